"""nn.mla: RoPE, GQA, MLA naive == absorbed == cached decode, SVD init (Eckart-Young, exact at
full rank without positions, not exact with RoPE), and bad input."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nn.mla import MLA, GQAttention, mla_decode, mla_from_gqa, rope, svd_factor

KEY = jax.random.key(0)


def test_rope_rotates_pairs_and_keeps_relative_scores():
    x = jax.random.normal(KEY, (5, 6))
    y = rope(x, jnp.arange(5), 100.0)
    np.testing.assert_allclose(jnp.linalg.norm(y, axis=-1), jnp.linalg.norm(x, axis=-1), rtol=1e-13)
    # pair (0, 3) at position 2 rotates by angle 2 * 100^0 = 2
    c, s = math.cos(2.0), math.sin(2.0)
    np.testing.assert_allclose(
        y[2, [0, 3]], [x[2, 0] * c - x[2, 3] * s, x[2, 0] * s + x[2, 3] * c], rtol=1e-12
    )
    q, k = jax.random.normal(KEY, (2, 1, 6))
    a = rope(q, jnp.array([3]), 100.0) @ rope(k, jnp.array([1]), 100.0).T
    b = rope(q, jnp.array([7]), 100.0) @ rope(k, jnp.array([5]), 100.0).T
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_gqa_with_one_group_per_head_is_plain_attention():
    from nn import causal_attention

    g = GQAttention(12, 3, 3, 4, key=KEY)
    x = jax.random.normal(KEY, (2, 5, 12))
    h = lambda y: jnp.swapaxes(y.reshape(2, 5, 3, 4), 1, 2)  # noqa: E731
    o = causal_attention(h(g.q_proj(x)), h(g.k_proj(x)), h(g.v_proj(x)))
    np.testing.assert_allclose(g(x), g.o_proj(jnp.swapaxes(o, 1, 2).reshape(2, 5, 12)), atol=1e-13)


@settings(max_examples=6)
@given(
    G=st.integers(1, 2),
    g=st.integers(1, 2),
    nope=st.integers(0, 3),
    rope_half=st.integers(0, 2),
    r=st.integers(1, 6),
    T=st.integers(1, 6),
    q_rank=st.sampled_from([None, 3]),
)
def test_absorbed_and_decode_equal_naive(G, g, nope, rope_half, r, T, q_rank):
    if nope + 2 * rope_half == 0:
        nope = 1
    d = 8
    r = min(r, d, G * (nope + 3))
    if q_rank is not None:
        q_rank = min(q_rank, G * g * (nope + 2 * rope_half))
    m = MLA(
        d,
        G * g,
        G,
        kv_rank=r,
        nope_dim=nope,
        v_dim=3,
        rope_dim=2 * rope_half,
        q_rank=q_rank,
        key=jax.random.key(G + 7 * r + 13 * T),
    )
    x = jax.random.normal(KEY, (2, T, d))
    call = eqx.filter_jit(MLA.__call__)  # one compile per example, not one per op
    np.testing.assert_allclose(call(m, x, absorbed=True), call(m, x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(mla_decode(m, x), call(m, x), rtol=0, atol=1e-12)


def test_svd_init_exact_at_full_rank_without_positions_and_eckart_young():
    g = GQAttention(16, 4, 2, 4, key=KEY)
    x = jax.random.normal(KEY, (2, 7, 16))
    m, info = mla_from_gqa(g, 16)
    np.testing.assert_allclose(m(x), g(x), rtol=0, atol=1e-12)
    W = np.concatenate(
        [
            np.asarray(g.k_proj.weight).reshape(2, 4, 16),
            np.asarray(g.v_proj.weight).reshape(2, 4, 16),
        ],
        1,
    ).reshape(16, 16)
    s = np.linalg.svd(W, compute_uv=False)
    for r in (3, 8, 12):
        m, info = mla_from_gqa(g, r)
        rec = np.asarray(m.kv_up.weight) @ np.asarray(m.kv_down.weight)
        assert np.linalg.norm(rec - W) == pytest.approx(np.sqrt(np.sum(s[r:] ** 2)), rel=1e-10)
        assert info["kv_tail"] == pytest.approx(np.sqrt(np.sum(s[r:] ** 2)), rel=1e-10)


def test_svd_init_with_rope_is_not_the_teacher():
    g = GQAttention(16, 4, 2, 4, rope_theta=10000.0, key=KEY)
    x = jax.random.normal(KEY, (2, 9, 16))
    m, _ = mla_from_gqa(g, 12, rope_dim=2)  # full kept rank: 2 heads x (2 nope + 4 v)
    y = g(x)
    assert float(jnp.linalg.norm(m(x) - y) / jnp.linalg.norm(y)) > 0.05


def test_svd_factor_q_rank_reconstructs():
    W = np.asarray(jax.random.normal(KEY, (6, 5)))
    up, down, tail = svd_factor(W, 5)
    np.testing.assert_allclose(up @ down, W, atol=1e-12)
    assert tail == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: GQAttention(16, 4, 3, 4, key=KEY), "num_kv_heads"),
        (lambda: MLA(16, 4, 2, kv_rank=40, nope_dim=4, v_dim=4, key=KEY), "kv_rank"),
        (lambda: MLA(16, 4, 2, kv_rank=4, nope_dim=4, v_dim=4, q_rank=17, key=KEY), "q_rank"),
        (lambda: MLA(16, 4, 2, kv_rank=4, nope_dim=4, v_dim=4, rope_dim=3, key=KEY), "rope_dim"),
        (lambda: svd_factor(np.ones((3, 4)), 4), "rank"),
        (lambda: mla_from_gqa(GQAttention(16, 4, 2, 4, key=KEY), 4, rope_dim=5), "rope_dim"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@settings(max_examples=6, deadline=None)
@given(
    T=st.integers(1, 7),
    heads=st.sampled_from([(2, 1), (4, 2), (3, 3)]),
    rope_theta=st.sampled_from([None, 50.0]),
)
def test_gqa_cached_decode_equals_the_full_pass(T, heads, rope_theta):
    from nn.mla import gqa_decode

    with jax.enable_x64(True):
        H, G = heads
        g = GQAttention(10, H, G, 4, rope_theta=rope_theta, dtype=jnp.float64, key=KEY)
        x = jax.random.normal(jax.random.fold_in(KEY, T), (2, T, 10), jnp.float64)
        full = eqx.filter_jit(GQAttention.__call__)(g, x)  # one compile, not one per op
        np.testing.assert_allclose(gqa_decode(g, x), full, atol=1e-12)
        # the cache matters: decoding a changed earlier token changes later outputs only
        x2 = x.at[:, 0].add(1.0)
        d = jnp.abs(gqa_decode(g, x2) - gqa_decode(g, x)).max(axis=(0, 2))
        assert float(d[0]) > 1e-6 and (T == 1 or float(d[-1]) > 1e-6)


def test_gqa_decode_bad_input_names_the_argument():
    from nn.mla import gqa_decode

    g = GQAttention(8, 2, 1, 4, key=KEY)
    with pytest.raises(ValueError, match="`x`"):
        gqa_decode(g, jnp.zeros((1, 3, 6)))
    with pytest.raises(TypeError, match="`layer`"):
        gqa_decode(MLA(8, 2, 1, kv_rank=4, nope_dim=4, v_dim=4, key=KEY), jnp.zeros((1, 3, 8)))
