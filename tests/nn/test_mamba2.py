"""nn.mamba2: the chunked SSD equals the sequential recurrence (any length), A = 0 is causal linear
attention, the kqvo init copies the teacher's maps, the layer's two modes agree, bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nn.mamba2 import Mamba2, mamba2_from_gqa, ssd_chunked, ssd_scan
from nn.mla import GQAttention

KEY = jax.random.key(0)


def _inputs(T, H, P, N, key=KEY):
    k = jax.random.split(key, 5)
    return (
        jax.random.normal(k[0], (2, T, H, P)),
        jax.nn.softplus(jax.random.normal(k[1], (2, T, H))),
        -jnp.exp(jax.random.normal(k[2], (H,))),
        jax.random.normal(k[3], (2, T, H, N)),
        jax.random.normal(k[4], (2, T, H, N)),
    )


def _with(args, i, value):
    return (*args[:i], value, *args[i + 1 :])


@settings(max_examples=8)
@given(
    T=st.integers(1, 13),
    H=st.integers(1, 3),
    P=st.integers(1, 3),
    N=st.integers(1, 3),
    chunk=st.integers(1, 6),
)
def test_chunked_equals_scan(T, H, P, N, chunk):
    x, dt, A, B, C = _inputs(T, H, P, N, jax.random.key(T * 31 + chunk))
    chunked = jax.jit(ssd_chunked, static_argnums=5)  # one compile per example, not per op
    np.testing.assert_allclose(
        chunked(x, dt, A, B, C, chunk), jax.jit(ssd_scan)(x, dt, A, B, C)[0], rtol=1e-10, atol=1e-10
    )


def test_scan_matches_explicit_loop_and_linear_attention():
    x, dt, A, B, C = _inputs(6, 2, 3, 4)
    H_ = np.zeros((2, 2, 3, 4))
    ys = []
    for t in range(6):
        H_ = np.exp(np.asarray(dt[:, t] * A))[..., None, None] * H_ + np.einsum(
            "bhp,bhn->bhpn", np.asarray(dt[:, t, :, None] * x[:, t]), B[:, t]
        )
        ys.append(np.einsum("bhpn,bhn->bhp", H_, C[:, t]))
    y, state = ssd_scan(x, dt, A, B, C)
    np.testing.assert_allclose(y, np.stack(ys, 1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state, H_, rtol=1e-12, atol=1e-12)
    y0, _ = ssd_scan(x, jnp.ones_like(dt), jnp.zeros(2), B, C)
    M = np.einsum("bthn,bshn->bhts", C, B) * np.tril(np.ones((6, 6)))
    np.testing.assert_allclose(y0, np.einsum("bhts,bshp->bthp", M, x), rtol=1e-12, atol=1e-12)


def test_layer_modes_agree_and_kqvo_init_copies_teacher():
    g = GQAttention(16, 4, 2, 4, key=KEY)
    m = mamba2_from_gqa(g, chunk=3, key=KEY)
    u = jax.random.normal(KEY, (2, 7, 16))
    np.testing.assert_allclose(m(u), m(u, mode="scan"), rtol=1e-10, atol=1e-12)
    W = m.in_proj.weight
    np.testing.assert_array_equal(W[16:24], g.v_proj.weight)
    np.testing.assert_array_equal(W[24:32], g.k_proj.weight)
    np.testing.assert_array_equal(W[32:48], g.q_proj.weight)
    np.testing.assert_array_equal(m.out_proj.weight, g.o_proj.weight)
    assert bool(jnp.all(jnp.isfinite(m(u))))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: Mamba2(16, 4, 3, 4, key=KEY), "num_kv_heads"),
        (lambda: Mamba2(16, 4, 2, 4, chunk=0, key=KEY), "chunk"),
        (lambda: ssd_chunked(*_inputs(3, 1, 1, 1), chunk=0), "chunk"),
        (lambda: ssd_scan(*_with(_inputs(3, 1, 1, 1), 2, jnp.array([0.5]))), "A.*got max 0.5"),
        (lambda: ssd_scan(*_with(_inputs(3, 1, 1, 1), 1, -jnp.ones((2, 3, 1)))), "dt.*got min -1"),
        (lambda: Mamba2(16, 4, 2, 4, key=KEY)(jnp.zeros((2, 16)), mode="fast"), "mode"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@settings(max_examples=6, deadline=None)
@given(T=st.integers(1, 9), heads=st.sampled_from([(2, 1), (4, 2)]), d_conv=st.integers(1, 4))
def test_recurrent_decode_equals_the_layer(T, heads, d_conv):
    from nn.mamba2 import mamba2_decode

    with jax.enable_x64(True):
        m = Mamba2(12, *heads, 3, d_conv=d_conv, chunk=4, dtype=jnp.float64, key=KEY)
        u = jax.random.normal(jax.random.fold_in(KEY, T), (2, T, 12), jnp.float64)
        full = eqx.filter_jit(Mamba2.__call__)(m, u)  # one compile, not one per op
        np.testing.assert_allclose(mamba2_decode(m, u), full, atol=1e-12)


def test_decode_state_size_does_not_grow_with_context():
    from nn.mamba2 import mamba2_decode

    m = Mamba2(8, 2, 1, 4, key=KEY)
    win = jnp.zeros((1, 3, m.conv_weight.shape[0]))
    Hs = jnp.zeros((1, 2, 4, 4))
    y, (w2, H2) = m.step(jnp.ones((1, 8)), (win, Hs))
    assert w2.shape == win.shape and H2.shape == Hs.shape and y.shape == (1, 8)
    with pytest.raises(ValueError, match="`u`"):
        mamba2_decode(m, jnp.zeros((1, 3, 5)))
