"""Test-time adaptation of an MRI reconstruction network under distribution shift: the baselines
(no adaptation; single-shot test-time training per slice, Darestani, Liu & Heckel, ICML 2022,
arXiv 2204.07204) and D2SA (Zhang et al., NeurIPS 2025, arXiv 2503.20815), as released in the
official code ``uceclz0/D2SA-MRI-Recon`` (``docs/papers/d2sa.md``).

Pipeline (single coil; k-space ``y`` on the scale of :func:`physics.fft2c`):

* the network sees the zero-filled image ``F^H (M_in y)`` as two real channels (real, imaginary)
  and outputs two channels read as a complex image ``x_hat``; :func:`pretrain` fits a
  :class:`nn.unet.UNet` on the source setting with the supervised L1 loss through ``nn.train``;
* self-supervised losses are the relative l1 data fidelity ``|M_loss (F x_hat - y)|_1 / |M_loss
  y|_1`` (D2SA ``engine/adapt.py``) with the masks of :func:`ssl_masks`: ``"dc"`` (Darestani:
  input = loss = acquired), ``"ssdu"`` (Yaman et al. 2020: a disjoint point-wise split, rho = 0.4,
  4x4 centre kept in the input), ``"n2n"`` (input = acquired times a further R = 2 column mask,
  loss = acquired); 5 % of the acquired points are held out of input and loss for
  self-validation, and the final reconstruction is the network fed all acquired points;
* self-validation early stopping (:func:`stop_iteration`): after ``3 w`` iterations stop at the
  first one where the mean held-out error of the last ``w`` iterations exceeds that of the ``w``
  before (D2SA ``engine/adapt.py``, w = 30; the anchor notebook uses 100);
* :func:`no_adaptation`, :func:`single_shot` (B1: the whole network re-trained per slice) and
  :func:`d2sa` (stage 1: :class:`FilmINR` fitted per patient, FiLM on the last decoder block;
  stage 2: :class:`DiffusionBlock` adapters around frozen conv blocks, per slice).

Departures from the code, each an option (``docs/papers/d2sa.md#departures-and-why``):
``gamma="residual"`` gives
``gamma = 1 + head(...)`` with a zero-initialised head (identity at initialisation) where the code
has ``gamma = head(...)`` from a default-initialised head (``gamma="raw"``); ``de_init="zero"``
zero-initialises the diffusion block's output conv (the code: default init, ``"default"``);
``train_unet_stage1=True`` is the code (the whole U-Net trains in stage 1), False the "frozen"
reading of the abstract. Held-out points are drawn without replacement (the code draws with
replacement, about 4.9 % unique). The per-slice intensity scale ``alpha`` of the code is not
applied: data keep the physical scale, so a scanner gain reaches the network (what stage 1's FiLM
is meant to absorb).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from _core.validation import (
    _is_tracer,
    as_array,
    check_bool,
    check_choice,
    check_instance,
    check_int,
    check_key,
    check_scalar,
)
from nn.unet import UNet

from .metrics import _psnr
from .physics import _fft2c, _ifft2c, cartesian_mask, ssdu_split

__all__ = [
    "SSL",
    "pretrain",
    "to_channels",
    "to_complex",
    "ssl_masks",
    "stop_iteration",
    "DiffusionBlock",
    "FilmINR",
    "D2SAModel",
    "init_d2sa",
    "Adapted",
    "no_adaptation",
    "single_shot",
    "d2sa",
]

SSL = ("dc", "ssdu", "n2n")
# Networks run in float32 (XLA's CPU convolutions are about 5x slower in float64); the physics
# and the metrics stay in the caller's precision.
DTYPE = jnp.float32
CDTYPE = jnp.complex64


# Defaults read at call time (so a claim's mutant can patch them): Adam learning rates of the
# single-shot baseline and of D2SA's stages, and the early-stopping window (the code: 30 for D2SA,
# 100 in the anchor notebook; scaled to the small images here, the same for both methods).
LR_SINGLE_SHOT = 1e-3
LR_LATENT = 1e-2
LR_MODEL = 1e-3
LR_STAGE2 = 1e-3
WINDOW = 10


def _checked(x, name, *, ndim=None, shape=None, lower=None, upper=None):
    """``x`` validated at the public boundary: a finite real or complex array (values checked
    when concrete; traced arrays pass through)."""
    if _is_tracer(x):
        return x
    if isinstance(x, str | bytes) or x is None:
        raise TypeError(f"`{name}` must be a numeric array; got {x!r:.60}.")
    a = np.asarray(x)
    if a.dtype.kind not in "iufc":
        raise TypeError(f"`{name}` must be a numeric array; got dtype {a.dtype}.")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-D; got shape {a.shape}.")
    if shape is not None and a.shape != tuple(shape):
        raise ValueError(f"`{name}` must have shape {tuple(shape)}; got {a.shape}.")
    if a.size and not np.all(np.isfinite(a)):
        raise ValueError(f"`{name}` must be finite; got NaN or infinite value(s).")
    if a.size and np.max(np.abs(a)) > 1e30:  # the networks run in float32
        raise ValueError(f"`{name}` must have magnitudes <= 1e30; got {np.max(np.abs(a)):g}.")
    if lower is not None:
        as_array(a, name, lower=lower, upper=upper)
    return x


def _patient(unet, y, mask, target=None):
    """Validate ``y (S, H, W)``, ``mask (H, W)`` in [0, 1] and (unless None) ``target`` like
    ``y`` for a frozen ``unet``."""
    check_instance(unet, "unet", UNet)
    _checked(y, "y", ndim=3)
    h, w = np.shape(y)[-2:]
    f = 2**unet.pools
    if h % f or w % f or np.shape(y)[0] < 1:
        raise ValueError(
            f"`y` must be (S >= 1, H, W) with H, W divisible by 2**pools = {f}; got {np.shape(y)}."
        )
    _checked(mask, "mask", shape=(h, w), lower=0.0, upper=1.0)
    if not _is_tracer(mask) and not np.any(np.asarray(mask)):
        raise ValueError("`mask` must sample at least one k-space point; got all zeros.")
    if not (_is_tracer(y) or _is_tracer(mask)) and not np.all(
        np.any(np.asarray(y) * np.asarray(mask) != 0, axis=(-2, -1))
    ):
        raise ValueError("`y` must hold acquired signal in every slice; some slice is all zero.")
    if target is not None:
        _checked(target, "target", shape=np.shape(y))
        if not _is_tracer(target) and not np.all(np.any(np.asarray(target) != 0, axis=(-2, -1))):
            raise ValueError("`target` must be nonzero in every slice (its PSNR is undefined).")


def _required(x, name):
    if x is None:
        raise TypeError(f"`{name}` must be an array; got None.")
    return x


def _c(x):
    return jnp.asarray(x, CDTYPE)


def _r(x):
    return jnp.asarray(x, DTYPE)


# --- network input / output ---------------------------------------------------------------


def to_channels(x):
    """Complex image ``(..., H, W)`` as two real channels ``(..., 2, H, W)`` (real, imaginary).

    Examples
    --------
    >>> x = jnp.array([[1 + 2j, 3j], [0j, 1 + 0j]])
    >>> c = to_channels(x)
    >>> c.shape, c[1].tolist()  # the second channel: the imaginary part
    ((2, 2, 2), [[2.0, 3.0], [0.0, 0.0]])
    """
    x = jnp.asarray(_checked(x, "x"))
    if x.ndim < 2:
        raise ValueError(f"`x` must have shape (..., H, W); got {x.shape}.")
    return jnp.stack([x.real, x.imag], axis=-3)


def to_complex(out):
    """Two channels ``(..., 2, H, W)`` as a complex image ``(..., H, W)``.

    Examples
    --------
    >>> x = jnp.array([[1 + 2j, 3j], [0j, 1 + 0j]])
    >>> bool((to_complex(to_channels(x)) == x).all())
    True
    """
    out = jnp.asarray(_checked(out, "out"))
    if jnp.iscomplexobj(out):
        raise TypeError(f"`out` must be real (two channels: real, imaginary); got {out.dtype}.")
    if out.ndim < 3 or out.shape[-3] != 2:
        raise ValueError(f"`out` must have shape (..., 2, H, W); got {out.shape}.")
    return out[..., 0, :, :] + 1j * out[..., 1, :, :]


def _inputs(y, m):
    return to_channels(_ifft2c(m * y))


def _rel_l1(yp, y, m):
    """Relative l1 ``|M (yp - y)|_1 / |M y|_1`` over real and imaginary parts (the
    :func:`physics.relative_l1` formula, summed over every axis given)."""
    d, t = m * (yp - y), m * y
    num = jnp.sum(jnp.abs(d.real)) + jnp.sum(jnp.abs(d.imag))
    return num / (jnp.sum(jnp.abs(t.real)) + jnp.sum(jnp.abs(t.imag)))


# --- pre-training on the source -----------------------------------------------------------


def _supervised_l1(model, batch, *, key=None):
    x, target = batch
    return jnp.mean(jnp.abs(model(x) - target))


def pretrain(cohort, *, channels=8, pools=2, steps=300, batch=16, lr=2e-3, key):
    """A :class:`nn.unet.UNet` fitted on ``cohort`` (a source :class:`phantoms.Cohort`) by
    ``nn.train`` with Adam and the supervised L1 loss between the network's output on the
    zero-filled image and the fully sampled reference (two channels), mini-batches of ``batch``
    slices drawn uniformly. Returns ``(unet, TrainResult)``; the caller keeps the network frozen.
    """
    from .phantoms import Cohort

    check_instance(cohort, "cohort", Cohort)
    check_key(key)
    steps = check_int(steps, "steps", lower=1, upper=100_000)
    batch = check_int(batch, "batch", lower=1, upper=4096)
    lr = check_scalar(lr, "lr", lower=0.0, upper=1.0, closed="neither")
    h, w = cohort.kspace.shape[-2:]
    m = jnp.broadcast_to(_r(cohort.mask)[:, None], cohort.kspace.shape)
    x = _inputs(_c(cohort.kspace), m).reshape(-1, 2, h, w)
    t = to_channels(_c(cohort.target)).reshape(-1, 2, h, w)
    kinit, kdata, ktrain = jax.random.split(key, 3)
    unet = UNet(2, 2, channels, pools, dtype=DTYPE, key=kinit)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(kdata)).ravel().tolist())
    idx = rng.integers(0, x.shape[0], (steps, batch))
    res = nn.train(
        unet,
        _supervised_l1,
        lambda s: (x[idx[s]], t[idx[s]]),
        _adam(lr),
        steps,
        key=ktrain,
        progress=False,
    )
    return res.model, res


@functools.cache
def _adam(lr):
    """One ``optax.adam(lr)`` object per rate, so that ``nn.train``'s step cache (keyed on the
    loss and the optimiser) compiles :func:`pretrain`'s step once for every source network of the
    same shapes, not once per network. (A ``lax.scan`` over the steps measured 2x slower to run
    on the CPU than the per-step program.)"""
    return optax.adam(lr)


# --- self-supervised masks and early stopping ----------------------------------------------


class Masks(NamedTuple):
    """Per-slice masks ``(..., H, W)``: network input, loss, held-out (validation), INR-image
    loss, and all acquired points (fed at the final reconstruction)."""

    m_in: jax.Array
    m_loss: jax.Array
    m_val: jax.Array
    m_inr: jax.Array
    m_full: jax.Array


def ssl_masks(mask, n_slices, ssl, *, key, holdout=0.05, rho=0.4):
    """The :class:`Masks` of the self-supervised framework ``ssl`` for ``n_slices`` slices
    acquired with ``mask (H, W)`` (D2SA ``data/masking.py``,
    ``docs/papers/d2sa.md#mechanism-of-the-official-code``): a held-out
    set of ``holdout`` of the acquired points per slice (uniform, without replacement; none when
    ``holdout = 0``, as in stage 1); of the
    rest ``A``: ``"dc"`` input = loss = ``A``; ``"ssdu"`` input ``Theta`` and loss ``Lambda`` a
    uniform point-wise split of ``A`` with ``|Lambda| = floor(rho |A outside a 4x4 centre|)``;
    ``"n2n"`` input ``A`` times a further random column mask (R = 2, cf = 0.08), loss ``A``. The
    INR-image term uses ``A``.

    Examples
    --------
    >>> m = cartesian_mask((8, 8), 2, 0.25, key=jax.random.key(0))
    >>> ms = ssl_masks(m, 2, "ssdu", key=jax.random.key(1))
    >>> ms.m_in.shape, bool(((ms.m_in + ms.m_loss + ms.m_val) == m).all())  # a partition
    ((2, 8, 8), True)
    """
    ssl = check_choice(ssl, "ssl", SSL)
    n_slices = check_int(n_slices, "n_slices", lower=1, upper=10_000)
    holdout = check_scalar(holdout, "holdout", lower=0.0, upper=0.5, closed="left")
    rho = check_scalar(rho, "rho", lower=0.0, upper=1.0, closed="neither")
    _checked(mask, "mask", ndim=2, lower=0.0, upper=1.0)
    check_key(key)
    mask = _r(mask)
    out = []
    for s in range(n_slices):
        kv, ks = jax.random.split(jax.random.fold_in(key, s))
        if holdout > 0:
            a, val = ssdu_split(mask, holdout, key=kv, kind="uniform", acs=(0, 0))
        else:
            a, val = mask, jnp.zeros_like(mask)
        if ssl == "dc":
            m_in, m_loss = a, a
        elif ssl == "ssdu":
            m_in, m_loss = ssdu_split(a, rho, key=ks, kind="uniform", acs=(4, 4))
        else:
            m_in, m_loss = a * cartesian_mask(mask.shape, 2.0, 0.08, key=ks), a
        out.append(Masks(m_in, m_loss, val, a, mask))
    return Masks(*(_r(jnp.stack(f)) for f in zip(*out, strict=True)))


def stop_iteration(errors, window):
    """Iterations run under self-validation early stopping on the held-out ``errors``
    (``errors[t]`` measured before update ``t``): the first ``t >= 3 window`` with
    ``mean(errors[t - w:t]) > mean(errors[t - 2w:t - w])``, or ``len(errors)`` if none (D2SA
    ``engine/adapt.py``).

    Examples
    --------
    >>> stop_iteration([5, 4, 3, 2, 1, 1, 2, 3], 1)  # errors[6] > errors[5]: 7 run
    7
    """
    e = as_array(errors, "errors", ndim=1)
    w = check_int(window, "window", lower=1, upper=100_000)
    for t in range(3 * w, e.size + 1):
        if e[t - w : t].mean() > e[t - 2 * w : t - w].mean():
            return t
    return e.size


def _should_stop(errs, t, w):
    """In-loop form of :func:`stop_iteration`: ``t`` errors recorded in ``errs``."""
    last = jax.lax.dynamic_slice(errs, (jnp.maximum(t - w, 0),), (w,)).mean()
    prev = jax.lax.dynamic_slice(errs, (jnp.maximum(t - 2 * w, 0),), (w,)).mean()
    return (t >= 3 * w) & (last > prev)


# --- D2SA modules --------------------------------------------------------------------------

# One clockwise step around the 8-neighbourhood of a 3x3 kernel in row-major order (the angular
# pixel-difference convolution of Su et al., ICCV 2021, that D2SA's ``diff_conv.py`` uses).
_ROTATE = np.array([3, 0, 1, 6, 4, 2, 7, 8, 5])


class DiffusionBlock(eqx.Module):
    """D2SA's learnable "anisotropic diffusion" block on ``d`` channels (``models/diff_conv.py``):
    ``DE(u) = W2 q + b2`` with ``q = g / (1 + (g/K)^2)`` (the Perona-Malik flux ``c(g) g``,
    ``c(g) = 1/(1 + (g/K)^2)``, Perona & Malik, IEEE PAMI 12:629, 1990) or ``q = g``
    (``nonlinearity="identity"``, the ablation), ``g = K_DE * u`` a 3x3 conv ``d -> d/ratio``
    whose kernel is the sum of five re-parametrised kernels: central difference (centre tap
    ``w_c - sum w``), angular difference (``w - w o rotation``), horizontal and vertical
    differences (``[w, 0, -w]`` across columns / rows) and a vanilla kernel; K a learnable scalar
    (init 1). ``zero_init`` zero-initialises ``W2, b2`` (exact warm start; the code does not).
    The code's Laplacian of ``q`` is discarded there and is not computed here. The choice of
    flux is a boolean array (``identity``, not trainable), not a static field, so that both
    variants run through one compiled adaptation program (issue 46: the identity ablation cost
    a compile of its own, about 11 CPU-s).
    """

    cd: jax.Array
    ad: jax.Array
    hd: jax.Array
    vd: jax.Array
    vanilla: jax.Array
    bias: jax.Array
    K: jax.Array
    out: nn.unet.Conv2d
    identity: jax.Array  # bool (), True for the identity ablation: traced, never trained

    def __init__(self, channels, *, ratio=4, nonlinearity="perona_malik", zero_init=True, key):
        channels = check_int(channels, "channels", lower=1, upper=4096)
        ratio = check_int(ratio, "ratio", lower=1, upper=channels)
        zero_init = check_bool(zero_init, "zero_init")
        check_key(key)
        nonlinearity = check_choice(nonlinearity, "nonlinearity", ("perona_malik", "identity"))
        self.identity = jnp.asarray(nonlinearity == "identity")
        hidden = max(1, channels // ratio)
        ks = jax.random.split(key, 7)
        init = nn.uniform_fan_in(9 * channels)
        dt = DTYPE
        self.cd, self.ad, self.vanilla = (init(k, (hidden, channels, 3, 3), dt) for k in ks[:3])
        self.hd = nn.uniform_fan_in(3 * channels)(ks[3], (hidden, channels, 3), dt)
        self.vd = nn.uniform_fan_in(3 * channels)(ks[4], (hidden, channels, 3), dt)
        self.bias = 5 * init(ks[5], (hidden,), dt)  # five branch biases, summed
        self.K = jnp.ones((), dt)
        conv = nn.unet.Conv2d(hidden, channels, 1, True, dtype=dt, key=ks[6])
        if zero_init:
            conv = eqx.tree_at(lambda c: (c.weight, c.bias), conv, replace_fn=jnp.zeros_like)
        self.out = conv

    def kernel(self):
        """The summed 3x3 kernel ``(d/ratio, d, 3, 3)`` of the five branches."""
        h, d = self.cd.shape[:2]
        cd = self.cd.at[..., 1, 1].add(-self.cd.sum(axis=(-2, -1)))
        flat = self.ad.reshape(h, d, 9)
        ad = (flat - flat[..., _ROTATE]).reshape(h, d, 3, 3)
        zero = jnp.zeros_like(self.hd)
        hd = jnp.stack([self.hd, zero, -self.hd], axis=-1)  # columns: [w, 0, -w] on each row
        vd = jnp.stack([self.vd, zero, -self.vd], axis=-2)  # rows: [w, 0, -w] on each column
        return cd + ad + hd + vd + self.vanilla

    @property
    def nonlinearity(self) -> str:
        """``"perona_malik"`` or ``"identity"`` (outside a traced function)."""
        return "identity" if bool(self.identity) else "perona_malik"

    def flux(self, g):
        """``g/(1 + (g/K)^2)`` (Perona-Malik) or ``g`` (identity); a select, so the
        Perona-Malik values and gradients are those of the flux alone."""
        return jnp.where(self.identity, g, g / (1 + (g / self.K) ** 2))

    def __call__(self, u, *, key=None):
        xf = u.reshape((-1, *u.shape[-3:]))
        g = (
            jax.lax.conv_general_dilated(
                xf, self.kernel(), (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
            )
            + self.bias[:, None, None]
        )
        return self.out(self.flux(g)).reshape(u.shape)


def _siren_init(fan_in, omega, first):
    """SIREN weights (Sitzmann et al., NeurIPS 2020, Sec. 3.2): U(+-1/fan_in) in the first layer,
    U(+-sqrt(6/fan_in)/omega) after it."""
    lim = 1.0 / fan_in if first else math.sqrt(6.0 / fan_in) / omega

    def init(key, shape, dtype):
        return jax.random.uniform(key, shape, dtype, -lim, lim)

    return init


class FilmINR(eqx.Module):
    """D2SA's MR-INR (``models/inr.py``, ``models/prompt.py``): Gaussian Fourier features
    ``psi(x) = [sin 2 pi B x, cos 2 pi B x]`` of the pixel coordinates ``x`` in [0, 1]^2 (Tancik et
    al., NeurIPS 2020; ``B`` fixed, entries N(0, scale^2)) concatenated with a slice latent ``z``,
    a SIREN trunk of ``depth`` sine layers ``sin(omega (W h + b))``, and two linear heads: FiLM
    ``(gamma, beta)`` per pixel and channel of the last decoder block, and a complex INR image
    ``u``. ``gamma="residual"`` is ``1 + Delta gamma`` with the FiLM head zero-initialised
    (identity at initialisation); ``"raw"`` the code's ``gamma`` from a SIREN-initialised head.
    """

    B: jax.Array
    layers: tuple
    film: nn.Linear
    image: nn.Linear
    omega: float = eqx.field(static=True)
    gamma: str = eqx.field(static=True)

    def __init__(
        self,
        channels,
        latent_dim=16,
        *,
        width=32,
        depth=3,
        n_freq=32,
        scale=4.0,
        omega=30.0,
        gamma="residual",
        key,
    ):
        channels = check_int(channels, "channels", lower=1, upper=1024)
        latent_dim = check_int(latent_dim, "latent_dim", lower=1, upper=4096)
        width = check_int(width, "width", lower=1, upper=4096)
        depth = check_int(depth, "depth", lower=1, upper=16)
        n_freq = check_int(n_freq, "n_freq", lower=1, upper=4096)
        scale = check_scalar(scale, "scale", lower=0.0, upper=1e3, closed="neither")
        self.omega = check_scalar(omega, "omega", lower=1e-3, upper=1e3)
        self.gamma = check_choice(gamma, "gamma", ("residual", "raw"))
        check_key(key)
        ks = jax.random.split(key, depth + 3)
        self.B = scale * jax.random.normal(ks[0], (n_freq, 2), DTYPE)
        sizes = [2 * n_freq + latent_dim] + [width] * depth
        self.layers = tuple(
            nn.Linear(a, b, init=_siren_init(a, self.omega, i == 0), dtype=DTYPE, key=k)
            for i, (a, b, k) in enumerate(zip(sizes[:-1], sizes[1:], ks[1:], strict=False))
        )
        hidden = _siren_init(width, self.omega, False)
        film = nn.Linear(width, 2 * channels, init=hidden, dtype=DTYPE, key=ks[-2])
        if self.gamma == "residual":
            film = eqx.tree_at(lambda f: (f.weight, f.bias), film, replace_fn=jnp.zeros_like)
        self.film = film
        self.image = nn.Linear(width, 2, init=hidden, dtype=DTYPE, key=ks[-1])

    def __call__(self, z, shape):
        """``(gamma, beta)`` of shape ``(..., C, H, W)`` and the INR image ``(..., H, W)`` for
        latents ``z (..., latent_dim)`` on the grid ``shape``."""
        h, w = shape
        yy, xx = jnp.meshgrid(
            jnp.arange(h, dtype=DTYPE) / h, jnp.arange(w, dtype=DTYPE) / w, indexing="ij"
        )
        proj = 2 * jnp.pi * (jnp.stack([xx, yy], axis=-1) @ self.B.T)  # (H, W, F)
        psi = jnp.concatenate([jnp.sin(proj), jnp.cos(proj)], axis=-1)
        lead = z.shape[:-1]
        zz = jnp.broadcast_to(z[..., None, None, :], (*lead, h, w, z.shape[-1]))
        a = jnp.concatenate([jnp.broadcast_to(psi, (*lead, *psi.shape)), zz], axis=-1)
        for layer in self.layers:
            a = jnp.sin(self.omega * layer(a))
        gb = jnp.moveaxis(self.film(a), -1, -3)  # (..., 2C, H, W)
        gamma, beta = jnp.split(gb, 2, axis=-3)
        if self.gamma == "residual":
            gamma = 1 + gamma
        img = self.image(a)
        return gamma, beta, img[..., 0] + 1j * img[..., 1]


class D2SAModel(eqx.Module):
    """A U-Net with FiLM from a :class:`FilmINR` on its last decoder block and one latent per
    slice (``latents (S, latent_dim)``, init N(0, 0.01^2), D2SA ``models/prompt.py``)."""

    unet: UNet
    inr: FilmINR
    latents: jax.Array

    def __call__(self, x, z):
        """Complex reconstruction ``(..., H, W)`` and INR image for inputs ``x (..., 2, H, W)``
        and latents ``z (..., latent_dim)``."""
        gamma, beta, u = self.inr(z, x.shape[-2:])
        return to_complex(self.unet(x, film=(gamma, beta))), u


def init_d2sa(unet, n_slices, *, latent_dim=16, gamma="residual", key, **inr_options):
    """A :class:`D2SAModel` around ``unet`` with ``n_slices`` latents."""
    check_instance(unet, "unet", UNet)
    n_slices = check_int(n_slices, "n_slices", lower=1, upper=10_000)
    latent_dim = check_int(latent_dim, "latent_dim", lower=1, upper=4096)
    check_key(key)
    kinr, kz = jax.random.split(key)
    channels = unet.head.weight.shape[1]
    inr = FilmINR(channels, latent_dim, gamma=gamma, key=kinr, **inr_options)
    z = 0.01 * jax.random.normal(kz, (n_slices, latent_dim), DTYPE)
    return D2SAModel(unet, inr, z)


def with_diffusion(model, *, nonlinearity="perona_malik", zero_init=True, ratio=4, key):
    """``model`` (a :class:`D2SAModel`) with a :class:`DiffusionBlock` as the adapter of every
    U-Net conv block (D2SA stage 2, ``models/prompt.py``)."""
    blocks = model.unet.conv_blocks()
    check_key(key)
    keys = jax.random.split(key, len(blocks))
    adapters = tuple(
        DiffusionBlock(
            b.out_channels,
            ratio=min(ratio, b.out_channels),
            nonlinearity=nonlinearity,
            zero_init=zero_init,
            key=k,
        )
        for b, k in zip(blocks, keys, strict=True)
    )
    return eqx.tree_at(
        lambda m: tuple(b.adapter for b in m.unet.conv_blocks()),
        model,
        adapters,
        is_leaf=lambda x: x is None,
    )


# --- adaptation loops ----------------------------------------------------------------------


class Adapted(NamedTuple):
    """Outcome of a method on one patient: reconstructions ``recon (S, H, W)`` (complex),
    optimiser ``steps`` per slice ``(S,)`` (stage 2 or single-shot) and of stage 1 (``stage1``,
    0 without), held-out error curves ``val (S, T)`` and training-input PSNR curves
    ``psnr (S, T)`` (NaN after a slice stopped), and the per-slice mean FiLM scale ``gamma (S,)``
    (1 where no FiLM)."""

    recon: jax.Array
    steps: np.ndarray
    stage1: int
    val: np.ndarray
    psnr: np.ndarray
    gamma: np.ndarray


@eqx.filter_jit
def _early_stopped(trainable, frozen, lr, data, target, max_iters, window, inr_weight):
    """Per-slice Adam on the relative-l1 self-supervised loss with self-validation early
    stopping: a ``lax.while_loop`` of single :func:`nn.fit` steps (the held-out error and PSNR
    recorded as its aux), one slice after another (``lax.map``; each slice adapts its own copy,
    and unbatched convolutions keep XLA off grouped convolutions).

    ``data = (y, masks, z)`` with a slice axis; ``z`` None for a plain U-Net. Returns the final
    trainable halves, iterations, held-out error and PSNR curves. ``lr`` and ``inr_weight`` are
    traced (arrays), so one program serves every framework and learning rate; ``max_iters`` and
    ``window`` set buffer and slice sizes and are static.
    """
    opt = optax.adam(lr)

    def predict(model, x, z):
        if z is None:
            return to_complex(model(x)), None
        return model(x, z)

    def one(y, masks, z, ref):
        x_in = _inputs(y, masks.m_in)

        def loss(model, _):
            xh, u = predict(model, x_in, z)
            k = _fft2c(xh)
            total = _rel_l1(k, y, masks.m_loss)
            if u is not None:
                total = total + inr_weight * _rel_l1(_fft2c(u), y, masks.m_inr)
            return total, (_rel_l1(k, y, masks.m_val), _psnr(jnp.abs(xh), jnp.abs(ref)))

        def body(state):
            t, tr, os, errs, ps, _ = state
            tr, os, (_, (val, p)) = nn.fit(
                loss, opt, tr, frozen=frozen, opt_state=os, length=1, has_aux=True
            )
            errs, ps = errs.at[t].set(val[0]), ps.at[t].set(p[0])
            return t + 1, tr, os, errs, ps, _should_stop(errs, t + 1, window)

        def cond(state):
            return (state[0] < max_iters) & ~state[5]

        buf = jnp.full((max_iters,), jnp.nan, DTYPE)
        init = (0, trainable, opt.init(trainable), buf, buf, False)
        t, tr, _, errs, ps, _ = jax.lax.while_loop(cond, body, init)
        xh, _ = predict(eqx.combine(tr, frozen), _inputs(y, masks.m_full), z)
        return xh, t, errs, ps

    y, masks, z = data
    return jax.lax.map(lambda args: one(*args), (y, masks, z, target))


def no_adaptation(unet, y, mask):
    """B0: the frozen network on the zero-filled acquired data ``y (S, H, W)`` (mask ``(H, W)``)."""
    _patient(unet, y, mask)
    return to_complex(unet(_inputs(_c(y), _r(mask))))


def single_shot(unet, y, mask, target, *, ssl="dc", lr=None, max_iters=300, window=None, key):
    """B1, single-shot test-time training (Darestani et al. 2022; D2SA's anchor): for each slice
    a copy of the whole network trained by Adam at ``lr`` on the self-supervised loss ``ssl``
    (:func:`ssl_masks`) with self-validation early stopping (window ``window``, at most
    ``max_iters`` iterations; defaults :data:`LR_SINGLE_SHOT`, :data:`WINDOW`). ``target`` is used
    only to record PSNR curves."""
    lr = LR_SINGLE_SHOT if lr is None else check_scalar(lr, "lr", lower=0.0, upper=1.0)
    window = WINDOW if window is None else window
    _patient(unet, y, mask, _required(target, "target"))
    s = np.shape(y)[0]
    y, target = _c(y), _c(target)
    masks = ssl_masks(mask, s, ssl, key=key)
    tr, fr = nn.split(unet)
    xh, t, errs, ps = _early_stopped(
        tr, fr, _r(lr), (y, masks, None), target, _iters(max_iters), _window(window, max_iters),
        _r(0.0),
    )  # fmt: skip
    return Adapted(xh, np.asarray(t), 0, np.asarray(errs), np.asarray(ps), np.ones(s))


def _iters(v):
    return check_int(v, "max_iters", lower=1, upper=100_000)


def _window(v, max_iters):
    """The early-stopping window: at most ``max_iters`` (the error curve it averages over)."""
    w = check_int(v, "window", lower=1, upper=10_000)
    if w > _iters(max_iters):
        raise ValueError(f"`window` must be at most max_iters = {max_iters}; got {w}.")
    return w


def _stage1_loss(model, batch, *, key=None):
    """D2SA stage-1 loss on a mini-batch of slices (``engine/adapt.py``): relative l1 of the
    FiLM-modulated reconstruction on the loss mask, of the INR image on the acquired mask, and
    the latent prior ``lambda/sigma^2 mean_b |z_b|^2`` with ``lambda/sigma^2 = 1``."""
    y, masks, idx, prior = batch
    z = model.latents[idx]
    xh, u = model(_inputs(y, masks.m_in), z)
    data = _rel_l1(_fft2c(xh), y, masks.m_loss) + _rel_l1(_fft2c(u), y, masks.m_full)
    return data + prior * jnp.mean(jnp.sum(z**2, axis=-1))


@eqx.filter_jit
def _stage1(model, mask_tree, y, masks, order, lr_latent, lr_model):
    """Stage 1 by :func:`nn.fit` over the mini-batches ``order (steps, batch)`` (Adam;
    ``lr_latent`` on the latents, ``lr_model`` on the rest)."""

    def labels(params):
        lab = jax.tree.map(lambda _: "model", params)
        return eqx.tree_at(lambda m: m.latents, lab, "latent")

    opt = optax.multi_transform(
        {"latent": optax.adam(lr_latent), "model": optax.adam(lr_model)}, labels
    )
    tr, fr = eqx.partition(model, mask_tree)

    def loss(model, idx):
        return _stage1_loss(model, (y[idx], jax.tree.map(lambda a: a[idx], masks), idx, 1.0))

    tr, _, losses = nn.fit(loss, opt, tr, order, frozen=fr)
    return eqx.combine(tr, fr), losses


def d2sa(
    unet,
    y,
    mask,
    target,
    *,
    ssl="dc",
    epochs=10,
    batch=2,
    lr_latent=None,
    lr_model=None,
    lr_stage2=None,
    max_iters=300,
    window=None,
    stage2=True,
    train_unet_stage1=True,
    gamma="residual",
    nonlinearity="perona_malik",
    de_init="zero",
    key,
):
    """D2SA on one patient's slices ``y (S, H, W)`` acquired with ``mask (H, W)``.

    Stage 1 (``docs/papers/d2sa.md#mechanism-of-the-official-code``): a :class:`D2SAModel` (FiLM INR
    with one latent per slice)
    fitted on all slices for ``epochs`` shuffled passes of mini-batches of ``batch`` slices
    (Adam, ``lr_latent`` / ``lr_model``); the U-Net trains too when ``train_unet_stage1`` (the
    code). Stage 2 (Sec. 2.3, when ``stage2``): per slice, :class:`DiffusionBlock` adapters on
    every conv block whose convolutions are frozen; trainable: adapters, INR (not ``B``),
    transpose convs and the output conv; the slice latent fixed; Adam ``lr_stage2`` with
    self-validation early stopping; the INR-image term is dropped for ``ssl="ssdu"`` (the code).
    ``target`` is used only to record PSNR curves. Learning rates and window default to
    :data:`LR_LATENT`, :data:`LR_MODEL`, :data:`LR_STAGE2`, :data:`WINDOW`.
    """
    lr_latent = LR_LATENT if lr_latent is None else lr_latent
    lr_model = LR_MODEL if lr_model is None else lr_model
    lr_stage2 = LR_STAGE2 if lr_stage2 is None else lr_stage2
    window = WINDOW if window is None else window
    _patient(unet, y, mask, _required(target, "target"))
    check_key(key)
    s = np.shape(y)[0]
    y, target, mask = _c(y), _c(target), _r(mask)
    ssl = check_choice(ssl, "ssl", SSL)
    epochs = check_int(epochs, "epochs", lower=0, upper=10_000)
    batch = check_int(batch, "batch", lower=1, upper=s)
    for v, name in ((lr_latent, "lr_latent"), (lr_model, "lr_model"), (lr_stage2, "lr_stage2")):
        check_scalar(v, name, lower=0.0, upper=1.0)
    stage2 = check_bool(stage2, "stage2")
    train_unet_stage1 = check_bool(train_unet_stage1, "train_unet_stage1")
    de_init = check_choice(de_init, "de_init", ("zero", "default"))
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    model = init_d2sa(unet, s, gamma=gamma, key=k1)
    masks1 = ssl_masks(mask, s, ssl, key=k2, holdout=0.0)
    mask_tree = jax.tree.map(eqx.is_inexact_array, model)
    mask_tree = eqx.tree_at(lambda m: m.inr.B, mask_tree, False)
    if not train_unet_stage1:
        mask_tree = eqx.tree_at(lambda m: m.unet, mask_tree, replace_fn=_all_false)
    steps1 = epochs * (s // batch)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(k3)).ravel().tolist())
    order = np.concatenate(
        [rng.permutation(s)[: (s // batch) * batch].reshape(-1, batch) for _ in range(epochs)]
        or [np.zeros((0, batch), int)]
    )
    if steps1:
        model, _ = _stage1(model, mask_tree, y, masks1, jnp.asarray(order), lr_latent, lr_model)
    gam = np.asarray(jnp.mean(model.inr(model.latents, y.shape[-2:])[0], axis=(-3, -2, -1)))
    if not stage2:
        xh, _ = model(_inputs(y, mask), model.latents)
        return Adapted(xh, np.zeros(s, int), steps1, np.zeros((s, 0)), np.zeros((s, 0)), gam)
    model = with_diffusion(model, nonlinearity=nonlinearity, zero_init=de_init == "zero", key=k4)
    tmask = jax.tree.map(eqx.is_inexact_array, model)
    tmask = eqx.tree_at(
        lambda m: (
            *(b.conv1 for b in m.unet.conv_blocks()),
            *(b.conv2 for b in m.unet.conv_blocks()),
            m.inr.B,
            m.latents,
        ),
        tmask,
        replace_fn=_all_false,
    )
    tr, fr = eqx.partition(model, tmask)
    z = model.latents
    masks2 = ssl_masks(mask, s, ssl, key=k5)
    xh, t, errs, ps = _early_stopped(
        tr,
        fr,
        _r(lr_stage2),
        (y, masks2, z),
        target,
        _iters(max_iters),
        _window(window, max_iters),
        _r(0.0 if ssl == "ssdu" else 1.0),
    )
    return Adapted(xh, np.asarray(t), steps1, np.asarray(errs), np.asarray(ps), gam)


def _all_false(node):
    return jax.tree.map(lambda _: False, node)
