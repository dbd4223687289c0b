"""A small batch-native U-Net for image reconstruction (the fastMRI U-Net of Ronneberger et al.,
MICCAI 2015, as built by Zbontar et al. 2018, arXiv 1811.08839, ``fastmri/models/unet.py``; the
backbone of Darestani et al., ICML 2022, and of D2SA, Zhang et al., NeurIPS 2025,
arXiv 2503.20815).

Every module acts on arrays ``(..., C, H, W)`` with arbitrary leading batch axes:

* :class:`Conv2d` -- ``k x k`` convolution with zero "same" padding (``lax.conv_general_dilated``);
* :class:`ConvBlock` -- two ``3 x 3`` convolutions without bias, each followed by instance norm
  (no affine) and LeakyReLU(0.2); an optional ``adapter`` module adds a residual ``adapter(u)`` to
  the block's output ``u`` (the slot test-time adapters use; None for the plain block);
* :class:`TransposeConvBlock` -- ``2 x 2`` stride-2 transposed convolution without bias,
  instance norm, LeakyReLU(0.2);
* :class:`UNet` -- ``pools`` average-pool down steps with channels doubling from ``channels``, a
  bottleneck block, transpose-conv up steps with skip concatenation, and a ``1 x 1`` output conv
  with bias. ``UNet.features`` returns the last decoder block's output and ``UNet.__call__``
  takes an optional per-pixel FiLM ``(gamma, beta)`` applied to it before the output conv (the
  place D2SA modulates).

Dropout is left out (the fastMRI default ``drop_prob = 0`` in D2SA's runner).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from _core.validation import as_array, check_bool, check_int, check_key, check_scalar

from ._layers import default_float, uniform_fan_in

__all__ = ["Conv2d", "ConvBlock", "TransposeConvBlock", "UNet", "instance_norm"]

_SLOPE = 0.2  # LeakyReLU negative slope of the fastMRI ConvBlock
_EPS = 1e-5  # torch.nn.InstanceNorm2d default
_MAX_CHANNELS = 4096


def _image(x, c=None):
    """``x`` validated as a real, finite ``(..., C, H, W)`` array (values checked when concrete)."""
    as_array(x, "x")
    x = jnp.asarray(x)
    if x.ndim < 3 or (c is not None and x.shape[-3] != c):
        want = f"(..., {c}, H, W)" if c is not None else "(..., C, H, W)"
        raise ValueError(f"`x` must have shape {want}; got shape {tuple(x.shape)}.")
    return x


def instance_norm(x, eps=_EPS):
    """Per-sample, per-channel normalisation over the last two axes: ``(x - mean)/sqrt(var + eps)``
    with the biased variance (``torch.nn.InstanceNorm2d``, affine off; Ulyanov et al. 2016).

    Examples
    --------
    >>> y = instance_norm(jnp.arange(8.0).reshape(1, 2, 2, 2))  # two channels of 2 x 2
    >>> bool(jnp.allclose(y.mean(axis=(-2, -1)), 0.0, atol=1e-6)), round(float(y.std()), 3)
    (True, 1.0)
    """
    x = _image(x)
    eps = check_scalar(eps, "eps", lower=0.0, upper=1.0, closed="right")
    mean = jnp.mean(x, axis=(-2, -1), keepdims=True)
    var = jnp.var(x, axis=(-2, -1), keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps)


def _flat(x, c):
    """``x (..., C, H, W)`` as ``(N, C, H, W)`` and the leading shape."""
    x = _image(x, c)
    return x.reshape((-1, *x.shape[-3:])), x.shape[:-3]


class Conv2d(eqx.Module):
    """``k x k`` convolution, zero padding to keep ``(H, W)`` (odd ``k``), weight
    ``(out, in, k, k)`` and optional bias, both initialised U(+-1/sqrt(in k^2)) (PyTorch's
    default)."""

    weight: jax.Array
    bias: jax.Array | None

    def __init__(self, in_channels, out_channels, kernel_size=3, use_bias=True, *, dtype=None, key):
        in_channels = check_int(in_channels, "in_channels", lower=1, upper=_MAX_CHANNELS)
        out_channels = check_int(out_channels, "out_channels", lower=1, upper=_MAX_CHANNELS)
        k = check_int(kernel_size, "kernel_size", lower=1, upper=15)
        use_bias = check_bool(use_bias, "use_bias")
        if k % 2 == 0:
            raise ValueError(f"`kernel_size` must be odd; got {k}.")
        dtype = default_float(dtype)
        check_key(key)
        init = uniform_fan_in(in_channels * k * k)
        wk, bk = jax.random.split(key)
        self.weight = init(wk, (out_channels, in_channels, k, k), dtype)
        self.bias = init(bk, (out_channels,), dtype) if use_bias else None

    def __call__(self, x, *, key=None):
        xf, lead = _flat(x, self.weight.shape[1])
        y = jax.lax.conv_general_dilated(
            xf, self.weight, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        if self.bias is not None:
            y = y + self.bias[:, None, None]
        return y.reshape((*lead, *y.shape[1:]))


class ConvBlock(eqx.Module):
    """Two (conv3x3 no bias, instance norm, LeakyReLU 0.2) layers (fastMRI ``ConvBlock``), then
    ``u + adapter(u)`` when an ``adapter`` module is set."""

    conv1: Conv2d
    conv2: Conv2d
    adapter: eqx.Module | None = None

    def __init__(self, in_channels, out_channels, *, dtype=None, key):
        check_int(in_channels, "in_channels", lower=1, upper=_MAX_CHANNELS)
        check_int(out_channels, "out_channels", lower=1, upper=_MAX_CHANNELS)
        check_key(key)
        k1, k2 = jax.random.split(key)
        self.conv1 = Conv2d(in_channels, out_channels, 3, False, dtype=dtype, key=k1)
        self.conv2 = Conv2d(out_channels, out_channels, 3, False, dtype=dtype, key=k2)
        self.adapter = None

    @property
    def out_channels(self):
        return self.conv2.weight.shape[0]

    def __call__(self, x, *, key=None):
        x = jax.nn.leaky_relu(instance_norm(self.conv1(x)), _SLOPE)
        u = jax.nn.leaky_relu(instance_norm(self.conv2(x)), _SLOPE)
        # eqx.Module declares no __call__; the adapter module defines one
        return u if self.adapter is None else u + self.adapter(u)  # pyright: ignore[reportCallIssue]


class TransposeConvBlock(eqx.Module):
    """``2 x 2`` stride-2 transposed convolution without bias (non-overlapping, so
    ``y[o, 2i + a, 2j + b] = sum_c x[c, i, j] W[c, o, a, b]``), instance norm, LeakyReLU 0.2
    (fastMRI ``TransposeConvBlock``)."""

    weight: jax.Array

    def __init__(self, in_channels, out_channels, *, dtype=None, key):
        in_channels = check_int(in_channels, "in_channels", lower=1, upper=_MAX_CHANNELS)
        out_channels = check_int(out_channels, "out_channels", lower=1, upper=_MAX_CHANNELS)
        check_key(key)
        init = uniform_fan_in(out_channels * 4)  # PyTorch's fan_in of a transposed conv weight
        self.weight = init(key, (in_channels, out_channels, 2, 2), default_float(dtype))

    def __call__(self, x, *, key=None):
        xf, lead = _flat(x, self.weight.shape[0])
        n, _, h, w = xf.shape
        y = jnp.einsum("ncij,coab->noiajb", xf, self.weight).reshape(n, -1, 2 * h, 2 * w)
        y = jax.nn.leaky_relu(instance_norm(y), _SLOPE)
        return y.reshape((*lead, *y.shape[1:]))


def _pool(x):
    """2 x 2 average pooling of the last two axes (even sizes)."""
    *lead, h, w = x.shape
    return x.reshape(*lead, h // 2, 2, w // 2, 2).mean(axis=(-3, -1))


class UNet(eqx.Module):
    """fastMRI-style U-Net ``(..., in_channels, H, W) -> (..., out_channels, H, W)``; ``H`` and
    ``W`` must be divisible by ``2**pools``.

    ``down[i]`` has ``channels * 2**i`` output channels, the bottleneck ``channels * 2**pools``;
    ``up_t[i]`` halves the channels and doubles the size, ``up_c[i]`` merges the skip. The last
    decoder block ``up_c[-1]`` outputs ``channels`` features that ``head`` (1x1 conv with bias)
    maps to the output.
    """

    down: tuple
    bottleneck: ConvBlock
    up_t: tuple
    up_c: tuple
    head: Conv2d

    def __init__(self, in_channels=2, out_channels=2, channels=8, pools=2, *, dtype=None, key):
        in_channels = check_int(in_channels, "in_channels", lower=1, upper=64)
        out_channels = check_int(out_channels, "out_channels", lower=1, upper=64)
        channels = check_int(channels, "channels", lower=1, upper=256)
        pools = check_int(pools, "pools", lower=1, upper=6)
        check_key(key)
        keys = iter(jax.random.split(key, 3 * pools + 2))
        ch = [channels * 2**i for i in range(pools + 1)]
        self.down = tuple(
            ConvBlock(in_channels if i == 0 else ch[i - 1], ch[i], dtype=dtype, key=next(keys))
            for i in range(pools)
        )
        self.bottleneck = ConvBlock(ch[pools - 1], ch[pools], dtype=dtype, key=next(keys))
        self.up_t = tuple(
            TransposeConvBlock(ch[i + 1], ch[i], dtype=dtype, key=next(keys))
            for i in reversed(range(pools))
        )
        self.up_c = tuple(
            ConvBlock(2 * ch[i], ch[i], dtype=dtype, key=next(keys)) for i in reversed(range(pools))
        )
        self.head = Conv2d(channels, out_channels, 1, True, dtype=dtype, key=next(keys))

    @property
    def pools(self):
        return len(self.down)

    def conv_blocks(self):
        """Every :class:`ConvBlock` (down, bottleneck, up): a ``where`` for ``eqx.tree_at``."""
        return (*self.down, self.bottleneck, *self.up_c)

    def _check(self, x):
        x = _image(x, self.down[0].conv1.weight.shape[1])
        f = 2**self.pools
        if x.shape[-1] % f or x.shape[-2] % f:
            raise ValueError(
                f"`x`'s last two axes must be divisible by 2**pools = {f}; got {tuple(x.shape)}."
            )
        return x

    def features(self, x):
        """Output ``(..., channels, H, W)`` of the last decoder block."""
        x = self._check(x)
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = _pool(x)
        x = self.bottleneck(x)
        for up, block, skip in zip(self.up_t, self.up_c, reversed(skips), strict=True):
            x = block(jnp.concatenate([up(x), skip], axis=-3))
        return x

    def __call__(self, x, *, film=None, key=None):
        """``head(gamma * phi + beta)`` with ``phi = features(x)``; ``film = (gamma, beta)``
        broadcastable to ``phi`` (per pixel and channel), or None for ``head(phi)``."""
        phi = self.features(x)
        if film is not None:
            gamma, beta = film
            phi = gamma * phi + beta
        return self.head(phi)
