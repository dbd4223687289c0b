"""Ravan: exact federated aggregation, zero update at init, parameter count and rank."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nn
import nn.adapters as ad


def _mlp(seed=0):
    return nn.MLP(12, 6, 16, 1, activation=jax.nn.relu, key=jax.random.key(seed))


def test_ravan_zero_at_init_count_and_rank(randomise):
    a = ad.inject(_mlp(), "ravan", key=jax.random.key(1), r=2, heads=3)
    assert nn.count_params(a) == 2 * 3 * (4 + 1)
    for dw in ad.delta_weights(a).values():
        assert float(jnp.max(jnp.abs(dw))) == 0.0
    b = randomise(a, 2)
    for p, dw in ad.delta_weights(b).items():
        m, n = b.layers()[p].shape
        assert np.linalg.matrix_rank(np.asarray(dw), tol=1e-10) == min(2 * 3, m, n)


@pytest.mark.parametrize("seed", [0])
def test_ravan_server_average_equals_average_of_client_updates(seed, randomise):
    a = ad.inject(_mlp(), "ravan", key=jax.random.key(1), r=2, heads=3)
    clients = [randomise(a, 10 * seed + c) for c in range(4)]
    w = [0.1, 0.2, 0.3, 0.4]
    server = ad.ravan_aggregate(clients, w)
    for p, dw in ad.delta_weights(server).items():
        target = sum(wi * ad.delta_weights(c)[p] for wi, c in zip(w, clients, strict=True))
        np.testing.assert_allclose(dw, target, atol=1e-12 * float(jnp.max(jnp.abs(target))))


def test_lora_fedavg_is_not_the_average_update(randomise):
    a = ad.inject(_mlp(), "lora", key=jax.random.key(1), r=2)
    clients = [randomise(a, c) for c in range(3)]
    server = ad.fedavg(clients)
    p = "layers.0"
    avg_update = sum(ad.delta_weights(c)[p] for c in clients) / 3
    gap = float(jnp.max(jnp.abs(ad.delta_weights(server)[p] - avg_update)))
    assert gap > 1e-2 * float(jnp.max(jnp.abs(avg_update)))


def test_ravan_bad_input():
    with pytest.raises(ValueError, match="heads"):
        ad.inject(_mlp(), "ravan", key=jax.random.key(0), r=4, heads=4)  # 16 > min(6, 16)
    a = ad.inject(_mlp(), "lora", key=jax.random.key(0), r=2)
    with pytest.raises(ValueError, match="clients"):
        ad.ravan_aggregate([a, a])
    with pytest.raises(ValueError, match="weights"):
        ad.fedavg([a, a], [0.7, 0.7])
