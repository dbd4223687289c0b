"""Uni-LoRA's isometric projection and the projections of VeRA, Tied-LoRA and VB-LoRA."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nn
import nn.adapters as ad
from paper_checks import PROPERTIES, verify


def _dense(index, value, d):
    p = np.zeros((len(index), d))
    p[np.arange(len(index)), index] = value
    return p


def test_isometry():
    """P^T P = I, one nonzero per row, balanced groups, ||P theta|| = ||theta||, P fixed by the
    seed: the registry property ``adapters.unilora_isometry`` (its one copy, searched by
    ``theorylab verify``)."""
    row = verify(PROPERTIES["adapters.unilora_isometry"], examples=30)
    assert row["status"] == "holds" and row["min_slack"] >= 0, row


@pytest.mark.parametrize(("D", "d"), [(1003, 37), (64, 64), (10, 1)])
def test_gather_and_segment_sum_are_p_and_p_transpose(D, d):
    idx, val = ad.isometric_projection(D, d, 5)
    p = _dense(idx, val, d)
    theta = np.random.default_rng(0).standard_normal(d)
    g = np.random.default_rng(1).standard_normal(D)
    np.testing.assert_allclose(ad.project(theta, idx, val), p @ theta, atol=1e-14)
    np.testing.assert_allclose(ad.project_transpose(g, idx, val, d), p.T @ g, atol=1e-12)


def test_gradient_through_gather_is_p_transpose():
    D, d = 50, 7
    idx, val = ad.isometric_projection(D, d, 3)
    w = jnp.asarray(np.random.default_rng(0).standard_normal(D))
    f = lambda th: jnp.sum(jnp.sin(ad.project(th, idx, val)) * w)  # noqa: E731
    th = jnp.asarray(np.random.default_rng(1).standard_normal(d))
    g_dense = jnp.cos(ad.project(th, idx, val)) * w
    np.testing.assert_allclose(
        jax.grad(f)(th), ad.project_transpose(g_dense, idx, val, d), atol=1e-13
    )


def test_lora_is_identity_projection():
    """P = I_D recovers LoRA: A = theta_D[:rn].reshape, B = theta_D[rn:].reshape."""
    r, m, n = 2, 5, 4
    theta = np.random.default_rng(0).standard_normal(r * (m + n))
    idx, val = np.arange(theta.size), np.ones(theta.size)
    t = np.asarray(ad.project(theta, idx, val))
    np.testing.assert_array_equal(t, theta)


def _mlp():
    return nn.MLP(8, 4, 12, 1, key=jax.random.key(0))


def test_vera_equals_direct_formula_and_is_not_isometric():
    a = ad.inject(_mlp(), "vera", key=jax.random.key(2), r=5)
    theta = jax.random.normal(jax.random.key(3), a.shared["theta"].shape)
    a = eqx.tree_at(lambda m: m.shared["theta"], a, theta)
    shapes = a.spec.shapes
    # regenerate the shared bases exactly as inject does
    layers = list(a.layers().values())
    off = 0
    for (m, _), layer in zip(shapes, layers, strict=True):
        lam_b, lam_d = theta[off : off + m], theta[off + m : off + m + 5]
        off += m + 5
        bm, an = layer.value_B, layer.value_A
        direct = jnp.diag(lam_b) @ bm @ jnp.diag(lam_d) @ an
        np.testing.assert_allclose(layer.delta_weight({"theta": theta}), direct, atol=1e-13)
    # VeRA's P^T P is diagonal with the row norms of B and A: not the identity
    idx = np.concatenate(
        [np.ravel(l.index_A) for l in layers] + [np.ravel(l.index_B) for l in layers]
    )
    val = np.concatenate(
        [np.ravel(l.value_A) for l in layers] + [np.ravel(l.value_B) for l in layers]
    )
    ptp = _dense(idx, val, theta.size)
    ptp = ptp.T @ ptp
    np.testing.assert_allclose(ptp, np.diag(np.diag(ptp)), atol=1e-14)
    assert np.max(np.abs(np.diag(ptp) - 1)) > 0.1


def test_vera_zero_at_init_and_shared_bases_sliced():
    a = ad.inject(_mlp(), "vera", key=jax.random.key(2), r=5)
    layers = list(a.layers().values())
    for layer in layers:
        assert float(jnp.max(jnp.abs(layer.delta_weight(a.shared)))) == 0.0
    # the second layer (4 x 12) uses the top-left slice of the same shared bases
    b0, b1 = layers[0].value_B, layers[1].value_B
    np.testing.assert_array_equal(b1, b0[:4])


def test_tied_lora_frozen_is_the_vera_projection():
    a = ad.inject(_mlp(), "tied_lora", key=jax.random.key(4), r=3, train_ab=False)
    A, B = a.shared["A"], a.shared["B"]
    rng = np.random.default_rng(0)
    layers = list(a.layers().values())
    uv = [(rng.standard_normal(layer.shape[0]), rng.standard_normal(3)) for layer in layers]
    theta = jnp.asarray(np.concatenate([np.concatenate(p) for p in uv]))
    proj = ad.vera_projection(a.spec.shapes, A, B)
    for (u, v), layer, (ia, va, ib, vb) in zip(uv, layers, proj, strict=True):
        tied = ad.TiedLoRALinear(layer.shape, jnp.asarray(u), jnp.asarray(v))
        via_p = ad.project(theta, ib, vb) @ ad.project(theta, ia, va)
        ctx = {k: v for k, v in a.shared.items()}
        np.testing.assert_allclose(tied.delta_weight(ctx), via_p, atol=1e-13)


def test_vblora_mixture_weights_are_a_simplex_and_shapes_recovered():
    a = ad.inject(
        _mlp(), "vblora", key=jax.random.key(5), r=2, num_vectors=6, vector_length=4, topk=3
    )
    for layer in a.layers().values():
        w, idx = ad.topk_mixture_weights(layer.logits_A, 3)
        assert bool(jnp.all(w >= 0))
        np.testing.assert_allclose(jnp.sum(w, -1), 1.0, atol=1e-14)
        A, B = layer.factors(a.shared)
        m, n = layer.shape
        assert A.shape == (2, n) and B.shape == (m, 2)
        # one sub-vector of A by hand: sum_k w_k bank[idx_k]
        bank = a.shared["bank"]
        np.testing.assert_allclose(A[1, 4:8], w[1, 1] @ bank[idx[1, 1]], atol=1e-14)


def test_bad_input():
    with pytest.raises(ValueError, match="`d`"):
        ad.isometric_projection(5, 6)
    with pytest.raises(ValueError, match="`d`"):
        ad.inject(_mlp(), "unilora", key=jax.random.key(0), r=2)
