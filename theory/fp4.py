"""The sqrt(3) noise threshold of stochastic-rounding (SR) training, and the SR noise model.

Source: Chmiel, Fishman, Banner & Soudry, "FP4 All the Way", NeurIPS 2025 (arXiv 2505.19115), Sec.
4.
Model (paper Sec. 4): the quantised gradient is ``g_q = g + eps`` with ``E eps = 0`` and
``E eps eps^T = sigma^2 I`` (SR noise, ``d`` coordinates). On a quadratic with Hessian ``H`` a step
``-eta g_q`` changes the loss in expectation by

    E dL = -eta |g|^2 + eta^2 / 2 (g^T H g + sigma^2 tr H),

minimised by ``eta* = |g|^2 / (g^T H g + sigma^2 tr H)``. With ``H = lam I`` (the paper's
"concentrated spectrum") and ``G = |g|^2`` the optimal-step descent is ``D = G^2 / (2 lam (G + d
sigma^2))``
and ``|dD/dsigma|`` peaks at ``sigma_crit = |g| / sqrt(3 d)`` (paper's statement; the last algebraic
step is derived here and checked with sympy in :func:`threshold_derivation` and
``tests/theory/test_fp4.py``). So training with SR is effective while the gradient-to-noise ratio
``rho = |g| / (sigma sqrt d)`` exceeds ``sqrt(3)``. Corollaries (derived here, same tests):
optimal-step efficiency ``rho^2 / (1 + rho^2)`` (3/4 at the threshold), fixed step ``eta = 1/lam``
efficiency ``1 - 1/rho^2`` (2/3 at the threshold, negative below ``rho = 1``).

SR noise (paper Sec. 3; derived here for the two-operand GEMM): one SR draw of ``y`` between the
grid
points ``lo <= y <= hi`` has variance ``(y - lo)(hi - y)``; for the update GEMM ``G = Q(delta)^T
Q(a)``
with independent SR operands, ``E G = delta^T a`` and
``Var G_jk = sum_n (delta_nj^2 v^a_nk + a_nk^2 v^delta_nj + v^delta_nj v^a_nk)``.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from theory._validation import as_array, check_int, check_scalar

__all__ = [
    "SQRT3",
    "gradient_noise_ratio",
    "critical_sigma",
    "optimal_step",
    "expected_loss_change",
    "optimal_efficiency",
    "fixed_step_efficiency",
    "two_point_variance",
    "update_gemm_noise",
    "ThresholdDerivation",
    "threshold_derivation",
]

SQRT3 = math.sqrt(3.0)
"""The threshold on ``rho = |g| / (sigma sqrt d)`` (paper Sec. 4)."""


def gradient_noise_ratio(grad_norm, noise_norm):
    """``rho = |g| / (sigma sqrt d) = |g| / sqrt(E |eps|^2)`` (paper Sec. 4, Fig. 5).

    ``noise_norm`` is the root mean square noise norm ``sqrt(E |eps|^2) = sigma sqrt d``.
    """
    g = check_scalar(grad_norm, "grad_norm", lower=0.0)
    n = check_scalar(noise_norm, "noise_norm", lower=0.0, closed="neither")
    return g / n


def critical_sigma(grad_norm, d):
    """``sigma_crit = |g| / sqrt(3 d)`` (paper Sec. 4): the per-coordinate SR noise level at which
    the
    sensitivity of the optimal-step descent to the noise peaks."""
    g = check_scalar(grad_norm, "grad_norm", lower=0.0)
    d = check_int(d, "d", lower=1)
    return g / math.sqrt(3.0 * d)


def _quad(G, sigma, d, lam):
    G = check_scalar(G, "G", lower=0.0)
    sigma = check_scalar(sigma, "sigma", lower=0.0)
    d = check_int(d, "d", lower=1)
    lam = check_scalar(lam, "lam", lower=0.0, closed="neither")
    return G, sigma, d, lam


def optimal_step(G, sigma, d, lam):
    """``eta* = G / (lam (G + d sigma^2))`` for ``H = lam I`` (paper Sec. 4, step-size optimum)."""
    G, sigma, d, lam = _quad(G, sigma, d, lam)
    return G / (lam * (G + d * sigma**2))


def expected_loss_change(G, sigma, d, lam, eta=None):
    """``E dL = -eta G + eta^2 lam (G + d sigma^2) / 2`` on ``L = lam |x|^2 / 2`` (paper Sec. 4);
    ``eta=None`` uses :func:`optimal_step`, giving ``-G^2 / (2 lam (G + d sigma^2))``."""
    G, sigma, d, lam = _quad(G, sigma, d, lam)
    eta = optimal_step(G, sigma, d, lam) if eta is None else check_scalar(eta, "eta", lower=0.0)
    return -eta * G + 0.5 * eta**2 * lam * (G + d * sigma**2)


def optimal_efficiency(rho):
    """Optimal-step descent relative to noise-free: ``rho^2 / (1 + rho^2)`` (derived here)."""
    rho = as_array(rho, "rho")
    if np.any(rho < 0):
        raise ValueError(f"rho must be >= 0, got min {rho.min()}")
    return rho**2 / (1.0 + rho**2)


def fixed_step_efficiency(rho):
    """Descent with the noise-free optimal step ``eta = 1/lam``, relative: ``1 - 1/rho^2``
    (derived here)."""
    rho = as_array(rho, "rho")
    if np.any(rho <= 0):
        raise ValueError(f"rho must be > 0, got min {rho.min()}")
    return 1.0 - 1.0 / rho**2


def two_point_variance(y, lo, hi):
    """Variance ``(y - lo)(hi - y)`` of SR of ``y`` onto ``{lo, hi}`` (paper Sec. 3)."""
    y, lo, hi = as_array(y, "y"), as_array(lo, "lo"), as_array(hi, "hi")
    if np.any(lo > y) or np.any(y > hi):
        raise ValueError("y must satisfy lo <= y <= hi")
    return (y - lo) * (hi - y)


def update_gemm_noise(delta, a, v_delta, v_a):
    """Exact ``E |Q(delta)^T Q(a) - delta^T a|_F^2`` for independent SR of both operands (derived
    here):
    ``sum_{n,j,k} delta_nj^2 v^a_nk + a_nk^2 v^delta_nj + v^delta_nj v^a_nk`` with the elementwise
    SR
    variances ``v``. ``delta (n, p)``, ``a (n, q)``."""
    delta = as_array(delta, "delta", ndim=2)
    a = as_array(a, "a", ndim=2)
    v_delta = as_array(v_delta, "v_delta", shape=delta.shape)
    v_a = as_array(v_a, "v_a", shape=a.shape)
    if delta.shape[0] != a.shape[0]:
        raise ValueError(f"a must have {delta.shape[0]} rows like delta, got {a.shape[0]}")
    d2, a2 = delta**2, a**2
    return float(np.sum(d2.T @ v_a + v_delta.T @ a2 + v_delta.T @ v_a))


@dataclasses.dataclass(frozen=True)
class ThresholdDerivation:
    """Symbolic results of :func:`threshold_derivation` (sympy expressions in ``G, d, lam,
    sigma``)."""

    descent: object  # optimal-step D(sigma)
    sigma_crit: object  # the positive critical point of dD/dsigma
    rho_crit: object  # |g| / (sigma_crit sqrt d)
    efficiency_at_crit: object  # D(sigma_crit) / D(0)
    fixed_efficiency_at_crit: object

    def summary(self) -> str:
        return "\n".join(f"{k:<26}{v}" for k, v in dataclasses.asdict(self).items())


@functools.cache
def threshold_derivation() -> ThresholdDerivation:
    """Derive the sqrt(3) threshold with sympy (paper Sec. 4 with ``H = lam I``; last step derived
    here).

    Minimises ``E dL(eta)`` over ``eta``, forms ``D(sigma) = -min E dL``, solves
    ``d^2 D / d sigma^2 = 0`` (the extremum of the sensitivity ``dD/dsigma``) for ``sigma > 0``.
    """
    import sympy as sp

    G, d, lam, sig, eta = sp.symbols("G d lam sigma eta", positive=True)
    dL = -eta * G + eta**2 / 2 * lam * (G + d * sig**2)
    eta_star = sp.solve(sp.diff(dL, eta), eta)[0]
    D = sp.simplify(-dL.subs(eta, eta_star))
    crit = [s for s in sp.solve(sp.diff(D, sig, 2), sig) if s.is_positive]
    (sc,) = crit
    rho = sp.simplify(sp.sqrt(G) / (sc * sp.sqrt(d)))
    eff = sp.simplify(D.subs(sig, sc) / D.subs(sig, 0))
    fixed = sp.simplify(dL.subs({eta: 1 / lam, sig: sc}) / dL.subs({eta: 1 / lam, sig: 0}))
    return ThresholdDerivation(D, sc, rho, eff, fixed)
