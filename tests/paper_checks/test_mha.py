"""`mha.token_uniformity` helpers: the cosine, and the paired models of one init."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nn.hopfield import HopfieldBlock
from paper_checks.mha import TU, _tu_init, mean_cosine, token_cosines


def test_mean_cosine_is_one_for_equal_tokens_and_zero_for_orthogonal_ones():
    same = jnp.ones((3, 4))
    assert float(mean_cosine(same)) == pytest.approx(1.0)
    assert float(mean_cosine(jnp.eye(4))) == pytest.approx(0.0)


def test_token_cosines_runs_the_blocks_of_the_init_with_the_models_alphas():
    """The stacked leaves of :func:`_tu_init` rebuilt with a model's (alpha, alpha') are the
    blocks drawn from the init's key, run in order with the hidden state passed up."""
    key, depth = jax.random.key(3), 3
    x, params = _tu_init(key, depth)
    kb = jax.random.split(key, 4)[2]
    got = np.asarray(token_cosines(x, params, alpha=0.5, alpha_prime=0.5))
    y, h, want = x, None, [float(jnp.mean(mean_cosine(x)))]
    for k in jax.random.split(kb, depth):
        blk = HopfieldBlock(TU["d_model"], TU["num_heads"], alpha_prime=0.5, alpha=0.5, key=k)
        y, h = blk(y, h)
        want.append(float(jnp.mean(mean_cosine(y))))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # the weights do not depend on (alpha, alpha'): with h_1 = S_1 the first layer of MHA and of
    # its control (alpha' = 0) are the same map
    ctl = np.asarray(token_cosines(x, params, alpha=0.5, alpha_prime=0.0))
    np.testing.assert_array_equal(ctl[:2], got[:2])
    assert eqx.is_array(params[0]) and params[0].shape[0] == depth
