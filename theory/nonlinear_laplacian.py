r"""Asymptotic spectrum of the nonlinear Laplacian L = Ŷ + diag(σ(Ŷ1)) (Ma & Kunisky 2025).

Model: Ŷ = W/√n + β x xᵀ, W a GOE matrix, x = y/‖y‖ with y_i i.i.d. (1-ρ)δ0 + ρη, ρ → 0,
ρn → ∞, m1 = Eη > 0, m2 = Eη² (arXiv 2505.12528, Sec. 2; the official code's models).
With g, h independent N(0, 1), ν = Law(σ(g)), s₊ = sup σ and, for θ > s₊,

.. math::
   H(θ) = θ + E\frac{1}{θ - σ(g)}, \quad H'(θ) = 1 - E\frac{1}{(θ - σ(g))^2},
   \qquad S_β(θ) = E_{η,g}\Big[\frac{η^2/m_2}{θ - σ(β η m_1/m_2 + g)}\Big].

- bulk: μ_SC ⊞ ν, right edge E₊ = H(z*) (:mod:`theory.free_convolution`; Sec. 3.1);
- θ(β): root of β S_β(θ) = 1 on θ > s₊, the top eigenvalue of β x xᵀ + diag(σ(Ŷ1))
  (Sec. 3.1, "rank-one perturbation of a diagonal matrix"); none when β S_β(s₊+) <= 1;
- outlier iff θ(β) exists and H'(θ(β)) > 0; then λ1(L) → H(θ(β)) and
  ⟨v1(L), x⟩² → H'(θ) / (β² E[(η²/m2)/(θ - σ(βηm1/m2 + g))²]) (Sec. 3, main theorem; the
  official code's ``outlier_eval`` and ``outlier_evec_overlap``); otherwise λ1 → E₊, overlap 0.
- β*(σ) = inf{β : H'(θ(β)) > 0}.

Single-root form of β* (derived here; checked against the nested solve in
``tests/theory/test_nonlinear_laplacian.py::test_single_root_equals_nested``): H' is increasing on
(s₊, ∞), so H'(θ) > 0 iff θ > z*; and for non-decreasing σ and η >= 0, β ↦ β S_β(θ) is
increasing, so θ(β) > z* iff β S_β(z*) > 1. Hence β* is the unique root of β S_β(z*) = 1, with
z* = s₊ + u* the edge's subordination point (u* = 0 in the irregular case). One root in β
instead of a root in β of a root in θ.

Numerics: everything is written in u = θ - s₊ > 0 with the gaps s₊ - σ(t) supplied by σ itself
(no cancellation near s₊), expectations over g use :func:`theory.gaussian.gaussian_nodes` split at
σ's kinks and jumps (moved to c - shift in the signal term), so kinked and step σ are integrated
to ~1e-13; the η-expectation is a fixed rule of :class:`EtaLaw`.

``sigma`` here is any object with ``__call__``, ``upper``, ``lower``, ``breaks``, ``gap_upper(t)``
(= upper - σ(t)) and ``gap_lower(t)``; :mod:`spectral.sigmas` builds validated ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from _core.validation import as_array, check_instance, check_scalar

from .free_convolution import AtomicLaw, edge_point
from .gaussian import gaussian_nodes
from .roots import find_root

__all__ = [
    "EtaLaw",
    "null_law",
    "signal_expectations",
    "theta",
    "ThresholdResult",
    "critical_threshold",
    "critical_threshold_nested",
    "OutlierResult",
    "outlier",
    "bulk_edge",
    "small_sigma_slope",
]


@dataclass(frozen=True, eq=False)
class EtaLaw:
    """Law of a nonzero entry η >= 0 of the spike, as a quadrature rule (nodes, probabilities).

    Use :meth:`point` (planted submatrix, η = δ1), :meth:`half_normal` (Gaussian sparse NNPCA,
    η = |N(0,1)|), :meth:`discrete` or :meth:`from_scipy`. The sparse biased prior of Ma & Kunisky
    2025, Sec. 2 (``docs/papers/nonlinear_laplacian.md#open-readings-as-options``: general η).
    """

    nodes: np.ndarray
    probs: np.ndarray
    name: str = "eta"

    def __post_init__(self):
        check_instance(self.name, "name", str)
        v = as_array(self.nodes, "nodes", ndim=1, min_size=1, lower=0.0, upper=1e100)
        p = as_array(self.probs, "probs", shape=v.shape, lower=0.0)
        if abs(p.sum() - 1) > 1e-9:
            raise ValueError(f"`probs` must sum to 1; got sum {p.sum():.15g}.")
        if p @ v <= 0:
            raise ValueError("`nodes` must have positive mean under `probs` (m1 > 0).")
        object.__setattr__(self, "nodes", v)
        object.__setattr__(self, "probs", p)

    @cached_property
    def m1(self) -> float:
        return float(self.probs @ self.nodes)

    @cached_property
    def m2(self) -> float:
        return float(self.probs @ self.nodes**2)

    @classmethod
    def point(cls, value: float = 1.0) -> EtaLaw:
        v = check_scalar(value, "value", lower=0.0, closed="neither")
        return cls(np.array([v]), np.array([1.0]), f"delta({v:g})")

    @classmethod
    def discrete(cls, values, probs, name: str = "discrete") -> EtaLaw:
        v = as_array(values, "values", ndim=1)
        p = as_array(probs, "probs", shape=v.shape)
        if np.any(v < 0):
            raise ValueError(f"`values` must be >= 0 (a non-negative spike); got min {v.min():g}.")
        if np.any(p < 0) or abs(p.sum() - 1) > 1e-12:
            raise ValueError(f"`probs` must be non-negative and sum to 1; got sum {p.sum():.15g}.")
        if p @ v <= 0:
            raise ValueError("`values` must have positive mean.")
        return cls(v, p, name)

    @classmethod
    def half_normal(cls, *, half_width: float = 12.0, order: int = 20) -> EtaLaw:
        """η = |N(0,1)|: Gauss–Legendre on [0, half_width] in unit pieces against 2φ."""
        x, w = gaussian_nodes(0.0, (), half_width=half_width, step=1.0, order=order)
        keep = x > 0
        return cls(x[keep], 2 * w[keep] / (2 * w[keep]).sum(), "|N(0,1)|")

    @classmethod
    def from_scipy(cls, dist, *, pieces: int = 60, order: int = 16, tail: float = 1e-15) -> EtaLaw:
        """A frozen continuous scipy.stats law on [0, ∞): Gauss–Legendre against its pdf.

        The support is cut at the ``tail`` quantiles; smooth densities are integrated to ~1e-12.
        """
        if not (hasattr(dist, "pdf") and hasattr(dist, "ppf")):
            raise TypeError(
                f"`eta` must be a frozen continuous scipy.stats distribution; got "
                f"{type(dist).__name__}."
            )
        lo, hi = (float(t) for t in dist.support())
        if lo < 0:
            raise ValueError(f"`eta` must be supported on [0, inf); its support starts at {lo:g}.")
        lo = max(lo, float(dist.ppf(tail)))
        hi = min(hi, float(dist.ppf(1 - tail)))
        xq, wq = np.polynomial.legendre.leggauss(order)
        edges = np.linspace(lo, hi, pieces + 1)
        half = 0.5 * np.diff(edges)
        x = ((edges[:-1] + half)[:, None] + half[:, None] * xq).ravel()
        w = (half[:, None] * wq).ravel() * dist.pdf(x)
        return cls(x, w / w.sum(), f"scipy:{getattr(dist.dist, 'name', 'dist')}")

    def __repr__(self):
        return f"EtaLaw({self.name}, m1={self.m1:.6g}, m2={self.m2:.6g}, nodes={self.nodes.size})"


def _check_sigma(sigma, name="sigma"):
    """``sigma`` a bounded non-decreasing σ (``spectral.sigmas``: callable with ``breaks``,
    ``upper``, ``lower``, ``gap_upper``, ``gap_lower``)."""
    if not (
        callable(sigma)
        and all(hasattr(sigma, a) for a in ("breaks", "upper", "lower", "gap_upper", "gap_lower"))
    ):
        raise TypeError(
            f"`{name}` must be a σ from spectral.sigmas (e.g. sigmas.tanh(a, b)); got "
            f"{type(sigma).__name__}."
        )
    if not (np.isfinite(float(sigma.upper)) and np.isfinite(float(sigma.lower))):
        raise ValueError(f"`{name}` must be bounded; got upper={sigma.upper}, lower={sigma.lower}.")
    return sigma


def _check_eta(eta):
    return check_instance(eta, "eta", EtaLaw, "an EtaLaw (e.g. EtaLaw.point(1.0))")


def null_law(sigma) -> AtomicLaw:
    """ν = Law(σ(g)) as atoms on the split Gauss–Legendre rule (kinks/jumps of σ as cuts).

    The null law whose free convolution with μ_SC is the bulk (Ma & Kunisky 2025, Sec. 3.1).

    >>> from spectral import sigmas
    >>> null_law(sigmas.constant(1.0)).upper  # sigma = 1: the atom at 1
    1.0
    """
    _check_sigma(sigma)
    x, w = gaussian_nodes(0.0, sigma.breaks)
    x, w = x[w > 0], w[w > 0]
    return AtomicLaw(
        sigma(x), w, float(sigma.upper), float(sigma.lower), sigma.gap_upper(x), sigma.gap_lower(x)
    )


@dataclass(frozen=True)
class _Signal:
    """Gaps s₊ - σ(βηm1/m2 + g) and weights (η²/m2)·P on the signal rule at one β."""

    gaps: np.ndarray
    weights: np.ndarray

    def s1(self, u):
        with np.errstate(divide="ignore"):
            return float(np.sum(self.weights / (u + self.gaps)))

    def s2(self, u):
        with np.errstate(divide="ignore"):
            return float(np.sum(self.weights / np.square(u + self.gaps)))


def signal_expectations(sigma, beta: float, eta: EtaLaw) -> _Signal:
    """The rule for E_{η,g}[(η²/m2) f(σ(βηm1/m2 + g))] at this β (a :class:`_Signal`).

    The expectations of S_β (Ma & Kunisky 2025, Sec. 3.1; official code's ``theta`` integrals).

    >>> from spectral import sigmas
    >>> sig = signal_expectations(sigmas.step([0.0], [0.0, 1.0]), 2.0, EtaLaw.point())
    >>> round(sig.s1(1.0), 9)  # E[1/(1 + 1{2 + g < 0})] = Phi(2) + Phi(-2) / 2
    0.988624934
    """
    _check_sigma(sigma)
    _check_eta(eta)
    beta = check_scalar(beta, "beta", lower=0.0, upper=1e12)
    keep = eta.probs * eta.nodes**2 > 0
    q = beta * eta.nodes[keep] * eta.m1 / eta.m2
    x, w = gaussian_nodes(q, sigma.breaks)
    weights = (w * (eta.probs[keep] * eta.nodes[keep] ** 2 / eta.m2)[:, None]).ravel()
    x = x.ravel()
    pos = weights > 0  # empty pieces where a break was clipped to the truncation
    return _Signal(sigma.gap_upper(x[pos]), weights[pos])


def _decreasing_root_log(f, hi: float):
    """Root of a decreasing f on u in (0, hi], f(hi) <= 0, found in log u; None if f(0+) <= 0."""
    s_hi = math.log(hi)
    s_lo = s_hi - 4.0
    while f(math.exp(s_lo)) <= 0.0:
        if s_lo < -700.0:
            return None
        s_lo -= 16.0
    res = find_root(lambda s: f(math.exp(s)), s_lo, s_hi, xtol=1e-15)
    return math.exp(res.value())


def _theta_u(sig: _Signal, beta: float):
    """u = θ(β) - s₊ > 0 solving β S(u) = 1, or None when β S(0+) <= 1 (no top root)."""
    f0 = beta * sig.s1(0.0)
    if f0 <= 1.0:
        return None
    # S(u) <= Σw/u, so β S(β Σw) <= 1 (equality when every gap is 0: widen past rounding)
    hi = beta * float(sig.weights.sum()) * (1.0 + 1e-9)
    return _decreasing_root_log(lambda u: beta * sig.s1(u) - 1.0, hi)


def theta(sigma, beta: float, eta: EtaLaw) -> float | None:
    """θ(β): top eigenvalue limit of β x xᵀ + diag(σ(Ŷ1)) (Ma & Kunisky 2025, Sec. 3.1).

    Root of β S_β(θ) = 1 on θ > s₊; ``None`` when there is none (no eigenvalue above s₊).

    >>> from spectral import sigmas
    >>> theta(sigmas.zero(), 2.0, EtaLaw.point())  # sigma = 0: the spike alone
    2.0
    """
    beta = check_scalar(beta, "beta", lower=0.0, upper=1e12)
    u = _theta_u(signal_expectations(sigma, beta, eta), beta)
    return None if u is None else float(sigma.upper) + u


@dataclass(frozen=True)
class ThresholdResult:
    """β*(σ), the edge point z* = s₊ + u*, the regime and the bulk edge E₊ = H(z*).

    Ma & Kunisky 2025, Sec. 3 (β*) and Biane 1997, Cor. 2 (the edge)."""

    beta_star: float
    z_star: float
    regular: bool
    edge: float
    evaluations: int

    def summary(self) -> str:
        rows = [("beta*", self.beta_star), ("z*", self.z_star), ("edge E+", self.edge)]
        body = "\n".join(f"{k:<10}{v:>18.12f}" for k, v in rows)
        return (
            f"Nonlinear-Laplacian threshold\n{'=' * 28}\n{body}\n"
            f"{'regime':<10}{'regular' if self.regular else 'irregular':>18}"
        )


def critical_threshold(sigma, eta: EtaLaw, *, xtol: float = 1e-13) -> ThresholdResult:
    """β*(σ) as the root of β S_β(z*) = 1 (single-root form, derived here; see module doc).

    Needs σ bounded and non-decreasing and η >= 0 with m1 > 0 (then the root exists and is
    unique). ``evaluations`` counts S-evaluations.

    >>> from spectral import sigmas
    >>> round(critical_threshold(sigmas.zero(), EtaLaw.point()).beta_star, 9)  # σ = 0: BBP
    1.0
    """
    _check_eta(eta)
    xtol = check_scalar(xtol, "xtol", lower=0.0, upper=0.1, closed="right")
    law = null_law(sigma)
    ep = edge_point(law)
    u_star = ep.u
    calls = [0]

    def phi(beta):
        calls[0] += 1
        if beta <= 0:
            return -1.0
        return beta * signal_expectations(sigma, beta, eta).s1(u_star) - 1.0

    res = find_root(phi, 0.0, 2.0, expand=2.0, xtol=xtol)
    if not res.found:
        raise ValueError(
            f"`sigma` must be non-decreasing with sup σ reached or approached "
            f"(β*: {res.message}); got {sigma!r}."
        )
    return ThresholdResult(res.value(), float(sigma.upper) + u_star, ep.regular, ep.edge, calls[0])


def critical_threshold_nested(
    sigma, eta: EtaLaw, lo: float = 0.3, hi: float = 1.5, *, xtol: float = 1e-13
):
    """β* as the root in β of H'(θ(β)) = 0, the two-level form of the official code.

    Ma & Kunisky 2025, Sec. 3 (β* = inf{β : H'(θ(β)) > 0}), solved as their code does.

    Returns a :class:`theory.roots.RootResult` (``found`` False when H'(θ(·)) has no sign change
    in [lo, hi]: never the bracket end). H'(θ) := -1 where θ(β) does not exist.

    >>> from spectral import sigmas
    >>> round(critical_threshold_nested(sigmas.zero(), EtaLaw.point()).root, 9)  # BBP
    1.0
    """
    _check_eta(eta)
    lo = check_scalar(lo, "lo", lower=0.0, upper=1e6, closed="neither")
    hi = check_scalar(hi, "hi", lower=0.0, upper=1e6, closed="neither")
    law = null_law(sigma)

    def hprime(beta):
        u = _theta_u(signal_expectations(sigma, beta, eta), beta)
        if u is None:
            return -1.0
        return 1.0 - float(np.sum(law.weights / np.square(u + law.upper_gaps)))

    return find_root(hprime, lo, hi, xtol=xtol)


@dataclass(frozen=True)
class OutlierResult:
    """Limits of λ1(L) and ⟨v1(L), x⟩² at one β; ``exists`` False below β* (then λ1 → edge).

    The quantities of Ma & Kunisky 2025's main theorem (Sec. 3), see :func:`outlier`."""

    beta: float
    eigenvalue: float
    overlap: float
    exists: bool
    theta: float | None
    edge: float
    hprime: float | None

    def summary(self) -> str:
        rows = [
            ("beta", self.beta),
            ("lambda1", self.eigenvalue),
            ("overlap", self.overlap),
            ("edge E+", self.edge),
        ]
        body = "\n".join(f"{k:<10}{v:>18.12f}" for k, v in rows)
        return (
            f"Nonlinear-Laplacian outlier\n{'=' * 28}\n{body}\n{'outlier':<10}{self.exists!s:>18}"
        )


def outlier(sigma, beta: float, eta: EtaLaw, *, law: AtomicLaw | None = None) -> OutlierResult:
    """λ1(L) → H(θ(β)) and ⟨v1(L), x⟩² → H'(θ)/(β² E[(η²/m2)(θ - σ(βηm1/m2+g))^{-2}]).

    Source: Ma & Kunisky 2025, main theorem of Sec. 3 (outlier and overlap); the official code's
    ``outlier_eval`` / ``outlier_evec_overlap``. Below β* the limits are (E₊, 0).

    >>> from spectral import sigmas
    >>> round(outlier(sigmas.zero(), 2.0, EtaLaw.point()).eigenvalue, 9)  # BBP: beta + 1 / beta
    2.5
    """
    _check_sigma(sigma)
    _check_eta(eta)
    beta = check_scalar(beta, "beta", upper=1e12)
    law = null_law(sigma) if law is None else law
    ep = edge_point(law)
    if beta <= 0:
        return OutlierResult(beta, ep.edge, 0.0, False, None, ep.edge, None)
    sig = signal_expectations(sigma, beta, eta)
    u = _theta_u(sig, beta)
    if u is None:
        return OutlierResult(beta, ep.edge, 0.0, False, None, ep.edge, None)
    d, w = law.upper_gaps, law.weights
    hp = 1.0 - float(np.sum(w / np.square(u + d)))
    th = float(sigma.upper) + u
    if hp <= 0.0:
        return OutlierResult(beta, ep.edge, 0.0, False, th, ep.edge, hp)
    lam = th + float(np.sum(w / (u + d)))
    ov = hp / (beta * beta * sig.s2(u))
    return OutlierResult(beta, lam, min(ov, 1.0), True, th, ep.edge, hp)


def bulk_edge(sigma) -> float:
    """Right edge E₊ of μ_SC ⊞ Law(σ(g)) (Biane 1997, Cor. 2; regular and irregular cases).

    >>> from spectral import sigmas
    >>> round(bulk_edge(sigmas.zero()), 9)  # σ = 0: the semicircle edge
    2.0
    """
    return edge_point(null_law(sigma)).edge


def small_sigma_slope(s, eta: EtaLaw) -> float:
    r"""d/dε β*(ε s) at ε = 0: -(E[(η²/m2) s(ηm1/m2 + g)] - E[s(g)]) (derived here).

    First order of the single-root equation: at ε = 0, z* = 1 and β* = 1, and
    β S_β(z*) = 1 expands to β*(εs) = 1 - ε (E[(η²/m2) s(ηm1/m2 + g)] - E[s(g)]) + O(ε²)
    (the E s(g) term from z* = 1 + ε E s(g) + O(ε²)). Checked against finite differences of
    :func:`critical_threshold` in ``tests/theory/test_nonlinear_laplacian.py``.

    >>> from spectral import sigmas
    >>> abs(small_sigma_slope(sigmas.constant(1.0), EtaLaw.point()))  # a shift moves both terms
    0.0
    """
    _check_sigma(s, "s")
    _check_eta(eta)
    x0, w0 = gaussian_nodes(0.0, s.breaks)
    keep = eta.probs * eta.nodes**2 > 0
    q = eta.nodes[keep] * eta.m1 / eta.m2
    x1, w1 = gaussian_nodes(q, s.breaks)
    wt = (eta.probs[keep] * eta.nodes[keep] ** 2 / eta.m2)[:, None]
    return -(float(np.sum(wt * w1 * s(x1))) - float(np.sum(w0 * s(x0))))
