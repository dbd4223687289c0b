"""The simulators behind :mod:`dynamics.sgd`: result types, validation at the public boundary,
and :func:`expected_excess_risk`, :func:`expected_quadratic_form`,
:func:`worst_start_excess_risk`, :func:`simulate_iterates`, :func:`simulate_divergence` and
:func:`continual_learning` (Attia et al. 2025, arXiv 2507.11274). Re-exported from the package."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from _core.validation import (
    as_array,
    check_bool,
    check_choice,
    check_finite_result,
    check_int,
    check_key,
    check_memory,
    check_scalar,
)
from theory.sgd import check_stepsize

from ._exact import quadratic_spectral
from ._instances import (
    ContinualTasks,
    FiniteSum,
    QuadraticSum,
)
from ._mc import simulate_recorded

__all__ = [
    "RiskCurve",
    "ContinualCurve",
    "expected_excess_risk",
    "expected_quadratic_form",
    "worst_start_excess_risk",
    "simulate_iterates",
    "simulate_divergence",
    "continual_learning",
]


# --------------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------------
def _z(level):
    level = check_scalar(level, "level", lower=0.0, upper=1.0, closed="neither")
    return float(ndtri(0.5 + level / 2.0))


@dataclass(frozen=True)
class RiskCurve:
    """Expected excess risk :math:`E F(w_T) - F_\\star` at horizons ``T``.

    ``se`` is the Monte Carlo standard error (zeros for ``method="exact"``); ``n_paths`` is 0 for
    the exact method.
    """

    T: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    method: str
    eta: float
    n_paths: int
    instance: str

    def conf_int(self, level=0.95):
        """Normal-approximation interval ``(lower, upper)`` at each ``T``."""
        z = _z(level)
        return self.mean - z * self.se, self.mean + z * self.se

    def summary(self) -> str:
        head = (
            f"SGD last-iterate excess risk: {self.instance}, eta = {self.eta:.6g}, "
            f"method = {self.method}" + (f", {self.n_paths} paths" if self.n_paths else "")
        )
        lines = [head, f"{'T':>10} {'E[F(w_T)]-F*':>16} {'se':>12}"]
        lines += [
            f"{int(t):>10d} {m:>16.6e} {s:>12.3e}"
            for t, m, s in zip(self.T, self.mean, self.se, strict=True)
        ]
        return "\n".join(lines)

    def __repr__(self):
        return (
            f"RiskCurve({self.instance}, eta={self.eta:.4g}, method={self.method!r}, "
            f"{self.T.size} horizons, T<={int(self.T.max())})"
        )


@dataclass(frozen=True)
class ContinualCurve:
    """Normalised average loss and forgetting of continual linear regression after ``k`` tasks."""

    k: np.ndarray
    loss: np.ndarray
    loss_se: np.ndarray
    forgetting: np.ndarray
    forgetting_se: np.ndarray
    replacement: bool
    n_paths: int

    def conf_int(self, level=0.95, *, which="loss"):
        check_choice(which, "which", ("loss", "forgetting"))
        z = _z(level)
        m, s = (
            (self.loss, self.loss_se) if which == "loss" else (self.forgetting, self.forgetting_se)
        )
        return m - z * s, m + z * s

    def summary(self) -> str:
        lines = [
            f"continual linear regression, random order "
            f"({'with' if self.replacement else 'without'} replacement), "
            f"{self.n_paths} orderings",
            f"{'k':>8} {'loss':>12} {'se':>10} {'forgetting':>12} {'se':>10}",
        ]
        lines += [
            f"{int(k):>8d} {a:>12.5e} {b:>10.2e} {c:>12.5e} {e:>10.2e}"
            for k, a, b, c, e in zip(
                self.k, self.loss, self.loss_se, self.forgetting, self.forgetting_se, strict=True
            )
        ]
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------------
def _check_instance(inst):
    if not isinstance(inst, QuadraticSum | FiniteSum):
        raise TypeError(
            "`instance` must be a QuadraticSum or FiniteSum (see dynamics.sgd); got "
            f"{type(inst).__name__}."
        )
    return inst


def _horizons(T, name="T"):
    arr = np.atleast_1d(as_array(T, name))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"`{name}` must be an integer or a 1-D grid of integers; got shape {np.shape(T)}."
        )
    if np.any(arr != np.round(arr)) or np.any(arr < 1) or np.any(arr > 2**53):
        raise ValueError(
            f"`{name}` must hold integers in [1, 2**53]; got values in "
            f"[{arr.min():g}, {arr.max():g}]."
        )
    return np.unique(arr.astype(np.int64))


_MAX_STEPS = 10**10  # Monte Carlo work cap (paths x steps): about an hour of CPU


def _mc_budget(grid, n_paths, name="T"):
    """Reject Monte Carlo runs of more than ``_MAX_STEPS`` path-steps before starting them."""
    steps = int(grid.max()) * n_paths
    if steps > _MAX_STEPS:
        raise ValueError(
            f"`{name}` x `n_paths` = {steps:.3g} SGD path-steps exceeds the cap {_MAX_STEPS:.0e};"
            f" reduce `{name}` or `n_paths`."
        )


def _key(key):
    if key is None:
        raise ValueError("`key` is required for method='monte_carlo' (a jax.random key).")
    return check_key(key)


def _mean_se(x):
    """Mean and SE over paths (axis 0), each horizon summed pairwise along a contiguous row, so a
    horizon's numbers do not depend on which other horizons were recorded."""
    n, x = x.shape[0], np.ascontiguousarray(np.moveaxis(x, 0, -1))
    return x.mean(axis=-1), (
        x.std(axis=-1, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(x.shape[:-1])
    )


# --------------------------------------------------------------------------------------------------
# public simulators
# --------------------------------------------------------------------------------------------------
def expected_excess_risk(
    instance, eta, T, *, method="exact", key=None, n_paths=10_000, chunk=4096, precision="auto"
) -> RiskCurve:
    r"""Expected last-iterate excess risk :math:`E[F(w_T)] - F_\star` of constant-step SGD.

    Parameters
    ----------
    instance : QuadraticSum or FiniteSum
        The problem (start point ``instance.w0``).
    eta : float
        Stepsize, ``0 < eta < 2/instance.beta`` (Attia et al. 2025, Thm 1); ``ValueError``
        otherwise (see :func:`simulate_divergence` for larger stepsizes).
    T : int or 1-D array of int
        Horizons (>= 1); the curve is returned at the sorted unique horizons.
    method : {"exact", "monte_carlo"}
        ``"exact"``: second-moment recursion (quadratic instances only), one eigendecomposition
        serves every ``T``. ``"monte_carlo"``: ``n_paths`` paths, mean and standard error
        (quadratic instances on the fused Numba kernel of ``dynamics.sgd._kernel``, the others
        in JAX).
    key : jax.random key
        Required for Monte Carlo. A path's draws depend on ``key`` and its index only (quadratic:
        a counter-based stream seeded by the key's data; otherwise ``fold_in(key, i)``).
    n_paths, chunk : int
        Monte Carlo paths, and at most how many of them one compiled JAX call simulates (the
        quadratic kernel needs no chunks).
    precision : {"auto", "float32", "float64"}
        Arithmetic of the Monte Carlo paths of a quadratic instance (non-quadratic instances run
        in float64; the risk is always evaluated in float64). ``"float32"`` halves the bytes and
        doubles the SIMD width of every step; its rounding acts as extra noise of per-step size
        about :math:`u\sqrt d\,M` (:math:`u = 2^{-24}`, :math:`M` a bound on the iterates), whose
        stationary excess risk is about :math:`d u^2 M^2 / (\eta(2-\beta\eta))` (derived here,
        checked in ``tests/dynamics/test_sgd.py``). ``"auto"`` runs float32 and repeats the run
        in float64 when a mean comes within a factor ``1e4`` of that floor.

    Returns
    -------
    RiskCurve

    Examples
    --------
    >>> from dynamics.sgd import rare_curvature, expected_excess_risk
    >>> c = expected_excess_risk(rare_curvature(1.0, 0.1), 1.0, [1, 10])
    >>> bool(abs(c.mean[1] - 0.05 * 0.9 ** 10) < 1e-12)
    True
    """
    inst = _check_instance(instance)
    eta, _ = check_stepsize(eta, inst.beta)
    grid = _horizons(T)
    check_choice(method, "method", ("exact", "monte_carlo"))
    # checked for both methods: a bad Monte Carlo option passed to method="exact" is a bug
    n_paths = check_int(n_paths, "n_paths", lower=2)
    chunk = check_int(chunk, "chunk", lower=1)
    check_choice(precision, "precision", ("auto", "float32", "float64"))
    if method == "exact":
        if not isinstance(inst, QuadraticSum):
            raise ValueError(
                "`method`='exact' needs a quadratic instance (QuadraticSum); use "
                "method='monte_carlo' for " + inst.name + "."
            )
        mean = quadratic_spectral(inst, eta).quadratic_form(0.5 * inst.H, grid)
        mean = np.maximum(mean, 0.0)  # round-off only: a PSD form
        return RiskCurve(grid, mean, np.zeros_like(mean), "exact", eta, 0, inst.name)
    _mc_budget(grid, n_paths)
    key = _key(key)
    quad = isinstance(inst, QuadraticSum)
    dtype = "float32" if quad and precision != "float64" else "float64"
    W = simulate_recorded(inst, eta, grid, key=key, n_paths=n_paths, chunk=chunk, dtype=dtype)
    m, s = _mean_se(np.asarray(inst.excess_risk(W)))
    if dtype == "float32" and precision == "auto" and np.min(m) < 1e4 * _f32_floor(inst, eta):
        W = simulate_recorded(inst, eta, grid, key=key, n_paths=n_paths, chunk=chunk)
        m, s = _mean_se(np.asarray(inst.excess_risk(W)))
    return RiskCurve(grid, m, s, "monte_carlo", eta, n_paths, inst.name)


def _f32_floor(inst, eta):
    r"""Excess risk that float32 rounding alone sustains: :math:`d u^2 M^2/(\eta(2-\beta\eta))`.

    Derived here: rounding adds per step a perturbation of squared norm about :math:`d u^2 M^2`
    (:math:`u = 2^{-24}`, :math:`M = \|w_0 - w_\star\| + \|w_\star\| + \sigma`, the iterates'
    scale); with :math:`E\|(I - \eta a a^\top) e\|^2 \le \|e\|^2 - \eta(2 - \beta\eta)
    e^\top H e` the stationary :math:`E[e^\top H e]` is at most the per-step perturbation divided
    by :math:`\eta(2-\beta\eta)`.
    """
    u = 2.0**-24
    M = np.sqrt(inst.dist2) + np.linalg.norm(inst.w_star) + np.sqrt(inst.noise_var)
    return inst.dim * (u * M) ** 2 / (eta * (2.0 - inst.beta * eta))


def expected_quadratic_form(instance, eta, T, weight=None):
    r"""Exact :math:`E[(w_T - w_\star)^\top W (w_T - w_\star)]` for a quadratic instance.

    Derived here, not a result of Attia et al. 2025: the second-moment recursion of
    :mod:`dynamics.sgd._exact`, the least-squares map of
    ``docs/papers/sgd_last_iterate.md#exact-expected-risk`` extended to nonzero gradients at
    ``w_star`` and label noise. ``weight`` defaults to the identity (the expected squared distance
    to ``w_star``); returns an array over the sorted unique ``T``.

    >>> from dynamics.sgd import rare_curvature
    >>> q = expected_quadratic_form(rare_curvature(1.0, 0.1), 1.5, [1, 10])  # w_0 = 1, w_star = 0
    >>> bool(np.allclose(q, 0.925 ** np.array([1, 10])))  # (1 - p eta beta (2 - eta beta))^T
    True
    """
    inst = _check_instance(instance)
    if not isinstance(inst, QuadraticSum):
        raise ValueError("`instance` must be a QuadraticSum for the exact recursion.")
    eta, _ = check_stepsize(eta, inst.beta)
    grid = _horizons(T)
    d = inst.dim
    W = np.eye(d) if weight is None else as_array(weight, "weight", shape=(d, d))
    return quadratic_spectral(inst, eta).quadratic_form(W, grid)


def worst_start_excess_risk(instance, eta, T):
    r"""Exact :math:`\max_{w_0} (E[F(w_T)] - F_\star)/\|w_0 - w_\star\|^2` at each horizon ``T``.

    The worst start point of a realizable, noiseless quadratic instance (derived here; module
    :mod:`dynamics.sgd._exact`): the top eigenvalue of the backward-propagated risk form.
    Returns an array over the sorted unique ``T``.

    Examples
    --------
    >>> from dynamics.sgd import rare_curvature
    >>> r = worst_start_excess_risk(rare_curvature(1.0, 0.1), 1.0, [1, 10])
    >>> bool(np.allclose(r, 0.05 * 0.9 ** np.array([1, 10])))  # (p beta / 2) (1 - p eta beta)^T
    True
    """
    inst = _check_instance(instance)
    if not isinstance(inst, QuadraticSum):
        raise ValueError("`instance` must be a QuadraticSum for the exact recursion.")
    eta, _ = check_stepsize(eta, inst.beta)
    grid = _horizons(T)
    return quadratic_spectral(inst, eta).worst_start(0.5 * inst.H, grid)


def simulate_iterates(instance, eta, T, *, key, n_paths=16, order="iid"):
    """Whole SGD paths ``w_0, ..., w_T``: array ``(n_paths, T + 1, d)`` (keep ``T`` small).

    Examples
    --------
    >>> import jax
    >>> from dynamics.sgd import rare_curvature
    >>> W = simulate_iterates(rare_curvature(1.0, 1.0), 0.5, 3, key=jax.random.key(0), n_paths=2)
    >>> W.shape, [round(float(v), 6) for v in W[0, :, 0]]  # p = 1 is GD: w_t = (1 - eta)^t
    ((2, 4, 1), [1.0, 0.5, 0.25, 0.125])
    """
    inst = _check_instance(instance)
    eta, _ = check_stepsize(eta, inst.beta)
    T = check_int(T, "T", lower=1)
    n_paths = check_int(n_paths, "n_paths", lower=1)
    check_choice(order, "order", ("iid", "reshuffle"))
    _mc_budget(np.array([T]), n_paths)
    check_memory(n_paths * (T + 1) * inst.dim, "`T`, `n_paths`", what="the recorded paths")
    return simulate_recorded(
        inst, eta, np.arange(T + 1), key=_key(key), n_paths=n_paths, order=order
    )


def simulate_divergence(instance, eta, T, *, key, n_paths=64) -> RiskCurve:
    r"""Monte Carlo excess risk for *any* ``eta > 0``, including :math:`\eta \ge 2/\beta`.

    The stepsize range of Thm 1 is not enforced here: this is the function that shows what happens
    outside it (on :func:`rare_curvature` with ``p = 1``, a deterministic quadratic of curvature
    :math:`\beta`, the loss stays constant at :math:`\eta = 2/\beta` and grows like
    :math:`|1-\beta\eta|^{2T}` beyond; compare :func:`theory.sgd.quadratic_gd_loss_ratio`).

    Examples
    --------
    >>> import jax
    >>> from dynamics.sgd import rare_curvature
    >>> inst = rare_curvature(1.0, 1.0)  # p = 1: gradient descent on w^2 / 2
    >>> c = simulate_divergence(inst, 3.0, [1, 2], key=jax.random.key(0), n_paths=2)
    >>> [round(float(m), 6) for m in c.mean]  # (beta / 2) |1 - beta eta|^{2T} beyond 2/beta
    [2.0, 8.0]
    """
    inst = _check_instance(instance)
    eta = check_scalar(eta, "eta", lower=0.0, closed="neither")
    grid = _horizons(T)
    n_paths = check_int(n_paths, "n_paths", lower=2)
    _mc_budget(grid, n_paths)
    with np.errstate(over="ignore", invalid="ignore"):
        W = simulate_recorded(inst, eta, grid, key=_key(key), n_paths=n_paths)
        m, s = _mean_se(np.asarray(inst.excess_risk(W)))
    check_finite_result(m, "the simulated excess risk (it overflowed float64)", eta=eta)
    check_finite_result(s, "the standard error of the simulated excess risk", eta=eta)
    return RiskCurve(grid, m, s, "monte_carlo", eta, n_paths, inst.name + " (unchecked eta)")


def continual_learning(
    tasks, k, *, replacement=True, key=None, n_paths=1000, method="monte_carlo"
) -> ContinualCurve:
    r"""Average loss and forgetting after learning ``k`` tasks in random order (to convergence).

    Each step projects onto the solution set of the current task (SGD with :math:`\eta = 1` on
    the 1-smooth task losses of :class:`ContinualTasks`). ``replacement=True`` draws tasks i.i.d.
    uniformly; ``False`` goes through fresh random permutations (single pass for ``k <= T``).
    Loss :math:`\mathcal L(w_k)` and forgetting :math:`\frac1k\sum_{t\le k}\|X_{\tau(t)} w_k -
    y_{\tau(t)}\|^2`, both divided by :math:`\|w_\star\|^2R^2` (Evron et al. 2025; Tsipory et al.
    2025, Def. 2.3 and Remark 2.4). ``method="exact"`` (with replacement only) returns the exact
    expected loss from the second-moment recursion; forgetting is path-dependent, so its arrays
    are then empty.

    Examples
    --------
    >>> from dynamics.sgd import random_continual_tasks
    >>> tasks = random_continual_tasks(3, 4, 4, rng=0)  # full-rank tasks: one of them fixes w_star
    >>> round(float(continual_learning(tasks, [1, 2], method="exact").loss[0]), 10)
    0.0
    """
    if not isinstance(tasks, ContinualTasks):
        raise TypeError(f"`tasks` must be ContinualTasks; got {type(tasks).__name__}.")
    grid = _horizons(k, "k")
    check_choice(method, "method", ("exact", "monte_carlo"))
    replacement = check_bool(replacement, "replacement")
    inst = tasks.instance
    if method == "exact":
        if not replacement:
            raise ValueError("`method`='exact' is available with `replacement`=True only.")
        Wt = np.einsum("mki,mkj->ij", tasks.Xs, tasks.Xs) / tasks.n_tasks / tasks.norm
        loss = quadratic_spectral(inst, 1.0).quadratic_form(Wt, grid)
        z = np.zeros(0)
        return ContinualCurve(grid, np.maximum(loss, 0.0), np.zeros_like(loss), z, z, True, 0)
    n_paths = check_int(n_paths, "n_paths", lower=2)
    _mc_budget(grid, n_paths, "k")
    W, C = simulate_recorded(
        inst,
        1.0,
        grid,
        key=_key(key),
        n_paths=n_paths,
        order="iid" if replacement else "reshuffle",
        track_counts=True,
    )
    per_task = tasks.task_losses(W) / tasks.norm  # (N, G, T)
    loss = per_task.mean(axis=-1)
    forget = np.sum(C * per_task, axis=-1) / grid[None, :]
    lm, ls = _mean_se(loss)
    fm, fs = _mean_se(forget)
    return ContinualCurve(grid, lm, ls, fm, fs, bool(replacement), n_paths)
