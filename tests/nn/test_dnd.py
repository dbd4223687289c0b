"""nn.dnd: the parameter tokenizer and its inverse, the criterion weight, the masked loss and the
hyper-convolutional decoder (Drag-and-Drop LLMs, arXiv 2506.16406;
``docs/papers/dnd.md#mechanism-of-the-official-code``)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nn import dnd as D

SHAPES = [(20, 8), (20, 20), (3, 20)]  # (d_out, d_in); 20 and 3 are not multiples of the chunk
_call = eqx.filter_jit(lambda m, x: m(x))  # one compilation instead of one per eager op


def _factors(dtype, seed=0, r=2):
    g = np.random.default_rng(seed)
    out = []
    for o, i in SHAPES:
        out.append(
            (g.normal(0.3, 0.5, (r, i)).astype(dtype), g.normal(-0.1, 0.02, (o, r)).astype(dtype))
        )
    return out


def test_round_trip_float64_to_rounding():
    """detokenize(tokenize(f)) == f to 1e-13 relative in float64 (x64 on in the tests)."""
    f = _factors(np.float64)
    tok = D.tokenize([(jnp.asarray(a), jnp.asarray(b)) for a, b in f], 8)
    assert tok.dtype == jnp.float64
    back = D.detokenize(tok, SHAPES, 8)
    for (a, b), (a2, b2) in zip(f, back, strict=True):
        np.testing.assert_allclose(np.asarray(a2), a, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(np.asarray(b2), b, rtol=1e-13, atol=1e-15)


def test_round_trip_float32_to_rounding():
    """float32: every entry within 2e-6 of its size; the scale codes' log/exp cost a few ulps."""
    f = _factors(np.float32)
    back = D.detokenize(D.tokenize([(jnp.asarray(a), jnp.asarray(b)) for a, b in f], 8), SHAPES, 8)
    for (a, b), (a2, b2) in zip(f, back, strict=True):
        for x, y in ((a, a2), (b, b2)):
            assert y.dtype == jnp.float32
            err = np.max(np.abs(np.asarray(y, np.float64) - x) / np.max(np.abs(x)))
            assert err < 2e-6, err


def test_constant_chunk_round_trips_exactly():
    """A zero-initialised B (std 0 -> fallback 1) decodes to exact zeros."""
    a = jnp.ones((2, 8)) * 0.25
    b = jnp.zeros((20, 2))
    ((a2, b2),) = D.detokenize(D.tokenize([(a, b)], 8), [(20, 8)], 8)
    np.testing.assert_array_equal(np.asarray(b2), 0.0)
    np.testing.assert_allclose(np.asarray(a2), 0.25, rtol=1e-15)


def test_tile_layout_codes_and_standardisation():
    """Independent numpy reconstruction of the first tiles: block (x - mu)/sigma (sigma with
    ddof 1 over the valid entries), codes 8 mu and log(0.9 sigma + 0.1) + 1.6 in the last two
    columns of every row and alternating along the last two rows; NaN exactly at the padding."""
    f = _factors(np.float64, seed=3)
    tok = np.asarray(D.tokenize([(jnp.asarray(a), jnp.asarray(b)) for a, b in f], 8))
    assert tok.shape == (D.num_tiles(SHAPES, 8), 4, 10)
    # tile order: A0 (1 chunk), B0^T (3 chunks, last half padding), A1 (3), B1^T (3), ...
    bt = f[0][1].T  # (2, 20)
    chunks = [bt[:, 0:8], bt[:, 8:16], bt[:, 16:20]]
    for t, x in zip(tok[1:4], chunks, strict=True):
        mu, sd = x.mean(), x.std(ddof=1)
        w = x.shape[1]
        np.testing.assert_allclose(t[:2, :w], (x - mu) / sd, rtol=1e-12)
        assert np.isnan(t[:2, w:8]).all() and not np.isnan(t[:, 8:]).any()
        mc, sc = 8 * mu, np.log(0.9 * sd + 0.1) + 1.6
        np.testing.assert_allclose(t[:, 8], mc, rtol=1e-12)
        np.testing.assert_allclose(t[:, 9], sc, rtol=1e-12)
        np.testing.assert_allclose(t[2:, 0::2], mc, rtol=1e-12)
        np.testing.assert_allclose(t[2:, 1::2], sc, rtol=1e-12)
    pad = sum(2 * ((-d) % 8) for o, i in SHAPES for d in (i, o))
    assert int((~np.asarray(D.token_mask(tok))).sum()) == pad


def test_generated_tokens_decode_without_nan():
    """Generated tokens carry numbers where the targets had padding: decoding ignores them."""
    f = _factors(np.float64)
    tok = D.tokenize([(jnp.asarray(a), jnp.asarray(b)) for a, b in f], 8)
    filled = jnp.where(jnp.isnan(tok), 123.0, tok)
    for (a, b), (a2, b2) in zip(f, D.detokenize(filled, SHAPES, 8), strict=True):
        np.testing.assert_allclose(np.asarray(a2), a, rtol=1e-13)
        np.testing.assert_allclose(np.asarray(b2), b, rtol=1e-13)


def test_criterion_weight_by_hand():
    g = np.random.default_rng(1)
    tok = g.normal(size=(2, 3, 4, 2, 3)) * np.arange(1, 5)[None, None, :, None, None]
    tok[..., 0, 0] = np.nan
    s = np.std(tok, axis=1, ddof=1)  # NaN where the entry is padding
    per = np.array([[np.nanmean(s[d, t]) for t in range(4)] for d in range(2)])
    want = (per / np.nanmean(s.reshape(2, -1), axis=1)[:, None]).mean(0)
    np.testing.assert_allclose(np.asarray(D.criterion_weight(jnp.asarray(tok))), want, rtol=1e-12)


def test_loss_ignores_masked_entries_and_weights_tiles():
    g = np.random.default_rng(2)
    target = g.normal(size=(3, 4, 5))
    target[:, 0, :2] = np.nan
    pred = g.normal(size=(3, 4, 5))
    w = np.array([0.5, 1.0, 2.0])
    mask = ~np.isnan(target)
    want = np.mean(w[:, None, None] * np.where(mask, pred - np.nan_to_num(target), 0.0) ** 2)
    got = D.dnd_loss(jnp.asarray(pred), jnp.asarray(target), jnp.asarray(w))
    np.testing.assert_allclose(float(got), want, rtol=1e-13)
    pred2 = np.where(mask, pred, 1e3)
    assert float(D.dnd_loss(jnp.asarray(pred2), jnp.asarray(target), jnp.asarray(w))) == float(got)


def test_hyperconv_shapes_and_residual():
    key = jax.random.key(0)
    lay = D.HyperConvLayer((5, 4, 6), (3, 2, 7), key=key)
    x = jax.random.normal(key, (5, 4, 6), jnp.float32)
    assert _call(lay, x).shape == (3, 2, 7) and not lay.residual
    same = D.HyperConvLayer((5, 4, 6), (5, 4, 6), key=key)
    zero = eqx.tree_at(lambda m: (m.outer.weight, m.outer.bias), same, replace_fn=jnp.zeros_like)
    assert same.residual
    np.testing.assert_array_equal(np.asarray(_call(zero, x)), np.asarray(x))


def test_generator_mixes_prompts_and_is_order_sensitive():
    """The outer conv uses the prompt index as channels and the branch convs slide over it, so
    the output depends on the prompts and on their order (``docs/papers/dnd.md`` D7)."""
    gen = D.DnDGenerator(3, 6, 4, (4, 10), hidden=((6, 10),), key=jax.random.key(1))
    x = jax.random.normal(jax.random.key(2), (6, 3))
    y = _call(gen, x)
    assert y.shape == (4, 4, 10)
    assert float(jnp.max(jnp.abs(_call(gen, x + 1.0) - y))) > 1e-3
    assert float(jnp.max(jnp.abs(_call(gen, x[::-1]) - y))) > 1e-6
    assert _call(gen, jnp.stack([x, x])).shape == (2, 4, 4, 10)


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: D.tokenize([(jnp.ones((2, 8)), jnp.ones((4, 2)))], 7), "chunk"),
        (lambda: D.tokenize([(jnp.ones((2, 8)), jnp.ones((4, 3)))], 8), "factors"),
        (lambda: D.detokenize(jnp.ones((3, 4, 10)), [(4, 8)], 8), "tokens"),
        (lambda: D.dnd_loss(jnp.ones((2, 3, 4)), jnp.ones((2, 3, 4)), jnp.ones(3)), "weight"),
        (lambda: D.criterion_weight(jnp.ones((2, 1, 3, 4, 5))), "tokens"),
        (lambda: D.HyperConvLayer((2, 3), (2, 3, 4), key=jax.random.key(0)), "shape_in"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()
