"""Visual prompts for a frozen image classifier: ACAVP and the additive baselines.

ACAVP (Enomoto, NeurIPS 2025, arXiv 2510.07823; mechanism from the official code
``s-enmt/ACAVP/models/prompters.py``, ``docs/papers/acavp.md#mechanism``) transforms
the input image in three stages, all prompt parameters shared across the batch:

1. a bounded affine warp ``x_a = warp(x; A)`` (bilinear, zero padding, pixel centres at integer
   coordinates as kornia with ``align_corners=False``), :func:`affine_matrix`;
2. a per-pixel, per-channel colour gain ``x_c = x_a * G`` with ``G = gain_max * sigmoid(M)``;
3. an additive prompt ``x_p = x_c + mask * P`` only where the warped image is empty; the mask is
   the warp of a ones-image below ``1e-6`` (batch-independent, unlike the code's exact zeros of
   the batch, ``docs/papers/acavp.md#departures-and-why``).

Baselines: :class:`PaddingPrompt` (Bahng et al. 2022, ``hjbahng/visual_prompting``: additive frame
of width ``p`` on the full image, ``randn`` init) and :class:`EVPPrompt` (Wu et al., arXiv
2212.10556, ``UCSC-VLAA/EVP``: image shrunk and zero-padded, additive frame, zero init).
Label mappings: :func:`first_k_label_map` (the code's default for non-CLIP classifiers) and
:func:`frequency_label_map` (EVP's greedy frequency mapping). The frozen backbone here is
:class:`SmallCNN`; :class:`Prompted` and :class:`LinearProbe` wrap it with a trainable mask that
selects the prompt (or the new head) only. Images are ``(..., C, H, W)`` in pixel space [0, 1]
(the backbone takes pixel-space input, so the code's de/renormalisation is the identity here).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    _is_tracer,
    check_array,
    check_bool,
    check_choice,
    check_int,
    check_key,
    check_scalar,
    to_array,
)

__all__ = [
    "affine_matrix",
    "warp_affine",
    "acavp_transform",
    "ACAVPPrompt",
    "PaddingPrompt",
    "EVPPrompt",
    "frame_mask",
    "first_k_label_map",
    "frequency_label_map",
    "SmallCNN",
    "Prompted",
    "LinearProbe",
]

MAX_SIDE = 1024  # images larger than this are refused (a size typo, not a workload)
CENTERS = ("image", "corner")
F32 = jnp.float32  # NN work in float32, also under x64


def _check_images(x, name="x"):
    x = check_array(x, name, min_ndim=3)
    c, h, w = x.shape[-3:]
    if c < 1 or not (2 <= h <= MAX_SIDE and 2 <= w <= MAX_SIDE):
        raise ValueError(
            f"`{name}` must be images (..., C, H, W) with C >= 1 and 2 <= H, W <= {MAX_SIDE}; "
            f"got shape {tuple(x.shape)}."
        )
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(f"`{name}` must be a floating array; got dtype {x.dtype}.")
    return x


def _center(center, h, w):
    center = check_choice(center, "center", CENTERS)
    return (0.0, 0.0) if center == "corner" else ((w - 1) / 2.0, (h - 1) / 2.0)


def _affine_args(theta, scale, shear, translate):
    """Validated ``theta`` (scalar), ``scale`` (2, positive), ``shear`` (2, |h| < pi/2) and
    ``translate`` (2) as arrays (finiteness and ranges checked when concrete)."""
    theta = check_array(theta, "theta", ndim=0, max_abs=1e4)
    scale = check_array(scale, "scale", ndim=1, max_abs=1e4)
    shear = check_array(shear, "shear", ndim=1, max_abs=1.5)
    translate = check_array(translate, "translate", ndim=1, max_abs=1e5)
    for v, name in ((scale, "scale"), (shear, "shear"), (translate, "translate")):
        if v.shape != (2,):
            raise ValueError(f"`{name}` must have shape (2,); got {tuple(v.shape)}.")
    if not _is_tracer(scale) and np.any(np.asarray(scale) <= 1e-6):
        raise ValueError(f"`scale` must be positive; got {np.asarray(scale)}.")
    return tuple(jnp.asarray(v) for v in (theta, scale, shear, translate))


def affine_matrix(theta, scale, shear, translate, *, center=(0.0, 0.0)):
    """The 3x3 homogeneous map of ACAVP's affine prompt (kornia's ``get_affine_matrix2d``).

    ``A = T(t) T(c) R(theta) diag(s) T(-c) . T(c) Sh(h) T(-c)`` with ``R`` the rotation by
    ``theta`` radians, ``s = (s_x, s_y)``, ``Sh = [[1, -tan h_x], [-tan h_y, 1 + tan h_x tan
    h_y]]`` (kornia ``get_shear_matrix2d``) and ``t`` in pixels; ``c = (c_x, c_y)`` the centre.
    Points are ``(x, y) = (column, row)``; ``A`` maps source to destination pixels.

    Examples
    --------
    >>> a = affine_matrix(jnp.pi / 2, jnp.ones(2), jnp.zeros(2), jnp.array([1.0, 2.0]))
    >>> bool(jnp.allclose(a @ jnp.array([1.0, 0.0, 1.0]), jnp.array([1.0, 3.0, 1.0]), atol=1e-6))
    True
    """
    theta, scale, shear, translate = _affine_args(theta, scale, shear, translate)
    if not isinstance(center, tuple | list) or len(center) != 2:
        raise TypeError(f"`center` must be a pair (c_x, c_y); got {center!r}.")
    cx = check_scalar(center[0], "center", lower=-1e4, upper=1e4)
    cy = check_scalar(center[1], "center", lower=-1e4, upper=1e4)
    cos, sin = jnp.cos(theta), jnp.sin(theta)
    one, zero = jnp.ones_like(cos), jnp.zeros_like(cos)
    rs = jnp.array([[cos * scale[0], -sin * scale[1], zero], [sin * scale[0], cos * scale[1], zero],
                    [zero, zero, one]])  # fmt: skip
    tx, ty = jnp.tan(shear[0]), jnp.tan(shear[1])
    sh = jnp.array([[one, -tx, zero], [-ty, one + tx * ty, zero], [zero, zero, one]])
    c = jnp.array([[1.0, 0.0, cx], [0.0, 1.0, cy], [0.0, 0.0, 1.0]])
    c_inv = jnp.array([[1.0, 0.0, -cx], [0.0, 1.0, -cy], [0.0, 0.0, 1.0]])
    t = jnp.array([[one, zero, translate[0]], [zero, one, translate[1]], [zero, zero, one]])
    return t @ c @ rs @ sh @ c_inv


def _inverse_affine(a):
    """Inverse of a 3x3 affine map in closed form (exact for the identity)."""
    m, t = a[:2, :2], a[:2, 2]
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    mi = jnp.array([[m[1, 1], -m[0, 1]], [-m[1, 0], m[0, 0]]]) / det
    return mi, -(mi @ t)


def warp_affine(x, matrix, *, order: int = 1, inverse: bool = False):
    """``out(p) = x(A^{-1} p)``: bilinear (``order=1``) or nearest (``order=0``, PIL's rounding
    ``floor(q + 1/2)``) sampling with zero padding (kornia ``warp_affine``,
    ``align_corners=False``; pixel centres at integers).

    ``x`` is ``(..., C, H, W)``; ``matrix`` one 3x3 map shared by every image, or ``(N, 3, 3)``
    with one per image of ``x`` of shape ``(N, C, H, W)``. ``inverse=True``: ``matrix`` is
    already the output-to-input map (as PIL's ``Image.transform`` data).

    Examples
    --------
    >>> x = jnp.arange(9.0).reshape(1, 3, 3)
    >>> a = affine_matrix(0.0, jnp.ones(2), jnp.zeros(2), jnp.array([1.0, 0.0]))  # one column right
    >>> warp_affine(x, a, order=0)[0].tolist()  # zero padding enters on the left
    [[0.0, 0.0, 1.0], [0.0, 3.0, 4.0], [0.0, 6.0, 7.0]]
    """
    x = _check_images(x)
    order = check_choice(order, "order", (0, 1))
    inverse = check_bool(inverse, "inverse")
    matrix = check_array(matrix, "matrix", min_ndim=2)
    if matrix.shape[-2:] != (3, 3) or matrix.ndim not in (2, 3):
        raise ValueError(f"`matrix` must be (3, 3) or (N, 3, 3); got {tuple(matrix.shape)}.")
    if not _is_tracer(matrix):
        m = np.asarray(matrix, np.float64)
        if np.abs(m).max() > 1e6 or np.any(np.abs(np.linalg.det(m[..., :2, :2])) < 1e-9):
            raise ValueError("`matrix` must be an invertible affine map with entries <= 1e6.")
        if np.abs(m[..., 2, :] - [0.0, 0.0, 1.0]).max() > 1e-9:  # the warp never reads it
            raise ValueError(
                f"`matrix` must be affine, last row (0, 0, 1); got a projective last row "
                f"{m[..., 2, :].reshape(-1, 3)[0].tolist()}."
            )
    if matrix.ndim == 3:
        if x.ndim != 4 or x.shape[0] != matrix.shape[0]:
            raise ValueError(
                f"`matrix` (N, 3, 3) needs `x` of shape (N, C, H, W); got {tuple(matrix.shape)} "
                f"and {tuple(x.shape)}."
            )
        return jax.vmap(lambda xi, mi: _warp(xi, mi, order, inverse))(x, matrix)
    return _warp(x, matrix, order, inverse)


def _warp(x, matrix, order, inverse=False):
    h, w = x.shape[-2:]
    matrix = matrix.astype(x.dtype)
    mi, ti = (matrix[:2, :2], matrix[:2, 2]) if inverse else _inverse_affine(matrix)
    yy, xx = jnp.meshgrid(jnp.arange(h, dtype=x.dtype), jnp.arange(w, dtype=x.dtype), indexing="ij")
    sx = mi[0, 0] * xx + mi[0, 1] * yy + ti[0]
    sy = mi[1, 0] * xx + mi[1, 1] * yy + ti[1]
    if order == 0:  # PIL's NEAREST: round half up, outside -> 0
        sx, sy = jnp.floor(sx + 0.5), jnp.floor(sy + 0.5)
    flat = x.reshape(-1, h, w)

    def one(img):
        return jax.scipy.ndimage.map_coordinates(img, [sy, sx], order=1, mode="constant", cval=0.0)

    return jax.vmap(one)(flat).reshape(x.shape).astype(x.dtype)


def acavp_transform(x, theta, scale, shear, translate, gain, additive, *, center="image"):
    """ACAVP's prompt on constrained parameters: warp, colour gain, additive on the empty region.

    ``theta`` (radians), ``scale`` (2,), ``shear`` (2, radians), ``translate`` (2, pixels),
    ``gain`` and ``additive`` broadcastable to ``x``'s ``(C, H, W)``. ``center`` is ``"image"``
    (default: rotate and scale about the image centre, the natural reading of "creating prompt
    regions") or ``"corner"`` (about pixel (0, 0): what the official code computes, its
    ``affine_center`` flag being unused, ``docs/papers/acavp.md#departures-and-why``). With ``theta
    = 0, scale = 1, shear = 0, translate = 0, gain = 1, additive = 0`` it returns ``x`` exactly.

    Examples
    --------
    >>> x, shift = jnp.ones((1, 3, 3)), jnp.array([1.0, 0.0])
    >>> out = acavp_transform(x, 0.0, jnp.ones(2), jnp.zeros(2), shift, 2.0, 5.0)
    >>> out[0, 0].tolist()  # gain 2 on the image; the additive 5 where the warp left it empty
    [5.0, 2.0, 2.0]
    """
    x = _check_images(x)
    h, w = x.shape[-2:]
    a = affine_matrix(theta, scale, shear, translate, center=_center(center, h, w))
    for v, name in ((gain, "gain"), (additive, "additive")):
        v = check_array(v, name, max_abs=1e6)
        pairs = zip(v.shape[::-1], x.shape[::-1], strict=False)
        if v.ndim > 3 or any(d not in (1, e) for d, e in pairs):
            raise ValueError(
                f"`{name}` must broadcast to the image shape {tuple(x.shape[-3:])}; got "
                f"{tuple(v.shape)}."
            )
    xa = warp_affine(x, a)
    ones = jnp.ones(x.shape[-3:], x.dtype)
    mask = (warp_affine(ones, a) < 1e-6).astype(x.dtype)
    return xa * gain + mask * additive


def _logit(p):
    return math.log(p / (1.0 - p))


class ACAVPPrompt(eqx.Module):
    """ACAVP's trainable prompt (``docs/papers/acavp.md#mechanism``, ranges from
    ``configs/ACAVP.yaml``).

    Raw parameters and their bounded maps: ``theta = theta_range * tanh(a_theta)``, ``s =
    sigmoid(a_s)`` (init ``scale_init``), ``h = shear_range * tanh(a_h)``, ``t = t_range * W *
    tanh(a_t)`` pixels, ``G = gain_max * sigmoid(M)`` (init 1), ``P`` (init 0). ``affine``,
    ``colour``, ``additive`` switch the stages off for ablations (a stage off is its identity;
    ``affine=False`` keeps the fixed initial shrink, i.e. EVP's geometry plus colour).
    """

    a_theta: jax.Array
    a_scale: jax.Array
    a_shear: jax.Array
    a_translate: jax.Array
    m: jax.Array
    p: jax.Array
    shape: tuple = eqx.field(static=True)
    theta_range: float = eqx.field(static=True)
    shear_range: float = eqx.field(static=True)
    t_range: float = eqx.field(static=True)
    gain_max: float = eqx.field(static=True)
    center: str = eqx.field(static=True)
    stages: tuple = eqx.field(static=True)

    def __init__(self, shape=(3, 32, 32), *, scale_init=0.73, theta_range=0.1, shear_range=0.1,
                 t_range=0.05, gain_max=6.0, center="image", affine=True, colour=True,
                 additive=True):  # fmt: skip
        c, h, w = _check_shape(shape)
        scale_init = check_scalar(scale_init, "scale_init", lower=0.0, upper=1.0, closed="neither")
        self.theta_range = check_scalar(theta_range, "theta_range", lower=0.0, upper=math.pi)
        self.shear_range = check_scalar(shear_range, "shear_range", lower=0.0, upper=1.5)
        self.t_range = check_scalar(t_range, "t_range", lower=0.0, upper=1.0)
        self.gain_max = check_scalar(gain_max, "gain_max", lower=1.0, upper=1e3, closed="neither")
        self.center = check_choice(center, "center", CENTERS)
        self.stages = tuple(
            check_bool(v, k)
            for k, v in (("affine", affine), ("colour", colour), ("additive", additive))
        )
        self.shape = (c, h, w)
        self.a_theta = jnp.zeros((), F32)
        self.a_scale = jnp.full((2,), _logit(scale_init), F32)
        self.a_shear = jnp.zeros((2,), F32)
        self.a_translate = jnp.zeros((2,), F32)
        self.m = jnp.full((c, h, w), _logit(1.0 / self.gain_max), F32)
        self.p = jnp.zeros((c, h, w), F32)

    def params(self):
        """The constrained parameters ``(theta, scale, shear, translate, gain, additive)``."""
        aff, col, add = self.stages
        z = jnp.zeros(())
        theta = self.theta_range * jnp.tanh(self.a_theta) if aff else z
        shear = self.shear_range * jnp.tanh(self.a_shear) if aff else jnp.zeros(2)
        t = self.t_range * self.shape[2] * jnp.tanh(self.a_translate) if aff else jnp.zeros(2)
        scale = jax.nn.sigmoid(self.a_scale if aff else jax.lax.stop_gradient(self.a_scale))
        gain = self.gain_max * jax.nn.sigmoid(self.m) if col else jnp.ones(self.shape)
        p = self.p if add else jnp.zeros(self.shape)
        return theta, scale, shear, t, gain, p

    def __call__(self, x, *, key=None):
        x = _check_images(x)
        _match(x, self.shape)
        return acavp_transform(x, *self.params(), center=self.center)


def _check_shape(shape):
    if not isinstance(shape, tuple | list) or len(shape) != 3:
        raise TypeError(f"`shape` must be a (C, H, W) tuple; got {shape!r}.")
    c = check_int(shape[0], "shape", lower=1, upper=16)
    h = check_int(shape[1], "shape", lower=4, upper=MAX_SIDE)
    w = check_int(shape[2], "shape", lower=4, upper=MAX_SIDE)
    return c, h, w


def _match(x, shape):
    if tuple(x.shape[-3:]) != tuple(shape):
        raise ValueError(f"`x` must have image shape {tuple(shape)}; got {tuple(x.shape[-3:])}.")


def frame_mask(shape, width):
    """1 on the border frame of ``width`` pixels of a ``(C, H, W)`` image, 0 inside.

    Examples
    --------
    >>> frame_mask((1, 4, 4), 1)[0].tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """
    c, h, w = _check_shape(shape)
    width = check_int(width, "width", lower=1, upper=(min(h, w) - 1) // 2)
    inner = np.zeros((h, w), np.float32)
    inner[width : h - width, width : w - width] = 1.0
    return jnp.asarray(np.broadcast_to(1.0 - inner, (c, h, w)).copy())


class PaddingPrompt(eqx.Module):
    """Bahng et al. 2022 padding prompt: ``x + frame * P`` on the full-size image, ``P ~ N(0, 1)``
    (``hjbahng/visual_prompting/models/prompters.py``, ``PadPrompter``); ``3 (H W - (H - 2p)(W -
    2p))`` effective parameters."""

    p: jax.Array
    mask: jax.Array

    def __init__(self, shape=(3, 32, 32), width=4, *, key):
        check_key(key)
        self.mask = frame_mask(shape, width)  # an array, not a static width: one compilation
        self.p = jax.random.normal(key, self.mask.shape, F32)

    def __call__(self, x, *, key=None):
        x = _check_images(x)
        _match(x, self.mask.shape)
        return x + jax.lax.stop_gradient(self.mask) * self.p

    def trainable_mask(self):
        """Only ``p`` trains (the frame mask is a constant)."""
        return eqx.tree_at(lambda m: m.mask, jax.tree.map(eqx.is_inexact_array, self), False)


class EVPPrompt(eqx.Module):
    """EVP (Wu et al., arXiv 2212.10556, ``UCSC-VLAA/EVP/main.py``): the image shrunk to ``inner``
    pixels (antialiased bilinear), zero-padded back to ``(H, W)`` centred, and a zero-init additive
    prompt on the frame."""

    p: jax.Array
    mask: jax.Array
    inner: int = eqx.field(static=True)

    def __init__(self, shape=(3, 32, 32), inner=24):
        c, h, w = _check_shape(shape)
        inner = check_int(inner, "inner", lower=2, upper=min(h, w) - 2)
        if (h - inner) % 2 or (w - inner) % 2:
            raise ValueError(f"`inner` must leave an even border; got {inner} for {(h, w)}.")
        self.inner = inner
        self.mask = frame_mask((c, h, w), (min(h, w) - inner) // 2)
        self.p = jnp.zeros((c, h, w), F32)

    def __call__(self, x, *, key=None):
        x = _check_images(x)
        _match(x, self.mask.shape)
        c, h, w = self.mask.shape
        small = jax.image.resize(x, (*x.shape[:-2], self.inner, self.inner), "linear")
        b = (h - self.inner) // 2
        pad = [(0, 0)] * (x.ndim - 2) + [(b, b), (b, b)]
        return jnp.pad(small, pad) + jax.lax.stop_gradient(self.mask) * self.p

    def trainable_mask(self):
        """Only ``p`` trains (the frame mask is a constant)."""
        return eqx.tree_at(lambda m: m.mask, jax.tree.map(eqx.is_inexact_array, self), False)


def first_k_label_map(n_target: int, n_source: int):
    """Target class ``i`` read from source logit ``i`` (the official code's default for non-CLIP
    classifiers, ``docs/papers/acavp.md#mechanism``).

    Examples
    --------
    >>> first_k_label_map(3, 10).tolist()
    [0, 1, 2]
    """
    n_source = check_int(n_source, "n_source", lower=1, upper=100_000)
    n_target = check_int(n_target, "n_target", lower=1, upper=n_source)
    return np.arange(n_target)


def frequency_label_map(source_pred, target, n_target: int, n_source: int):
    """EVP's greedy frequency mapping: repeatedly give the (target, source) pair with the largest
    co-occurrence count among unassigned classes (``UCSC-VLAA/EVP`` ``--evp_output_mapping``;
    ILM-VP's greedy matching). Returns ``idx`` with target ``i`` read from source logit
    ``idx[i]``.

    Examples
    --------
    >>> source_pred, target = np.array([7, 7, 2, 2, 2, 5]), np.array([0, 0, 1, 1, 0, 2])
    >>> frequency_label_map(source_pred, target, 3, 10).tolist()  # (0, 7) and (1, 2) twice each
    [7, 2, 5]
    """
    n_source = check_int(n_source, "n_source", lower=1, upper=100_000)
    n_target = check_int(n_target, "n_target", lower=1, upper=n_source)
    sp, tg = to_array(source_pred, "source_pred"), to_array(target, "target")
    for arr, name, hi in ((sp, "source_pred", n_source), (tg, "target", n_target)):
        if arr.ndim != 1 or arr.dtype.kind not in "iu" or arr.size == 0:
            raise TypeError(f"`{name}` must be a non-empty 1-D integer array; got {arr.dtype}.")
        if arr.min() < 0 or arr.max() >= hi:
            raise ValueError(f"`{name}` must lie in [0, {hi}); got [{arr.min()}, {arr.max()}].")
    if sp.shape != tg.shape:
        raise ValueError(f"`source_pred` and `target` differ in shape: {sp.shape} vs {tg.shape}.")
    counts = np.zeros((n_target, n_source))
    np.add.at(counts, (tg, sp), 1.0)
    idx = np.full(n_target, -1)
    for _ in range(n_target):
        t, s = np.unravel_index(np.argmax(counts), counts.shape)
        idx[t] = s
        counts[t, :] = -1.0
        counts[:, s] = -1.0
    return idx


class SmallCNN(eqx.Module):
    """3x3 conv + ReLU layers (stride 2 but the last), global average pooling and a linear head:
    the small source CNN of ``docs/papers/acavp.md#small-scale-experiment``, with strided
    convolutions in place of 2x2 max pooling and a fourth layer so the receptive field (31 px)
    covers a digit (derived here: three such layers see 15 px, and max-pool backprop costs seven
    times more on CPU).
    Default 8-16-32-32 channels: 15,642 parameters at 10 classes."""

    convs: tuple
    head: eqx.nn.Linear

    def __init__(self, channels=(8, 16, 32, 32), n_classes=10, in_channels=3, *, key):
        check_key(key)
        if not isinstance(channels, tuple | list) or not 1 <= len(channels) <= 8:
            raise TypeError(f"`channels` must be 1 to 8 ints; got {channels!r}.")
        chans = [check_int(in_channels, "in_channels", lower=1, upper=16)]
        chans += [check_int(c, "channels", lower=1, upper=512) for c in channels]
        n_classes = check_int(n_classes, "n_classes", lower=2, upper=10_000)
        keys = jax.random.split(key, len(channels) + 1)
        last = len(channels) - 1
        self.convs = tuple(
            eqx.nn.Conv2d(
                chans[i],
                chans[i + 1],
                3,
                stride=1 if i == last else 2,
                padding=1,
                dtype=F32,
                key=keys[i],
            )  # fmt: skip
            for i in range(len(channels))
        )
        self.head = eqx.nn.Linear(chans[-1], n_classes, dtype=F32, key=keys[-1])

    def features(self, x):
        """Pooled features ``(..., channels[-1])`` of images ``(..., C, H, W)``."""
        x = _check_images(x)
        lead = x.shape[:-3]
        h = x.reshape(-1, *x.shape[-3:]).astype(self.convs[0].weight.dtype)
        for conv in self.convs:
            h = jax.nn.relu(jax.vmap(conv)(h))
        return h.mean(axis=(-2, -1)).reshape(*lead, -1)

    def __call__(self, x, *, key=None):
        f = self.features(x)
        # eqx types Linear.bias as optional; this head is built with one
        return f @ self.head.weight.T + self.head.bias  # pyright: ignore[reportOperatorIssue]


class Prompted(eqx.Module):
    """``backbone(prompt(x))[..., label_map]``: only the prompt trains (:meth:`trainable_mask`)."""

    prompt: eqx.Module
    backbone: SmallCNN
    label_map: jax.Array  # an array, not static: one compilation serves every label map

    def __init__(self, prompt, backbone, label_map):
        if not isinstance(prompt, eqx.Module) or not callable(prompt):
            raise TypeError(f"`prompt` must be a prompt module; got {type(prompt).__name__}.")
        if not isinstance(backbone, SmallCNN):
            raise TypeError(f"`backbone` must be a SmallCNN; got {type(backbone).__name__}.")
        lm = to_array(label_map, "label_map")
        n_src = backbone.head.out_features
        if lm.ndim != 1 or lm.dtype.kind not in "iu" or lm.size < 2:
            raise TypeError("`label_map` must be a 1-D integer array of >= 2 source indices.")
        if lm.min() < 0 or lm.max() >= n_src or np.unique(lm).size != lm.size:
            raise ValueError(f"`label_map` must hold distinct source classes in [0, {n_src}).")
        self.prompt, self.backbone = prompt, backbone
        self.label_map = jnp.asarray(np.asarray(lm, np.int32))

    def __call__(self, x, *, key=None):
        # eqx.Module declares no __call__; every prompt module defines one
        prompt = self.prompt(x)  # pyright: ignore[reportCallIssue]
        return self.backbone(prompt)[..., self.label_map]

    def trainable_mask(self):
        mask = jax.tree.map(lambda _: False, self)
        own = getattr(self.prompt, "trainable_mask", None)
        inner = own() if callable(own) else jax.tree.map(eqx.is_inexact_array, self.prompt)
        return eqx.tree_at(lambda m: m.prompt, mask, inner)


class LinearProbe(eqx.Module):
    """A new linear head on the frozen backbone's pooled features (only the head trains)."""

    head: eqx.nn.Linear
    backbone: SmallCNN

    def __init__(self, backbone, n_classes, *, key):
        if not isinstance(backbone, SmallCNN):
            raise TypeError(f"`backbone` must be a SmallCNN; got {type(backbone).__name__}.")
        check_key(key)
        n_classes = check_int(n_classes, "n_classes", lower=2, upper=10_000)
        self.head = eqx.nn.Linear(backbone.head.in_features, n_classes, dtype=F32, key=key)
        self.backbone = backbone

    def __call__(self, x, *, key=None):
        # eqx types Linear.bias as optional; this head is built with one
        feats = self.backbone.features(x)
        return feats @ self.head.weight.T + self.head.bias  # pyright: ignore[reportOperatorIssue]

    def trainable_mask(self):
        mask = jax.tree.map(lambda _: False, self)
        return eqx.tree_at(lambda m: m.head, mask, jax.tree.map(eqx.is_inexact_array, self.head))
