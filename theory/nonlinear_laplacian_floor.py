r"""The floor of the nonlinear Laplacian: a lower bound on β*(σ) over every bounded σ.

Derived here (not in Ma & Kunisky 2025, arXiv 2505.12528; it uses their Sec. 3 threshold
characterisation and nothing else). Write f = 1/(z* - σ) at the bulk-edge point z* of
:mod:`theory.nonlinear_laplacian`, so that E f(g)² = 1 - H'(z*) <= 1, and a = β m1/m2. An outlier
exists at β iff θ(β) > z*, i.e. (S_β decreasing in θ, any σ) iff

.. math::  β\, E_{η,g}\big[(η^2/m_2)\, f(aη + g)\big] > 1 .

1. Gaussian shift (Cameron–Martin): E_g f(aη + g) = E_g[f(g) e^{aηg - a²η²/2}], so the left side
   is β E_g[f(g) K_β(g)] with K_β(t) = E_η[(η²/m2) e^{aηt - a²η²/2}].
2. Cauchy–Schwarz in L²(N(0, 1)): E[f K_β] <= ‖f‖ ‖K_β‖ <= ‖K_β‖, and
   ‖K_β‖² = E_{η,η'}[(η²η'²/m2²) e^{a²ηη'}] (η, η' independent; E_g e^{a(η+η')g} = e^{a²(η+η')²/2}).
3. β ‖K_β‖ increases in β, so no outlier below its root β0:

.. math::  β_0^2\, E\big[η^2 η'^2 e^{β_0^2 (m_1/m_2)^2 η η'}\big] = m_2^2, \qquad
           β^*(σ) \ge β_0 \ \text{for every bounded } σ .

Planted submatrix (η = 1): β0² e^{β0²} = 1, β0 = √W(1) = 0.7530891649796748 (Lambert W).
Gaussian sparse NNPCA (η = |N(0, 1)|, m1 = √(2/π), m2 = 1): with M(τ) = E[η² e^{τη}] =
2 e^{τ²/2}[(1 + τ²)Φ(τ) + τφ(τ)] the equation is β0² E_η'[η'² M(sη')] = 1, s = 2β0²/π, a
one-dimensional integral of a closed form; β0 = 0.66092736...

Equality needs f ∝ K_β0 with E f² = 1: σ = z* - 1/(c K_β0), increasing, bounded above by z* and
reaching it only as t → ∞ (planted: σ(t) = z* - e^{β0²} e^{-β0 t}). :func:`extremal_log_kernel`
gives log(K_β0(t)/K_β0(0)), from which :func:`spectral.sigmas.extremal` builds the capped family.
For the planted submatrix, AMP's state evolution in the sparse limit is x ↦ T(x) = β² e^x
(x = μ², Hajek, Wu & Xu 2018; AMP succeeds iff β > e^{-1/2}); β0² e^{β0²} = 1 reads
T'(T(0)) = 1: one nonlinear step through the degree (x = T(0) = β²), then power iteration (the
linearisation T' there), so PCA (1) > β0 > AMP (e^{-1/2} = 0.6065).

Checks: ``tests/theory/test_nonlinear_laplacian_floor.py`` (the shift identity and the
Cauchy–Schwarz bound by quadrature on random σ, the closed forms against generic quadrature and
an independent ``scipy.integrate`` double integral, M(τ) by sympy, and the extremal family's β*
approaching β0 from above).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from scipy import integrate
from scipy.special import erfcx, lambertw, ndtr

from _core.validation import as_array, check_instance, check_scalar

from .nonlinear_laplacian import EtaLaw
from .roots import find_root

__all__ = ["PRIORS", "beta_floor", "floor_equation", "half_normal_m", "extremal_log_kernel"]

PRIORS = ("planted_submatrix", "sparse_nnpca")
_SQ2PI = math.sqrt(2.0 * math.pi)


def _check_prior(prior):
    """A named prior (closed forms) or an :class:`EtaLaw` (quadrature)."""
    if isinstance(prior, str):
        if prior not in PRIORS:
            raise ValueError(f"`prior` must be one of {PRIORS} or an EtaLaw; got {prior!r}.")
        return prior
    return check_instance(prior, "prior", EtaLaw, f"one of {PRIORS} or an EtaLaw")


def half_normal_m(tau):
    r"""log M(τ), M(τ) = E[η² e^{τη}] for η = |N(0, 1)| (derived here; sympy-checked in tests).

    M(τ) = 2 e^{τ²/2} E[(Z + τ)² 1{Z > -τ}] = 2 e^{τ²/2}[(1 + τ²)Φ(τ) + τφ(τ)]. For τ < 0 it is
    written as (2/√(2π))[(1 + τ²)R(τ) + τ], R = Φ/φ = √(π/2) erfcx(-τ/√2) (no underflow).

    >>> round(float(half_normal_m(0.0)), 12)  # M(0) = E η² = 1
    0.0
    """
    t = as_array(tau, "tau")
    neg, pos = np.minimum(t, 0.0), np.maximum(t, 0.0)
    ratio = math.sqrt(math.pi / 2) * erfcx(-neg / math.sqrt(2.0))
    low = math.log(2.0 / _SQ2PI) + np.log((1.0 + neg**2) * ratio + neg)
    phi = np.exp(-0.5 * pos**2) / _SQ2PI
    high = math.log(2.0) + 0.5 * pos**2 + np.log((1.0 + pos**2) * ndtr(pos) + pos * phi)
    return np.where(t < 0.0, low, high)


def _nnpca_norm2(beta: float) -> float:
    """E_{η,η'}[η²η'² e^{sηη'}], s = 2β²/π, η = |N(0, 1)|: ∫ y² M(sy) 2φ(y) dy (s < 1)."""
    s = 2.0 * beta * beta / math.pi

    def integrand(y):
        return y * y * math.exp(float(half_normal_m(s * y)) - 0.5 * y * y) * 2.0 / _SQ2PI

    val, _ = integrate.quad(integrand, 0.0, np.inf, epsabs=0.0, epsrel=1e-13, limit=200)
    return val


def floor_equation(beta: float, prior) -> float:
    r"""β² E[η²η'² e^{β²(m1/m2)²ηη'}] - m2², increasing in β; its root is the floor (derived here).

    >>> round(floor_equation(1.0, "planted_submatrix"), 12)  # e - 1
    1.718281828459
    """
    prior = _check_prior(prior)
    # NNPCA's double expectation is finite iff s = 2β²/π < 1; the floor lies in (0, 1]
    beta = check_scalar(beta, "beta", lower=0.0, upper=1.2)
    if prior == "planted_submatrix":
        return beta * beta * math.exp(beta * beta) - 1.0
    if prior == "sparse_nnpca":
        return beta * beta * _nnpca_norm2(beta) - 1.0
    v, p = prior.nodes, prior.probs
    s = beta * beta * (prior.m1 / prior.m2) ** 2
    w = p * v * v
    return beta * beta * float(w @ np.exp(s * np.outer(v, v)) @ w) - prior.m2**2


def beta_floor(prior="planted_submatrix") -> float:
    r"""β0: β*(σ) >= β0 for every bounded σ, monotone or not (derived here; see module doc).

    ``"planted_submatrix"``: √W(1) (Lambert W); ``"sparse_nnpca"``: the root of
    β² E[η'² M(2β²η'/π)] = 1 with M of :func:`half_normal_m`; an :class:`EtaLaw`: the double
    sum of its rule. The priors of Ma & Kunisky 2025, Sec. 2.

    >>> round(beta_floor("planted_submatrix"), 10)
    0.753089165
    """
    return _floor(_check_prior(prior))


@cache
def _floor(prior) -> float:
    if prior == "planted_submatrix":
        return math.sqrt(float(lambertw(1.0).real))
    # F(0) = -m2² < 0 and F(1) >= 0 (the exponential is >= 1 for η >= 0)
    return find_root(lambda b: floor_equation(b, prior), 1e-6, 1.0, xtol=1e-15).value()


def extremal_log_kernel(t, prior="planted_submatrix"):
    r"""log(K(t)/K(0)), K(t) = E[(η²/m2) e^{aηt - a²η²/2}] at a = β0 m1/m2 (derived here).

    1/K is the gap z* - σ of the σ that attains the floor (module doc). Planted: β0 t;
    NNPCA: log M(at/√(1 + a²)) (:func:`half_normal_m`, as K ∝ M(at/√(1+a²)) there); an
    :class:`EtaLaw`: a log-sum-exp over its rule.

    >>> round(float(extremal_log_kernel(1.0)), 10)  # planted: beta0 * t
    0.753089165
    """
    prior = _check_prior(prior)
    t = as_array(t, "t")
    b0 = _floor(prior)
    if prior == "planted_submatrix":
        return b0 * t
    if prior == "sparse_nnpca":
        a = b0 * math.sqrt(2.0 / math.pi)
        return half_normal_m(a * t / math.sqrt(1.0 + a * a))
    a = b0 * prior.m1 / prior.m2
    keep = prior.probs * prior.nodes > 0
    v, lw = prior.nodes[keep], np.log(prior.probs[keep] * prior.nodes[keep] ** 2)
    expo = lw + a * v * t[..., None] - 0.5 * a * a * v * v
    top = expo.max(-1, keepdims=True)
    lk = top[..., 0] + np.log(np.exp(expo - top).sum(-1))
    e0 = lw - 0.5 * a * a * v * v
    return lk - (e0.max() + math.log(float(np.exp(e0 - e0.max()).sum())))
