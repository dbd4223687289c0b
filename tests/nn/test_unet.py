"""The batch-native U-Net: layers against explicit formulas, batching, FiLM and bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nn.unet import Conv2d, ConvBlock, TransposeConvBlock, UNet, instance_norm

KEY = jax.random.key(0)


@eqx.filter_jit
def _call(module, x, film=None):
    """One compiled call (eager op-by-op dispatch of a U-Net is slow on CPU)."""
    return module(x) if film is None else module(x, film=film)


def test_conv2d_is_a_zero_padded_cross_correlation():
    conv = Conv2d(2, 3, 3, True, key=KEY)
    x = np.asarray(jax.random.normal(jax.random.key(1), (2, 5, 6)))
    w, b = np.asarray(conv.weight), np.asarray(conv.bias)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    want = np.empty((3, 5, 6))
    for o in range(3):
        for i in range(5):
            for j in range(6):
                want[o, i, j] = np.sum(w[o] * xp[:, i : i + 3, j : j + 3]) + b[o]
    got = np.asarray(_call(conv, jnp.asarray(x)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_transpose_conv_formula():
    """``y[o, 2i+a, 2j+b] = sum_c x[c, i, j] W[c, o, a, b]`` before the norm and activation."""
    block = TransposeConvBlock(3, 2, key=KEY)
    x = np.asarray(jax.random.normal(jax.random.key(2), (3, 4, 5)))
    w = np.asarray(block.weight)
    pre = np.zeros((2, 8, 10))
    for a in range(2):
        for b in range(2):
            pre[:, a::2, b::2] = np.einsum("cij,co->oij", x, w[:, :, a, b])
    want = np.asarray(jax.jit(lambda p: jax.nn.leaky_relu(instance_norm(p), 0.2))(pre))
    got = np.asarray(_call(block, jnp.asarray(x)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_instance_norm_moments():
    x = jax.random.normal(jax.random.key(3), (2, 3, 6, 7)) * 5 + 2
    y = np.asarray(jax.jit(instance_norm)(x))
    var = np.var(np.asarray(x), axis=(-2, -1))
    np.testing.assert_allclose(y.mean(axis=(-2, -1)), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=(-2, -1)), var / (var + 1e-5), rtol=1e-12)


def test_unet_leading_axes_match_per_sample_calls():
    net = UNet(2, 2, 4, 2, dtype=jnp.float32, key=KEY)
    x = jax.random.normal(jax.random.key(4), (2, 3, 2, 8, 12), jnp.float32)
    out = _call(net, x)
    assert out.shape == x.shape and out.dtype == jnp.float32
    np.testing.assert_allclose(out[1, 2], _call(net, x[1, 2]), rtol=1e-5, atol=1e-5)


def test_unet_film_identity_and_affine():
    net = UNet(2, 2, 4, 2, key=KEY)
    x = jax.random.normal(jax.random.key(5), (2, 2, 8, 8))
    np.testing.assert_array_equal(_call(net, x, (1.0, 0.0)), _call(net, x))
    g, b = 1.7, 0.3
    phi = eqx.filter_jit(net.features)(x)
    np.testing.assert_allclose(_call(net, x, (g, b)), _call(net.head, g * phi + b), rtol=1e-12)


def test_conv_block_adapter_is_residual():
    block = ConvBlock(2, 3, key=KEY)
    x = jax.random.normal(jax.random.key(6), (2, 6, 6))
    conv = Conv2d(3, 3, 1, True, key=jax.random.key(7))
    adapted = ConvBlock.__new__(ConvBlock)
    object.__setattr__(adapted, "conv1", block.conv1)
    object.__setattr__(adapted, "conv2", block.conv2)
    object.__setattr__(adapted, "adapter", conv)
    u = _call(block, x)
    np.testing.assert_allclose(_call(adapted, x), u + _call(conv, u), rtol=1e-12)


def test_unet_bad_input():
    net = UNet(2, 2, 4, 2, key=KEY)
    with pytest.raises(ValueError, match="`x` must have shape"):
        net(jnp.zeros((3, 8, 8)))
    with pytest.raises(ValueError, match="divisible by 2\\*\\*pools"):
        net(jnp.zeros((2, 6, 8)))
    with pytest.raises(ValueError, match="channels"):
        UNet(2, 2, 0, 2, key=KEY)
    with pytest.raises(ValueError, match="kernel_size"):
        Conv2d(2, 2, 2, key=KEY)
