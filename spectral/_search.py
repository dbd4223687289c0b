"""Searching for σ: grids, Nelder–Mead on β*, gradient descent on β* by implicit differentiation.

The paper's modes (Ma & Kunisky 2025, Sec. 4; official ``zshape_grid_search.py`` and
``blackbox_optimization.py``): exhaustive grids over simple classes and black-box Nelder–Mead on
the asymptotic β*. Added here: the gradient of β* with respect to σ's parameters by the
implicit-function theorem through the two root solves (derived here; checked against finite
differences in ``tests/spectral/test_search.py``):

- inner: z* = s₊ + u*, R1(u, p) = E[(u + gap_p(g))^{-2}] - 1 = 0 (u* = 0 in the irregular case);
- outer: R2(β, u, p) = β E_{η,g}[(η²/m2)/(u + gap_p(βηm1/m2 + g))] - 1 = 0 at u = u*;
- du*/dp = -∂_p R1/∂_u R1, dβ*/dp = -(∂_p R2 + ∂_u R2 du*/dp)/∂_β R2.

The partial derivatives come from JAX applied to the same split Gauss–Legendre rule, with the
cut points (σ's breaks moved by the shift) as functions of p and β, so moving kinks and jumps
are differentiated exactly (Leibniz terms included).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize
from tqdm import tqdm

from _core.validation import as_array, check_choice, check_instance, check_int, check_scalar
from theory.gaussian import piece_rule
from theory.nonlinear_laplacian import EtaLaw
from theory.nonlinear_laplacian import critical_threshold as _threshold
from theory.nonlinear_laplacian_floor import beta_floor

from . import _sigmas
from ._theory import as_prior

__all__ = [
    "Family",
    "FAMILIES",
    "family",
    "threshold_and_gradient",
    "GridResult",
    "threshold_grid",
    "OptimizationResult",
    "optimize_threshold",
]


@dataclass(frozen=True)
class Family:
    """A parametrised σ family: numpy constructor, JAX gap s₊ - σ(t), JAX breaks, bounds.

    The families searched by Ma & Kunisky 2025, Sec. 4 (see :func:`family`).
    """

    name: str
    make: Callable[[Any], Any]  # params (np.ndarray) -> Sigma
    gap: Callable[[Any, Any], jax.Array]  # (params, t) -> upper - σ(t)
    breaks: Callable[[Any], jax.Array]  # params -> kinks/jumps
    bounds: tuple  # per-parameter (lo, hi) for L-BFGS-B
    size: int


def _tanh_gap(p, t):
    return 2.0 * p[0] / (1.0 + jnp.exp(jnp.clip(2.0 * p[1] * t, -700.0, 700.0)))


def _z_gap(p, t):
    a, b, c = p[0], p[1], p[2]
    return b * jnp.clip((c + a - t) / a, 0.0, 1.0)


def _step_parts(p, k):
    return jnp.cumsum(p[:k]), p[k:]


def _step_gap(p, t, k):
    x, jumps = _step_parts(p, k)
    return jnp.sum(jumps * (t[..., None] < x), axis=-1)


def _step_make(p, k):
    x = np.cumsum(p[:k])
    return _sigmas.step(x, np.concatenate([[0.0], np.cumsum(p[k:])]))


def _make_step_family(k: int) -> Family:
    bounds = ((None, None),) + ((0.0, None),) * (k - 1) + ((0.0, None),) * k
    return Family(
        f"step{k}",
        partial(_step_make, k=k),
        partial(_step_gap, k=k),
        lambda p: _step_parts(p, k)[0],
        bounds,
        2 * k,
    )


def _jax_half_normal_m(tau):
    """JAX twin of :func:`theory.nonlinear_laplacian_floor.half_normal_m` (log M, both branches
    evaluated on clipped arguments so that gradients stay finite)."""
    neg, pos = jnp.minimum(tau, 0.0), jnp.maximum(tau, 0.0)
    ratio = jnp.sqrt(jnp.pi / 2) * jax.scipy.special.erfcx(-neg / jnp.sqrt(2.0))
    low = jnp.log(2.0 / _SQ2PI) + jnp.log((1.0 + neg**2) * ratio + neg)
    phi = jnp.exp(-0.5 * pos**2) / _SQ2PI
    high = (
        jnp.log(2.0)
        + 0.5 * pos**2
        + jnp.log((1.0 + pos**2) * jax.scipy.special.ndtr(pos) + pos * phi)
    )
    return jnp.where(tau < 0.0, low, high)


def _extremal_log_kernel(prior: str):
    """log(K(t)/K(0)) of :func:`theory.nonlinear_laplacian_floor.extremal_log_kernel` in JAX."""
    b0 = beta_floor(prior)
    if prior == "planted_submatrix":
        return lambda t: b0 * t
    a = b0 * np.sqrt(2.0 / np.pi)
    return lambda t: _jax_half_normal_m(a * t / np.sqrt(1.0 + a * a))


def _extremal_gap(p, t, prior):
    lk = _extremal_log_kernel(prior)
    tau = jnp.clip(t, p[1] - p[2], p[1])
    lt = lk(tau)
    return jnp.exp(p[0] - lt) * -jnp.expm1(lt - lk(p[1]))


def _make_extremal_family(prior: str) -> Family:
    """(c, t0, width) of :func:`spectral.sigmas.extremal`: t0 kept in the Gaussian rule's range
    (|t0| <= 8) and width <= 20, so the gaps stay finite."""
    return Family(
        f"extremal_{prior}",
        lambda p: _sigmas.extremal(p[0], p[1], p[2], prior),
        partial(_extremal_gap, prior=prior),
        lambda p: jnp.stack([p[1] - p[2], p[1]]),
        ((-30.0, 30.0), (-8.0, 8.0), (1e-3, 20.0)),
        3,
    )


FAMILIES = {
    "tanh": Family(
        "tanh",
        lambda p: _sigmas.tanh(p[0], p[1]),
        _tanh_gap,
        lambda p: jnp.zeros(0),
        ((1e-6, None), (1e-6, None)),
        2,
    ),
    "zshape": Family(
        "zshape",
        lambda p: _sigmas.zshape(p[0], p[1], p[2]),
        _z_gap,
        lambda p: jnp.stack([p[2], p[2] + p[0]]),
        ((1e-6, None), (0.0, None), (None, None)),
        3,
    ),
    **{f"extremal_{p}": _make_extremal_family(p) for p in ("planted_submatrix", "sparse_nnpca")},
}


#: the most jumps of a ``stepK`` family (the official search uses K = 16)
MAX_STEPS = 256


def family(name: str) -> Family:
    """``"tanh"`` (a, b), ``"zshape"`` (a, b, c) or ``"stepK"`` (a_0..a_{K-1}, b_0..b_{K-1}):
    breaks cumsum(a), levels (0, cumsum(b)) as in the official ``beta_to_sigma`` (K = 16 there).
    The families of Ma & Kunisky 2025, Sec. 4. Added here: ``"extremal_planted_submatrix"`` and
    ``"extremal_sparse_nnpca"`` (c, t0, width), the capped floor-attaining σ of
    :func:`spectral.sigmas.extremal`."""
    if not isinstance(name, str):
        raise TypeError(
            f"`name` must be a family name ('tanh', 'zshape', 'stepK'); got {type(name).__name__}."
        )
    if name in FAMILIES:
        return FAMILIES[name]
    k = name[4:]
    if name.startswith("step") and k.isdecimal() and k == str(int(k)) and 1 <= int(k) <= MAX_STEPS:
        return _make_step_family(int(k))
    raise ValueError(
        f"`name` must be a family name, 'tanh', 'zshape' or 'stepK' (K in 1..{MAX_STEPS}, no "
        f"leading zeros); got {name!r}."
    )


_GRID = np.arange(-12.0, 12.5, 1.0)  # theory.gaussian.gaussian_nodes' default cuts
_SQ2PI = np.sqrt(2 * np.pi)


def _jnodes(cuts_g):
    """The split Gauss–Legendre rule of theory.gaussian in JAX: points and weights in g."""
    cuts = jnp.sort(jnp.concatenate([jnp.asarray(_GRID), jnp.clip(cuts_g, -12.0, 12.0)]))
    g, w = piece_rule(cuts, xp=jnp)
    return g.ravel(), w.ravel()


def _jexpect(fam: Family, p, shift, h):
    """E[h(gap_p(shift + g))] with exact derivatives in p and shift (Leibniz rule).

    The rule's cut points are held fixed (stop_gradient: sorting ties between a break and a grid
    point would otherwise mis-assign their derivative); the motion of each break c_i = x_i - shift
    enters through the boundary term φ(c_i)[F(c_i-) - F(c_i+)] dc_i, added with zero value.
    """
    br = fam.breaks(p)
    c = br - shift
    g, w = _jnodes(jax.lax.stop_gradient(c))
    value = jnp.sum(w * h(fam.gap(p, shift + g)))
    if br.size:
        delta = 1e-9 * (1.0 + jnp.abs(jax.lax.stop_gradient(br)))
        jump = h(fam.gap(p, br - delta)) - h(fam.gap(p, br + delta))
        phi = jnp.exp(-0.5 * c * c) / _SQ2PI
        value = value + jnp.sum(jax.lax.stop_gradient(phi * jump) * (c - jax.lax.stop_gradient(c)))
    return value


def _residuals(fam: Family, q, pw):
    """JAX residual functions R1(u, p) and R2(β, u, p) for a family and an η-rule (q, weights)."""

    def r1(u, p):
        return _jexpect(fam, p, 0.0, lambda d: 1.0 / (u + d) ** 2) - 1.0

    def r2(beta, u, p):
        def one(qk):
            return _jexpect(fam, p, beta * qk, lambda d: 1.0 / (u + d))

        return beta * jnp.sum(pw * jax.vmap(one)(q)) - 1.0

    return r1, r2


_GRADS: dict = {}


def _as_family(fam) -> Family:
    if isinstance(fam, Family):
        return fam
    if not isinstance(fam, str):
        raise TypeError(
            f"`fam` must be a family name ('tanh', 'zshape', 'stepK') or a Family; "
            f"got {type(fam).__name__}."
        )
    try:
        return family(fam)
    except ValueError as err:
        raise ValueError(str(err).replace("`name`", "`fam`", 1)) from None


def _grad_fns(fam: Family, eta):
    # keyed by the rule's content: a prior given as a scipy law is rebuilt on every call
    key = (fam.name, eta.nodes.tobytes(), eta.probs.tobytes())
    if key not in _GRADS:
        keep = eta.probs * eta.nodes**2 > 0
        q = jnp.asarray(eta.nodes[keep] * eta.m1 / eta.m2)
        pw = jnp.asarray(eta.probs[keep] * eta.nodes[keep] ** 2 / eta.m2)
        r1, r2 = _residuals(fam, q, pw)
        _GRADS[key] = (
            jax.jit(jax.grad(r1, argnums=(0, 1))),
            jax.jit(jax.grad(r2, argnums=(0, 1, 2))),
        )
    return _GRADS[key]


def threshold_and_gradient(fam, params, prior: str | EtaLaw = "planted_submatrix"):
    """β*(σ_p) and dβ*/dp by implicit differentiation (derived here; see the module docstring).

    Returns ``(beta_star, gradient, result)`` with the :class:`ThresholdResult`.

    >>> b, g, _ = threshold_and_gradient("tanh", [1.0, 0.5])
    >>> b2 = threshold_and_gradient("tanh", [1.0, 0.5 + 1e-6])[0]
    >>> round(b, 4), bool(abs((b2 - b) / 1e-6 - g[1]) < 1e-5)  # a finite difference agrees
    (0.7851, True)
    """
    fam = _as_family(fam)
    p = as_array(params, "params", shape=(fam.size,), lower=-1e100, upper=1e100)
    for i, (v, (lo, hi)) in enumerate(zip(p, fam.bounds, strict=True)):
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ValueError(
                f"`params`[{i}] must lie in the family's domain [{lo}, {hi}]; got {v:g}."
            )
    eta = as_prior(prior)
    res = _threshold(fam.make(p), eta)
    g1, g2 = _grad_fns(fam, eta)
    u = res.z_star - fam.make(p).upper
    with jax.enable_x64(True):
        pj = jnp.asarray(p)
        db, du2, dp2 = g2(jnp.float64(res.beta_star), jnp.float64(u), pj)
        total = np.asarray(dp2)
        if res.regular:
            du1, dp1 = g1(jnp.float64(u), pj)
            total = total - float(du2) * np.asarray(dp1) / float(du1)
        grad = -total / float(db)
    return res.beta_star, grad, res


@dataclass(frozen=True)
class GridResult:
    """β* on a parameter grid: ``values[i, j]`` at (``x[i]``, ``y[j]``) with the rest ``fixed``.

    The Z-shape heatmaps of Ma & Kunisky 2025, Sec. 4.
    """

    family: str
    axes: tuple[str, str]
    x: np.ndarray
    y: np.ndarray
    values: np.ndarray
    fixed: dict = field(default_factory=dict)

    @property
    def argmin(self) -> tuple[float, float, float]:
        i, j = np.unravel_index(np.nanargmin(self.values), self.values.shape)
        return float(self.x[i]), float(self.y[j]), float(self.values[i, j])

    def summary(self) -> str:
        x, y, v = self.argmin
        below = float(np.mean(self.values < 1.0))
        return (
            f"beta* grid ({self.family}; {self.axes[0]} x {self.axes[1]}, fixed {self.fixed})\n"
            f"min {v:.6f} at {self.axes[0]}={x:g}, {self.axes[1]}={y:g}; "
            f"fraction with beta* < 1: {below:.2f}"
        )


def threshold_grid(fam: str, axes: dict, fixed: dict, prior="planted_submatrix") -> GridResult:
    """β* over the product of two parameter grids (Ma & Kunisky 2025, Sec. 4: exhaustive search).

    ``axes`` maps two parameter names to 1-D grids, ``fixed`` the others to values; names are
    ``a, b`` (tanh) or ``a, b, c`` (zshape). Each cell is an exact β* (no bracket capping).

    >>> g = threshold_grid("tanh", {"a": [1.0, 2.0], "b": [0.5, 1.0]}, {})
    >>> g.values.round(4)
    array([[0.7851, 0.7843],
           [0.834 , 0.7642]])
    """
    names = {"tanh": ("a", "b"), "zshape": ("a", "b", "c")}[
        check_choice(fam, "fam", ("tanh", "zshape"))
    ]
    check_instance(axes, "axes", dict)
    check_instance(fixed, "fixed", dict)
    if len(axes) != 2 or set(axes) | set(fixed) != set(names):
        raise ValueError(
            f"`axes` (two names) and `fixed` must cover {names}; got {list(axes)} "
            f"and {list(fixed)}."
        )
    if set(axes) & set(fixed):
        raise ValueError(
            f"`fixed` must not repeat a name of `axes`; got {sorted(set(axes) & set(fixed))} "
            f"in both."
        )
    (nx, gx), (ny, gy) = axes.items()
    gx = as_array(gx, "axes", ndim=1, min_size=1, lower=-1e100, upper=1e100)
    gy = as_array(gy, "axes", ndim=1, min_size=1, lower=-1e100, upper=1e100)
    if gx.size * gy.size > 10**6:
        raise ValueError(f"`axes` must span at most 10^6 cells; got {gx.size} x {gy.size}.")
    eta = as_prior(prior)
    maker = getattr(_sigmas, fam)
    # a and b are >= 0 in both families, c any real
    fixed = {k: check_scalar(v, "fixed", lower=None if k == "c" else 0.0) for k, v in fixed.items()}
    for ex, ey in ((gx.min(), gy.min()), (gx.max(), gy.max())):
        try:  # every σ of the grid valid (the families' checks are monotone in each parameter)
            maker(**dict(fixed, **{nx: ex, ny: ey}))
        except (TypeError, ValueError) as err:
            raise type(err)(f"`axes` gives an invalid σ: {err}") from None
    vals = np.empty((gx.size, gy.size))
    for i in tqdm(range(gx.size), desc=f"beta* grid {nx}x{ny}", leave=False, disable=None):
        for j in range(gy.size):
            kw = dict(fixed, **{nx: gx[i], ny: gy[j]})
            vals[i, j] = _threshold(maker(**kw), eta).beta_star
    return GridResult(fam, (nx, ny), gx, gy, vals, dict(fixed))


@dataclass(frozen=True)
class OptimizationResult:
    """Optimised parameters, β* there, and the number of β* evaluations spent.

    Ma & Kunisky 2025, Sec. 4 (black-box search), see :func:`optimize_threshold`.
    """

    family: str
    method: str
    params: np.ndarray
    beta_star: float
    evaluations: int
    iterations: int
    history: np.ndarray

    @property
    def sigma(self):
        return family(self.family).make(self.params)

    def evaluations_to_reach(self, target: float) -> int | None:
        """β* evaluations until the running best is <= ``target`` (None if never)."""
        best = np.minimum.accumulate(self.history)
        hit = np.flatnonzero(best <= target)
        return int(hit[0]) + 1 if hit.size else None

    def summary(self) -> str:
        return (
            f"{self.method} on {self.family}: beta* = {self.beta_star:.10f} after "
            f"{self.evaluations} beta* evaluations ({self.iterations} iterations)\n"
            f"params = {np.array2string(self.params, precision=8)}"
        )


def optimize_threshold(
    fam: str,
    x0,
    prior="planted_submatrix",
    *,
    method: str = "gradient",
    maxiter: int = 2000,
    tol: float = 1e-12,
    initial_simplex=None,
) -> OptimizationResult:
    """Minimise β*(σ_p) over the parameters of a family (Ma & Kunisky 2025, Sec. 4).

    ``method="nelder-mead"``: the paper's black-box search (scipy Nelder–Mead on the exact β*).
    ``method="gradient"``: L-BFGS-B (bounds of the family) with the implicit-differentiation
    gradient of :func:`threshold_and_gradient`; each evaluation is one β* plus its gradient.

    >>> r = optimize_threshold("tanh", [1.0, 0.5], method="nelder-mead", maxiter=40)
    >>> round(r.beta_star, 6), r.params.round(3).tolist()  # the tanh optimum (a, b) ~ (1.71, 0.584)
    (0.755007, [1.71, 0.584])
    """
    fam_ = _as_family(fam)
    x0 = as_array(x0, "x0", shape=(fam_.size,), lower=-1e100, upper=1e100)
    method = check_choice(method, "method", ("gradient", "nelder-mead"))
    maxiter = check_int(maxiter, "maxiter", lower=1, upper=10**6)
    tol = check_scalar(tol, "tol", lower=0.0, upper=1.0)
    for i, (v, (lo, hi)) in enumerate(zip(x0, fam_.bounds, strict=True)):
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ValueError(f"`x0`[{i}] must lie in the family's domain [{lo}, {hi}]; got {v:g}.")
    if initial_simplex is not None:
        if method != "nelder-mead":
            raise ValueError("`initial_simplex` applies to method='nelder-mead' only.")
        initial_simplex = as_array(
            initial_simplex, "initial_simplex", shape=(fam_.size + 1, fam_.size),
            lower=-1e100, upper=1e100,
        )  # fmt: skip
    eta = as_prior(prior)
    hist: list[float] = []
    best_p: list[Any] = [x0, np.inf]
    big = 10.0  # β* of an infeasible point (parameters outside the family's domain)

    def feasible(p):
        return all(
            (lo is None or v >= lo) and (hi is None or v <= hi)
            for v, (lo, hi) in zip(p, fam_.bounds, strict=True)
        )

    if method == "nelder-mead":

        def f(p):
            val = _threshold(fam_.make(p), eta).beta_star if feasible(p) else big
            hist.append(val)
            if val < best_p[1]:
                best_p[:] = [np.array(p, dtype=float), val]
            return val

        opts: dict[str, Any] = dict(maxiter=maxiter, maxfev=2 * maxiter, xatol=1e-8, fatol=tol)
        if initial_simplex is not None:
            opts["initial_simplex"] = initial_simplex
        r = minimize(f, x0, method="Nelder-Mead", options=opts)
    else:

        def fg(p):
            val, grad, _ = threshold_and_gradient(fam_, p, eta)
            hist.append(val)
            if val < best_p[1]:
                best_p[:] = [np.array(p, dtype=float), val]
            return val, grad

        # β* has a kink where the edge switches regime (H'(s₊) = 0, the irregular edge, Sec. 3.1): a
        # minimiser there is a smooth minimum of β* restricted to that boundary, found by SLSQP
        # with the constraint E[gap^-2] = 1 (only families without an atom at s₊ have one).
        g1, _ = _grad_fns(fam_, eta)
        r1_fn = _residuals(fam_, jnp.zeros(1), jnp.zeros(1))[0]

        def cons(p):
            with jax.enable_x64(True):
                return float(r1_fn(0.0, jnp.asarray(p)))

        def cons_jac(p):
            with jax.enable_x64(True):
                return np.asarray(g1(jnp.float64(0.0), jnp.asarray(p))[1])

        kinked = np.isfinite(cons(x0))  # no atom at s₊: a regime boundary may exist
        lb = dict(jac=True, method="L-BFGS-B", bounds=fam_.bounds)
        first = min(15, maxiter) if kinked else maxiter
        r = minimize(fg, x0, **lb, options=dict(maxiter=first, ftol=tol, gtol=1e-10))
        c_end = cons(best_p[0]) if kinked else np.inf
        if abs(c_end) < 0.25:
            r = minimize(
                fg,
                best_p[0],
                jac=True,
                method="SLSQP",
                bounds=fam_.bounds,
                constraints=[dict(type="eq", fun=cons, jac=cons_jac)],
                options=dict(maxiter=min(200, maxiter), ftol=tol),
            )
        if kinked:  # polish (also when the minimiser is interior to one regime)
            r = minimize(fg, best_p[0], **lb, options=dict(maxiter=maxiter, ftol=tol, gtol=1e-10))
    return OptimizationResult(
        fam_.name, method, best_p[0], float(best_p[1]), len(hist), int(r.nit), np.array(hist)
    )
