"""Ravan (exact federated aggregation, rank) and MoORE (identity at init, orthogonal experts)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nn
import nn.adapters as ad


def _mlp(seed=0):
    return nn.MLP(12, 6, 16, 1, activation=jax.nn.relu, key=jax.random.key(seed))


def _randomise(a, seed):
    tr, fr = nn.split(a)
    leaves, td = jax.tree.flatten(tr)
    ks = jax.random.split(jax.random.key(seed), len(leaves))
    leaves = [x + jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, ks, strict=True)]
    return nn.combine(jax.tree.unflatten(td, leaves), fr)


def test_ravan_zero_at_init_count_and_rank():
    a = ad.inject(_mlp(), "ravan", key=jax.random.key(1), r=2, heads=3)
    assert nn.count_params(a) == 2 * 3 * (4 + 1)
    for dw in ad.delta_weights(a).values():
        assert float(jnp.max(jnp.abs(dw))) == 0.0
    b = _randomise(a, 2)
    for p, dw in ad.delta_weights(b).items():
        m, n = b.layers()[p].shape
        assert np.linalg.matrix_rank(np.asarray(dw), tol=1e-10) == min(2 * 3, m, n)


@pytest.mark.parametrize("seed", [0])
def test_ravan_server_average_equals_average_of_client_updates(seed):
    a = ad.inject(_mlp(), "ravan", key=jax.random.key(1), r=2, heads=3)
    clients = [_randomise(a, 10 * seed + c) for c in range(4)]
    w = [0.1, 0.2, 0.3, 0.4]
    server = ad.ravan_aggregate(clients, w)
    for p, dw in ad.delta_weights(server).items():
        target = sum(wi * ad.delta_weights(c)[p] for wi, c in zip(w, clients, strict=True))
        np.testing.assert_allclose(dw, target, atol=1e-12 * float(jnp.max(jnp.abs(target))))


def test_lora_fedavg_is_not_the_average_update():
    a = ad.inject(_mlp(), "lora", key=jax.random.key(1), r=2)
    clients = [_randomise(a, c) for c in range(3)]
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


def _moore(seed=0, tasks=3):
    return ad.inject(_mlp(), "moore", targets="layers.0", key=jax.random.key(seed), r=4,
                     num_experts=8, task_dim=5, num_tasks=tasks)


def test_moore_equals_base_at_init_and_count():
    a = _moore()
    x = jax.random.normal(jax.random.key(3), (7, 12))
    base = _mlp()
    np.testing.assert_allclose(a(x, task=1), base(x), atol=1e-12)
    layer = a.layers()["layers.0"]
    np.testing.assert_allclose(ad.householder_matrix(layer.householder), np.eye(12), atol=1e-13)
    assert nn.count_params(a) == ad.num_params("moore", a.spec.shapes, **a.spec.config_dict)
    assert nn.count_params(a) == 4 * 12 + 8 * 12 + 12 * (8 + 5) + 3 * 5


@pytest.mark.parametrize("seed", [0, 1])
def test_moore_column_space_orthogonal_experts_and_singular_values(seed):
    a = _randomise(_moore(seed), seed + 5)
    layer = a.layers()["layers.0"]
    x = jax.random.normal(jax.random.key(seed), (12,))
    for t in range(3):
        w = layer.effective_weight(x, t)
        u = nn.value(layer.U)
        np.testing.assert_allclose((np.eye(16) - u @ u.T) @ w, 0, atol=1e-12)  # col(W0) kept
        g = np.sort(np.asarray(layer.gates(x, t)))[::-1]
        np.testing.assert_allclose(np.linalg.svd(np.asarray(w), compute_uv=False), g, atol=1e-12)
        y = a.bind(task=t)(x[None])
        np.testing.assert_allclose(y[0], nn.MLP.__call__(
            eqx.tree_at(lambda m: m.layers[0], _mlp(), _dense(w, layer)), x), atol=1e-12)
    r = ad.householder_matrix(layer.householder)
    np.testing.assert_allclose(r.T @ r, np.eye(12), atol=1e-13)
    v = nn.value(layer.V)
    experts = [np.outer(u[:, j], r.T @ v[:, j]) for j in range(v.shape[1])]
    gram = np.array([[np.sum(e1 * e2) for e2 in experts] for e1 in experts])
    np.testing.assert_allclose(gram, np.eye(len(experts)), atol=1e-12)


def _dense(w, layer):
    lin = layer.linear
    return eqx.tree_at(lambda m: m.weight, lin, w)


def test_moore_is_not_mergeable():
    with pytest.raises(ValueError, match="adapted"):
        ad.merge(_moore())
    with pytest.raises(ValueError, match="even"):
        ad.inject(_mlp(), "moore", key=jax.random.key(0), r=3)
