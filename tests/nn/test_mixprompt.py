"""Tests of :mod:`nn.mixprompt` and its closed-form counts (:mod:`theory.mixprompt`)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nn
from nn import mixprompt as M
from theory import mixprompt as TM

KEY = jax.random.key(0)
SMALL = dict(channels=(16, 16, 16), depths=(1, 1, 1), expansion=2)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_split_merge_round_trip_is_exact_and_chunks_are_contiguous(n):
    u = jax.random.normal(KEY, (3, 5, 16))
    s = M.split_subspaces(u, n)
    assert s.shape == (3, 5, 16 // n, n)
    d = 16 // n
    for j in range(n):
        np.testing.assert_array_equal(s[..., j], u[..., j * d : (j + 1) * d])
    np.testing.assert_array_equal(M.merge_subspaces(s), u)


def test_mixing_is_the_chunk_sum_and_identity_is_exact():
    u = jax.random.normal(KEY, (2, 12))
    om = jnp.asarray([[1.0, 2.0, 0.0], [0.0, -1.0, 0.5], [3.0, 0.0, 1.0]])
    c = [u[:, 4 * j : 4 * j + 4] for j in range(3)]
    want = jnp.concatenate([sum(om[k, j] * c[j] for j in range(3)) for k in range(3)], -1)
    np.testing.assert_allclose(M.mix_subspaces(u, om), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(M.mix_subspaces(u, jnp.eye(3)), u)


def test_adapter_without_mixing_is_down_add_up_then_norm():
    ada = M.MixedPromptAdapter(32, mix="none", key=KEY)
    h, e = jax.random.normal(jax.random.key(1), (2, 4, 4, 4, 32))
    want = ada.norm(ada.up(ada.down_rgb(h) + ada.down_aux(e)))
    np.testing.assert_array_equal(ada(h, e), want)
    assert ada.omega is None


@pytest.mark.parametrize("c,n", [(16, 4), (32, 2), (64, 4)])
def test_adapter_count_is_three_quarters_c_squared(c, n):
    ada = M.MixedPromptAdapter(c, 4, n, key=KEY)
    # the Q7 form of docs/papers/mixprompt.md: 0.75 C^2 + 1.5 C + n^2, plus the prompt LayerNorm's 2
    # C
    assert nn.count_params(ada) == 3 * c * c // 4 + 3 * c // 2 + n * n + 2 * c
    assert TM.ada_params(c, 4, n) == nn.count_params(ada)


def test_closed_forms_match_counted_parameters():
    bb = M.Backbone(key=KEY)
    chans, depths = (16, 32, 64), (1, 1, 4)
    want_bb = sum(TM.patch_embed_params(a, b) for a, b in zip((3, 16, 32), chans, strict=True))
    want_bb += sum(d * TM.block_params(c) for c, d in zip(chans, depths, strict=True))
    assert nn.count_params(bb) == want_bb + sum(2 * c for c in chans)
    for kw in (dict(), dict(extractor="embed", subspaces=1, mix="none", norm=False)):
        m = M.mixprompt(bb, 5, head_embed=8, key=KEY, **kw)
        assert nn.count_params(m) == TM.mixprompt_params(chans, 5, head_embed=8, **kw)["total"]


def test_resnet50_stem_layer1_count_from_the_note():
    # the official model uses only the ResNet-50 stem + layer1, 225,344 parameters
    # (docs/papers/mixprompt.md#departures-and-why)
    assert TM.resnet50_stem_layer1_params() == 225_344


def test_paper_rows_round_to_the_ablation_table():
    p = TM.paper_trainable_params(41)
    assert [round(p[k] / 1e5) / 10 for k in ("full", "without_extractor")] == [5.7, 5.5]
    assert round(p["without_mixed_prompting"] / 1e5) / 10 == 5.4


def test_pretrained_extractor_copies_the_backbone_stage_one():
    bb = M.Backbone(key=KEY, **SMALL)
    m = M.mixprompt(bb, 3, key=KEY)
    for a, b in zip(
        jax.tree.leaves((bb.embeds[0], *bb.stages[0])), jax.tree.leaves(m.extractor), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    r = M.mixprompt(bb, 3, extractor="random", key=KEY)
    assert not np.array_equal(r.extractor[0].weight, bb.embeds[0].weight)


def test_gradients_reach_every_prompt_parameter_and_never_the_backbone():
    bb = M.Backbone(key=KEY, **SMALL)
    m = M.mixprompt(bb, 3, key=jax.random.key(1))
    x, a = jax.random.normal(jax.random.key(2), (2, 2, 8, 8, 3))
    y = jax.random.randint(jax.random.key(3), (2, 8, 8), 0, 3)
    tr, fr = nn.split(m)
    assert all(v is None for v in jax.tree.leaves(tr.backbone, is_leaf=lambda v: v is None))

    def loss(t):
        logits = nn.combine(t, fr)(x, a)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

    g = eqx.filter_jit(eqx.filter_grad(loss))(tr)
    leaves = jax.tree_util.tree_leaves_with_path(g)
    assert len(leaves) == len(jax.tree.leaves(tr))
    for path, leaf in leaves:
        assert bool(jnp.any(leaf != 0)), jax.tree_util.keystr(path)


def test_models_output_logits_at_input_size():
    bb = M.Backbone(key=KEY, **SMALL)
    x = jnp.zeros((3, 8, 8, 3))
    for m in (
        M.mixprompt(bb, 4, key=KEY),
        M.RGBSegmenter(bb, 4, key=KEY),
        M.two_branch(bb, 4, key=KEY),
    ):
        assert eqx.filter_jit(lambda m, a: m(a, a))(m, x).shape == (3, 8, 8, 4)


@pytest.mark.parametrize("extractor", ["pretrained", "random", "embed"])
def test_every_built_model_takes_the_backbones_dtype(extractor):
    # the heads, adapters and fusion layers took JAX's default float (float64 under x64) around
    # a float32 backbone
    with jax.enable_x64(True):
        bb = M.Backbone(dtype=jnp.float32, key=KEY, **SMALL)
        models = (
            M.mixprompt(bb, 4, extractor=extractor, key=KEY),
            M.RGBSegmenter(bb, 4, key=KEY),
            M.two_branch(bb, 4, key=KEY),
        )
    for m in models:
        leaves = jax.tree.leaves(eqx.filter(m, eqx.is_inexact_array))
        assert {str(a.dtype) for a in leaves} == {"float32"}, type(m).__name__


def test_bad_input_names_the_argument():
    bb = M.Backbone(key=KEY, **SMALL)
    m = M.mixprompt(bb, 3, key=KEY)
    with pytest.raises(ValueError, match="rgb"):
        m(jnp.zeros((2, 8, 8, 1)), jnp.zeros((2, 8, 8, 3)))
    with pytest.raises(ValueError, match="aux"):
        m(jnp.zeros((2, 8, 8, 3)), jnp.zeros((8, 3)))
    with pytest.raises(ValueError, match="subspaces"):
        M.MixedPromptAdapter(16, 4, 3, key=KEY)
    with pytest.raises(ValueError, match="rank_ratio"):
        M.MixedPromptAdapter(16, 3, key=KEY)
    with pytest.raises(ValueError, match="num_classes"):
        M.mixprompt(bb, 1, key=KEY)
    with pytest.raises(ValueError, match="mix"):
        M.MixedPromptAdapter(16, mix="rgb-and-depth", key=KEY)
    with pytest.raises(ValueError, match="n="):
        M.split_subspaces(jnp.zeros((2, 6)), 4)
    with pytest.raises(ValueError, match="omega"):
        M.mix_subspaces(jnp.zeros((2, 8)), jnp.zeros((2, 3)))
