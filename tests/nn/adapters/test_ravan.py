"""Ravan: exact federated aggregation (with and without head masks), head selection, the two
basis initialisations, zero update at init, parameter count and rank."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    # the same server step under jit with traced weights (a federated round in one program)
    jitted = eqx.filter_jit(lambda cs, w: ad.ravan_aggregate(cs, w))(clients, jnp.asarray(w))
    for u, v in zip(
        jax.tree.leaves(nn.split(jitted)[0]), jax.tree.leaves(nn.split(server)[0]), strict=True
    ):
        np.testing.assert_allclose(u, v, rtol=1e-13, atol=1e-15)


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


def _train_heads(a, mask, seed):
    """A client that trained only the heads in ``mask``: ``H_i -> H_i + N(0, 1)``, ``s_i -> s_i +
    N(0, 1)`` on those heads, the others left at their broadcast value."""
    tr, fr = nn.split(a)
    k = jax.random.key(seed)

    def bump(node):
        if not isinstance(node, ad.RavanLinear):
            return node
        j, path = paths[id(node)]
        m = mask[path]
        kh, ks = jax.random.split(jax.random.fold_in(k, j))
        dh = jax.random.normal(kh, node.H.shape) * m[:, None, None]
        ds = jax.random.normal(ks, node.s.shape) * m
        return eqx.tree_at(lambda n: (n.H, n.s), node, (node.H + dh, node.s + ds))

    paths = {id(v): (j, p) for j, (p, v) in enumerate(tr.layers().items())}
    tr = jax.tree.map(bump, tr, is_leaf=lambda n: isinstance(n, ad.RavanLinear))
    return nn.combine(tr, fr)


@given(st.integers(2, 4), st.integers(0, 2**16))
@settings(max_examples=8, deadline=None)
def test_ravan_masked_aggregate_averages_each_head_over_its_clients(n_clients, seed):
    """With head masks (computational heterogeneity), head i of each layer becomes
    ``sum_{c trained i} p_c s_i^c H_i^c / sum_{c trained i} p_c``; untrained heads keep their
    broadcast value; ``s`` is reset to 1. Checked against a direct numpy computation."""
    rng = np.random.default_rng(seed)
    a = ad.inject(_mlp(), "ravan", key=jax.random.key(seed), r=2, heads=3)
    a = _train_heads(a, {p: np.ones(3, bool) for p in a.layers()}, seed + 1)  # a nonzero broadcast
    a = ad.ravan_aggregate([a])
    w = rng.dirichlet(np.ones(n_clients))
    masks = [{p: rng.random(3) < 0.5 for p in a.layers()} for _ in range(n_clients)]
    clients = [_train_heads(a, mk, seed + 10 + c) for c, mk in enumerate(masks)]
    server = ad.ravan_aggregate(clients, list(w), masks=masks)
    for p, layer in server.layers().items():
        np.testing.assert_array_equal(layer.s, np.ones(3))
        for i in range(3):
            sh = [np.asarray(c.layers()[p].s[i] * c.layers()[p].H[i]) for c in clients]
            on = [c for c in range(n_clients) if masks[c][p][i]]
            if on:
                want = sum(w[c] * sh[c] for c in on) / sum(w[c] for c in on)
            else:
                want = np.asarray(a.layers()[p].H[i])
            np.testing.assert_allclose(layer.H[i], want, rtol=1e-12, atol=1e-12)


def test_ravan_masked_aggregate_is_exact_fedavg_when_clients_share_a_head_set(randomise):
    """If every client trains the same heads, the heads it froze are equal across clients, so the
    masked server step is exact FedAvg of the client updates (as the unmasked one)."""
    a = ad.inject(_mlp(), "ravan", key=jax.random.key(3), r=2, heads=3)
    a = ad.ravan_aggregate([randomise(a, 0)])
    mask = {p: np.array([True, False, True]) for p in a.layers()}
    clients = [_train_heads(a, mask, c) for c in range(3)]
    w = [0.2, 0.3, 0.5]
    server = ad.ravan_aggregate(clients, w, masks=[mask] * 3)
    for p, dw in ad.delta_weights(server).items():
        target = sum(wi * ad.delta_weights(c)[p] for wi, c in zip(w, clients, strict=True))
        np.testing.assert_allclose(dw, target, atol=1e-12 * float(jnp.max(jnp.abs(target))))


def test_ravan_select_heads_scores():
    a = ad.inject(_mlp(), "ravan", key=jax.random.key(4), r=1, heads=4)
    a = _train_heads(a, {p: np.ones(4, bool) for p in a.layers()}, 5)
    for p, mk in ad.ravan_select_heads(a, 2, score="weight").items():
        q = a.layers()[p]
        norms = np.linalg.norm(np.asarray(q.s)[:, None, None] * np.asarray(q.H), axis=(1, 2))
        np.testing.assert_array_equal(np.asarray(mk), np.isin(np.arange(4), np.argsort(-norms)[:2]))
    tr, fr = nn.split(a)
    x = jax.random.normal(jax.random.key(0), (8, 12))
    g = eqx.filter_grad(lambda t: jnp.sum(nn.combine(t, fr)(x) ** 2))(tr)
    for p, mk in ad.ravan_select_heads(a, 3, score="gradient", grads=g).items():
        norms = np.linalg.norm(np.asarray(g.layers()[p].H), axis=(1, 2))
        np.testing.assert_array_equal(np.asarray(mk), np.isin(np.arange(4), np.argsort(-norms)[:3]))
    r1 = ad.ravan_select_heads(a, 1, key=jax.random.key(0))
    r2 = ad.ravan_select_heads(a, 1, key=jax.random.key(0))
    for p in r1:
        assert int(np.sum(r1[p])) == 1
        np.testing.assert_array_equal(r1[p], r2[p])
    with pytest.raises(ValueError, match="`k`"):
        ad.ravan_select_heads(a, 5, score="weight")
    with pytest.raises(ValueError, match="`score`"):
        ad.ravan_select_heads(a, 1, score="fisher")
    with pytest.raises(ValueError, match="`key`"):
        ad.ravan_select_heads(a, 1)
    with pytest.raises(ValueError, match="`grads`"):
        ad.ravan_select_heads(a, 1, score="gradient")
    with pytest.raises(ValueError, match="`masks`"):
        ad.ravan_aggregate([a, a], masks=[{}, {}])


def test_ravan_bases_orthogonal_and_random_normal():
    """init="orthogonal": the stacked bases [B_1 .. B_h] and [A_1; ..; A_h] are orthonormal
    (Gram-Schmidt across heads). init="random": entries N(0, 1/m) for B and N(0, 1/n) for A,
    checked to 4 standard errors of the mean and of the variance."""
    base = nn.Linear(120, 100, key=jax.random.key(0))
    h, r = 4, 5
    q = ad.inject(base, "ravan", key=jax.random.key(1), r=r, heads=h).layers()[""]
    b = np.asarray(q.B).transpose(1, 0, 2).reshape(100, h * r)
    a = np.asarray(q.A).reshape(h * r, 120)
    np.testing.assert_allclose(b.T @ b, np.eye(h * r), atol=1e-12)
    np.testing.assert_allclose(a @ a.T, np.eye(h * r), atol=1e-12)
    q = ad.inject(base, "ravan", key=jax.random.key(2), r=r, heads=h, init="random").layers()[""]
    for arr, dim in ((q.B, 100), (q.A, 120)):
        z = np.asarray(arr).ravel() * np.sqrt(dim)  # standard normal if the scale is right
        assert abs(z.mean()) < 4 / np.sqrt(z.size)
        assert abs(z.var() - 1) < 4 * np.sqrt(2 / z.size)
