"""nn.hopfield: exact reductions (alpha' = 0 is vanilla), the EMA closed form, the causal mask
inside the softmax only, cached decoding equal to the prefill, and bad input."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nn
from nn.hopfield import (
    HopfieldAttention,
    HopfieldBlock,
    HopfieldViT,
    decode,
    hidden_update,
    hopfield_attention,
    hopfield_block,
    hopfield_lm,
    patchify,
)

KEY = jax.random.key(0)


def test_alpha_prime_zero_lm_equals_vanilla_and_adds_no_parameter():
    V, d, H, L, T = 19, 16, 4, 3, 7
    toks = jax.random.randint(KEY, (2, T), 0, V)
    van = nn.TransformerLM(V, d, H, L, T, key=KEY)
    mha = hopfield_lm(V, d, H, L, T, alpha_prime=0.0, key=KEY)
    np.testing.assert_allclose(mha(toks), van(toks), rtol=0, atol=1e-13)
    assert nn.count_params(mha) == nn.count_params(van)
    mha5 = hopfield_lm(V, d, H, L, T, alpha_prime=0.5, alpha=0.5, key=KEY)
    assert nn.count_params(mha5) == nn.count_params(van)
    assert float(jnp.max(jnp.abs(mha5(toks) - van(toks)))) > 1e-3  # the switch does change it


def test_decode_equals_prefill():
    V, d, H, L, T = 19, 16, 2, 3, 9
    toks = jax.random.randint(KEY, (2, T), 0, V)
    lm = hopfield_lm(V, d, H, L, T, alpha_prime=0.7, alpha=0.4, key=KEY)
    np.testing.assert_allclose(decode(lm, toks), lm(toks), rtol=0, atol=1e-12)


def _qkv(key, H, T, dh):
    return jax.random.normal(key, (3, 2, H, T, dh))


@settings(max_examples=6)
@given(
    H=st.integers(1, 3),
    T=st.integers(1, 6),
    dh=st.integers(1, 4),
    ap=st.floats(0.0, 1.0),
    n=st.integers(1, 4),
)
def test_hidden_state_is_the_ema_of_scores(H, T, dh, ap, n):
    """h_n = ap^{n-1} S_1 + (1 - ap) sum_{k=2}^n ap^{n-k} S_k (init 'first'), and the output is
    softmax over the masked h (checked against an explicit NumPy softmax)."""
    keys = jax.random.split(jax.random.key(H * 100 + T * 10 + dh), n)
    h, S = None, []
    for k in keys:
        q, kk, v = _qkv(k, H, T, dh)
        out, h = hopfield_attention(q, kk, v, h, alpha_prime=ap)
        S.append(np.einsum("bhtd,bhsd->bhts", q, kk) / math.sqrt(dh))
    ref = ap ** (n - 1) * S[0] + sum((1 - ap) * ap ** (n - k) * S[k - 1] for k in range(2, n + 1))
    np.testing.assert_allclose(h, ref, rtol=1e-12, atol=1e-12)
    logits = np.where(np.tril(np.ones((T, T), bool)), ref, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, p @ np.asarray(v), rtol=1e-10, atol=1e-12)


@settings(max_examples=4)
@given(
    T=st.integers(2, 6),
    ap=st.sampled_from([0.0, 1.0, 0.3]),
    init=st.sampled_from(["first", "zero"]),
)
def test_rows_decode_and_mask_stays_inside_softmax(T, ap, init):
    """Row t computed alone (q_offset = t, hidden row of the layer below) equals row t of the full
    computation; alpha' in {0, 1} gives finite outputs (no 0 * -inf)."""
    (q1, k1, v1), (q2, k2, v2) = (_qkv(k, 2, T, 3) for k in jax.random.split(KEY))
    o1, h1 = hopfield_attention(q1, k1, v1, None, alpha_prime=ap, init=init)
    o2, h2 = hopfield_attention(q2, k2, v2, h1, alpha_prime=ap, init=init)
    assert bool(jnp.all(jnp.isfinite(o2))) and bool(jnp.all(jnp.isfinite(h2)))
    for t in range(T):
        r1 = hopfield_attention(
            q1[..., t : t + 1, :], k1, v1, None, alpha_prime=ap, init=init, q_offset=t
        )
        r2 = hopfield_attention(
            q2[..., t : t + 1, :], k2, v2, r1[1], alpha_prime=ap, init=init, q_offset=t
        )
        np.testing.assert_allclose(r2[0], o2[..., t : t + 1, :], rtol=0, atol=1e-12)


def test_init_zero_softens_the_first_layer():
    q, k, v = _qkv(KEY, 2, 4, 3)
    _, h_first = hopfield_attention(q, k, v, alpha_prime=0.25, init="first")
    _, h_zero = hopfield_attention(q, k, v, alpha_prime=0.25, init="zero")
    np.testing.assert_allclose(h_zero, 0.75 * h_first, rtol=1e-14)
    np.testing.assert_allclose(
        hidden_update(h_first, 2 * h_first, 0.25), 1.75 * h_first, rtol=1e-14
    )


def test_grads_finite_at_alpha_prime_one():
    lm = hopfield_lm(11, 8, 2, 2, 5, alpha_prime=1.0, alpha=0.5, key=KEY)
    toks = jax.random.randint(KEY, (2, 6), 0, 11)
    loss, g = eqx.filter_jit(eqx.filter_value_and_grad(nn.lm_loss))(lm, toks)
    assert np.isfinite(float(loss))
    assert all(np.isfinite(a).all() for a in jax.tree.leaves(g))


def test_block_skip_forms():
    x = jax.random.normal(KEY, (2, 5, 8))
    plain = HopfieldBlock(8, 2, alpha_prime=0.0, key=KEY)
    van = nn.TransformerBlock(8, 2, key=KEY)
    np.testing.assert_allclose(plain(x)[0], van(x), rtol=0, atol=1e-13)
    # alpha = 0 and no MLP residual: the block is MLP(norm(Attn(norm(x))))
    free = HopfieldBlock(8, 2, alpha_prime=0.0, alpha=0.0, mlp_residual=False, key=KEY)
    a, _ = free.attn(free.norm1(x))
    np.testing.assert_allclose(free(x)[0], free.mlp(free.norm2(a)), rtol=0, atol=1e-13)


def test_vit_and_patchify():
    img = jnp.arange(2 * 8 * 8, dtype=float).reshape(2, 8, 8)
    p = patchify(img, 2)
    assert p.shape == (2, 16, 4)
    np.testing.assert_array_equal(p[0, 1], [2.0, 3.0, 10.0, 11.0])
    vit = HopfieldViT(16, 4, 10, 16, 4, 2, alpha_prime=0.5, alpha=0.0, mlp_residual=False, key=KEY)
    assert vit(p).shape == (2, 10)
    assert vit.features(p).shape == (2, 17, 16)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: HopfieldAttention(10, 3, alpha_prime=0.5, key=KEY), "num_heads"),
        (lambda: HopfieldAttention(8, 2, alpha_prime=1.5, key=KEY), "alpha_prime"),
        (lambda: HopfieldBlock(8, 2, alpha_prime=0.5, alpha=-0.1, key=KEY), "alpha"),
        (lambda: hopfield_block(alpha_prime=-0.5), "alpha_prime"),
        (lambda: HopfieldAttention(8, 2, alpha_prime=0.5, init="last", key=KEY), "init"),
        (lambda: patchify(jnp.zeros((3, 3)), 2), "patch"),
        (
            lambda: decode(hopfield_lm(5, 4, 1, 1, 3, alpha_prime=0.5, key=KEY), jnp.zeros(3, int)),
            "tokens",
        ),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
