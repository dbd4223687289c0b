"""The shape-sharing devices of the Uni-LoRA claim train exactly as the models they stand for:
rank-r LoRA as masked rank-4 LoRA (``lora_rank``) and Uni-LoRA with a zero-padded vector
(``pad_theta``), both derived in ``paper_checks/adapters/unilora.py``."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
import nn.adapters as ad
from paper_checks.adapters._base import fit, xent
from paper_checks.adapters.unilora import lora_rank, pad_theta

X = jax.random.normal(jax.random.key(1), (64, 6))
Y = jax.random.randint(jax.random.key(2), (64,), 0, 4)
BASE = nn.MLP(6, 4, 8, 2, activation=jax.nn.relu, key=jax.random.key(0))


TOL = 1e-9  # float64 round-off (sums in another order) grown over 60 steps; a leak would be O(1)


def _train(model):
    return fit(model, lambda m: jnp.mean(xent(m(X), Y)), optax.adamw(3e-2, weight_decay=0.1), 60)[0]


def test_masked_lora_trains_as_rank_r_lora():
    big = lora_rank(ad.inject(BASE, "lora", key=jax.random.key(3), r=4, alpha=8.0), 2)
    small = ad.inject(BASE, "lora", key=jax.random.key(3), r=2, alpha=4.0)
    small = eqx.tree_at(
        lambda m: [la.A for la in m.layers().values()],
        small,
        [la.A[:2] for la in big.layers().values()],
    )
    big, small = _train(big), _train(small)
    np.testing.assert_allclose(big(X), small(X), rtol=TOL, atol=TOL)
    for la in big.layers().values():
        assert not np.any(np.asarray(la.A[2:])) and not np.any(np.asarray(la.B[:, 2:]))
    # the head alone: r = 0 leaves every update exactly 0
    inert = _train(lora_rank(ad.inject(BASE, "lora", key=jax.random.key(3), r=4, alpha=8.0), 0))
    np.testing.assert_array_equal(inert(X), BASE(X))


def test_padded_uni_lora_trains_as_uni_lora():
    small = ad.inject(BASE, "unilora", key=jax.random.key(4), r=2, d=5, seed=1)
    big = pad_theta(small, 9)
    assert big.shared["theta"].shape == (9,)
    big, small = _train(big), _train(small)
    np.testing.assert_allclose(big(X), small(X), rtol=TOL, atol=TOL)
    np.testing.assert_array_equal(big.shared["theta"][5:], 0.0)
    np.testing.assert_allclose(big.shared["theta"][:5], small.shared["theta"], rtol=TOL, atol=TOL)
