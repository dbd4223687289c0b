"""Synthetic MRI patients: 3-D ellipsoid phantoms sliced into 2-D images, k-space simulated
analytically (ellipse Fourier transform) or on a finer grid, and the five distribution shifts of
D2SA (Zhang et al., NeurIPS 2025, arXiv 2503.20815): anatomy, scanner gain/bias field, contrast,
acceleration and mask type.

A patient is a :class:`Patient`: ellipsoids ``(E, 8)`` with columns
``(rho, a, b, c, x0, y0, z0, phi)`` (additive intensity, semi-axes along x, y, z, centre, rotation
``phi`` in radians about the z axis) and a tissue label per ellipsoid. Ellipsoids are z-aligned,
so the axial slice at height ``z`` is exactly a set of ellipses ``(rho, a s, b s, x0, y0, phi)``
with ``s = sqrt(1 - ((z - z0)/c)^2)`` (zero where the slice misses). Grids follow
:mod:`dynamics.mri.physics`: field of view [-1, 1)^2, rows = y, columns = x, origin at index
``n // 2``, k-space on the scale of ``physics.fft2c``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

from _core.validation import as_array, check_choice, check_int, check_key, check_scalar, to_array

from .physics import _fft2c, _grid, _ifft2c, _rng, _shape, cartesian_mask, coil_maps

__all__ = [
    "Patient",
    "SHEPP_LOGAN_3D",
    "CONTRASTS",
    "SHIFTS",
    "SOURCE",
    "shepp_logan_3d",
    "random_patient",
    "slice_ellipses",
    "rasterize",
    "j1",
    "ellipse_kspace",
    "polynomial_field",
    "random_bias",
    "random_phase",
    "apply_contrast",
    "simulate",
    "shift_setting",
    "Cohort",
    "cohort",
]

# 3-D modified Shepp-Logan (Shepp & Logan 1974 geometry, Toft 1996 intensities; the 3-D table of
# Schabel's ``phantom3d``): rho, a, b, c, x0, y0, z0, phi (degrees); the small out-of-plane tilts
# of that table (theta = 0, psi = 10 deg on two ellipsoids) are dropped so slices stay exact
# ellipses. Its in-plane columns (rho, a, b, x0, y0, phi) are the 2-D modified Shepp-Logan table
# (Toft 1996, as scikit-image's ``shepp_logan_phantom``).
SHEPP_LOGAN_3D = np.array(
    [
        [1.0, 0.69, 0.92, 0.81, 0.0, 0.0, 0.0, 0.0],
        [-0.8, 0.6624, 0.874, 0.78, 0.0, -0.0184, 0.0, 0.0],
        [-0.2, 0.11, 0.31, 0.22, 0.22, 0.0, 0.0, -18.0],
        [-0.2, 0.16, 0.41, 0.28, -0.22, 0.0, 0.0, 18.0],
        [0.1, 0.21, 0.25, 0.41, 0.0, 0.35, -0.15, 0.0],
        [0.1, 0.046, 0.046, 0.05, 0.0, 0.1, 0.25, 0.0],
        [0.1, 0.046, 0.046, 0.05, 0.0, -0.1, 0.25, 0.0],
        [0.1, 0.046, 0.023, 0.05, -0.08, -0.605, 0.0, 0.0],
        [0.1, 0.023, 0.023, 0.02, 0.0, -0.606, 0.0, 0.0],
        [0.1, 0.023, 0.046, 0.02, 0.06, -0.605, 0.0, 0.0],
    ]
)
_SL_TISSUE = np.array([0, 1, 2, 2, 3, 3, 3, 3, 3, 3])  # skull, brain, ventricles, small structures

# Per-tissue factors on the additive intensities (derived here): "T1" is the table; "T2" makes the
# ventricles bright (0.2 + 0.3 = 0.5 inside) and the small structures fainter, reversing the order
# of ventricles and brain as between T1- and T2-weighted images.
CONTRASTS = {"T1": np.array([1.0, 1.0, 1.0, 1.0]), "T2": np.array([1.0, 1.0, -1.5, 0.5])}

SHIFTS = ("anatomy", "scanner", "contrast", "acceleration", "mask")

# The source setting (D2SA defaults where they exist: random columns, cf = 0.08, R = 4).
SOURCE = {
    "family": "brain",
    "contrast": "T1",
    "bias": False,
    "R": 4.0,
    "center_fraction": 0.08,
    "mask_kind": "random",
}


class Patient(NamedTuple):
    """Ellipsoids ``(E, 8)`` (rho, a, b, c, x0, y0, z0, phi[rad]) and tissue labels ``(E,)``.

    Examples
    --------
    >>> p = shepp_logan_3d()
    >>> p.ellipsoids.shape, p.tissue.tolist()[:3]  # skull, brain, a ventricle
    ((10, 8), [0, 1, 2])
    """

    ellipsoids: jax.Array
    tissue: jax.Array


def shepp_logan_3d():
    """The 3-D modified Shepp-Logan phantom (table :data:`SHEPP_LOGAN_3D`) as a :class:`Patient`.

    Examples
    --------
    >>> img = rasterize(slice_ellipses(shepp_logan_3d(), 0.0), (16, 16))
    >>> round(float(img[8, 8]), 6)  # the centre: skull 1.0 plus brain -0.8
    0.2
    """
    e = SHEPP_LOGAN_3D.copy()
    e[:, 7] = np.deg2rad(e[:, 7])
    return Patient(jnp.asarray(e, dtype=jnp.result_type(float)), jnp.asarray(_SL_TISSUE))


def _knee(rng):
    """Knee-like family (derived here): a soft-tissue envelope, muscle, femur and tibia shafts
    meeting at the joint line, two thin cartilage plates; tissues fat, muscle, bone, cartilage."""
    gap = rng.uniform(0.03, 0.08)
    tilt = rng.uniform(-0.2, 0.2)
    e = np.array(
        [
            [0.9, 0.75, 0.95, 0.85, 0.0, 0.0, 0.0, 0.0],  # subcutaneous fat envelope
            [-0.4, 0.65, 0.88, 0.8, 0.0, 0.0, 0.0, 0.0],  # muscle
            [-0.35, 0.28, 0.25, 0.6, 0.0, 0.0, 0.0, 0.0],  # femur (upper)
            [-0.35, 0.25, 0.25, 0.6, 0.0, 0.0, 0.0, 0.0],  # tibia (lower)
            [0.3, 0.3, 0.03, 0.5, 0.0, 0.0, 0.0, 0.0],  # femoral cartilage
            [0.3, 0.27, 0.03, 0.5, 0.0, 0.0, 0.0, 0.0],  # tibial cartilage
        ]
    )
    y = np.array([0.0, 0.0, -0.3 - gap, 0.3 + gap, -gap, gap])  # joint line at y = 0
    e[:, 4], e[:, 5], e[:, 7] = -y * np.sin(tilt), y * np.cos(tilt), tilt
    return e, np.array([0, 1, 2, 2, 3, 3])


def random_patient(*, key, family="brain", jitter=1.0):
    """A random patient of ``family`` ("brain": the 3-D Shepp-Logan with centres moved by up to
    5 %, semi-axes scaled by up to 10 %, in-plane tilts of up to 10 deg (the outer shell, the
    first two ellipsoids, perturbed as one so the object stays non-negative), as in
    ``docs/papers/d2sa.md#small-scale-experiment``; "knee": elongated bone/cartilage ellipsoids, the
    anatomy shift) with every perturbation scaled by ``jitter`` in [0, 1].

    Examples
    --------
    >>> p = random_patient(key=jax.random.key(0), jitter=0.0)  # no jitter: the Shepp-Logan phantom
    >>> bool(jnp.allclose(p.ellipsoids, shepp_logan_3d().ellipsoids))
    True
    """
    rng = _rng(key)
    family = check_choice(family, "family", ("brain", "knee"))
    jitter = check_scalar(jitter, "jitter", lower=0.0, upper=1.0)
    if family == "brain":
        e, tissue = SHEPP_LOGAN_3D.copy(), _SL_TISSUE
        e[:, 7] = np.deg2rad(e[:, 7])
    else:
        e, tissue = _knee(rng)
    n = e.shape[0]
    shift, scale = rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, (n, 3))
    tilt = rng.uniform(-1, 1, n)
    for d in (shift, scale, tilt):  # the outer shell (first two ellipsoids) moves as one
        d[1] = d[0]
    e[:, 4:7] += 0.05 * jitter * shift
    e[:, 1:4] *= 1 + 0.1 * jitter * scale
    e[:, 7] += np.deg2rad(10.0) * jitter * tilt
    return Patient(jnp.asarray(e, dtype=jnp.result_type(float)), jnp.asarray(tissue))


def _check_patient(patient, name="patient"):
    if not isinstance(patient, Patient):
        raise TypeError(f"`{name}` must be a Patient; got {type(patient).__name__}.")
    return patient


def slice_ellipses(patient, z):
    """The 2-D ellipses ``(..., E, 6)`` = (rho, a s, b s, x0, y0, phi) cut by the planes ``z``
    (scalar or array), ``s = sqrt(max(0, 1 - ((z - z0)/c)^2))`` (the section of a z-aligned
    ellipsoid; derived here).

    Examples
    --------
    >>> el = slice_ellipses(shepp_logan_3d(), jnp.array([0.0, 0.9]))
    >>> el.shape, round(float(el[0, 0, 1]), 4), float(el[1, 0, 1])  # z = 0.9 > c = 0.81
    ((2, 10, 6), 0.69, 0.0)
    """
    return _slice(_check_patient(patient).ellipsoids, jnp.asarray(_check_z(z)))


@jax.jit
def _slice(e, z):
    z = z[..., None]
    s = jnp.sqrt(jnp.clip(1 - ((z - e[:, 6]) / e[:, 3]) ** 2, 0.0, None))
    rho = jnp.broadcast_to(e[:, 0], s.shape)
    x0, y0, phi = (jnp.broadcast_to(e[:, i], s.shape) for i in (4, 5, 7))
    return jnp.stack([rho, e[:, 1] * s, e[:, 2] * s, x0, y0, phi], axis=-1)


def _check_z(z):
    arr = to_array(z, "z") if not isinstance(z, Tracer) else z
    if np.dtype(arr.dtype).kind not in "iuf":
        raise TypeError(f"`z` must be real; got dtype {arr.dtype}.")
    if not isinstance(arr, Tracer) and not np.all(np.abs(arr) <= 1):
        raise ValueError(f"`z` must lie in [-1, 1]; got {np.ravel(arr)[:4].tolist()}.")
    return arr


def _ellipses(ellipses):
    arr = np.asarray(ellipses) if not isinstance(ellipses, Tracer) else ellipses
    if np.dtype(arr.dtype).kind not in "iuf":
        raise TypeError(f"`ellipses` must be a real array; got dtype {arr.dtype}.")
    if arr.ndim < 2 or arr.shape[-1] != 6:
        raise ValueError(f"`ellipses` must have shape (..., E, 6); got {tuple(arr.shape)}.")
    if not isinstance(arr, Tracer) and (
        not np.all(np.isfinite(arr)) or np.any(arr[..., 1:3] < 0) or np.any(np.abs(arr) > 1e3)
    ):
        raise ValueError(
            "`ellipses` must be finite, of magnitude <= 1e3 (the field of view is "
            "[-1, 1)^2), with non-negative semi-axes."
        )
    return jnp.asarray(arr, dtype=jnp.result_type(float))


def rasterize(ellipses, shape):
    """Point samples at the pixel centres of the sum of ellipse indicators times intensities:
    ``(..., H, W)`` real.

    Examples
    --------
    >>> disc = jnp.array([[1.0, 0.5, 0.5, 0.0, 0.0, 0.0]])  # intensity 1, radius 0.5
    >>> area = float(rasterize(disc, (64, 64)).sum()) * (2 / 64) ** 2
    >>> bool(abs(area - np.pi / 4) < 0.01)  # pixel count times pixel area: pi r^2
    True
    """
    return _rasterize(_ellipses(ellipses), _shape(shape))


@partial(jax.jit, static_argnums=1)
def _rasterize(el, shape):
    yy, xx = _grid(shape)
    p = el[..., None, None, :]
    dx, dy = xx - p[..., 3], yy - p[..., 4]
    c, s = jnp.cos(p[..., 5]), jnp.sin(p[..., 5])
    u = (c * dx + s * dy) / jnp.maximum(p[..., 1], 1e-300)
    v = (-s * dx + c * dy) / jnp.maximum(p[..., 2], 1e-300)
    inside = (u**2 + v**2 <= 1) & (p[..., 1] > 0) & (p[..., 2] > 0)
    return jnp.sum(jnp.where(inside, p[..., 0], 0.0), axis=-3)


def _j1_over_x(x):
    """``J1(x)/x`` for ``x >= 0`` by Abramowitz & Stegun 9.4.4 (``x <= 3``, error < 1.3e-8 in
    ``J1(x)/x``) and 9.4.6 (``x >= 3``, ``J1 = x^{-1/2} f1 cos(theta1)``, error < 4e-8 in
    ``f1``)."""
    t = (jnp.minimum(x, 3.0) / 3.0) ** 2
    small = 0.5 + t * (
        -0.56249985
        + t
        * (0.21093573 + t * (-0.03954289 + t * (0.00443319 + t * (-0.00031761 + t * 0.00001109))))
    )
    xl = jnp.maximum(x, 3.0)
    r = 3.0 / xl
    f1 = 0.79788456 + r * (
        0.00000156
        + r
        * (0.01659667 + r * (0.00017105 + r * (-0.00249511 + r * (0.00113653 - r * 0.00020033))))
    )
    th = (
        xl
        - 2.35619449
        + r
        * (
            0.12499612
            + r
            * (
                0.00005650
                + r * (-0.00637879 + r * (0.00074348 + r * (0.00079824 - r * 0.00029166)))
            )
        )
    )
    large = f1 * jnp.cos(th) / xl**1.5
    return jnp.where(x <= 3.0, small, large)


def j1(x):
    """Bessel function ``J1`` (Abramowitz & Stegun 9.4.4 and 9.4.6 polynomial approximations,
    absolute error below 1e-7; odd in ``x``).

    Examples
    --------
    >>> round(float(j1(1.0)), 6), round(float(j1(-1.0)), 6)  # J1(1) = 0.4400506
    (0.440051, -0.440051)
    """
    return _j1(jnp.asarray(_check_real(x, "x"), dtype=jnp.result_type(float)))


@jax.jit
def _j1(x):
    return x * _j1_over_x(jnp.abs(x))


def _check_real(x, name):
    try:
        arr = np.asarray(x) if not isinstance(x, Tracer) else x
    except ValueError as err:  # ragged nesting
        raise TypeError(f"`{name}` must be a real array; got {err}.") from err
    if np.dtype(arr.dtype).kind not in "iuf":
        raise TypeError(f"`{name}` must be real; got dtype {arr.dtype}.")
    if not isinstance(arr, Tracer) and not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be finite; got NaN or infinite value(s).")
    return arr


def ellipse_kspace(ellipses, shape):
    """Analytic k-space ``(..., H, W)`` of the ellipses, on the scale of ``fft2c`` of an image
    sampled on the grid: ``sqrt(HW)/4 * sum_e F_e(nu)`` at ``nu = ((k - H/2)/2, (l - W/2)/2)``
    cycles per unit length, where the transform of the ellipse ``rho 1{|D^-1 R (r - r0)| <= 1}``
    (``D = diag(a, b)``, ``R`` the rotation by ``phi``) is
    ``F(nu) = rho a b J1(2 pi q)/q exp(-2 pi i nu.r0)``, ``q = |D R nu|`` (the disc's jinc,
    Bracewell, *The Fourier Transform and its Applications*, 3rd ed., the jinc function, mapped
    by the affine change of variables; as in Guerquin-Kern et al., IEEE TMI 31:626, 2012).
    The factor ``sqrt(HW)/4`` is the Riemann sum of the orthonormal DFT over pixels of area
    ``(2/H)(2/W)`` (derived here). Being the continuous transform sampled, it has no inverse crime.

    Examples
    --------
    >>> disc = jnp.array([[1.0, 0.5, 0.5, 0.0, 0.0, 0.0]])
    >>> k = ellipse_kspace(disc, (8, 8))
    >>> round(float(k[4, 4].real), 4)  # DC: sqrt(HW)/4 times the area pi/4
    1.5708
    """
    return _ellipse_kspace(_ellipses(ellipses), _shape(shape))


@partial(jax.jit, static_argnums=1)
def _ellipse_kspace(el, shape):
    h, w = shape
    ny, nx = _grid((h, w))
    ny, nx = ny * h / 4, nx * w / 4  # (k - H/2)/2 cycles per unit length
    p = el[..., None, None, :]
    c, s = jnp.cos(p[..., 5]), jnp.sin(p[..., 5])
    q = jnp.sqrt((p[..., 1] * (c * nx + s * ny)) ** 2 + (p[..., 2] * (-s * nx + c * ny)) ** 2)
    jinc = 2 * jnp.pi * _j1_over_x(2 * jnp.pi * q)  # J1(2 pi q)/q, = pi at q = 0
    phase = jnp.exp(-2j * jnp.pi * (nx * p[..., 3] + ny * p[..., 4]))
    return jnp.sum(p[..., 0] * p[..., 1] * p[..., 2] * jinc * phase, axis=-3) * jnp.sqrt(h * w) / 4


def polynomial_field(coeffs, shape, *, oversample=1):
    """The smooth bias field ``c0 + c1 x + c2 y + c3 x^2 + c4 x y + c5 y^2``
    (``docs/papers/d2sa.md#small-scale-experiment``: a 2nd-order polynomial) on the (``oversample``
    times finer) grid ``(H, W)`` of [-1, 1)^2.

    Examples
    --------
    >>> [round(float(v), 6) for v in polynomial_field([1.0, 0.5, 0, 0, 0, 0], (4, 4))[0]]  # 1 + x/2
    [0.5, 0.75, 1.0, 1.25]
    """
    arr = _check_real(coeffs, "coeffs")
    if arr.shape != (6,):
        raise ValueError(f"`coeffs` must have shape (6,); got {tuple(arr.shape)}.")
    oversample = check_int(oversample, "oversample", lower=1, upper=64)
    h, w = _shape(shape)
    y, x = _grid((h * oversample, w * oversample))
    c = np.asarray(arr, dtype=float)
    f = c[0] + c[1] * x + c[2] * y + c[3] * x**2 + c[4] * x * y + c[5] * y**2
    return jnp.asarray(f, dtype=jnp.result_type(float))


def random_bias(*, key, strength=0.3, gain=(0.6, 1.6)):
    """Scanner shift: coefficients of a multiplicative field ``g (1 + p(x, y))``, ``g`` uniform on
    ``gain`` and the five non-constant coefficients of ``p`` uniform on ``+-strength/5``, so
    ``|p| <= strength`` on the field of view and the field stays positive for ``strength < 1``
    (a second-order polynomial bias, ``docs/papers/d2sa.md#small-scale-experiment``; derived here).

    Examples
    --------
    >>> c = random_bias(key=jax.random.key(0), strength=0.3)
    >>> c.shape, bool(0.6 <= c[0] <= 1.6), bool(jnp.all(jnp.abs(c[1:]) <= 0.06 * c[0]))
    ((6,), True, True)
    """
    rng = _rng(key)
    strength = check_scalar(strength, "strength", lower=0.0, upper=1.0, closed="left")
    pair = as_array(gain, "gain", shape=(2,))  # a pair (low, high)
    lo = check_scalar(pair[0], "gain", lower=0.0, closed="neither")
    hi = check_scalar(pair[1], "gain", lower=lo)
    g = rng.uniform(lo, hi)
    return jnp.asarray(
        g * np.r_[1.0, rng.uniform(-strength / 5, strength / 5, 5)], dtype=jnp.result_type(float)
    )


def random_phase(*, key, max_phase=0.5):
    """Coefficients of a smooth image phase (radians) with ``|phase| <= max_phase`` (five
    non-constant coefficients uniform on ``+-max_phase/5``;
    ``docs/papers/d2sa.md#small-scale-experiment``).

    Examples
    --------
    >>> c = random_phase(key=jax.random.key(0), max_phase=0.5)
    >>> float(c[0]), bool(jnp.abs(polynomial_field(c, (16, 16))).max() <= 0.5)
    (0.0, True)
    """
    rng = _rng(key)
    max_phase = check_scalar(max_phase, "max_phase", lower=0.0, upper=np.pi)
    return jnp.asarray(
        np.r_[0.0, rng.uniform(-max_phase / 5, max_phase / 5, 5)], dtype=jnp.result_type(float)
    )


def apply_contrast(patient, contrast):
    """Contrast shift: each ellipsoid's intensity times the factor of its tissue
    (``CONTRASTS[contrast]`` or an array of 4 factors).

    Examples
    --------
    >>> t2 = apply_contrast(shepp_logan_3d(), "T2")
    >>> [round(float(v), 6) for v in t2.ellipsoids[2:4, 0]]  # the ventricles: -0.2 * -1.5
    [0.3, 0.3]
    """
    patient = _check_patient(patient)
    if isinstance(contrast, str):
        factors = CONTRASTS[check_choice(contrast, "contrast", tuple(CONTRASTS))]
    else:
        factors = _check_real(contrast, "contrast")
        if factors.shape != (4,):
            raise ValueError(
                f"`contrast` must be a name or 4 factors; got shape {tuple(factors.shape)}."
            )
    e = patient.ellipsoids
    out = Patient(e.at[:, 0].multiply(jnp.asarray(factors)[patient.tissue]), patient.tissue)
    if not isinstance(contrast, str) and not isinstance(e, Tracer):
        # factors act on the ellipsoids' additive intensities (T2 flips a ventricle's sign): the
        # test is the object itself, non-negative (a density) on slices through the volume
        img = np.asarray(_rasterize(_slice(out.ellipsoids, jnp.linspace(-0.9, 0.9, 7)), (64, 64)))
        top = max(float(np.abs(img).max()), 1e-300)
        if img.min() < -1e-5 * top:  # float32 rounding of nested sums
            raise ValueError(
                f"`contrast` must keep the object's intensity non-negative; the factors "
                f"{np.asarray(factors).tolist()} give {img.min():.3g} (largest |intensity| "
                f"{top:.3g})."
            )
    return out


def simulate(
    patient, z, shape, *, n_coils=1, bias=None, phase=None, oversample=4, noise_std=0.0, key=None
):
    """Fully sampled k-space of the slices ``z``: ``(S, H, W)`` or ``(S, C, H, W)``, and the coil
    maps ``(C, H, W)`` (None for one coil).

    With one coil and no ``bias``/``phase`` fields the k-space is :func:`ellipse_kspace`
    (analytic). Otherwise the object times the fields (``bias`` and ``phase``: coefficient
    vectors of :func:`polynomial_field`) times the continuous coil maps is sampled on a grid
    ``oversample`` times finer, transformed, and its central ``H x W`` frequencies kept, scaled by
    ``1/oversample`` (the ``sqrt(HW)`` factor of ``fft2c``; derived here): the data do not come
    from the reconstruction grid (no inverse crime; Guerquin-Kern et al. 2012).
    ``noise_std`` adds circular complex Gaussian noise of that standard deviation per entry
    (drawn from ``key``).

    Examples
    --------
    >>> k, coils = simulate(shepp_logan_3d(), [0.0, 0.1], (8, 8))  # one coil: analytic k-space
    >>> k.shape, coils is None
    ((2, 8, 8), True)
    """
    patient = _check_patient(patient)
    h, w = _shape(shape)
    n_coils = check_int(n_coils, "n_coils", lower=1, upper=64)
    oversample = check_int(oversample, "oversample", lower=1, upper=16)
    noise_std = check_scalar(noise_std, "noise_std", lower=0.0, upper=1e6)
    if noise_std > 0 and key is None:
        raise ValueError("`key` is required when `noise_std` > 0; got key=None.")
    z = jnp.atleast_1d(jnp.asarray(_check_z(z), dtype=jnp.result_type(float)))
    if z.ndim != 1:
        raise ValueError(f"`z` must be a scalar or 1-D; got shape {tuple(z.shape)}.")
    el = slice_ellipses(patient, z)
    coils = None
    if n_coils == 1 and bias is None and phase is None:
        k = ellipse_kspace(el, (h, w))
    else:

        def fine(c):
            return None if c is None else polynomial_field(c, (h, w), oversample=oversample)

        if bias is not None:
            field = np.asarray(fine(bias))
            if field.min() <= 0:
                raise ValueError(
                    f"`bias` must give a positive multiplicative field on the field of view; "
                    f"its minimum is {field.min():.3g}."
                )
        maps = None
        if n_coils > 1:
            maps = coil_maps(n_coils, (h, w), oversample=oversample)
            coils = coil_maps(n_coils, (h, w))
        k = _fine_kspace(el, fine(bias), fine(phase), maps, (h, w), oversample)
    if noise_std > 0:
        rng = _rng(key)
        k = k + noise_std / np.sqrt(2) * jnp.asarray(
            rng.standard_normal(k.shape) + 1j * rng.standard_normal(k.shape)
        )
    return k, coils


@partial(jax.jit, static_argnums=(4, 5))
def _fine_kspace(el, bias, phase, maps, shape, oversample):
    h, w = shape
    img = _rasterize(el, (h * oversample, w * oversample)).astype(jnp.result_type(complex))
    if bias is not None:
        img = img * bias
    if phase is not None:
        img = img * jnp.exp(1j * phase)
    if maps is not None:
        img = img[:, None] * maps
    r0, c0 = (h * oversample) // 2 - h // 2, (w * oversample) // 2 - w // 2
    return _fft2c(img)[..., r0 : r0 + h, c0 : c0 + w] / oversample


def shift_setting(shift):
    """The acquisition setting of a shift: :data:`SOURCE` with one entry changed — anatomy: knee
    family; scanner: bias field on (gain and polynomial, :func:`random_bias`); contrast: "T2";
    acceleration: R = 8 with cf = 0.04; mask: equispaced columns
    (``docs/papers/d2sa.md#small-scale-experiment``).

    Examples
    --------
    >>> shift_setting("acceleration")["R"], shift_setting("mask")["mask_kind"]
    (8.0, 'equispaced')
    """
    shift = check_choice(shift, "shift", SHIFTS + ("source",))
    change = {
        "source": {},
        "anatomy": {"family": "knee"},
        "scanner": {"bias": True},
        "contrast": {"contrast": "T2"},
        "acceleration": {"R": 8.0, "center_fraction": 0.04},
        "mask": {"mask_kind": "equispaced"},
    }[shift]
    return {**SOURCE, **change}


class Cohort(NamedTuple):
    """Patients of one setting: noisy fully sampled k-space ``kspace (P, S, H, W)``, the
    noiseless band-limited images ``target (P, S, H, W)`` (``ifft2c`` of the noiseless k-space,
    the fully sampled reference as in fastMRI), one acquisition mask per patient ``mask (P, H, W)``
    and the injected per-patient gain ``gain (P,)`` (1 without a bias field).

    Examples
    --------
    >>> c = cohort("scanner", 1, 1, (8, 8), key=jax.random.key(0))
    >>> c.kspace.shape, c.target.shape, bool(c.gain[0] != 1.0)  # a bias field sets the gain
    ((1, 1, 8, 8), (1, 1, 8, 8), True)
    """

    kspace: jax.Array
    target: jax.Array
    mask: jax.Array
    gain: np.ndarray


def cohort(shift, n_patients, n_slices, shape, *, key, noise_std=0.01, z_range=0.4):
    """``n_patients`` random patients of the setting :func:`shift_setting` ``(shift)`` (``"source"``
    or one of :data:`SHIFTS`), each sliced at ``n_slices`` equispaced heights in
    ``[-z_range, z_range]``, with a smooth random phase, the setting's bias field (scanner
    shift), contrast and family, complex Gaussian noise of ``noise_std`` per k-space entry, and a
    Cartesian mask of the setting's kind, R and centre fraction (one per patient, fixed over its
    slices as in D2SA's ``data/dataset.py``). Patient ``p`` uses ``fold_in(key, p)`` only, so a
    patient does not depend on how many others are drawn. Single coil.

    Examples
    --------
    >>> c = cohort("scanner", 2, 1, (8, 8), key=jax.random.key(0))
    >>> c.kspace.shape, c.mask.shape, bool(np.all((0.6 <= c.gain) & (c.gain <= 1.6)))
    ((2, 1, 8, 8), (2, 8, 8), True)
    """
    setting = shift_setting(shift)
    n_patients = check_int(n_patients, "n_patients", lower=1, upper=10_000)
    n_slices = check_int(n_slices, "n_slices", lower=1, upper=1_000)
    h, w = _shape(shape)
    noise_std = check_scalar(noise_std, "noise_std", lower=0.0, upper=1.0)
    z_range = check_scalar(z_range, "z_range", lower=0.0, upper=0.7)
    key = check_key(key, "key")
    z = np.linspace(-z_range, z_range, n_slices)
    ks, ts, ms, gains = [], [], [], []
    for p in range(n_patients):
        kp, kphase, kbias, knoise, kmask = jax.random.split(jax.random.fold_in(key, p), 5)
        patient = apply_contrast(
            random_patient(key=kp, family=setting["family"]), setting["contrast"]
        )
        bias = random_bias(key=kbias) if setting["bias"] else None
        clean, _ = simulate(patient, z, (h, w), bias=bias, phase=random_phase(key=kphase))
        ks.append(clean + _noise(knoise, clean.shape, noise_std))
        ts.append(_ifft2c(clean))
        ms.append(
            cartesian_mask(
                (h, w),
                setting["R"],
                setting["center_fraction"],
                key=kmask,
                kind=setting["mask_kind"],
            )
        )
        gains.append(1.0 if bias is None else float(bias[0]))
    return Cohort(jnp.stack(ks), jnp.stack(ts), jnp.stack(ms), np.asarray(gains))


def _noise(key, shape, std):
    rng = _rng(key)
    z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return jnp.asarray(std / np.sqrt(2) * z, dtype=jnp.result_type(complex))
