"""TrivialAugment (Mueller & Hutter, ICCV 2021, arXiv 2103.10158) in its "standard" space, as
ACAVP uses it (``s-enmt/ACAVP/augmentations/strategy_augment.py``, the authors' PIL code with
``fixed_standard``; ``docs/papers/acavp.md#small-scale-experiment``): one of 14 operations per
image, a strength level drawn uniformly from 0..30, geometric ops with a random sign and black fill.

Why written here: the maintained implementations are torchvision's ``TrivialAugmentWide`` (the
*wide* space, a different and much stronger augmentation, and a torch dependency) and the
authors' per-image PIL code; neither is vectorised in JAX/numpy. The 14 operations are therefore
re-implemented batch-wise on the PIL semantics (uint8 quantisation, PIL's luma, blend with
truncation, ``SMOOTH`` kernel, nearest resampling with ``floor(q + 1/2)``); each is tested
against Pillow itself in ``tests/dynamics/acavp/test_augment.py``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import _is_tracer, as_array, check_array, check_key, check_scalar
from nn.acavp import warp_affine

__all__ = ["OPS", "LEVELS", "apply_ops", "trivial_augment"]

#: the 14 operations of the standard space, in the order of the authors' ``ALL_TRANSFORMS``
OPS = (
    "identity", "auto_contrast", "equalize", "rotate", "solarize", "color", "posterize",
    "contrast", "brightness", "sharpness", "shear_x", "shear_y", "translate_x", "translate_y",
)  # fmt: skip
LEVELS = 31  # strength levels 0..30 (PARAMETER_MAX = 30)
_GEOMETRIC = (3, 10, 11, 12, 13)


def _luma(q):
    """PIL's ``convert("L")``: ``(19595 R + 38470 G + 7471 B + 2^15) >> 16`` on uint8 values."""
    qi = q.astype(jnp.int32)
    return ((19595 * qi[0] + 38470 * qi[1] + 7471 * qi[2] + 32768) >> 16).astype(q.dtype)


def _blend(degenerate, q, factor):
    """PIL ``Image.blend(degenerate, img, factor)``: ``int(d + f (q - d))`` clipped to 0..255,
    in C ``float`` (float32) arithmetic as ``libImaging/Blend.c`` computes it, so that the
    truncation agrees with Pillow's at any JAX precision (in float64, 0.58 * 100 truncates to
    57 where Pillow's float32 gives 58)."""
    f32 = jnp.float32
    blend = degenerate.astype(f32) + jnp.asarray(factor, f32) * (q - degenerate).astype(f32)
    return jnp.clip(jnp.trunc(blend), 0.0, 255.0).astype(q.dtype)


def _auto_contrast(q):
    lo = q.min(axis=(1, 2), keepdims=True)
    hi = q.max(axis=(1, 2), keepdims=True)
    scale = 255.0 / jnp.maximum(hi - lo, 1.0)
    out = jnp.clip(jnp.trunc(q * scale - lo * scale), 0.0, 255.0)
    return jnp.where(hi > lo, out, q)


def _equalize_channel(c):
    """PIL ``ImageOps.equalize`` of one uint8 channel."""
    ci = c.astype(jnp.int32).ravel()
    h = jnp.bincount(ci, length=256)
    step = (ci.size - h[ci.max()]) // 255
    lut = jnp.minimum((step // 2 + jnp.cumsum(h) - h) // jnp.maximum(step, 1), 255)
    return jnp.where(step == 0, c, lut[c.astype(jnp.int32)].astype(c.dtype))


def _sharpness_degenerate(q):
    """PIL ``ImageFilter.SMOOTH`` (3x3, centre 5, others 1, scale 13), border pixels kept."""
    k = jnp.ones((3, 3), q.dtype).at[1, 1].set(5.0) / 13.0
    inner = jax.vmap(lambda ch: jax.scipy.signal.convolve2d(ch, k, mode="valid"))(q)
    return q.at[:, 1:-1, 1:-1].set(jnp.clip(jnp.floor(inner + 0.5), 0.0, 255.0))


def _colour_op(q, op, m):
    """The photometric ops on one uint8-valued float image ``(3, H, W)``; ``m = level / 30``."""
    factor = 0.1 + 1.8 * m  # enhancers: MinMax(0.1, 1.9)
    grey = _luma(q)
    bits = 8 - jnp.floor(m * 4.0)  # posterize: MinMax(4, 8), bits 8 .. 4
    thr = 256.0 - jnp.floor(m * 256.0)  # solarize: MinMax(0, 256)
    mean = jnp.floor(grey.mean() + 0.5)
    branches = [
        lambda: q,
        lambda: _auto_contrast(q),
        lambda: jax.vmap(_equalize_channel)(q),
        lambda: q,
        lambda: jnp.where(q < thr, q, 255.0 - q),
        lambda: _blend(jnp.broadcast_to(grey, q.shape), q, factor),
        lambda: jnp.floor(q / 2.0 ** (8.0 - bits)) * 2.0 ** (8.0 - bits),  # q & ~(2^(8-b) - 1)
        lambda: _blend(jnp.full_like(q, mean), q, factor),
        lambda: _blend(jnp.zeros_like(q), q, factor),
        lambda: _blend(_sharpness_degenerate(q), q, factor),
    ]
    return jax.lax.switch(jnp.minimum(op, len(branches) - 1) * (op < len(branches)), branches)


def _inverse_map(op, m, sign, h, w, max_translate):
    """PIL's output-to-input affine data for the geometric ops (identity otherwise), in integer
    pixel-centre coordinates (PIL samples at ``x + 1/2``)."""
    a = -jnp.deg2rad(sign * 30.0 * m)  # rotate: MinMax(0, 30) degrees; PIL's inverse uses -angle
    cx, cy = (w - 1) / 2.0, (h - 1) / 2.0
    cos, sin = jnp.cos(a), jnp.sin(a)
    rot = jnp.array([[cos, sin, cx - cos * cx - sin * cy], [-sin, cos, cy + sin * cx - cos * cy]])
    s = sign * 0.3 * m  # shear: MinMax(0, 0.3)
    t = sign * max_translate * m  # translate: MinMax(0, 10) pixels
    eye = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    mats = jnp.stack([
        rot,
        eye + jnp.array([[0.0, s, 0.5 * s], [0.0, 0.0, 0.0]]),
        eye + jnp.array([[0.0, 0.0, 0.0], [s, 0.0, 0.5 * s]]),
        eye + jnp.array([[0.0, 0.0, t], [0.0, 0.0, 0.0]]),
        eye + jnp.array([[0.0, 0.0, 0.0], [0.0, 0.0, t]]),
    ])  # fmt: skip
    geo = jnp.asarray(_GEOMETRIC)
    hit = geo == op
    mat = jnp.where(hit.any(), mats[jnp.argmax(hit)], eye)
    mat = jnp.where((mat[0, 1] != 0) | (mat[1, 0] != 0), _pil_fixed_point(mat), mat)
    return jnp.concatenate([mat, jnp.array([[0.0, 0.0, 1.0]])])


def _pil_fixed_point(mat):
    """The map Pillow samples with when it has a shear or rotation part: ``affine_fixed`` of
    ``libImaging/Geometry.c`` rounds each coefficient to 16.16 fixed point, ``FIX(v) =
    floor(65536 v + 1/2)``, the constant taken at the pixel corner (``a2 + a0/2 + a1/2``, here
    ``m02 + 1/2``), and samples at ``(FIX(a0) x + FIX(a1) y + FIX(c)) >> 16``. With these
    coefficients ``floor(q + 1/2)`` lands on the same pixel: a shear of 0.2 rounds to
    13107 / 65536, so a boundary that 0.2 reaches exactly (7.5 x 0.2 = 1.5) Pillow does not."""
    fix = lambda v: jnp.floor(v * 65536.0 + 0.5) / 65536.0  # noqa: E731
    return jnp.concatenate([fix(mat[:, :2]), fix(mat[:, 2:] + 0.5) - 0.5], axis=1)


def _indices(v, name, n, upper, lower=0):
    """An integer vector ``(n,)`` with entries in ``[lower, upper]`` (checked when concrete)."""
    if _is_tracer(v):
        if v.shape != (n,):
            raise ValueError(f"`{name}` must have shape ({n},); got {tuple(v.shape)}.")
        return v
    a = as_array(v, name, shape=(n,), lower=lower, upper=upper)
    if np.any(a != np.round(a)):
        raise ValueError(f"`{name}` must hold integers; got {a}.")
    return jnp.asarray(a.astype(np.int32))


def apply_ops(images, ops, levels, signs, *, max_translate: float = 10.0):
    """Apply operation ``ops[i]`` (index into :data:`OPS`) at strength ``levels[i]`` (0..30) with
    direction ``signs[i]`` (+1 or -1) to image ``i`` of ``images (N, 3, H, W)`` in [0, 1].

    Images are quantised to uint8 levels first (TrivialAugment runs on the PIL image); the
    output is on the 1/255 grid.
    """
    images = check_array(images, "images", ndim=4)
    if images.shape[1] != 3:
        raise ValueError(f"`images` must be RGB (N, 3, H, W); got {tuple(images.shape)}.")
    n = images.shape[0]
    max_translate = check_scalar(max_translate, "max_translate", lower=0.0, upper=1e3)
    ops = _indices(ops, "ops", n, len(OPS) - 1)
    levels = _indices(levels, "levels", n, LEVELS - 1)
    signs = _indices(signs, "signs", n, 1, lower=-1)
    if not _is_tracer(signs) and np.any(np.asarray(signs) == 0):
        raise ValueError("`signs` must be +1 or -1.")
    return _apply_ops(jnp.asarray(images), ops, levels, signs, max_translate)


@functools.partial(jax.jit, static_argnums=4)
def _apply_ops(images, ops, levels, signs, max_translate):
    """:func:`apply_ops` on checked input, one program per shape (run eagerly, its vmapped
    switch compiled every branch's primitives one by one: ~9 s per image count)."""
    _, _, h, w = images.shape
    q = jnp.round(jnp.clip(images, 0.0, 1.0) * 255.0)
    m = levels.astype(q.dtype) / (LEVELS - 1)
    sg = signs.astype(q.dtype)
    mats = jax.vmap(lambda o, mm, s: _inverse_map(o, mm, s, h, w, max_translate))(ops, m, sg)
    q = warp_affine(q, mats, order=0, inverse=True)
    q = jax.vmap(_colour_op)(q, ops, m)
    return q / 255.0


def trivial_augment(images, *, key, max_translate: float = 10.0):
    """TrivialAugment, standard space: per image one op of :data:`OPS` uniformly, a level
    uniform in 0..30, a random sign; vectorised over ``images (N, 3, H, W)`` in [0, 1]."""
    check_key(key)
    images = check_array(images, "images", ndim=4)
    n = images.shape[0]
    k1, k2, k3 = jax.random.split(key, 3)
    ops = jax.random.randint(k1, (n,), 0, len(OPS))
    levels = jax.random.randint(k2, (n,), 0, LEVELS)
    signs = jnp.where(jax.random.bernoulli(k3, 0.5, (n,)), 1.0, -1.0)
    return apply_ops(images, ops, levels, signs, max_translate=max_translate)
