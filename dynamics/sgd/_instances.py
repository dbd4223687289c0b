r"""SGD problem instances: quadratic finite sums (least squares, Kaczmarz, continual learning,
exactly solvable scalar / commuting families) and non-quadratic smooth convex finite sums
(logistic on separable data, squared hinge).

Every instance knows its smoothness ``beta`` (the largest smoothness of a per-sample loss), a
minimiser ``w_star`` (the one closest to the start ``w0``, where one exists), ``sigma2_star``
:math:`= E\|\nabla f(w_\star; z)\|^2`, ``dist2`` :math:`= \|w_0 - w_\star\|^2` and its population
risk ``risk(w)`` (``excess_risk(w) = risk(w) - f_star``).

The families are those of ``docs/papers/sgd_last_iterate.md#instance-families`` (least squares,
Kaczmarz, continual learning) and ``#solvable-instances`` there (the exactly solvable scalar and
commuting instances, derived for the package and checked numerically; the smooth convex families
probing the exponent); each class and constructor below states its loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from _core.validation import (
    NumericalError,
    as_array,
    as_generator,
    check_choice,
    check_instance,
    check_int,
    check_memory,
    check_scalar,
)

_BIG = 1e50  # data and parameters beyond this overflow the squared gradients of the instance
_SEP = 1e8  # the separability program is solved to a fixed tolerance: data within this range

__all__ = [
    "QuadraticSum",
    "FiniteSum",
    "ContinualTasks",
    "least_squares",
    "gaussian_design",
    "kaczmarz",
    "continual_tasks",
    "random_continual_tasks",
    "rare_curvature",
    "ar1",
    "commuting",
    "logistic_separable",
    "squared_hinge",
    "separable_data",
]


def _probs(probs, n, name="probs"):
    if probs is None:
        return np.full(n, 1.0 / n)
    p = as_array(probs, name, shape=(n,), min_size=1)
    if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(
            f"`{name}` must be >= 0 and sum to 1; got sum {p.sum():g}, min {p.min():g}."
        )
    return p / p.sum()


# --------------------------------------------------------------------------------------------------
# quadratic finite sums
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class QuadraticSum:
    r"""Quadratic finite sum :math:`f_i(w) = \tfrac12\|B_i w - c_i - \varepsilon\|^2`, i ~ p
    (``docs/papers/sgd_last_iterate.md#instance-families``).

    ``B`` has shape ``(n, k, d)`` (``k`` rows per sample; rank-one least squares has ``k = 1``;
    unused rows are zero), ``c`` shape ``(n, k)``; :math:`\varepsilon \sim N(0, s^2 I_k)` is fresh
    label noise drawn at every step (``noise_var`` :math:`= s^2`, 0 for none). The per-sample
    smoothness is :math:`\|B_i\|_2^2`, so ``beta = max_i ||B_i||^2``. The population risk is
    :math:`F(w) = \sum_i p_i \tfrac12\|B_i w - c_i\|^2 + \tfrac12 s^2 k` and
    :math:`F(w) - F(w_\star) = \tfrac12 (w-w_\star)^\top H (w-w_\star)`,
    :math:`H = \sum_i p_i B_i^\top B_i`.
    """

    B: np.ndarray
    c: np.ndarray
    probs: np.ndarray
    w0: np.ndarray
    noise_var: float = 0.0
    name: str = "quadratic"
    H: np.ndarray = field(init=False, repr=False)
    beta: float = field(init=False)
    w_star: np.ndarray = field(init=False, repr=False)
    f_star: float = field(init=False)
    sigma2_star: float = field(init=False)
    dist2: float = field(init=False)
    grad_star: np.ndarray = field(init=False, repr=False)
    _cache: dict = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self):
        check_instance(self.name, "name", str)
        B = as_array(self.B, "B", ndim=3, lower=-_BIG, upper=_BIG)
        n, k, d = B.shape
        if n < 1 or k < 1 or d < 1:
            raise ValueError(f"`B` must have shape (n, k, d) with all >= 1; got {B.shape}.")
        c = as_array(self.c, "c", shape=(n, k), lower=-_BIG, upper=_BIG)
        p = _probs(self.probs, n)
        w0 = as_array(self.w0, "w0", shape=(d,), lower=-_BIG, upper=_BIG)
        s2 = check_scalar(self.noise_var, "noise_var", lower=0.0, upper=_BIG)
        Q = np.einsum("nki,nkj->nij", B, B)
        H = np.einsum("n,nij->ij", p, Q)
        b = np.einsum("n,nki,nk->i", p, B, c)
        beta = float(max(np.linalg.eigvalsh(Q)[:, -1].max(), 0.0))
        if beta <= 0.0:
            raise ValueError("`B` must not be all zero (beta = 0).")
        # the minimiser of F closest to w0: w0 + H^+ (b - H w0)
        lam, V = np.linalg.eigh(H)
        keep = lam > lam.max() * d * np.finfo(float).eps * 10
        r = b - H @ w0
        w_star = w0 + V[:, keep] @ ((V[:, keep].T @ r) / lam[keep])
        resid = np.einsum("nki,i->nk", B, w_star) - c
        grad_star = np.einsum("nki,nk->ni", B, resid)
        sigma2 = float(p @ np.sum(grad_star**2, axis=1)) + s2 * float(p @ np.sum(B**2, (1, 2)))
        f_star = float(0.5 * p @ np.sum(resid**2, axis=1) + 0.5 * s2 * k)
        for name, val in dict(
            B=B,
            c=c,
            probs=p,
            w0=w0,
            noise_var=s2,
            H=H,
            beta=beta,
            w_star=w_star,
            f_star=f_star,
            sigma2_star=sigma2,
            dist2=float(np.sum((w0 - w_star) ** 2)),
            grad_star=grad_star,
        ).items():
            object.__setattr__(self, name, val)

    @property
    def dim(self) -> int:
        return self.B.shape[2]

    @property
    def n_samples(self) -> int:
        return self.B.shape[0]

    @property
    def realizable(self) -> bool:
        return self.sigma2_star <= 1e-14 * max(1.0, self.beta * self.dist2)

    def risk(self, w):
        """Population risk :math:`F(w)` at one point ``(d,)`` or a batch ``(..., d)``."""
        w = as_array(w, "w")
        if w.shape[-1] != self.dim:
            raise ValueError(f"`w` must have last axis {self.dim}; got shape {w.shape}.")
        return self.f_star + self.excess_risk(w)

    def excess_risk(self, w):
        r""":math:`F(w) - F(w_\star) = \tfrac12 (w-w_\star)^\top H (w-w_\star)`."""
        e = np.asarray(w, dtype=float) - self.w_star
        return 0.5 * np.einsum("...i,ij,...j->...", e, self.H, e)

    def gradient(self, w, i, eps=None):
        r"""Stochastic gradient :math:`B_i^\top(B_i w - c_i - \varepsilon)` of sample ``i``."""
        r = self.B[i] @ w - self.c[i] - (0.0 if eps is None else eps)
        return self.B[i].T @ r

    def summary(self) -> str:
        rows = [
            ("instance", self.name),
            ("dim d", self.dim),
            ("samples n", self.n_samples),
            ("beta", f"{self.beta:.6g}"),
            ("dist2", f"{self.dist2:.6g}"),
            ("sigma2_star", f"{self.sigma2_star:.6g}"),
            ("f_star", f"{self.f_star:.6g}"),
        ]
        return "\n".join(f"{a:<14}{b:>20}" for a, b in rows)


def least_squares(
    A, b=None, *, w_star=None, probs=None, noise_var=0.0, w0=None, name="least_squares"
) -> QuadraticSum:
    r"""Data set :math:`\{(a_i, b_i)\}`, per-sample loss :math:`\tfrac12(a_i^\top w - b_i)^2`
    (``docs/papers/sgd_last_iterate.md#instance-families``).

    Give ``b`` (fixed labels, possibly inconsistent: then :math:`\sigma_\star > 0`) or ``w_star``
    (realizable labels :math:`b = A w_\star`). ``noise_var`` adds fresh Gaussian label noise at
    each step. ``w0`` defaults to 0.

    Examples
    --------
    >>> inst = least_squares(np.eye(2), w_star=[1.0, -1.0])
    >>> inst.beta, inst.realizable, float(inst.excess_risk(np.zeros(2)))  # (1/2) (1/2) |w_star|^2
    (1.0, True, 0.5)
    """
    A = as_array(A, "A", ndim=2, min_size=1, lower=-_BIG, upper=_BIG)
    n, d = A.shape
    if not np.einsum("ij,ij->i", A, A).max() > 0.0:  # beta = max_i |a_i|^2 underflows too
        raise ValueError(
            "`A` must have a row with squared norm > 0 in float64 (the smoothness beta would be "
            f"0); got max |A| = {np.abs(A).max():g}."
        )
    if (b is None) == (w_star is None):
        raise ValueError("give exactly one of `b` (labels) and `w_star` (realizable labels).")
    if w_star is not None:
        b = A @ as_array(w_star, "w_star", shape=(d,), lower=-_BIG, upper=_BIG)
    b = as_array(b, "b", shape=(n,), lower=-_BIG, upper=_BIG)
    w0 = np.zeros(d) if w0 is None else w0
    return QuadraticSum(A[:, None, :], b[:, None], _probs(probs, n), w0, noise_var, name)


def gaussian_design(
    n, spectrum, *, w_star=None, noise_var=0.0, label_noise=0.0, rng=None, name="gaussian_design"
) -> QuadraticSum:
    r"""Finite Gaussian design: ``n`` rows :math:`a_i \sim N(0, \mathrm{diag}(\text{spectrum}))`.

    ``w_star`` defaults to a standard Gaussian vector; ``label_noise`` adds fixed noise
    :math:`b_i = a_i^\top w_\star + \xi_i`, :math:`\xi_i \sim N(0, \text{label\_noise})` (an
    inconsistent finite data set), ``noise_var`` fresh noise at every step. Uniform sampling,
    ``w0 = 0``; ``beta = max_i ||a_i||^2``.

    Examples
    --------
    >>> inst = gaussian_design(50, [1.0, 0.0], rng=0)  # the second coordinate has no variance
    >>> inst.dim, inst.n_samples, bool(np.all(inst.H[1] == 0))
    (2, 50, True)
    """
    n = check_int(n, "n", lower=1)
    spec = as_array(spectrum, "spectrum", ndim=1, min_size=1, lower=0.0, upper=_BIG)
    if not spec.any():
        raise ValueError("`spectrum` must not be all zero (the design would be zero).")
    label_noise = check_scalar(label_noise, "label_noise", lower=0.0, upper=_BIG)
    gen = as_generator(rng)
    d = spec.size
    check_memory(4 * n * d, "`n`, `spectrum`", what="the design and its products")
    A = gen.standard_normal((n, d)) * np.sqrt(spec)
    ws = gen.standard_normal(d) if w_star is None else as_array(w_star, "w_star", shape=(d,))
    b = A @ ws + np.sqrt(label_noise) * gen.standard_normal(n)
    return least_squares(A, b, noise_var=noise_var, name=name)


def kaczmarz(A, b, *, sampling="norm", w0=None) -> QuadraticSum:
    r"""Randomized Kaczmarz for :math:`Ax = b` as SGD: rows :math:`a_i/\|a_i\|`, so ``beta = 1``.

    Per-sample loss :math:`(a_i^\top x - b_i)^2 / (2\|a_i\|^2)`; SGD with stepsize
    :math:`\lambda` is relaxed Kaczmarz (``lambda = 1``: the classical projection). ``sampling``
    ``"norm"`` picks row i with probability :math:`\|a_i\|^2/\|A\|_F^2` (then
    :math:`F(x) = \|Ax-b\|^2/(2\|A\|_F^2)`), ``"uniform"`` uniformly. Source: the Kaczmarz
    application of Attia et al. 2025 (``docs/papers/sgd_last_iterate.md#instance-families``).

    Examples
    --------
    >>> inst = kaczmarz(np.array([[3.0, 4.0], [0.0, 2.0]]), np.array([5.0, 2.0]))
    >>> inst.beta, [round(float(v), 6) for v in inst.w_star]  # unit rows; the solution (1/3, 1)
    (1.0, [0.333333, 1.0])
    """
    A = as_array(A, "A", ndim=2, min_size=1, lower=-_BIG, upper=_BIG)
    n, d = A.shape
    b = as_array(b, "b", shape=(n,), lower=-_BIG, upper=_BIG)
    check_choice(sampling, "sampling", ("norm", "uniform"))
    norms = np.linalg.norm(A, axis=1)
    if np.any(norms == 0):
        raise ValueError("`A` must have no zero rows.")
    p = norms**2 / np.sum(norms**2) if sampling == "norm" else None
    return least_squares(A / norms[:, None], b / norms, probs=p, w0=w0, name="kaczmarz")


def rare_curvature(beta, p, w0=1.0) -> QuadraticSum:
    r"""Scalar instance :math:`f(w; z) = z\tfrac\beta2 w^2`, :math:`z\sim\mathrm{Bernoulli}(p)`.

    Exact risk: :func:`theory.sgd.rare_curvature_risk`
    (``docs/papers/sgd_last_iterate.md#solvable-instances``).

    Examples
    --------
    >>> inst = rare_curvature(2.0, 0.25)
    >>> round(float(inst.risk(np.array([1.0]))), 12), round(inst.beta, 12)  # F(w) = p beta w^2 / 2
    (0.25, 2.0)
    """
    beta = check_scalar(beta, "beta", lower=0.0, upper=_BIG, closed="right")
    p = check_scalar(p, "p", lower=0.0, upper=1.0, closed="right")
    B = np.array([[[np.sqrt(beta)]], [[0.0]]])
    return QuadraticSum(
        B,
        np.zeros((2, 1)),
        np.array([p, 1.0 - p]),
        np.array([check_scalar(w0, "w0", lower=-_BIG, upper=_BIG)]),
        0.0,
        "rare_curvature",
    )


def ar1(beta, s2, w0=1.0) -> QuadraticSum:
    r"""Scalar instance :math:`f(w; z) = \tfrac\beta2(w - z)^2`, :math:`z \sim N(0, s^2)`.

    :math:`\sigma_\star^2 = \beta^2 s^2`; exact risk: :func:`theory.sgd.ar1_risk`
    (``docs/papers/sgd_last_iterate.md#solvable-instances``).

    Examples
    --------
    >>> round(ar1(2.0, 0.5).sigma2_star, 12)  # beta^2 s^2
    2.0
    """
    beta = check_scalar(beta, "beta", lower=0.0, upper=1e25, closed="right")
    s2 = check_scalar(s2, "s2", lower=0.0, upper=_BIG)
    return QuadraticSum(
        np.array([[[np.sqrt(beta)]]]),
        np.zeros((1, 1)),
        np.ones(1),
        np.array([check_scalar(w0, "w0", lower=-_BIG, upper=_BIG)]),
        beta * s2,
        "ar1",
    )


def commuting(beta, p, w0) -> QuadraticSum:
    r"""Commuting mixture: sample :math:`k \sim p`, loss :math:`\tfrac\beta2 (e_k^\top w)^2`.

    Exact risk: :func:`theory.sgd.commuting_risk`
    (``docs/papers/sgd_last_iterate.md#solvable-instances``).

    Examples
    --------
    >>> inst = commuting(2.0, [0.5, 0.5], [1.0, 1.0])
    >>> round(float(inst.risk(np.ones(2))), 12)  # sum_k p_k beta w_k^2 / 2
    1.0
    """
    beta = check_scalar(beta, "beta", lower=0.0, upper=_BIG, closed="right")
    p = _probs(as_array(p, "p", ndim=1, min_size=1), np.size(p), "p")
    w0 = as_array(w0, "w0", shape=(p.size,), lower=-_BIG, upper=_BIG)
    return least_squares(
        np.sqrt(beta) * np.eye(p.size), w_star=np.zeros(p.size), probs=p, w0=w0, name="commuting"
    )


# --------------------------------------------------------------------------------------------------
# continual linear regression
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ContinualTasks:
    r"""Jointly realizable regression tasks :math:`(X_m, y_m)` learnt to convergence in turn.

    Fitting task :math:`m` to convergence from :math:`w` is the projection
    :math:`w \mapsto w - X_m^+(X_m w - y_m)`, i.e. one SGD step with :math:`\eta = 1` on the
    1-smooth loss :math:`\tfrac12\|U_m^\top (w - w_\star)\|^2` (:math:`U_m` an orthonormal basis of
    the row space of :math:`X_m`): ``instance`` is that :class:`QuadraticSum` (uniform task
    sampling, ``w0 = 0``). ``w_star`` is the minimum-norm joint solution and ``R = max ||X_m||``.
    ``loss(w)`` is :math:`\frac1T\sum_m \|X_m w - y_m\|^2/(\|w_\star\|^2R^2)` (Evron et al. 2025;
    Tsipory et al. 2025, Def. 2.3).
    """

    X: tuple
    y: tuple
    instance: QuadraticSum = field(init=False, repr=False)
    w_star: np.ndarray = field(init=False, repr=False)
    R: float = field(init=False)
    norm: float = field(init=False)
    Xs: np.ndarray = field(init=False, repr=False)  # (T, rmax, d) zero-padded
    ys: np.ndarray = field(init=False, repr=False)  # (T, rmax)

    def __post_init__(self):
        if len(self.X) != len(self.y) or len(self.X) < 1:
            raise ValueError(
                "`X` and `y` must be non-empty sequences of equal length; got "
                f"{len(self.X)} and {len(self.y)}."
            )
        X = [as_array(x, f"X[{m}]", ndim=2) for m, x in enumerate(self.X)]
        d = X[0].shape[1]
        y = [
            as_array(v, f"y[{m}]", shape=(x.shape[0],))
            for m, (x, v) in enumerate(zip(X, self.y, strict=True))
        ]
        if any(x.shape[1] != d for x in X):
            raise ValueError("every `X[m]` must have the same number of columns d.")
        Xall, yall = np.vstack(X), np.concatenate(y)
        w_star = np.linalg.lstsq(Xall, yall, rcond=None)[0]
        scale = max(1.0, np.linalg.norm(yall))
        if np.linalg.norm(Xall @ w_star - yall) > 1e-8 * scale:
            raise ValueError(
                "the tasks must be jointly realizable (some w solves every "
                "X_m w = y_m); the least-squares residual is "
                f"{np.linalg.norm(Xall @ w_star - yall):.3g}."
            )
        bases = []
        for x in X:
            _, s, Vt = np.linalg.svd(x, full_matrices=False)
            r = int(np.sum(s > s.max() * max(x.shape) * np.finfo(float).eps * 10)) if s.size else 0
            bases.append(Vt[:r])
        k = max(1, max(b.shape[0] for b in bases))
        T = len(X)
        B = np.zeros((T, k, d))
        for m, U in enumerate(bases):
            B[m, : U.shape[0]] = U
        c = np.einsum("mki,i->mk", B, w_star)
        inst = QuadraticSum(B, c, np.full(T, 1.0 / T), np.zeros(d), 0.0, "continual")
        rmax = max(x.shape[0] for x in X)
        Xs, ys = np.zeros((T, rmax, d)), np.zeros((T, rmax))
        for m, (x, v) in enumerate(zip(X, y, strict=True)):
            Xs[m, : x.shape[0]], ys[m, : x.shape[0]] = x, v
        R = max(np.linalg.norm(x, 2) for x in X)
        norm = float(np.sum(w_star**2) * R**2)
        if norm == 0:
            raise ValueError(
                "the joint solution is 0 (all y_m = 0): the normalised loss is undefined."
            )
        for name, val in dict(
            X=tuple(X),
            y=tuple(y),
            instance=inst,
            w_star=w_star,
            R=float(R),
            norm=norm,
            Xs=Xs,
            ys=ys,
        ).items():
            object.__setattr__(self, name, val)

    @property
    def n_tasks(self) -> int:
        return len(self.X)

    def task_losses(self, w):
        """:math:`\\|X_m w - y_m\\|^2` for every task, shape ``(..., T)``."""
        w = np.asarray(w, dtype=float)
        r = np.einsum("mki,...i->...mk", self.Xs, w) - self.ys
        return np.sum(r**2, axis=-1)

    def loss(self, w):
        """Normalised average loss over all tasks."""
        return self.task_losses(w).mean(axis=-1) / self.norm


def continual_tasks(X: Sequence, y: Sequence) -> ContinualTasks:
    """Build :class:`ContinualTasks` from task matrices ``X[m]`` and targets ``y[m]``.

    Examples
    --------
    >>> X = [np.array([[1.0, 0.0]]), np.array([[0.0, 2.0]])]
    >>> tasks = continual_tasks(X, [np.array([1.0]), np.array([2.0])])
    >>> tasks.w_star.tolist(), tasks.R
    ([1.0, 1.0], 2.0)
    """
    for name, v in (("X", X), ("y", y)):
        if isinstance(v, str | bytes) or not isinstance(v, Sequence | np.ndarray):
            raise TypeError(
                f"`{name}` must be a sequence (one entry per task); got {type(v).__name__}."
            )
    return ContinualTasks(tuple(X), tuple(y))


def random_continual_tasks(n_tasks, dim, rank, *, rng=None) -> ContinualTasks:
    r"""Random jointly realizable tasks: Gaussian ``X_m`` ``(rank, dim)``, ``y_m = X_m w_star``.

    :math:`w_\star \sim N(0, I/d)`; the setting of Evron et al. 2025 / Tsipory et al. 2025 (App. B).

    Examples
    --------
    >>> t = random_continual_tasks(4, 6, 2, rng=0)
    >>> len(t.X), t.X[0].shape, bool(np.allclose(t.X[1] @ t.w_star, t.y[1]))  # jointly realizable
    (4, (2, 6), True)
    """
    n_tasks = check_int(n_tasks, "n_tasks", lower=1)
    dim = check_int(dim, "dim", lower=1)
    rank = check_int(rank, "rank", lower=1, upper=dim)
    check_memory(n_tasks * (rank + 1) * dim + 4 * dim * dim, "`n_tasks`, `dim`", what="the tasks")
    gen = as_generator(rng)
    ws = gen.standard_normal(dim) / np.sqrt(dim)
    X = [gen.standard_normal((rank, dim)) for _ in range(n_tasks)]
    return continual_tasks(X, [x @ ws for x in X])


# --------------------------------------------------------------------------------------------------
# non-quadratic smooth convex finite sums
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class FiniteSum:
    r"""Finite sum :math:`F(w) = \sum_i p_i\,\ell(w; x_i, y_i)` of smooth convex per-sample losses
    (``docs/papers/sgd_last_iterate.md#instance-families``).

    ``loss(w, x, y)`` must be JAX-traceable (the Monte Carlo simulator differentiates it with
    ``jax.grad``); ``beta`` is the largest per-sample smoothness; ``w_star`` a minimiser (``None``
    where the infimum is not attained, as for logistic loss on separable data), ``f_star`` the
    infimum of :math:`F`, ``sigma2_star`` :math:`E\|\nabla\ell(w_\star)\|^2` (its limit 0 along a
    minimising sequence when ``w_star`` is ``None`` and ``f_star = 0``).
    """

    loss: Callable
    X: np.ndarray
    y: np.ndarray
    probs: np.ndarray
    w0: np.ndarray
    beta: float
    w_star: np.ndarray | None
    f_star: float
    name: str = "finite_sum"
    sigma2_star: float = field(init=False)
    dist2: float = field(init=False)
    realizable: bool = field(init=False)

    def __post_init__(self):
        X = as_array(self.X, "X", ndim=2)
        n, d = X.shape
        y = as_array(self.y, "y", shape=(n,))
        p = _probs(self.probs, n)
        w0 = as_array(self.w0, "w0", shape=(d,))
        ws = None if self.w_star is None else as_array(self.w_star, "w_star", shape=(d,))
        for name, val in dict(X=X, y=y, probs=p, w0=w0, w_star=ws).items():
            object.__setattr__(self, name, val)
        if ws is None:
            sig, dist2 = 0.0, float("inf")
        else:
            g = self.per_sample_gradients(ws)
            sig, dist2 = float(p @ np.sum(g**2, axis=1)), float(np.sum((w0 - ws) ** 2))
        object.__setattr__(self, "sigma2_star", sig)
        object.__setattr__(self, "dist2", dist2)
        object.__setattr__(self, "realizable", sig <= 1e-14)

    @property
    def dim(self) -> int:
        return self.X.shape[1]

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    def _jax_losses(self):
        import jax

        return jax.vmap(self.loss, in_axes=(None, 0, 0))

    def per_sample_gradients(self, w):
        import jax

        with jax.enable_x64(True):
            g = jax.vmap(jax.grad(self.loss), in_axes=(None, 0, 0))(np.asarray(w), self.X, self.y)
            return np.asarray(g)

    def risk(self, w):
        """Population risk at ``(d,)`` or a batch ``(..., d)``."""
        import jax

        w = as_array(w, "w")
        if w.shape[-1] != self.dim:
            raise ValueError(f"`w` must have last axis {self.dim}; got shape {w.shape}.")
        with jax.enable_x64(True):
            f = jax.vmap(self._jax_losses(), in_axes=(0, None, None))
            flat = np.asarray(f(w.reshape(-1, self.dim), self.X, self.y)) @ self.probs
        return flat.reshape(w.shape[:-1]) if w.ndim > 1 else float(flat[0])

    def excess_risk(self, w):
        return np.asarray(self.risk(w)) - self.f_star


def separable_data(n, dim, *, margin=0.1, rng=None):
    r"""Linearly separable data with unit-norm rows: labels :math:`\mathrm{sign}(u^\top x)` and
    :math:`|u^\top x| \ge` ``margin`` for a unit vector :math:`u` (rejection sampling)."""
    n = check_int(n, "n", lower=1)
    dim = check_int(dim, "dim", lower=2)
    margin = check_scalar(margin, "margin", lower=0.0, upper=0.9, closed="left")
    check_memory(8 * n * dim, "`n`, `dim`", what="the rejection-sampling draws")
    gen = as_generator(rng)
    u = gen.standard_normal(dim)
    u /= np.linalg.norm(u)
    rows = []
    while len(rows) < n:
        x = gen.standard_normal((4 * n, dim))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        rows.extend(x[np.abs(x @ u) >= margin])
    X = np.array(rows[:n])
    return X, np.sign(X @ u)


def _logistic(w, x, y):
    import jax.numpy as jnp

    return jnp.logaddexp(0.0, -y * jnp.dot(x, w))


def _squared_hinge(w, x, y):
    import jax.numpy as jnp

    return 0.5 * jnp.maximum(0.0, 1.0 - y * jnp.dot(x, w)) ** 2


def logistic_separable(X, y, *, probs=None, w0=None) -> FiniteSum:
    r"""Logistic loss :math:`\log(1 + e^{-y_i x_i^\top w})` on linearly separable data
    (separable classification as in Evron et al. 2025,
    ``docs/papers/sgd_last_iterate.md#instance-families``).

    Smoothness :math:`\|x_i\|^2/4`; the infimum 0 is not attained (``w_star = None``,
    ``dist2 = inf``), so the last-iterate bound with a minimiser is vacuous and only comparator
    versions apply. Raises if the data are not separable (checked by a linear program).

    Examples
    --------
    >>> X, y = separable_data(8, 2, rng=0)
    >>> inst = logistic_separable(X, y)
    >>> round(inst.beta, 6), inst.w_star is None  # |x_i|^2 / 4 on unit rows; no minimiser
    (0.25, True)
    """
    X = as_array(X, "X", ndim=2, min_size=1, lower=-_SEP, upper=_SEP)
    y = as_array(y, "y", shape=(X.shape[0],))
    if not np.all(np.abs(y) == 1):
        raise ValueError("`y` must hold labels +-1.")
    if _hard_margin_point(X, y, np.zeros(X.shape[1])) is None:
        raise ValueError("`X`, `y` must be linearly separable for logistic_separable.")
    beta = float(np.max(np.sum(X**2, axis=1)) / 4.0)
    w0 = np.zeros(X.shape[1]) if w0 is None else w0
    p = _probs(probs, X.shape[0])
    return FiniteSum(_logistic, X, y, p, w0, beta, None, 0.0, "logistic_separable")


def squared_hinge(X, y, *, probs=None, w0=None) -> FiniteSum:
    r"""Squared hinge :math:`\tfrac12\max(0, 1 - y_i x_i^\top w)^2`, smoothness :math:`\|x_i\|^2`
    (``docs/papers/sgd_last_iterate.md#instance-families``).

    On separable data the minimisers are :math:`\{w: y_i x_i^\top w \ge 1\ \forall i\}` (a common
    minimiser of every sample: :math:`\sigma_\star = 0`, ``f_star = 0``); ``w_star`` is the one
    closest to ``w0`` (a QP solved with cvxpy). SGD on it is relaxed random projection onto
    half-spaces (POCS).

    Examples
    --------
    >>> X, y = separable_data(8, 2, rng=0)
    >>> inst = squared_hinge(X, y)
    >>> round(inst.beta, 6), bool(np.all(y * (X @ inst.w_star) >= 1 - 1e-6))  # margins of w_star
    (1.0, True)
    """
    X = as_array(X, "X", ndim=2, min_size=1, lower=-_SEP, upper=_SEP)
    y = as_array(y, "y", shape=(X.shape[0],))
    if not np.all(np.abs(y) == 1):
        raise ValueError("`y` must hold labels +-1.")
    w0 = (
        np.zeros(X.shape[1])
        if w0 is None
        else as_array(w0, "w0", shape=(X.shape[1],), lower=-_SEP, upper=_SEP)
    )
    ws = _hard_margin_point(X, y, w0)
    if ws is None:
        raise ValueError("`X`, `y` must be linearly separable for squared_hinge.")
    beta = float(np.max(np.sum(X**2, axis=1)))
    p = _probs(probs, X.shape[0])
    return FiniteSum(_squared_hinge, X, y, p, w0, beta, ws, 0.0, "squared_hinge")


def _hard_margin_point(X, y, w0):
    """The point of {w : y_i x_i^T w >= 1} closest to w0, or None if empty."""
    import cvxpy as cp

    w = cp.Variable(X.shape[1])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w - w0)), [cp.multiply(y, X @ w) >= 1])
    try:
        prob.solve(solver=cp.CLARABEL)
    except cp.SolverError as err:
        raise NumericalError(f"the hard-margin program did not solve: {err}") from err
    if prob.status not in ("optimal", "optimal_inaccurate"):
        return None
    ws = np.asarray(w.value)
    # polish onto the feasible set (interior-point solutions sit within ~1e-9 of it)
    viol = 1.0 - y * (X @ ws)
    if viol.max() > 1e-6:
        return None
    return ws * max(1.0, 1.0 / np.min(y * (X @ ws)))
