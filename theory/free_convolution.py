r"""Free additive convolution of the semicircle (variance 1) with a compactly supported law ν.

The law ν is given by atoms (a quadrature rule for ν = Law(σ(g)), or an exact discrete law) in an
:class:`AtomicLaw`, which also carries the distances of the atoms to the top and bottom of the
support computed without cancellation (``upper_gaps = s₊ - v``): near s₊ the difference of two
close floats would otherwise create a spurious atom at s₊, and an atom at s₊ changes the edge.

Formulas (Biane 1997, "On the free convolution with a semi-circular distribution", Indiana Univ.
Math. J. 46, Cor. 2 and Prop. 2; used in Ma & Kunisky 2025, arXiv 2505.12528, Sec. 3.1):

- subordination: G(z) = G_ν(z - G(z)), G_ν(w) = E[1/(w - σ)];
- with H(w) = w + G_ν(w), H'(w) = 1 - E[(w - σ)^{-2}], the right edge of μ_SC ⊞ ν is
  H(w*) with w* the largest w > s₊ where H'(w) = 0 (regular case), or w* = s₊ when
  E[(s₊ - σ)^{-2}] <= 1 (irregular case); the left edge mirrors this;
- density (Biane's real parametrisation): for u in ℝ let v(u) >= 0 solve
  E[1/((u - σ)² + v²)] = 1 (v = 0 when even v = 0 gives <= 1); then the point
  x(u) = u + E[(u - σ)/((u - σ)² + v²)] carries density v(u)/π, and u ↦ x(u) is increasing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from _core.validation import as_array, check_instance, check_int

from .roots import find_root

__all__ = [
    "AtomicLaw",
    "edge_point",
    "right_edge",
    "left_edge",
    "free_convolution_density",
    "FreeConvolutionDensity",
]


@dataclass(frozen=True)
class AtomicLaw:
    """ν = Σ_i w_i δ_{v_i} with ``upper - values`` and ``values - lower`` given stably.

    The measure ν of Biane 1997 (here finitely many atoms, e.g. a quadrature rule for Law(σ(g))).
    Build with :meth:`from_values`. ``weights`` sum to 1 (within quadrature error).
    """

    values: np.ndarray
    weights: np.ndarray
    upper: float
    lower: float
    upper_gaps: np.ndarray
    lower_gaps: np.ndarray

    @classmethod
    def from_values(
        cls, values, weights, *, upper=None, lower=None, upper_gaps=None, lower_gaps=None
    ):
        """Atoms ``values`` with ``weights``; ``upper``/``lower`` default to the extreme atoms."""
        v = as_array(values, "values").ravel()
        w = as_array(weights, "weights").ravel()
        if v.shape != w.shape or v.size == 0:
            raise ValueError(
                f"`values` and `weights` must be non-empty of one shape; got "
                f"{v.shape} and {w.shape}."
            )
        if np.any(w < 0):
            raise ValueError("`weights` must be non-negative.")
        up = float(v.max()) if upper is None else float(upper)
        lo = float(v.min()) if lower is None else float(lower)
        ug = up - v if upper_gaps is None else np.asarray(upper_gaps, dtype=float).ravel()
        lg = v - lo if lower_gaps is None else np.asarray(lower_gaps, dtype=float).ravel()
        if np.any(ug < 0) or np.any(lg < 0):
            raise ValueError("atoms must lie in [`lower`, `upper`].")
        return cls(v, w, up, lo, np.clip(ug, 0, None), np.clip(lg, 0, None))

    def mirrored(self) -> AtomicLaw:
        """Law of -X (turns left-edge questions into right-edge ones)."""
        return AtomicLaw(
            -self.values, self.weights, -self.lower, -self.upper, self.lower_gaps, self.upper_gaps
        )


@dataclass(frozen=True)
class EdgePoint:
    """w* = upper + u (u >= 0), whether the edge is regular, and the edge H(w*)."""

    u: float
    regular: bool
    edge: float


def edge_point(law: AtomicLaw) -> EdgePoint:
    """Right edge of μ_SC ⊞ ν: w* = s₊ + u* with E[(u* + gap)^{-2}] = 1 (Biane 1997, Cor. 2).

    Irregular case (E[gap^{-2}] <= 1): u* = 0. The edge is H(w*) = w* + E[1/(u* + gap)].

    >>> law = AtomicLaw.from_values([1.0], [1.0])
    >>> round(edge_point(law).edge, 9)  # semicircle shifted by 1: edge 2 + 1
    3.0
    """
    check_instance(law, "law", AtomicLaw, "an AtomicLaw (e.g. AtomicLaw.from_values)")
    d, w = law.upper_gaps, law.weights
    with np.errstate(divide="ignore"):
        at_top = float(np.sum(w / np.square(d))) if np.all(d > 0) else math.inf
    if at_top <= 1.0:
        u = 0.0
        regular = False
    else:

        def f(s):  # in s = log u: E[(u + d)^-2] - 1, decreasing
            return float(np.sum(w / np.square(np.exp(s) + d))) - 1.0

        # E[(u+d)^-2] <= 1/u^2 sum(w) so the root is below log(sum w)/2 <= 1e-12 + 0
        hi = 0.5 * math.log(float(w.sum())) + 1e-12
        lo = hi - 2.0
        while f(lo) <= 0.0 and lo > -700.0:
            lo -= 8.0
        res = find_root(f, lo, hi, xtol=1e-15)
        u = math.exp(res.value())
        regular = True
    edge = law.upper + u + float(np.sum(w / (u + d))) if (u > 0 or np.all(d > 0)) else math.inf
    return EdgePoint(u, regular, edge)


def right_edge(law: AtomicLaw) -> float:
    """Right end of the support of μ_SC ⊞ ν (Biane 1997, Cor. 2; see :func:`edge_point`).

    >>> right_edge(AtomicLaw.from_values([0.0], [1.0]))  # ν = δ0: the semicircle
    2.0
    """
    return edge_point(law).edge


def left_edge(law: AtomicLaw) -> float:
    """Left end of the support of μ_SC ⊞ ν (Biane 1997, Cor. 2; mirror of :func:`right_edge`).

    >>> left_edge(AtomicLaw.from_values([0.0], [1.0]))
    -2.0
    """
    check_instance(law, "law", AtomicLaw, "an AtomicLaw (e.g. AtomicLaw.from_values)")
    return -edge_point(law.mirrored()).edge


@dataclass(frozen=True)
class FreeConvolutionDensity:
    """Density of μ_SC ⊞ ν on its support, from Biane's parametrisation (1997, Prop. 2) on a u-grid.

    ``x`` (increasing) and ``density`` are the parametrised curve; :meth:`__call__` interpolates
    it; ``mass`` is its integral (1 up to discretisation error).
    """

    x: np.ndarray
    density: np.ndarray
    left: float
    right: float

    def __call__(self, x):
        x = np.asarray(x, dtype=float)
        out = np.interp(x, self.x, self.density, left=0.0, right=0.0)
        return out if out.ndim else float(out)

    @property
    def mass(self) -> float:
        return float(np.trapezoid(self.density, self.x))

    def __repr__(self):
        return (
            f"FreeConvolutionDensity(support=[{self.left:.6g}, {self.right:.6g}], "
            f"mass={self.mass:.6f}, points={self.x.size})"
        )


def _v_of_u(u: np.ndarray, law: AtomicLaw, iters: int = 60) -> np.ndarray:
    """v(u) >= 0 with E[1/((u-σ)² + v²)] = 1 (0 where already <= 1), vectorised bisection on v²."""
    diff2 = np.square(u[:, None] - law.values[None, :])
    w = law.weights

    def g(v2):
        with np.errstate(divide="ignore"):
            return (w / (diff2 + v2[:, None])).sum(1) - 1.0

    lo = np.zeros(u.size)
    hi = np.full(u.size, float(w.sum()))  # at v² = Σw every term is <= w/v²: g <= 0
    pos = g(lo) > 0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        gm = g(mid)
        lo = np.where(gm > 0, mid, lo)
        hi = np.where(gm > 0, hi, mid)
    return np.where(pos, np.sqrt(0.5 * (lo + hi)), 0.0)


def free_convolution_density(law: AtomicLaw, *, points: int = 2001) -> FreeConvolutionDensity:
    """Density of μ_SC ⊞ ν by Biane's real parametrisation (Biane 1997, Prop. 2, Cor. 2).

    The u-grid runs over [w*_left, w*_right] (the subordination points of the two edges),
    Chebyshev-clustered at both ends where the density has its square-root edges.

    Examples
    --------
    >>> law = AtomicLaw.from_values([0.0], [1.0])   # ν = δ0: the semicircle itself
    >>> round(free_convolution_density(law)(0.0), 6)  # 1/π
    0.31831
    """
    points = check_int(points, "points", lower=2, upper=10**5)
    right = edge_point(law)
    left = edge_point(law.mirrored())
    a, b = law.lower - left.u, law.upper + right.u
    t = np.cos(np.pi * (np.arange(points)[::-1] + 0.5) / points)  # Chebyshev points in (-1, 1)
    u = np.concatenate([[a], 0.5 * (a + b) + 0.5 * (b - a) * t, [b]])
    v = _v_of_u(u, law)
    diff = u[:, None] - law.values[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        xs = u + (law.weights * diff / (diff * diff + (v * v)[:, None])).sum(1)
    ok = np.isfinite(xs)
    xs, dens = xs[ok], v[ok] / np.pi
    xs[0], xs[-1] = -left.edge, right.edge
    dens[0] = dens[-1] = 0.0
    order = np.argsort(xs, kind="stable")
    return FreeConvolutionDensity(xs[order], dens[order], -left.edge, right.edge)
