"""NN core: shapes, dtypes, causality, the trainable/frozen split, training, checkpoints."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nn


@functools.cache  # models are immutable; building one runs its initialisers op by op
def _lm(key=0):
    return nn.TransformerLM(
        vocab_size=11, d_model=16, num_heads=2, num_layers=2, max_len=8, key=jax.random.key(key)
    )


def test_linear_shapes_dtype_and_value():
    lin = nn.Linear(3, 5, key=jax.random.key(0))
    assert lin.weight.shape == (5, 3) and lin.bias.shape == (5,)
    assert lin.weight.dtype == jnp.float64  # x64 is on in tests: default float follows it
    x = jax.random.normal(jax.random.key(1), (4, 2, 3))
    np.testing.assert_allclose(lin(x), x @ lin.weight.T + lin.bias, rtol=1e-14)
    assert nn.Linear(3, 5, dtype=jnp.float32, key=jax.random.key(0)).weight.dtype == jnp.float32
    with jax.enable_x64(False):
        assert nn.Linear(3, 5, key=jax.random.key(0)).weight.dtype == jnp.float32
    z = nn.Linear(3, 5, False, init=jax.nn.initializers.zeros, key=jax.random.key(0))
    assert z.bias is None and not np.any(z.weight)


def test_linear_matmul_hook_and_set_matmul():
    calls = []

    def mm(x, w, *, key):
        calls.append(key)
        return 2.0 * (x @ w.T)

    lin = nn.Linear(3, 2, False, matmul=mm, key=jax.random.key(0))
    x = jnp.ones((1, 3))
    np.testing.assert_allclose(lin(x), 2.0 * (x @ lin.weight.T))
    lm = nn.set_matmul(_lm(), mm)
    lins = [
        n
        for n in jax.tree.leaves(lm, is_leaf=lambda n: isinstance(n, nn.Linear))
        if isinstance(n, nn.Linear)
    ]
    assert len(lins) == 2 * 6 + 1 and all(n.matmul is mm for n in lins)


def test_bad_input_names_argument():
    with pytest.raises(ValueError, match="in_features"):
        nn.Linear(0, 3, key=jax.random.key(0))
    with pytest.raises(ValueError, match="num_heads"):
        nn.CausalSelfAttention(10, 3, key=jax.random.key(0))
    with pytest.raises(ValueError, match="max_len"):
        _lm()(jnp.zeros((1, 9), int))
    with pytest.raises(TypeError, match="ids"):
        nn.Embedding(4, 2, key=jax.random.key(0))(jnp.zeros(3))
    with pytest.raises(ValueError, match="steps"):
        nn.train(_lm(), nn.lm_loss, lambda t: None, optax.sgd(0.1), -1, key=jax.random.key(0))


def test_attention_is_causal_and_rows_sum_to_one():
    att = nn.CausalSelfAttention(8, 2, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (3, 6, 8))
    y, w = att(x, return_weights=True)
    assert y.shape == x.shape and w.shape == (3, 2, 6, 6)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)
    assert np.all(np.asarray(w)[..., np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)
    # changing a future token leaves earlier outputs unchanged
    x2 = x.at[:, 4:].set(0.0)
    np.testing.assert_allclose(att(x2)[:, :4], y[:, :4], rtol=1e-12)
    # single head: explicit formula
    a1 = nn.CausalSelfAttention(8, 1, key=jax.random.key(2))
    q, k, v = (x @ a1.q_proj.weight.T, x @ a1.k_proj.weight.T, x @ a1.v_proj.weight.T)
    s = q @ jnp.swapaxes(k, -1, -2) / np.sqrt(8) + jnp.where(
        jnp.tril(jnp.ones((6, 6))) > 0, 0, -jnp.inf
    )
    np.testing.assert_allclose(a1(x), jax.nn.softmax(s, -1) @ v @ a1.o_proj.weight.T, rtol=1e-12)


def test_lm_causal_logits():
    lm = _lm()
    toks = jax.random.randint(jax.random.key(3), (2, 8), 0, 11)
    out = lm(toks)
    assert out.shape == (2, 8, 11)
    np.testing.assert_allclose(lm(toks.at[:, 5:].set(0))[:, :5], out[:, :5], rtol=1e-12)


def test_split_combine_and_mask_semantics():
    lm = _lm()
    mask = nn.trainable_mask(lm, frozen=lambda m: (m.embed, m.blocks[0].attn.q_proj, m.head.weight))
    tr, fr = nn.split(lm, mask)
    assert tr.embed.weight is None and fr.embed.weight is not None
    assert tr.head.weight is None and tr.blocks[1].attn.q_proj.weight is not None
    assert eqx.tree_equal(nn.combine(tr, fr), lm)
    # the model itself is untouched: its layers hold plain arrays and run as before
    assert isinstance(lm.embed.weight, jax.Array)
    n_frozen = lm.embed.weight.size + lm.blocks[0].attn.q_proj.weight.size + lm.head.weight.size
    assert nn.count_params(lm) - nn.count_params(lm, mask) == n_frozen


def test_inexact_filter_alone_decays_the_frozen_base():
    """The README warning: partitioning by eqx.is_inexact_array hands every array to AdamW,
    whose weight decay moves a leaf even where its gradient is zero."""
    lm = _lm()
    mask = nn.trainable_mask(lm, frozen=lambda m: m.embed)
    opt = optax.adamw(1e-2, weight_decay=0.5)
    for spec, moved in ((eqx.is_inexact_array, True), (mask, False)):
        tr, fr = eqx.partition(lm, spec)
        zero = jax.tree.map(jnp.zeros_like, tr)
        upd, _ = opt.update(zero, opt.init(tr), tr)
        new = nn.combine(eqx.apply_updates(tr, upd), fr)
        assert (not np.array_equal(new.embed.weight, lm.embed.weight)) is moved


def test_frozen_unchanged_after_training_with_weight_decay_and_loss_decreases():
    lm = _lm()
    mask = nn.trainable_mask(lm, frozen=lambda m: (m.embed, m.blocks[0].mlp))
    data = jax.random.randint(jax.random.key(4), (4, 9), 0, 11)
    res = nn.train(
        lm,
        nn.lm_loss,
        lambda t: data,
        optax.adamw(1e-2, weight_decay=0.5),
        30,
        key=jax.random.key(5),
        progress=False,
        mask=mask,
    )
    assert res.losses.shape == (30,) and res.losses[-1] < res.losses[0] - 0.5
    assert eqx.tree_equal(res.model.embed, lm.embed)
    assert eqx.tree_equal(res.model.blocks[0].mlp, lm.blocks[0].mlp)
    assert not np.allclose(
        res.model.blocks[1].mlp.layers[0].weight, lm.blocks[1].mlp.layers[0].weight
    )
    ev = nn.evaluate(res.model, nn.lm_loss, [data, data])
    assert abs(ev - float(jax.jit(nn.lm_loss)(res.model, data))) < 1e-12
    assert "final loss" in res.summary()


def test_train_resume_matches_single_run():
    lm = _lm()
    data = lambda t: jax.random.randint(jax.random.key(t), (3, 9), 0, 11)  # noqa: E731
    opt, k = optax.adam(1e-2), jax.random.key(0)
    full = nn.train(lm, nn.lm_loss, data, opt, 6, key=k, progress=False)
    a = nn.train(lm, nn.lm_loss, data, opt, 3, key=k, progress=False)
    b = nn.train(
        a.model,
        nn.lm_loss,
        data,
        opt,
        3,
        key=k,
        opt_state=a.opt_state,
        start_step=3,
        progress=False,
    )
    np.testing.assert_allclose(np.r_[a.losses, b.losses], full.losses, rtol=1e-12)


def test_checkpoint_round_trip_exact(tmp_path):
    lm = _lm()
    frozen = lambda m: m.embed  # noqa: E731
    opt = optax.adamw(1e-3)
    state = opt.init(nn.split(lm, nn.trainable_mask(lm, frozen))[0])
    p = tmp_path / "ck.eqx"
    nn.save(p, (lm, state))
    lm9 = _lm(key=9)
    like = (lm9, opt.init(nn.split(lm9, nn.trainable_mask(lm9, frozen))[0]))
    lm2, state2 = nn.load(p, like)
    assert eqx.tree_equal(lm2, lm) and eqx.tree_equal(state2, state)
    for a, b in zip(jax.tree.leaves(lm), jax.tree.leaves(lm2), strict=True):
        assert a.dtype == b.dtype and np.array_equal(np.asarray(a), np.asarray(b))


def test_mlp():
    m = nn.MLP(3, 2, 7, 2, key=jax.random.key(0))
    assert len(m.layers) == 3 and m(jnp.ones((5, 3))).shape == (5, 2)


@settings(max_examples=15, deadline=None)
@given(
    shape=st.lists(st.integers(1, 70), min_size=0, max_size=4).map(tuple),
    wide=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    typed=st.booleans(),
)
def test_uniform_init_is_the_shaped_draw_bit_for_bit(shape, wide, seed, typed):
    # the initialiser draws a flat vector of a few fixed sizes (one compile each) and slices it
    from nn._layers import _DRAW_SIZES, uniform_fan_in

    if wide:  # past the largest flat size: drawn as shaped
        shape = (_DRAW_SIZES[-1] + 3,)
    key = jax.random.key(seed) if typed else jax.random.key_data(jax.random.key(seed))
    for dtype in (jnp.float32, jnp.float64):
        with jax.enable_x64(dtype == jnp.float64):
            got = uniform_fan_in(9)(key, shape, dtype)
            want = jax.random.uniform(key, shape, dtype, -1 / 3, 1 / 3)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_uniform_init_under_vmap_draws_each_key_as_shaped():
    keys = jax.random.split(jax.random.key(0), 3)
    got = jax.vmap(lambda k: nn.uniform_fan_in(4)(k, (5, 6), jnp.float32))(keys)
    want = jnp.stack([jax.random.uniform(k, (5, 6), jnp.float32, -0.5, 0.5) for k in keys])
    np.testing.assert_array_equal(got, want)
