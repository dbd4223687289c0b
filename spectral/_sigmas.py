"""Nonlinearities σ for the nonlinear Laplacian, each with what exact integration needs.

Every σ here is bounded and non-decreasing (the hypotheses of Ma & Kunisky 2025, Sec. 3, as used
by the official code), declares its kinks and jumps (``breaks``), its supremum and infimum
(``upper``, ``lower``) and computes ``gap_upper(t) = upper - σ(t)`` and ``gap_lower(t) = σ(t) -
lower`` without cancellation, so that the theory never sees a fake atom at sup σ.
"""

from __future__ import annotations

import math

import numpy as np

from _core.validation import as_array, call_real, check_instance, check_scalar
from theory import nonlinear_laplacian_floor as nlf

__all__ = [
    "Sigma",
    "tanh",
    "zshape",
    "step",
    "constant",
    "zero",
    "monotone_mlp",
    "custom",
    "extremal",
]


class Sigma:
    """Base class: a bounded non-decreasing σ: ℝ → ℝ with declared breaks and bounds.

    The hypotheses on σ of Ma & Kunisky 2025, Sec. 3. A subclass sets ``upper``, ``lower``,
    ``breaks`` and ``gap_upper``; the call, ``gap_lower`` and shifts come from here.

    >>> class Clip(Sigma):  # min(max(t, 0), 1): kinks at 0 and 1
    ...     upper, lower, breaks, name = 1.0, 0.0, (0.0, 1.0), "clip"
    ...     def gap_upper(self, t):
    ...         return 1.0 - np.clip(t, 0.0, 1.0)
    >>> s = Clip()
    >>> s(np.array([-1.0, 0.25, 3.0])).tolist(), (s + 2.0).upper, float(s.gap_lower(0.25))
    ([0.0, 0.25, 1.0], 3.0, 0.25)
    """

    upper: float
    lower: float
    breaks: tuple[float, ...] = ()
    name: str = "sigma"

    def __call__(self, t):
        return self.upper - self.gap_upper(t)

    def gap_upper(self, t):
        raise NotImplementedError

    def gap_lower(self, t):
        return (self.upper - self.lower) - self.gap_upper(t)

    def __add__(self, c):
        c = check_scalar(c, "c")
        return _finite_span(_Shifted(self, c), "c")

    __radd__ = __add__

    def __repr__(self):
        return self.name


def _finite_span(sig: Sigma, name: str) -> Sigma:
    """``sig`` if its bounds and their span ``upper - lower`` are finite floats with ``lower <=
    upper`` (the theory subtracts them); else ``ValueError`` naming ``name``."""
    try:
        up, lo = float(sig.upper), float(sig.lower)
    except (AttributeError, TypeError, ValueError) as err:
        raise TypeError(f"`{name}` must have real bounds `upper` and `lower` ({err}).") from None
    with np.errstate(over="ignore", invalid="ignore"):
        span = np.float64(up) - np.float64(lo)
    if not (math.isfinite(up) and math.isfinite(lo) and math.isfinite(span) and lo <= up):
        raise ValueError(
            f"`{name}` must give a σ with finite bounds lower <= upper and a finite span "
            f"upper - lower; got lower={lo:g}, upper={up:g}."
        )
    return sig


class _Shifted(Sigma):
    def __init__(self, base: Sigma, c: float):
        self.base, self.c = base, c
        self.upper, self.lower = base.upper + c, base.lower + c
        self.breaks = base.breaks
        self.name = f"({base.name}) + {c:g}"

    def __call__(self, t):
        return self.base(t) + self.c

    def gap_upper(self, t):
        return self.base.gap_upper(t)

    def gap_lower(self, t):
        return self.base.gap_lower(t)


class _Tanh(Sigma):
    def __init__(self, a, b):
        self.a, self.b = a, b
        top = a if b > 0 else 0.0
        self.upper, self.lower = top, -top
        self.name = f"tanh(a={a:.10g}, b={b:.10g})"

    def __call__(self, t):
        return self.a * np.tanh(self.b * np.asarray(t, dtype=float))

    def gap_upper(self, t):
        if self.upper == 0.0:
            return np.zeros_like(np.asarray(t, dtype=float))
        # a - a tanh(bt) = 2a / (1 + e^{2bt}), exact in floating point
        with np.errstate(over="ignore"):
            return 2.0 * self.a / (1.0 + np.exp(2.0 * self.b * np.asarray(t, dtype=float)))

    def gap_lower(self, t):
        return self.gap_upper(-np.asarray(t, dtype=float))


def tanh(a: float, b: float) -> Sigma:
    """σ(t) = a·tanh(b t), a, b >= 0 (Ma & Kunisky 2025, Sec. 4 "tanh" family).

    >>> tanh(2.0, 1.0)(np.array([0.0, 50.0]))
    array([0., 2.])
    """
    a = check_scalar(a, "a", lower=0.0)
    b = check_scalar(b, "b", lower=0.0)
    return _finite_span(_Tanh(a, b), "a")


class _Step(Sigma):
    def __init__(self, breaks: np.ndarray, levels: np.ndarray):
        self._breaks, self.levels = breaks, levels
        self.breaks = tuple(float(x) for x in breaks)
        self.upper, self.lower = float(levels[-1]), float(levels[0])
        self.name = f"step({len(breaks)} jumps, levels {levels[0]:.4g}..{levels[-1]:.4g})"

    def _index(self, t):
        return np.searchsorted(self._breaks, np.asarray(t, dtype=float), side="right")

    def __call__(self, t):
        return self.levels[self._index(t)]

    def gap_upper(self, t):
        return self.upper - self.levels[self._index(t)]

    def gap_lower(self, t):
        return self.levels[self._index(t)] - self.lower


def step(breaks, levels) -> Sigma:
    """Non-decreasing step function: σ = levels[i] on [breaks[i-1], breaks[i]) (Sec. 4, steps).

    ``levels`` has one entry more than ``breaks``; ``levels[0]`` is the value below the first
    break. Breaks must be non-decreasing, levels non-decreasing.

    >>> step([0.0], [-1.0, 1.0])(np.array([-0.5, 0.5]))
    array([-1.,  1.])
    """
    b = as_array(breaks, "breaks", ndim=1)
    v = as_array(levels, "levels", ndim=1)
    if v.size != b.size + 1:
        raise ValueError(
            f"`levels` must have len(breaks) + 1 = {b.size + 1} entries; got {v.size}."
        )
    if np.any(b[1:] < b[:-1]):
        raise ValueError("`breaks` must be non-decreasing.")
    if np.any(v[1:] < v[:-1]):
        raise ValueError(
            "`levels` must be non-decreasing (σ non-decreasing); got a decrease at "
            f"index {int(np.argmax(v[1:] < v[:-1])) + 1}."
        )
    return _finite_span(_Step(b, v), "levels")


class _ZShape(Sigma):
    def __init__(self, a, b, c):
        self.a, self.b, self.c = a, b, c
        self.upper, self.lower = b, 0.0
        self.breaks = (c, c + a)
        self.name = f"zshape(a={a:.10g}, b={b:.10g}, c={c:.10g})"

    def gap_upper(self, t):
        t = np.asarray(t, dtype=float)
        return self.b * np.clip((self.c + self.a - t) / self.a, 0.0, 1.0)

    def gap_lower(self, t):
        t = np.asarray(t, dtype=float)
        return self.b * np.clip((t - self.c) / self.a, 0.0, 1.0)


def zshape(a: float, b: float, c: float) -> Sigma:
    """σ(t) = min(b, max(0, (b/a)(t - c))): 0 below c, linear on [c, c+a], b above (Sec. 4).

    ``a = 0`` gives the single step b·1{t >= c}.

    >>> zshape(2.0, 1.0, 0.0)(np.array([-1.0, 1.0, 3.0]))  # 0, linear, b
    array([0. , 0.5, 1. ])
    """
    a = check_scalar(a, "a", lower=0.0)
    b = check_scalar(b, "b", lower=0.0)
    c = check_scalar(c, "c")
    if a == 0.0:
        return step([c], [0.0, b])
    return _ZShape(a, b, c)


class _Constant(Sigma):
    def __init__(self, c):
        self.upper = self.lower = c
        self.name = f"constant({c:g})"

    def gap_upper(self, t):
        return np.zeros_like(np.asarray(t, dtype=float))

    gap_lower = gap_upper


def constant(c: float) -> Sigma:
    """σ ≡ c (then L = Ŷ + cI: plain PCA shifted by c; Ma & Kunisky 2025, Sec. 2).

    >>> constant(2.0)(np.zeros(2))
    array([2., 2.])
    """
    return _Constant(check_scalar(c, "c"))


def zero() -> Sigma:
    """σ ≡ 0 (plain PCA; BBP threshold β* = 1, Baik, Ben Arous & Péché 2005).

    >>> zero()(np.array([-1.0, 1.0]))
    array([0., 0.])
    """
    return _Constant(0.0)


def _softplus(x):
    return np.logaddexp(0.0, x)


class _MonotoneMLP(Sigma):
    def __init__(self, v, w, b, c0):
        self.v, self.w, self.b, self.c0 = v, w, b, c0
        self.amp, self.slope = _softplus(v), _softplus(w)
        with np.errstate(over="ignore"):  # an overflowing sum is refused by _finite_span
            tot = float(self.amp.sum())
        self.upper, self.lower = c0 + tot, c0 - tot
        self.name = f"monotone_mlp({v.size} units)"

    def __call__(self, t):
        t = np.asarray(t, dtype=float)
        return self.c0 + (self.amp * np.tanh(t[..., None] * self.slope + self.b)).sum(-1)

    def gap_upper(self, t):
        t = np.asarray(t, dtype=float)
        with np.errstate(over="ignore"):
            z = 2.0 * (t[..., None] * self.slope + self.b)
            return (2.0 * self.amp / (1.0 + np.exp(z))).sum(-1)

    def gap_lower(self, t):
        t = np.asarray(t, dtype=float)
        with np.errstate(over="ignore"):
            z = -2.0 * (t[..., None] * self.slope + self.b)
            return (2.0 * self.amp / (1.0 + np.exp(z))).sum(-1)


def monotone_mlp(v, w, b, c0: float = 0.0) -> Sigma:
    """σ(t) = c0 + Σ_k softplus(v_k) tanh(softplus(w_k) t + b_k): a one-hidden-layer MLP.

    Positive output and input weights make it non-decreasing and bounded by construction
    (|σ - c0| < Σ softplus(v_k)), instead of the official code's cumulative-maximum repair
    (Ma & Kunisky 2025, Sec. 4 learn σ by an MLP; this parametrisation is chosen here).

    >>> monotone_mlp([1.0], [1.0], [0.0], c0=0.5)(np.array([0.0]))  # c0 + softplus(1) tanh(0)
    array([0.5])
    """
    v = as_array(v, "v", ndim=1)
    w = as_array(w, "w", shape=v.shape)
    b = as_array(b, "b", shape=v.shape)
    return _finite_span(_MonotoneMLP(v, w, b, check_scalar(c0, "c0")), "v")


class _Custom(Sigma):
    def __init__(self, fn, upper, lower, breaks, name):
        self.fn, self.upper, self.lower, self.breaks, self.name = fn, upper, lower, breaks, name

    def __call__(self, t):
        return call_real(self.fn, np.asarray(t, dtype=float), "fn")

    def gap_upper(self, t):
        return np.clip(self.upper - self(t), 0.0, None)

    def gap_lower(self, t):
        return np.clip(self(t) - self.lower, 0.0, None)


def custom(fn, *, upper: float, lower: float, breaks=(), name: str = "custom") -> Sigma:
    """Wrap a vectorised callable with its bounds and kinks; checked on a grid of [-40, 40].

    Any σ meeting the hypotheses of Ma & Kunisky 2025, Sec. 3 (bounded, non-decreasing).

    Raises ``ValueError`` naming ``fn`` when it leaves [lower, upper] or decreases on the grid.
    Gaps are computed as differences, so an ``fn`` approaching ``upper`` only asymptotically
    loses accuracy near the top; prefer a family of :mod:`spectral.sigmas` then.

    >>> s = custom(np.tanh, upper=1.0, lower=-1.0)
    >>> s(np.array([0.0]))
    array([0.])
    """
    if not callable(fn):
        raise TypeError(f"`fn` must be callable; got {type(fn).__name__}.")
    upper = check_scalar(upper, "upper")
    lower = check_scalar(lower, "lower")
    check_instance(name, "name", str)
    if lower > upper:
        raise ValueError(f"`lower` must be <= `upper`; got lower={lower:g}, upper={upper:g}.")
    br = tuple(float(x) for x in as_array(breaks, "breaks").ravel())
    grid = np.sort(np.concatenate([np.linspace(-40, 40, 16001), br]))
    vals = call_real(fn, grid, "fn")
    if vals.shape != grid.shape or not np.all(np.isfinite(vals)):
        raise ValueError("`fn` must be vectorised and finite on [-40, 40].")
    tol = 1e-12 * max(1.0, abs(upper), abs(lower))
    if vals.max() > upper + tol or vals.min() < lower - tol:
        raise ValueError(
            f"`fn` must be bounded by [lower, upper] = [{lower:g}, {upper:g}]; got "
            f"values in [{vals.min():g}, {vals.max():g}]."
        )
    if np.any(np.diff(vals) < -tol):
        i = int(np.argmax(np.diff(vals) < -tol))
        raise ValueError(f"`fn` must be non-decreasing; it decreases near t = {grid[i]:g}.")
    return _Custom(fn, upper, lower, br, name)


def as_sigma(sigma, name: str = "sigma") -> Sigma:
    """Validate a σ argument: a :class:`Sigma` (finite bounds and span), or a number (constant
    σ)."""
    if isinstance(sigma, Sigma):
        return _finite_span(sigma, name)
    if isinstance(sigma, (int, float, np.floating, np.integer)) and not isinstance(sigma, bool):
        return constant(float(sigma))
    if callable(sigma):
        raise TypeError(
            f"`{name}` must be a spectral.sigmas object (bounds and kinks declared); "
            f"wrap a plain callable with spectral.sigmas.custom(fn, upper=..., "
            f"lower=..., breaks=...). Got {type(sigma).__name__}."
        )
    raise TypeError(
        f"`{name}` must be a spectral.sigmas object or a number; got {type(sigma).__name__}."
    )


class _Extremal(Sigma):
    def __init__(self, c, t0, width, prior):
        self.c, self.t0, self.width, self.prior = c, t0, width, prior
        self._lk = lambda t: nlf.extremal_log_kernel(t, prior)
        self._lk0 = float(self._lk(t0))
        self.breaks = (t0 - width, t0)
        self.upper = 0.0
        self.lower = -float(self.gap_upper(t0 - width))
        self.name = f"extremal(c={c:.10g}, t0={t0:.10g}, width={width:.10g}, {prior})"

    def gap_upper(self, t):
        tau = np.clip(np.asarray(t, dtype=float), self.t0 - self.width, self.t0)
        lk = self._lk(tau)
        # e^c (1/K(τ) - 1/K(t0)) written without cancellation near t0
        return np.exp(self.c - lk) * -np.expm1(lk - self._lk0)


def extremal(c: float, t0: float, width: float, prior: str = "planted_submatrix") -> Sigma:
    """The floor-attaining σ, capped: σ(t) = -e^c (1/K(τ) - 1/K(t0)), τ = clip(t, t0 - width, t0).

    K(t)/K(0) is :func:`theory.nonlinear_laplacian_floor.extremal_log_kernel` (planted submatrix:
    e^{β0 t}, β0 = √W(1)). Uncapped (t0 → ∞, width → ∞) and at the right scale c, β*(σ) tends to
    the floor β0 (derived here, not in Ma & Kunisky 2025; see that module). σ is 0 above t0 (its
    top level), increasing on [t0 - width, t0], constant below.

    >>> s = extremal(0.57, 5.0, 8.0)
    >>> float(s(np.array([6.0]))[0]), bool(s(np.array([-10.0]))[0] == s.lower)
    (0.0, True)
    """
    c = check_scalar(c, "c", lower=-50.0, upper=50.0)
    t0 = check_scalar(t0, "t0", lower=-12.0, upper=12.0)
    width = check_scalar(width, "width", lower=0.0, upper=40.0, closed="right")
    if not isinstance(prior, str) or prior not in ("planted_submatrix", "sparse_nnpca"):
        raise ValueError(f"`prior` must be 'planted_submatrix' or 'sparse_nnpca'; got {prior!r}.")
    return _Extremal(c, t0, width, prior)
