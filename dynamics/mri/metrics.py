"""Image-quality metrics for MRI reconstructions on magnitude images ``(..., H, W)`` (one value per
image), on a fixed intensity scale, beside the per-image normalised PSNR that D2SA's official code
reports (``uceclz0/D2SA-MRI-Recon: metrics.py``; ``docs/papers/d2sa.md#departures-and-why``).

* :func:`psnr` -- ``10 log10(peak^2 / MSE)`` with ``peak`` the reference's maximum (or a given
  ``data_range``): a gain or offset error in the reconstruction costs PSNR;
* :func:`psnr_normalized` -- both images min-max normalised *separately* to [0, 1], then PSNR with
  peak 1 (the official code): blind to a global gain/offset error, the very shift D2SA's stage 1
  targets;
* :func:`ssim` -- Wang et al., IEEE TIP 13:600, 2004, eq. (13) with a 7x7 uniform window, sample
  (co)variances, ``K1 = 0.01``, ``K2 = 0.03``, averaged over the window positions inside the image
  (the ``skimage.metrics.structural_similarity`` defaults the code calls), ``data_range`` the
  reference's ``max - min`` by default;
* :func:`hfen` -- high-frequency error norm ``|LoG(x - ref)|_2 / |LoG(ref)|_2`` with a Laplacian of
  Gaussian of ``sigma = 1.5`` on a 15x15 support (Ravishankar & Bresler, IEEE TMI 30:1028, 2011),
  the over-smoothing measure.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from scipy import ndimage

from _core.validation import check_int, check_scalar

__all__ = ["psnr", "psnr_normalized", "ssim", "hfen"]


_MAX_ABS = 1e100  # squared and summed: larger magnitudes overflow float64


def _pair(x, ref):
    arrs = []
    for v, name in ((x, "x"), (ref, "ref")):
        if isinstance(v, str | bytes) or v is None:
            raise TypeError(f"`{name}` must be a real array (..., H, W); got {v!r}.")
        a = np.asarray(v)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"`{name}` must be real (magnitudes); got dtype {a.dtype}.")
        if a.ndim < 2 or min(a.shape[-2:]) < 2:
            raise ValueError(f"`{name}` must have shape (..., H, W), H, W >= 2; got {a.shape}.")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"`{name}` must be finite; got NaN or infinite value(s).")
        if a.size and np.max(np.abs(a)) > _MAX_ABS:
            raise ValueError(
                f"`{name}` must have magnitudes <= {_MAX_ABS:g}; got {np.max(np.abs(a)):g}."
            )
        arrs.append(a.astype(np.float64))
    if arrs[0].shape != arrs[1].shape:
        raise ValueError(f"`x` must have the shape of `ref` {arrs[1].shape}; got {arrs[0].shape}.")
    return arrs


def _range(data_range, ref, default):
    if data_range is None:
        r = default(ref)
        if np.any(r <= 0):
            raise ValueError("`ref` must not be constant (its intensity range is 0).")
        return r
    return check_scalar(data_range, "data_range", lower=0.0, closed="neither")


def _psnr(x, ref):
    """JAX PSNR of one image with the reference's maximum as peak (for curves inside loops)."""
    return 10 * jnp.log10(jnp.max(ref) ** 2 / jnp.mean((x - ref) ** 2))


def psnr(x, ref, data_range=None):
    """``10 log10(peak^2 / mean((x - ref)^2))`` per image (the standard PSNR), ``peak = data_range``
    or the reference's maximum (a fixed intensity scale: not renormalised per reconstruction);
    ``inf`` where ``x == ref``. Evaluated in logs of ``peak`` and of the largest error, so a peak
    or an error below ``1e-154`` (whose square underflows float64) gives its finite PSNR.

    Examples
    --------
    >>> ref = np.zeros((4, 4))
    >>> ref[0, 0] = 1.0
    >>> round(float(psnr(ref + 0.1, ref)), 6)  # 10 log10(1 / 0.1^2)
    20.0
    """
    x, ref = _pair(x, ref)
    peak = _range(data_range, ref, lambda r: r.max(axis=(-2, -1)))
    d = x - ref
    top = np.abs(d).max(axis=(-2, -1))
    scale = np.where(top > 0, top, 1.0)
    rel = np.mean((d / scale[..., None, None]) ** 2, axis=(-2, -1))  # in [1/(HW), 1]
    with np.errstate(divide="ignore"):
        return 20 * np.log10(peak) - 20 * np.log10(top) - 10 * np.log10(rel)


def _minmax(a):
    lo, hi = a.min(axis=(-2, -1), keepdims=True), a.max(axis=(-2, -1), keepdims=True)
    return (a - lo) / np.where(hi > lo, hi - lo, 1.0)


def psnr_normalized(x, ref):
    """PSNR after min-max normalising ``x`` and ``ref`` separately to [0, 1] (D2SA's
    ``metrics.py``): invariant to ``x -> a x + b`` for ``a > 0``.

    Examples
    --------
    >>> ref = np.arange(16.0).reshape(4, 4)
    >>> float(psnr_normalized(2 * ref + 1, ref)), bool(psnr(2 * ref + 1, ref) < 10)  # blind to gain
    (inf, True)
    """
    x, ref = _pair(x, ref)
    return psnr(_minmax(x), _minmax(ref), 1.0)


def ssim(x, ref, data_range=None, *, win_size=7):
    """Mean structural similarity (Wang et al. 2004, eq. 13; ``skimage`` defaults: uniform
    ``win_size`` window, sample statistics, K1 = 0.01, K2 = 0.03, mean over the windows fully
    inside the image) per image; ``data_range`` defaults to the reference's ``max - min``.

    Examples
    --------
    >>> ref = np.arange(64.0).reshape(8, 8)
    >>> round(float(ssim(ref, ref)), 6), bool(ssim(ref + 5.0, ref) < 1)
    (1.0, True)
    """
    x, ref = _pair(x, ref)
    w = check_int(win_size, "win_size", lower=3, upper=min(x.shape[-2:]))
    if w % 2 == 0:
        raise ValueError(f"`win_size` must be odd; got {w}.")
    rng = _range(data_range, ref, lambda r: r.max(axis=(-2, -1)) - r.min(axis=(-2, -1)))
    rng = np.asarray(rng)[..., None, None]
    size = (1,) * (x.ndim - 2) + (w, w)

    def f(a):
        return ndimage.uniform_filter(a, size=size, mode="reflect")

    cov = w * w / (w * w - 1)
    mx, my = f(x), f(ref)
    vx, vy = cov * (f(x * x) - mx * mx), cov * (f(ref * ref) - my * my)
    vxy = cov * (f(x * ref) - mx * my)
    c1, c2 = (0.01 * rng) ** 2, (0.03 * rng) ** 2
    s = ((2 * mx * my + c1) * (2 * vxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    p = (w - 1) // 2
    return s[..., p:-p, p:-p].mean(axis=(-2, -1))


def hfen(x, ref, sigma=1.5):
    """``|LoG(x - ref)|_2 / |LoG(ref)|_2`` per image, LoG of ``sigma`` on a 15x15 support
    (Ravishankar & Bresler 2011), reflecting borders.

    Examples
    --------
    >>> ref = np.random.default_rng(0).random((16, 16))
    >>> round(float(hfen(ref + 3.0, ref)), 2), round(float(hfen(2 * ref, ref)), 6)  # offset: 0
    (0.0, 1.0)
    """
    x, ref = _pair(x, ref)
    sigma = check_scalar(sigma, "sigma", lower=0.3, upper=20.0)
    axes = tuple(range(x.ndim - 2, x.ndim))

    def log(a):
        out = np.empty_like(a)
        for i in np.ndindex(a.shape[:-2]):
            out[i] = ndimage.gaussian_laplace(a[i], sigma, mode="reflect", truncate=7.0 / sigma)
        return out

    num = np.sqrt(np.sum(log(x - ref) ** 2, axis=axes))
    den = np.sqrt(np.sum(log(ref) ** 2, axis=axes))
    if np.any(den == 0):
        raise ValueError("`ref` has no high-frequency content (LoG(ref) = 0).")
    return num / den
