"""The sqrt(3) noise threshold of stochastic-rounding (SR) training, and the SR noise model.

Source: Chmiel, Fishman, Banner & Soudry, "FP4 All the Way", NeurIPS 2025, arXiv 2505.19115.

Model (paper Sec. 4): the quantised gradient is ``g_q = g + eps`` with ``E eps = 0`` and
``E eps eps^T = sigma^2 I`` (SR noise, ``d`` coordinates). On a quadratic with Hessian ``H`` a step
``-eta g_q`` changes the loss in expectation by

    E dL = -eta |g|^2 + eta^2 / 2 (g^T H g + sigma^2 tr H),

minimised by ``eta* = |g|^2 / (g^T H g + sigma^2 tr H)``. With ``H = lam I`` (the paper's
"concentrated spectrum") and ``G = |g|^2`` the optimal-step descent is ``D = G^2 / (2 lam (G + d
sigma^2))`` and ``|dD/dsigma|`` peaks at ``sigma_crit = |g| / sqrt(3 d)`` (paper's statement; the
last algebraic step is derived here and checked with sympy in :func:`threshold_derivation` and
``tests/theory/test_fp4.py``). So training with SR is effective while the gradient-to-noise ratio
``rho = |g| / (sigma sqrt d)`` exceeds ``sqrt(3)``. Corollaries (derived here, same tests):
optimal-step efficiency ``rho^2 / (1 + rho^2)`` (3/4 at the threshold), fixed step ``eta = 1/lam``
efficiency ``1 - 1/rho^2`` (2/3 at the threshold, negative below ``rho = 1``).

SR noise (paper Sec. 3; derived here for the two-operand GEMM): one SR draw of ``y`` between the
grid points ``lo <= y <= hi`` has variance ``(y - lo)(hi - y)``; for the update GEMM ``G =
Q(delta)^T Q(a)`` with independent SR operands, ``E G = delta^T a`` and ``Var G_jk = sum_n
(delta_nj^2 v^a_nk + a_nk^2 v^delta_nj + v^delta_nj v^a_nk)``.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from _core.validation import as_array, check_finite_result, check_int, check_scalar

_BIG = 1e100  # magnitudes beyond this overflow the squares below; no FP4 quantity is that large

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
    "nvfp4_sr_variance",
    "noisy_gd_sq_error",
    "ThresholdDerivation",
    "threshold_derivation",
]

SQRT3 = math.sqrt(3.0)
"""The threshold on ``rho = |g| / (sigma sqrt d)`` (paper Sec. 4)."""


def gradient_noise_ratio(grad_norm, noise_norm):
    """``rho = |g| / (sigma sqrt d) = |g| / sqrt(E |eps|^2)`` (paper Sec. 4, Fig. 5).

    ``noise_norm`` is the root mean square noise norm ``sqrt(E |eps|^2) = sigma sqrt d``.

    >>> gradient_noise_ratio(2.0, 1.0)
    2.0
    """
    g = check_scalar(grad_norm, "grad_norm", lower=0.0, upper=_BIG)
    n = check_scalar(noise_norm, "noise_norm", lower=1.0 / _BIG, upper=_BIG)
    return g / n


def critical_sigma(grad_norm, d):
    """``sigma_crit = |g| / sqrt(3 d)`` (paper Sec. 4): the per-coordinate SR noise level at which
    the sensitivity of the optimal-step descent to the noise peaks.

    >>> critical_sigma(3.0, 3)  # |g| / sqrt(3 d)
    1.0
    """
    g = check_scalar(grad_norm, "grad_norm", lower=0.0, upper=_BIG)
    d = check_int(d, "d", lower=1)
    return g / math.sqrt(3.0 * d)


def _quad(G, sigma, d, lam):
    G = check_scalar(G, "G", lower=0.0, upper=_BIG)
    sigma = check_scalar(sigma, "sigma", lower=0.0, upper=1e40)
    d = check_int(d, "d", lower=1, upper=10**15)
    lam = check_scalar(lam, "lam", lower=1.0 / _BIG, upper=_BIG)
    if G + d * sigma**2 == 0:
        raise ValueError(
            "`G` and `sigma` must not both be 0: with neither gradient nor noise the "
            "optimal step is undefined."
        )
    return G, sigma, d, lam


def optimal_step(G, sigma, d, lam):
    """``eta* = G / (lam (G + d sigma^2))`` for ``H = lam I`` (paper Sec. 4, step-size optimum).

    >>> optimal_step(1.0, 0.0, 1, 2.0)  # without noise: 1/lam
    0.5
    """
    G, sigma, d, lam = _quad(G, sigma, d, lam)
    return G / (lam * (G + d * sigma**2))


def expected_loss_change(G, sigma, d, lam, eta=None):
    """``E dL = -eta G + eta^2 lam (G + d sigma^2) / 2`` on ``L = lam |x|^2 / 2`` (paper Sec. 4);
    ``eta=None`` uses :func:`optimal_step`, giving ``-G^2 / (2 lam (G + d sigma^2))``.

    >>> expected_loss_change(1.0, 0.0, 1, 2.0)  # -G / (2 lam) at the optimal step
    -0.25
    """
    G, sigma, d, lam = _quad(G, sigma, d, lam)
    eta = (
        optimal_step(G, sigma, d, lam)
        if eta is None
        else check_scalar(eta, "eta", lower=0.0, upper=_BIG)
    )
    return -eta * G + 0.5 * eta**2 * lam * (G + d * sigma**2)


def optimal_efficiency(rho):
    """Optimal-step descent relative to noise-free: ``rho^2 / (1 + rho^2)`` (derived here).

    >>> round(float(optimal_efficiency(3**0.5)), 12)  # 3/4 at the threshold
    0.75
    """
    rho = as_array(rho, "rho", lower=0.0, upper=_BIG)
    return rho**2 / (1.0 + rho**2)


def fixed_step_efficiency(rho):
    """Descent with the noise-free optimal step ``eta = 1/lam``, relative: ``1 - 1/rho^2``
    (derived here).

    >>> round(float(fixed_step_efficiency(3**0.5)), 12)  # 2/3 at the threshold
    0.666666666667
    """
    rho = as_array(rho, "rho", lower=1.0 / _BIG, upper=_BIG)
    return 1.0 - 1.0 / rho**2


def two_point_variance(y, lo, hi):
    """Variance ``(y - lo)(hi - y)`` of SR of ``y`` onto ``{lo, hi}`` (paper Sec. 3).

    >>> float(two_point_variance(0.25, 0.0, 1.0))  # (y - lo)(hi - y)
    0.1875
    """
    y, lo, hi = as_array(y, "y"), as_array(lo, "lo"), as_array(hi, "hi")
    bad = (lo > y) | (y > hi)
    if np.any(bad):
        yb, lb, hb = (np.broadcast_to(v, bad.shape)[bad].ravel()[0] for v in (y, lo, hi))
        raise ValueError(f"`y` must satisfy lo <= y <= hi; got y = {yb:g} with [{lb:g}, {hb:g}].")
    return (y - lo) * (hi - y)


def update_gemm_noise(delta, a, v_delta, v_a):
    """Exact ``E |Q(delta)^T Q(a) - delta^T a|_F^2`` for independent SR of both operands.

    ``sum_{n,j,k} delta_nj^2 v^a_nk + a_nk^2 v^delta_nj + v^delta_nj v^a_nk`` with the elementwise
    SR variances ``v`` (paper Sec. 3 gives the one-operand SR variance; the GEMM form is derived
    here). ``delta (n, p)``, ``a (n, q)``.

    >>> one = np.ones((1, 1))
    >>> float(update_gemm_noise(one, one, one, one))  # 1 * 1 + 1 * 1 + 1 * 1
    3.0
    """
    delta = as_array(delta, "delta", ndim=2, lower=-_BIG, upper=_BIG)
    a = as_array(a, "a", ndim=2, lower=-_BIG, upper=_BIG)
    v_delta = as_array(v_delta, "v_delta", shape=delta.shape, lower=0.0, upper=_BIG)
    v_a = as_array(v_a, "v_a", shape=a.shape, lower=0.0, upper=_BIG)
    if delta.shape[0] != a.shape[0]:
        raise ValueError(f"a must have {delta.shape[0]} rows like delta, got {a.shape[0]}")
    d2, a2 = delta**2, a**2
    return float(np.sum(d2.T @ v_a + v_delta.T @ a2 + v_delta.T @ v_a))


E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
"""Non-negative FP4 (E2M1) grid (OCP MX v1.0, Table 4)."""


@functools.cache
def _e4m3_values() -> np.ndarray:
    import ml_dtypes

    v = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return np.unique(v[np.isfinite(v) & (v > 0)])


def nvfp4_sr_variance(x, axis=-1, block=16):
    """Elementwise variance of NVFP4 stochastic rounding of ``x``, blocks of ``block`` along
    ``axis`` (float64 NumPy, independent of :mod:`nn.quant`).

    NVFP4 two-level scale (NVIDIA convention; paper Sec. 2-3, Table 1): ``s_enc = 6 * 448 /
    amax_T``; block decode scale ``s_b`` = ``amax_b / 6 * s_enc`` rounded *up* onto the E4M3 grid
    (the package's SR rule, so no element exceeds 6 and SR stays unbiased); scaled magnitude
    ``y = |x| s_enc / s_b`` between E2M1 neighbours ``lo <= y <= hi`` has SR variance
    ``(y - lo)(hi - y)`` (paper Sec. 3), times ``(s_b / s_enc)^2`` in the units of ``x``.
    The length along ``axis`` must be a multiple of ``block``.

    >>> x = np.array([6.0, 2.5] + [0.0] * 14)  # unit scales; 2.5 lies between 2 and 3
    >>> nvfp4_sr_variance(x)[:3]
    array([0.  , 0.25, 0.  ])
    """
    x = as_array(x, "x", min_size=1, lower=-_BIG, upper=_BIG)
    if x.ndim == 0:
        raise ValueError("`x` must be at least 1-D; got a scalar.")
    block = check_int(block, "block", lower=1)
    axis = check_int(axis, "axis", lower=-x.ndim, upper=x.ndim - 1)
    xm = np.moveaxis(x, axis, -1)
    if xm.shape[-1] % block:
        raise ValueError(
            f"x must have a multiple of block={block} entries along axis {axis}; got {xm.shape[-1]}"
        )
    xb = np.abs(xm.reshape(*xm.shape[:-1], -1, block))
    amax_b = xb.max(-1, keepdims=True)
    amax_t = xb.max()
    if amax_t == 0:
        return np.zeros_like(x)
    s_enc = 6.0 * 448.0 / amax_t
    e4 = _e4m3_values()
    ideal = amax_b / 6.0 * s_enc
    s_b = e4[np.minimum(np.searchsorted(e4, ideal, side="left"), e4.size - 1)]
    s_b = np.where(ideal > 0, s_b, 1.0)
    y = np.minimum(xb * s_enc / s_b, 6.0)  # <= 6 up to rounding of the division
    i = np.clip(np.searchsorted(E2M1_VALUES, y, side="right") - 1, 0, E2M1_VALUES.size - 2)
    v = two_point_variance(y, E2M1_VALUES[i], E2M1_VALUES[i + 1]) * (s_b / s_enc) ** 2
    return np.moveaxis(v.reshape(xm.shape), -1, axis)


def noisy_gd_sq_error(e0_sq, noise_sq, eta, lam=1.0):
    """``E |e_t|^2`` for ``t = 0..T`` of gradient descent ``e_{t+1} = e_t - eta (lam e_t + eps_t)``
    on ``L = lam |e|^2 / 2`` with zero-mean noise, ``E |eps_t|^2 = noise_sq[t]`` (length T),
    independent of ``e_t`` (paper Sec. 4 noise model, iterated; derived here):
    ``E |e_{t+1}|^2 = (1 - eta lam)^2 E |e_t|^2 + eta^2 noise_sq[t]``. A step ``t`` without noise
    (high-precision gradients) has ``noise_sq[t] = 0``. For constant noise N^2 the stationary
    ratio is ``rho^2 = lam^2 E|e|^2 / N^2 = eta lam / (2 - eta lam)``.
    Checked by Monte Carlo in ``tests/theory/test_fp4.py``.

    >>> noisy_gd_sq_error(1.0, [0.0, 1.0], 0.5)  # 0.25 * 1, then 0.25 * 0.25 + 0.25 * 1
    array([1.    , 0.25  , 0.3125])
    """
    e0 = check_scalar(e0_sq, "e0_sq", lower=0.0, upper=_BIG)
    n2 = as_array(noise_sq, "noise_sq", ndim=1, lower=0.0, upper=_BIG)
    eta = check_scalar(eta, "eta", lower=0.0, upper=_BIG, closed="right")
    lam = check_scalar(lam, "lam", lower=0.0, upper=_BIG, closed="right")
    from scipy.signal import lfilter

    a2 = (1.0 - eta * lam) ** 2
    with np.errstate(over="ignore", invalid="ignore"):
        rest = lfilter([1.0], [1.0, -a2], eta**2 * n2, zi=[a2 * e0])[0] if n2.size else n2
    return check_finite_result(
        np.concatenate([[e0], rest]),
        "E|e_t|^2 (diverges for eta*lam > 2)",
        eta=eta,
        lam=lam,
        steps=n2.size,
    )


@dataclasses.dataclass(frozen=True)
class ThresholdDerivation:
    """Symbolic results of :func:`threshold_derivation` (sympy expressions in ``G, d, lam, sigma``).

    The paper's Sec. 4 threshold, its last algebraic step derived here.
    """

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
