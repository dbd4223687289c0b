r"""The semicircle law of radius 2·scale (Wigner): density, CDF, Stieltjes transform.

For W/sqrt(n) with W a GOE/GUE matrix of off-diagonal variance scale², the empirical spectral law
tends to the semicircle on [-2·scale, 2·scale] (Wigner 1958; Anderson, Guionnet & Zeitouni 2010,
"AGZ", Thm 2.1.1):

.. math:: \rho(x) = \frac{\sqrt{4 s^2 - x^2}}{2\pi s^2}, \qquad
   m(z) = \int \frac{\rho(x)\,dx}{x - z} = \frac{-z + \sqrt{z - 2s}\sqrt{z + 2s}}{2 s^2}

with the branch of the square root that makes m(z) ~ -1/z at infinity (so Im m > 0 on the upper
half plane); m solves s² m² + z m + 1 = 0.
"""

from __future__ import annotations

import numpy as np

from _core.validation import as_array, check_finite_result, check_scalar

__all__ = ["semicircle_pdf", "semicircle_cdf", "semicircle_stieltjes", "semicircle_edge"]


def semicircle_edge(scale: float = 1.0) -> float:
    """Right edge 2·scale of the support (AGZ 2010, Thm 2.1.1).

    >>> semicircle_edge(2.0)
    4.0
    """
    return 2.0 * check_scalar(scale, "scale", lower=0.0, upper=1e300, closed="right")


def semicircle_pdf(x, scale: float = 1.0):
    """Density sqrt(4 s² - x²) / (2π s²) on [-2s, 2s], zero outside (AGZ 2010, Thm 2.1.1).

    >>> round(semicircle_pdf(0.0), 12)  # 1/pi
    0.318309886184
    """
    s = check_scalar(scale, "scale", lower=0.0, closed="neither")
    u = np.clip(as_array(x, "x", finite="nan") / s, -2.0, 2.0)
    out = np.sqrt(4 - u * u) / (2 * np.pi * s)
    return out if out.ndim else float(out)


def semicircle_cdf(x, scale: float = 1.0):
    """CDF: 1/2 + (u sqrt(4 - u²)/4 + arcsin(u/2)) / π, u = clip(x/s, -2, 2).

    The integral of :func:`semicircle_pdf` (AGZ 2010, Thm 2.1.1; derived here, checked by
    quadrature in ``tests/theory/test_semicircle.py``).

    >>> semicircle_cdf(0.0), semicircle_cdf(2.0)
    (0.5, 1.0)
    """
    s = check_scalar(scale, "scale", lower=0.0, closed="neither")
    u = np.clip(as_array(x, "x", finite="nan") / s, -2.0, 2.0)
    out = 0.5 + (u * np.sqrt(4 - u * u) / 4 + np.arcsin(u / 2)) / np.pi
    return out if out.ndim else float(out)


def semicircle_stieltjes(z, scale: float = 1.0):
    """m(z) = ∫ ρ(x)/(x - z) dx for complex z off the support (real z outside [-2s, 2s] too).

    AGZ 2010, Sec. 2.4 (the root of s² m² + z m + 1 = 0 with m ~ -1/z at infinity).

    Uses sqrt(z - 2s)·sqrt(z + 2s) with principal roots, which is the branch analytic off
    [-2s, 2s] and ~ z at infinity.

    >>> round(semicircle_stieltjes(3.0), 12)  # (sqrt(5) - 3) / 2
    -0.38196601125
    """
    s = check_scalar(scale, "scale", lower=0.0, closed="neither")
    z = np.asarray(z)
    if z.dtype.kind not in "iufc":
        raise TypeError(f"`z` must be a real or complex number or array; got dtype {z.dtype}.")
    if not np.all(np.isfinite(z)):
        raise ValueError("`z` must be finite.")
    with np.errstate(over="ignore", invalid="ignore"):  # overflow: NumericalError below
        u = z.astype(np.complex128) / s
        out = (-u + np.sqrt(u - 2) * np.sqrt(u + 2)) / (2 * s)
    if np.all(np.abs(out.imag) <= 1e-300) and np.all(np.imag(z) == 0):
        out = out.real
    check_finite_result(out, "m(z) (z / scale overflows float64)", scale=s)
    return out if out.ndim else out.item()
