"""Cartesian MRI physics in JAX: centred orthonormal FFT, coil sensitivities, the forward operator
``A = M F S`` and its adjoint, data consistency, undersampling masks, SSDU splits and the
self-supervised k-space losses used by the test-time-adaptation frameworks of D2SA (Zhang et al.,
NeurIPS 2025, arXiv 2503.20815).

Conventions (stated once, used everywhere):

* images and k-space are complex arrays whose last two axes are (rows, columns) = (readout,
  phase encode); complex128 under ``jax.enable_x64``, complex64 otherwise; leading axes batch;
* the image grid covers the field of view [-1, 1)^2 with pixel centres ``x_j = (j - n/2) 2/n``, so
  the centre index ``n // 2`` is the origin;
* ``F`` is the centred orthonormal 2-D DFT ``fftshift(fft2(ifftshift(x), norm="ortho"))`` over the
  last two axes: DC sits at index ``(H // 2, W // 2)`` and ``F^H F = I`` (the fastMRI ``fft2c``
  convention, Zbontar et al. 2018, arXiv 1811.08839, ``fastmri/fftc.py``);
* masks are real 0/1 arrays of shape ``(H, W)``; Cartesian masks select whole columns (phase-encode
  lines); SSDU subsets are point-wise;
* coil maps ``S`` have shape ``(C, H, W)`` with ``sum_c |S_c|^2 = 1`` for the maps built here, and
  multi-coil k-space has shape ``(..., C, H, W)``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    _is_tracer,
    check_choice,
    check_int,
    check_key,
    check_scalar,
)

__all__ = [
    "fft2c",
    "ifft2c",
    "coil_maps",
    "forward",
    "adjoint",
    "normal",
    "kspace_consistency",
    "data_consistency",
    "num_lines",
    "cartesian_mask",
    "ssdu_split",
    "resubsample",
    "normalized_l1_l2",
    "relative_l1",
]


# --- validation -------------------------------------------------------------------------------


def _complex(x, name, *, min_ndim=2):
    """``x`` as a JAX complex array with at least ``min_ndim`` axes and finite entries."""
    if isinstance(x, str | bytes) or x is None:
        raise TypeError(f"`{name}` must be a complex array; got {x!r}.")
    if not _is_tracer(x):
        try:
            x = np.asarray(x)
        except (TypeError, ValueError) as err:
            raise TypeError(f"`{name}` must be a complex array; got {type(x).__name__}.") from err
    if np.dtype(x.dtype).kind != "c":
        raise TypeError(
            f"`{name}` must be a complex array (complex64/complex128); got dtype {x.dtype}."
        )
    if x.ndim < min_ndim:
        raise ValueError(
            f"`{name}` must have at least {min_ndim} axes (..., H, W); got shape {tuple(x.shape)}."
        )
    if not _is_tracer(x):
        if not np.all(np.isfinite(x)):
            raise ValueError(f"`{name}` must be finite; got NaN or infinite value(s).")
        _fits(x, name)
    return jnp.asarray(x)


def _fits(x, name, factor=None, other=None):
    """Refuse magnitudes whose transforms, consistency steps and loss sums would overflow the
    working dtype (complex64 unless x64 is on): ``max|x|`` (times ``max|factor|``, the coil
    maps, when given) at most ``finfo.max / (4 size)``, ``size`` the entries summed over."""
    dt = np.dtype(jax.dtypes.canonicalize_dtype(x.dtype))
    size = x.size * (1 if factor is None else factor.shape[0])
    limit = float(np.finfo(dt).max) / (4.0 * max(size, 1))
    top = float(np.max(np.abs(x))) if x.size else 0.0
    if factor is not None:
        top *= float(np.max(np.abs(factor))) if factor.size else 0.0
    if top > limit:
        what = f"`{name}`" if factor is None else f"`{name}` times `{other}`"
        raise ValueError(
            f"{what} must have entries of magnitude <= {limit:.3g} (its transforms must fit in "
            f"{dt.name}); got {top:.3g}. Scale the data down."
        )


def _mask(mask, name, shape=None):
    """``mask`` as a real 0/1 JAX array of shape ``(H, W)`` (``shape`` if given)."""
    if isinstance(mask, str | bytes) or mask is None:
        raise TypeError(f"`{name}` must be a real 0/1 array of shape (H, W); got {mask!r}.")
    arr = mask if _is_tracer(mask) else np.asarray(mask)
    kind = np.dtype(arr.dtype).kind
    if kind not in "biuf":
        raise TypeError(f"`{name}` must hold real 0/1 values; got dtype {arr.dtype}.")
    if arr.ndim != 2 or min(arr.shape) < 2:
        raise ValueError(
            f"`{name}` must be 2-D (H, W) with H, W >= 2; got shape {tuple(arr.shape)}."
        )
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise ValueError(
            f"`{name}` must have shape {tuple(shape)} (the image's last two axes); "
            f"got shape {tuple(arr.shape)}."
        )
    if not _is_tracer(arr) and not np.all((arr == 0) | (arr == 1)):
        raise ValueError(
            f"`{name}` must hold only 0 and 1; got values {np.unique(arr)[:5].tolist()}."
        )
    return jnp.asarray(arr, dtype=jnp.result_type(float))


def _coils(coils, name, shape, x=None, x_name="x"):
    """Coil maps ``(C, H, W)``; with ``x``, their product with it checked by :func:`_fits`."""
    if coils is None:
        return None
    s = _complex(coils, name, min_ndim=3)
    if s.ndim != 3 or tuple(s.shape[1:]) != tuple(shape):
        raise ValueError(
            f"`{name}` must have shape (C, {shape[0]}, {shape[1]}); got shape {tuple(s.shape)}."
        )
    if x is not None and not _is_tracer(x) and not _is_tracer(s):
        _fits(x, x_name, s, name)
    return s


def _kspace(y, name, shape, coils):
    """``y`` complex with last axes ``shape`` (and a coil axis of ``C`` when ``coils`` given)."""
    y = _complex(y, name, min_ndim=3 if coils is not None else 2)
    if tuple(y.shape[-2:]) != tuple(shape):
        raise ValueError(
            f"`{name}` must end in axes {tuple(shape)} (the mask's shape); got shape "
            f"{tuple(y.shape)}."
        )
    if coils is not None and y.shape[-3] != coils.shape[0]:
        raise ValueError(
            f"`{name}` must have a coil axis of length {coils.shape[0]} at -3; got "
            f"shape {tuple(y.shape)}."
        )
    return y


# --- transforms and operators -----------------------------------------------------------------


def fft2c(x):
    """Centred orthonormal 2-D DFT over the last two axes: ``fftshift(fft2(ifftshift(x)))/sqrt(HW)``
    (fastMRI ``fft2c``, Zbontar et al. 2018); unitary, DC at ``(H // 2, W // 2)``.

    Examples
    --------
    >>> k = fft2c(jnp.ones((4, 4), dtype=complex))  # a constant image: all of it at DC
    >>> round(float(abs(k[2, 2])), 6), int(jnp.count_nonzero(jnp.abs(k) > 1e-6))
    (4.0, 1)
    """
    return _fft2c(_complex(x, "x"))


def ifft2c(k):
    """Inverse of :func:`fft2c` (its adjoint, the transform being unitary).

    Examples
    --------
    >>> x = jnp.arange(16.0).reshape(4, 4) + 1j
    >>> bool(jnp.allclose(ifft2c(fft2c(x)), x, atol=1e-4))
    True
    """
    return _ifft2c(_complex(k, "k"))


def coil_maps(n_coils, shape, *, width=1.0, radius=1.2, oversample=1):
    """Smooth birdcage-like coil sensitivities ``(C, H, W)``, normalised so ``sum_c |S_c|^2 = 1``.

    Coil ``c`` sits at angle ``2 pi c / C`` on a circle of ``radius`` (field of view [-1, 1)^2)
    with Gaussian magnitude ``exp(-|r - r_c|^2 / (2 width^2))`` and phase equal to that angle
    plus ``pi |r - r_c|/4`` (a smooth spatial phase); the root-sum-of-squares normalisation makes
    the coil combination ``S^H`` a left inverse of ``S`` (so ``S^H S = I``; the normalisation of
    SENSE maps, Pruessmann et al., MRM 42:952, 1999, with identity noise covariance). Profile
    derived here. ``oversample`` evaluates the same continuous maps on a grid ``oversample`` times
    finer (for simulation without the inverse crime). One coil gives ``S = 1``.

    Examples
    --------
    >>> s = coil_maps(4, (8, 8))
    >>> s.shape, bool(jnp.allclose(jnp.sum(jnp.abs(s) ** 2, axis=0), 1.0, atol=1e-5))
    ((4, 8, 8), True)
    """
    n_coils = check_int(n_coils, "n_coils", lower=1, upper=64)
    shape = _shape(shape)
    width = check_scalar(width, "width", lower=0.05, upper=100.0)
    radius = check_scalar(radius, "radius", lower=0.0, upper=100.0)
    oversample = check_int(oversample, "oversample", lower=1, upper=64)
    yy, xx = _grid((shape[0] * oversample, shape[1] * oversample))
    ang = 2 * np.pi * np.arange(n_coils) / n_coils
    cx, cy = radius * np.cos(ang), radius * np.sin(ang)
    d = np.sqrt((xx[None] - cx[:, None, None]) ** 2 + (yy[None] - cy[:, None, None]) ** 2)
    s = np.exp(-(d**2) / (2 * width**2)) * np.exp(1j * (ang[:, None, None] + np.pi * d / 4))
    if n_coils == 1:
        s = np.ones_like(s)
    return jnp.asarray(s / np.sqrt(np.sum(np.abs(s) ** 2, axis=0)), dtype=jnp.result_type(complex))


def _rng(key):
    """A NumPy generator seeded by the bits of a JAX key (masks and maps are built once, on the
    host; the same key gives the same draw)."""
    key = check_key(key, "key")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.random.default_rng(np.asarray(key, dtype=np.uint32).ravel().tolist())


def _shape(shape):
    try:
        pair = not isinstance(shape, str | bytes) and np.ndim(shape) == 1 and len(shape) == 2
    except (TypeError, ValueError):  # no length, or ragged
        pair = False
    if not pair:
        raise TypeError(f"`shape` must be a pair (H, W) of integers; got {shape!r}.")
    return (
        check_int(shape[0], "shape", lower=2, upper=4096),
        check_int(shape[1], "shape", lower=2, upper=4096),
    )


def _grid(shape):
    """Pixel-centre coordinates ``(y, x)`` on [-1, 1)^2, origin at index ``n // 2``."""
    h, w = shape
    y = (np.arange(h) - h // 2) * (2.0 / h)
    x = (np.arange(w) - w // 2) * (2.0 / w)
    return np.meshgrid(y, x, indexing="ij")


@jax.jit
def _fft2c(x):
    ax = (-2, -1)
    return jnp.fft.fftshift(jnp.fft.fft2(jnp.fft.ifftshift(x, axes=ax), norm="ortho"), axes=ax)


@jax.jit
def _ifft2c(k):
    ax = (-2, -1)
    return jnp.fft.fftshift(jnp.fft.ifft2(jnp.fft.ifftshift(k, axes=ax), norm="ortho"), axes=ax)


@jax.jit
def _apply(x, m, s):
    if s is None:
        return m * _fft2c(x)
    return m * _fft2c(s * x[..., None, :, :])


@jax.jit
def _apply_h(y, m, s):
    if s is None:
        return _ifft2c(m * y)
    return jnp.sum(jnp.conj(s) * _ifft2c(m * y), axis=-3)


def forward(x, mask, coils=None):
    """``A x = M F (S x)``: k-space ``(..., H, W)`` (single coil) or ``(..., C, H, W)``.

    Cartesian SENSE encoding model (Pruessmann et al. 1999; the D2SA forward model
    ``y_c = M F(S_c x)``). ``x`` complex ``(..., H, W)``; ``mask`` 0/1 ``(H, W)``; ``coils``
    ``(C, H, W)`` or None for a single coil with ``S = 1``.

    Examples
    --------
    >>> m = jnp.zeros((4, 4)).at[:, 2].set(1.0)  # only the centre column acquired
    >>> y = forward(jnp.ones((4, 4), dtype=complex), m)
    >>> round(float(abs(y[2, 2])), 6), int(jnp.count_nonzero(jnp.abs(y) > 1e-6))
    (4.0, 1)
    """
    x = _complex(x, "x")
    m = _mask(mask, "mask", x.shape[-2:])
    return _apply(x, m, _coils(coils, "coils", x.shape[-2:], x, "x"))


def adjoint(y, mask, coils=None):
    """``A^H y = sum_c conj(S_c) F^H (M y_c)`` (SENSE, Pruessmann et al. 1999; adjoint of
    :func:`forward`; ``M`` real so ``M^H = M``, ``F`` unitary so ``F^H = F^{-1}``).

    Examples
    --------
    >>> s, m = coil_maps(2, (4, 4)), jnp.zeros((4, 4)).at[:, 1:3].set(1.0)
    >>> x, y = jnp.arange(16.0).reshape(4, 4) + 1j, jnp.ones((2, 4, 4), dtype=complex)
    >>> lhs = jnp.vdot(forward(x, m, s), y)  # <A x, y> = <x, A^H y>
    >>> rhs = jnp.vdot(x, adjoint(y, m, s))
    >>> bool(abs(lhs - rhs) < 1e-4 * abs(lhs))
    True
    """
    m = _mask(mask, "mask")
    s = _coils(coils, "coils", m.shape)
    y = _kspace(y, "y", m.shape, s)
    if s is not None and not _is_tracer(y) and not _is_tracer(s):
        _fits(y, "y", s, "coils")
    return _apply_h(y, m, s)


def normal(x, mask, coils=None):
    """``A^H A x`` (the normal operator of the least-squares data term; SENSE, Pruessmann et al.
    1999).

    Examples
    --------
    >>> s, m = coil_maps(3, (4, 4)), jnp.ones((4, 4))  # full sampling: A^H A = S^H S = I
    >>> x = jnp.arange(16.0).reshape(4, 4) + 0j
    >>> bool(jnp.allclose(normal(x, m, s), x, atol=1e-4))
    True
    """
    x = _complex(x, "x")
    m = _mask(mask, "mask", x.shape[-2:])
    s = _coils(coils, "coils", x.shape[-2:], x, "x")
    return _apply_h(_apply(x, m, s), m, s)


def _lam(lam):
    return None if lam is None else check_scalar(lam, "lam", lower=0.0, finite=True)


@jax.jit
def _dc(k, y, m, lam):
    if lam is None:
        return (1 - m) * k + m * y
    t = lam / (1 + lam)  # (k + lam y)/(1 + lam) written without overflow for large lam
    return (1 - m) * k + m * ((1 - t) * k + t * y)


def kspace_consistency(k, y, mask, lam=None):
    """Data consistency in k-space: acquired entries replaced by ``y`` (``lam=None``, hard) or by
    ``(k + lam y)/(1 + lam)`` (soft, the minimiser of ``|k' - k|^2 + lam |M k' - y|^2`` entrywise;
    Schlemper et al., IEEE TMI 37:491, 2018, the data-consistency layer; ``lam -> inf``
    recovers the hard step); entries outside the mask are kept. ``k``, ``y`` complex, same shape.

    Examples
    --------
    >>> k, y, m = jnp.zeros((2, 2), complex), jnp.ones((2, 2), complex), jnp.eye(2)
    >>> kspace_consistency(k, y, m).real.tolist()  # hard: y on the mask
    [[1.0, 0.0], [0.0, 1.0]]
    >>> kspace_consistency(k, y, m, lam=1.0).real.tolist()  # soft: (k + y) / 2
    [[0.5, 0.0], [0.0, 0.5]]
    """
    k = _complex(k, "k")
    m = _mask(mask, "mask", k.shape[-2:])
    y = _complex(y, "y")
    if y.shape != k.shape:
        raise ValueError(f"`y` must have the shape of `k` {tuple(k.shape)}; got {tuple(y.shape)}.")
    return _dc(k, y, m, _lam(lam))


def data_consistency(x, y, mask, coils=None, lam=None):
    """Image-domain data consistency: ``S^H F^H dc(F S x, y)`` with :func:`kspace_consistency`.

    Single coil, hard: the orthogonal projection onto ``{x : M F x = y}``, so
    ``forward(result) == M y`` exactly. Multi coil with ``sum_c |S_c|^2 = 1`` the hard step equals
    ``x + A^H (y - A x)`` (derived here: expand ``S^H F^H [(1 - M) F S x + M y]``; checked in
    ``test_multicoil_dc_is_a_unit_gradient_step``) and the soft step
    ``x + A^H (y - A x) lam/(1+lam)``.

    Examples
    --------
    >>> m = cartesian_mask((8, 8), 2, 0.25, key=jax.random.key(0))
    >>> y = m * fft2c(jnp.ones((8, 8), complex))
    >>> x = data_consistency(jnp.zeros((8, 8), complex), y, m)
    >>> bool(jnp.allclose(forward(x, m), y, atol=1e-5))  # the result agrees with the data
    True
    """
    x = _complex(x, "x")
    m = _mask(mask, "mask", x.shape[-2:])
    s = _coils(coils, "coils", x.shape[-2:], x, "x")
    y = _kspace(y, "y", m.shape, s)
    if s is not None and not _is_tracer(y) and not _is_tracer(s):
        _fits(y, "y", s, "coils")
    lam = _lam(lam)
    return _image_dc(x, y, m, s, lam)


@jax.jit
def _image_dc(x, y, m, s, lam):
    if s is None:
        return _ifft2c(_dc(_fft2c(x), y, m, lam))
    return jnp.sum(jnp.conj(s) * _ifft2c(_dc(_fft2c(s * x[..., None, :, :]), y, m, lam)), axis=-3)


# --- masks ------------------------------------------------------------------------------------


def _round(v):
    return int(math.floor(v + 0.5))


def num_lines(n, R, center_fraction):
    """Acquired columns of :func:`cartesian_mask` with ``n`` columns:
    ``n_low = floor(n cf + 1/2)`` centre lines and ``n_lines = max(n_low, floor(n/R + 1/2))`` in
    all (the fastMRI mask's expected count ``n/R``, Zbontar et al. 2018 ``MaskFunc``, made exact).
    Returns ``(n_lines, n_low)``.

    Examples
    --------
    >>> num_lines(320, 4, 0.08)  # 320/4 lines in all, 320 * 0.08 = 25.6 of them the centre
    (80, 26)
    """
    n = check_int(n, "n", lower=2, upper=100_000)
    R = check_scalar(R, "R", lower=1.0, upper=float(n))
    cf = check_scalar(center_fraction, "center_fraction", lower=0.0, upper=1.0)
    n_low = _round(n * cf)
    return max(n_low, _round(n / R)), n_low


def cartesian_mask(shape, R, center_fraction, *, key, kind="random"):
    """Column (phase-encode) undersampling mask ``(H, W)`` of 0/1 with exactly
    ``n_lines = max(n_low, floor(W/R + 1/2))`` columns, ``n_low = floor(W cf + 1/2)`` of them the
    fully sampled centre ``[p, p + n_low)``, ``p = (W - n_low + 1) // 2`` (fastMRI ``MaskFunc``
    centre, Zbontar et al. 2018; D2SA ``data/masking.py``: cf = 0.08, R = 4).

    ``kind="random"``: the ``n_out = n_lines - n_low`` other columns drawn uniformly without
    replacement (fastMRI draws each with probability ``(W/R - n_low)/(W - n_low)``, the same
    count in expectation). ``kind="equispaced"``: the ``n_out`` columns at positions
    ``floor(o + j (W - n_low)/n_out)``, ``j < n_out``, of the outer columns in order, with a random
    offset ``o`` in ``[0, (W - n_low)/n_out)`` (fastMRI ``EquispacedMaskFunc``, made exact; derived
    here). Deterministic per ``key``.

    Examples
    --------
    >>> m = cartesian_mask((4, 16), 4, 0.125, key=jax.random.key(0))
    >>> m.shape, int(m[0].sum()), bool((m == m[0]).all()), m[0, 7:9].tolist()  # 16/4 whole columns
    ((4, 16), 4, True, [1.0, 1.0])
    """
    h, w = _shape(shape)
    kind = check_choice(kind, "kind", ("random", "equispaced"))
    rng = _rng(key)
    n_lines, n_low = num_lines(w, R, center_fraction)
    p = (w - n_low + 1) // 2
    line = np.zeros(w, dtype=bool)
    line[p : p + n_low] = True
    n_out = n_lines - n_low
    outer = np.r_[np.arange(p), np.arange(p + n_low, w)]  # the W - n_low outer columns in order
    if n_out and kind == "random":
        line[rng.choice(outer, n_out, replace=False)] = True
    elif n_out:
        step = (w - n_low) / n_out
        line[outer[np.floor(rng.uniform(0, step) + step * np.arange(n_out)).astype(int)]] = True
    return jnp.asarray(np.broadcast_to(line[None, :], (h, w)), dtype=jnp.result_type(float))


def ssdu_split(mask, rho, *, key, kind="gaussian", acs=(4, 4), std_scale=4.0):
    """SSDU split (Yaman et al., MRM 84:3172, 2020) of the acquired set ``Omega`` into
    ``(theta, lam)``: disjoint 0/1 masks with ``theta + lam = mask``.

    ``|Lambda| = floor(rho |Omega minus ACS|)`` points (D2SA ``data/masking.py``) drawn point-wise
    from the acquired points outside the central ``acs`` block (which stays in ``Theta``),
    without replacement, with probability proportional to a Gaussian density centred at DC with
    standard deviations ``(H, W)/std_scale`` (``kind="gaussian"``, SSDU's variable-density
    selection) or uniformly (``kind="uniform"``). Sampling without replacement is done by
    Gumbel-top-k (Kool et al., ICML 2019), which draws the same sequence as SSDU's repeated
    draws with rejection of duplicates (derived here). A held-out set for self-validation (D2SA:
    5 %) is ``ssdu_split(mask, 0.05, key, kind="uniform", acs=(0, 0))[1]``.

    Examples
    --------
    >>> m = jnp.ones((8, 8))
    >>> theta, lam = ssdu_split(m, 0.4, key=jax.random.key(0))
    >>> int(lam.sum()), bool((theta + lam == m).all())  # floor(0.4 (64 - 16)): the 4 x 4 ACS stays
    (19, True)
    """
    m = np.asarray(_mask(mask, "mask"))
    rho = check_scalar(rho, "rho", lower=0.0, upper=1.0, closed="neither")
    rng = _rng(key)
    kind = check_choice(kind, "kind", ("gaussian", "uniform"))
    if not hasattr(acs, "__len__") or len(acs) != 2:
        raise TypeError(f"`acs` must be a pair of integers; got {acs!r}.")
    h, w = m.shape
    ah = check_int(acs[0], "acs", lower=0, upper=h)
    aw = check_int(acs[1], "acs", lower=0, upper=w)
    std_scale = check_scalar(std_scale, "std_scale", lower=0.1, upper=1e3)
    rows, cols = np.arange(h)[:, None], np.arange(w)[None, :]
    r0, c0 = (h - ah + 1) // 2, (w - aw + 1) // 2  # the centre block, as the mask centre
    in_acs = (rows >= r0) & (rows < r0 + ah) & (cols >= c0) & (cols < c0 + aw)
    eligible = (m > 0) & ~in_acs
    n_lam = int(math.floor(rho * int(eligible.sum())))
    logw = np.zeros((h, w))
    if kind == "gaussian":
        logw = -0.5 * (
            ((rows - h // 2) * std_scale / h) ** 2 + ((cols - w // 2) * std_scale / w) ** 2
        )
    score = np.where(eligible, logw + rng.gumbel(size=(h, w)), -np.inf).ravel()
    lam = np.zeros(h * w)
    lam[np.argsort(-score, kind="stable")[:n_lam]] = 1.0
    lam = lam.reshape(h, w)
    dt = jnp.result_type(float)
    return jnp.asarray(m - lam, dtype=dt), jnp.asarray(lam, dtype=dt)


def resubsample(mask, R, center_fraction, *, key, kind="random"):
    """A further Cartesian mask applied on top of the acquired one: ``mask * cartesian_mask(...)``
    (the N2N-style resubsampling of D2SA ``data/masking.py``: sub-mask R = 2, cf = 0.08; the loss
    mask stays the full acquired one, so input and loss sets overlap).

    Examples
    --------
    >>> m = cartesian_mask((8, 16), 2, 0.25, key=jax.random.key(0))
    >>> sub = resubsample(m, 2, 0.25, key=jax.random.key(1))
    >>> bool((sub <= m).all()), sub[0, 6:10].tolist()  # a subset; both keep the 4 centre lines
    (True, [1.0, 1.0, 1.0, 1.0])
    """
    m = _mask(mask, "mask")
    return m * cartesian_mask(m.shape, R, center_fraction, key=key, kind=kind)


# --- self-supervised losses -------------------------------------------------------------------


def _loss_args(y_pred, y, mask):
    y_pred = _complex(y_pred, "y_pred")
    y = _complex(y, "y")
    if y.shape != y_pred.shape:
        raise ValueError(
            f"`y` must have the shape of `y_pred` {tuple(y_pred.shape)}; got {tuple(y.shape)}."
        )
    m = _mask(mask, "mask", y.shape[-2:])
    concrete = not (_is_tracer(y) or _is_tracer(m))
    if concrete:
        on = np.abs(np.asarray(y)[..., np.asarray(m) > 0])
        tiny = float(np.finfo(np.asarray(y).dtype).tiny)  # subnormals flush to zero in XLA
        if not on.size or on.max() < tiny:
            raise ValueError(
                f"`y` must be nonzero on `mask` (the losses divide by its norm): an entry of "
                f"magnitude >= {tiny:.3g} there; got all below."
            )
    return y_pred, y, m


def _l1(z):  # l1 of the real and imaginary parts, as on the 2-channel real view of k-space
    return jnp.sum(jnp.abs(z.real)) + jnp.sum(jnp.abs(z.imag))


def _scaled(yp, y, m):
    """``M(y - y_pred)`` and ``M y`` divided by ``max|M y|``: the losses are ratios of norms of
    degree 1, unchanged by a common scale, and their squares and sums then neither underflow
    nor overflow in complex64."""
    d, my = m * (y - yp), m * y
    c = jax.lax.stop_gradient(jnp.max(jnp.abs(my)))
    return d / c, my / c


@jax.jit
def _normalized_l1_l2(yp, y, m):
    d, my = _scaled(yp, y, m)
    return jnp.linalg.norm(d.ravel()) / jnp.linalg.norm(my.ravel()) + _l1(d) / _l1(my)


@jax.jit
def _relative_l1(yp, y, m):
    d, my = _scaled(yp, y, m)
    return _l1(d) / _l1(my)


def normalized_l1_l2(y_pred, y, mask):
    """SSDU loss on the points of ``mask`` (Yaman et al. 2020, the normalised l1-l2 loss):
    ``|M(y - y_pred)|_2/|M y|_2 + |M(y - y_pred)|_1/|M y|_1``, the l1 norm taken over the real
    and imaginary parts. Invariant to a common real scale ``c != 0`` of ``y`` and ``y_pred``
    (each term is a ratio of norms homogeneous of degree 1).

    Examples
    --------
    >>> y, m = jnp.ones((4, 4), complex), jnp.ones((4, 4))
    >>> round(float(normalized_l1_l2(0.5 * y, y, m)), 6)  # 1/2 + 1/2
    1.0
    """
    return _normalized_l1_l2(*_loss_args(y_pred, y, mask))


def relative_l1(y_pred, y, mask):
    """D2SA's relative l1 data fidelity on the points of ``mask``:
    ``|M(y_pred - y)|_1 / |M y|_1`` over real and imaginary parts (D2SA ``engine/adapt.py``; the
    Darestani et al. 2022 self-supervised loss). Invariant to a common real scale ``c != 0``.

    Examples
    --------
    >>> y, m = jnp.ones((4, 4), complex), jnp.ones((4, 4))
    >>> round(float(relative_l1(0.75 * y, y, m)), 6)
    0.25
    """
    return _relative_l1(*_loss_args(y_pred, y, mask))
