"""D2SA and the baselines: identity at initialisation, the stopping rule, the SSL masks, and one
short adaptation that lowers the self-supervised loss."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics.mri import tta
from dynamics.mri.physics import cartesian_mask
from nn.unet import UNet

KEY = jax.random.key(0)
SHAPE = (8, 8)


@pytest.fixture(scope="module")
def unet():
    return UNet(2, 2, 4, 2, dtype=tta.DTYPE, key=KEY)


def _x(s=3):
    return jax.random.normal(jax.random.key(1), (s, 2, *SHAPE), tta.DTYPE)


@eqx.filter_jit
def _both(model, unet, x):
    return model(x, model.latents)[0], tta.to_complex(unet(x))


def test_d2sa_at_initialisation_is_the_frozen_network(unet):
    """gamma = 1 + 0, beta = 0 and zero-initialised diffusion outputs: bit-for-bit the U-Net."""
    model = tta.init_d2sa(unet, 3, key=jax.random.key(2))
    model = tta.with_diffusion(model, key=jax.random.key(3))
    got, want = _both(model, unet, _x())
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_code_variants_do_not_start_at_identity(unet):
    """The code's raw gamma head and default-initialised diffusion output move the output at
    iteration 0 (``docs/papers/d2sa.md#departures-and-why``)."""
    raw = tta.init_d2sa(unet, 3, gamma="raw", key=jax.random.key(2))
    got, want = _both(raw, unet, _x())
    assert float(jnp.max(jnp.abs(got - want))) > 1e-2
    de = tta.with_diffusion(tta.init_d2sa(unet, 3, key=KEY), zero_init=False, key=KEY)
    got, want = _both(de, unet, _x())
    assert float(jnp.max(jnp.abs(got - want))) > 1e-4


NAMES = ("cd", "ad", "hd", "vd", "vanilla")


def test_diffusion_kernel_branches():
    """Central and angular difference kernels sum to zero (they act on differences), the
    horizontal one is antisymmetric across columns; the flux is g / (1 + (g/K)^2)."""
    blk = tta.DiffusionBlock(4, ratio=2, key=KEY)
    z = jnp.zeros_like(blk.cd)
    only = lambda **kw: eqx.tree_at(  # noqa: E731
        lambda b: (b.cd, b.ad, b.hd, b.vd, b.vanilla),
        blk,
        tuple(
            kw.get(n, jnp.zeros_like(getattr(blk, n))) for n in ("cd", "ad", "hd", "vd", "vanilla")
        ),
    ).kernel()
    np.testing.assert_allclose(only(cd=blk.cd).sum(axis=(-2, -1)), 0, atol=1e-6)
    np.testing.assert_allclose(only(ad=blk.ad).sum(axis=(-2, -1)), 0, atol=1e-6)
    h = only(hd=blk.hd)
    np.testing.assert_array_equal(h[..., 0], -h[..., 2])
    assert z.shape == blk.cd.shape
    g = jnp.linspace(-3, 3, 7, dtype=tta.DTYPE)
    np.testing.assert_allclose(blk.flux(g), g / (1 + g**2), rtol=1e-6)


def test_identity_flux_is_traced_one_program():
    """The identity ablation's flux is exactly ``g`` and is a traced flag, not a static field:
    both variants have one tree structure (one compiled adaptation program, issue 46), and the
    flag is not an inexact array (never trained)."""
    pm = tta.DiffusionBlock(4, ratio=2, key=KEY)
    ident = tta.DiffusionBlock(4, ratio=2, nonlinearity="identity", key=KEY)
    g = jnp.linspace(-3, 3, 7, dtype=tta.DTYPE)
    np.testing.assert_array_equal(ident.flux(g), g)
    assert (pm.nonlinearity, ident.nonlinearity) == ("perona_malik", "identity")
    assert jax.tree.structure(pm) == jax.tree.structure(ident)
    assert not eqx.is_inexact_array(ident.identity)
    grad = eqx.filter_grad(lambda b: jnp.sum(b.flux(g) ** 2))(ident)
    assert float(grad.K) == 0.0


def test_stop_iteration_rule():
    e = np.r_[np.linspace(1, 0.5, 30), np.linspace(0.5, 0.9, 30)]
    t = tta.stop_iteration(e, 5)
    # the first t >= 3w = 15 with mean(e[t-5:t]) > mean(e[t-10:t-5]); e turns up at index 30
    assert 31 <= t <= 40 and e[t - 5 : t].mean() > e[t - 10 : t - 5].mean()
    assert all(e[u - 5 : u].mean() <= e[u - 10 : u - 5].mean() for u in range(15, t))
    assert tta.stop_iteration(np.linspace(1, 0, 50), 5) == 50
    errs = jnp.asarray(np.r_[e, np.zeros(10)], tta.DTYPE)
    assert bool(tta._should_stop(errs, t, 5)) and not bool(tta._should_stop(errs, t - 1, 5))


@pytest.mark.parametrize("ssl", tta.SSL)
def test_ssl_masks_partition_the_acquired_set(ssl):
    mask = cartesian_mask((16, 16), 2.0, 0.25, key=KEY)
    m = tta.ssl_masks(mask, 2, ssl, key=KEY)
    acquired = np.asarray(mask)
    assert np.all(np.asarray(m.m_val) * np.asarray(m.m_inr) == 0)
    np.testing.assert_array_equal(
        np.asarray(m.m_val + m.m_inr), np.broadcast_to(acquired, (2, 16, 16))
    )
    assert np.all(np.asarray(m.m_in) <= np.asarray(m.m_inr))
    if ssl == "ssdu":
        assert np.all(np.asarray(m.m_in * m.m_loss) == 0)
        np.testing.assert_array_equal(np.asarray(m.m_in + m.m_loss), np.asarray(m.m_inr))
    n_val = np.asarray(m.m_val).sum(axis=(-2, -1))
    np.testing.assert_array_equal(n_val, np.floor(0.05 * acquired.sum()))


def test_bad_input(unet):
    y = jnp.ones((2, *SHAPE), tta.CDTYPE)
    mask = jnp.ones(SHAPE)
    with pytest.raises(ValueError, match="`y` must hold acquired signal"):
        tta.single_shot(unet, 0 * y, mask, y, key=KEY)
    with pytest.raises(ValueError, match="ssl"):
        tta.single_shot(unet, y, mask, y, ssl="n3n", key=KEY)
    with pytest.raises(ValueError, match="window"):
        tta.stop_iteration(np.ones(5), 0)
    with pytest.raises(ValueError, match="holdout"):
        tta.ssl_masks(mask, 2, "dc", key=KEY, holdout=0.7)
