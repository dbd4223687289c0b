"""inject / split / merge / save-load, shared by every adapter method."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nn
import nn.adapters as ad

CONFIGS = {
    "lora": dict(r=2),
    "lora_rs": dict(r=2, rslora=True, alpha=4.0),
    "polar": dict(r=2),
    "unilora": dict(r=2, d=17),
    "vera": dict(r=6),
    "tied_lora": dict(r=3),
    "tied_frozen": dict(r=3, train_ab=False),
    "vblora": dict(r=2, num_vectors=5, vector_length=4),
}
METHOD = {"lora_rs": "lora", "tied_frozen": "tied_lora"}


def _base(seed=0):
    return nn.MLP(8, 4, 16, 2, activation=jax.nn.relu, key=jax.random.key(seed))


def _perturbed(name, seed):
    """An adapted MLP with every trainable leaf moved off its init (so Delta W != 0)."""
    a = ad.inject(_base(), METHOD.get(name, name), key=jax.random.key(seed), **CONFIGS[name])
    tr, fr = nn.split(a)
    leaves, td = jax.tree.flatten(tr)
    keys = jax.random.split(jax.random.key(seed + 100), len(leaves))
    leaves = [x + 0.1 * jax.random.normal(k, x.shape, x.dtype)
              for x, k in zip(leaves, keys, strict=True)]
    return nn.combine(jax.tree.unflatten(td, leaves), fr)


X = jax.random.normal(jax.random.key(7), (5, 8))
fwd = eqx.filter_jit(lambda m, x: m(x))  # one compile per model structure, not per op


@pytest.mark.parametrize("name", list(CONFIGS))
def test_merge_equals_unmerged_float64(name):
    y0 = fwd(_base(), X)
    for seed in range(2):
        a = _perturbed(name, seed)
        merged = ad.merge(a)
        assert not any(isinstance(n, nn.Frozen) for n in jax.tree.leaves(
            merged, is_leaf=lambda n: isinstance(n, nn.Frozen)))
        y, ym = fwd(a, X), fwd(merged, X)
        assert float(jnp.max(jnp.abs(y - y0))) > 1e-6  # the adapter does something
        np.testing.assert_allclose(ym, y, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(y))))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_save_load_round_trip_regenerates_frozen(name, tmp_path):
    a = _perturbed(name, 3)
    path = tmp_path / "adapter.npz"
    ad.save_adapter(path, a)
    b = ad.load_adapter(path, _base())
    ta, fa = nn.split(a)
    tb, fb = nn.split(b)
    for u, v in zip(jax.tree.leaves(ta), jax.tree.leaves(tb), strict=True):
        np.testing.assert_array_equal(u, v)
    for u, v in zip(jax.tree.leaves(fa), jax.tree.leaves(fb), strict=True):
        np.testing.assert_array_equal(u, v)  # frozen random bases rebuilt from the key
    np.testing.assert_array_equal(fwd(a, X), fwd(b, X))
    header = ad.read_header(path)
    assert header["spec"]["method"] == METHOD.get(name, name)


def test_load_rejects_other_base(tmp_path):
    a = _perturbed("lora", 0)
    ad.save_adapter(tmp_path / "a.npz", a)
    other = nn.MLP(8, 4, 12, 2, key=jax.random.key(0))
    with pytest.raises(ValueError, match="model"):
        ad.load_adapter(tmp_path / "a.npz", other)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_param_count_equals_formula(name):
    for seed, (width, depth) in enumerate([(16, 1), (16, 2), (32, 3)]):
        base = nn.MLP(8, 4, width, depth, key=jax.random.key(seed))
        a = ad.inject(base, METHOD.get(name, name), key=jax.random.key(seed), **CONFIGS[name])
        cfg = a.spec.config_dict
        assert nn.count_params(a) == ad.num_params(a.spec.method, a.spec.shapes, **cfg)
    # the closed forms themselves, on one hand-computed case (two layers 16x8 and 4x16)
    shapes = [(16, 8), (4, 16)]
    assert ad.num_params("lora", shapes, r=2) == 2 * (24 + 20)
    assert ad.num_params("polar", shapes, r=2) == 2 * (24 + 20) + 2 * 4
    assert ad.num_params("unilora", shapes, d=17) == 17
    assert ad.num_params("vera", shapes, r=6) == (16 + 6) + (4 + 6)
    assert ad.num_params("tied_lora", shapes, r=3, train_ab=True) == 19 + 7 + 3 * (16 + 16)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_adapter_keeps_the_base_dtype(name):
    """A float32 model stays float32 under x64: trainables (shared vectors included) and output."""
    base = nn.MLP(8, 4, 16, 2, activation=jax.nn.relu, dtype=jnp.float32, key=jax.random.key(0))
    a = ad.inject(base, METHOD.get(name, name), key=jax.random.key(1), **CONFIGS[name])
    assert {x.dtype for x in jax.tree.leaves(nn.split(a)[0])} == {jnp.dtype(jnp.float32)}
    assert fwd(a, X.astype(jnp.float32)).dtype == jnp.float32


def test_frozen_leaves_unchanged_after_adamw_with_weight_decay():
    a = ad.inject(_base(), "vera", key=jax.random.key(0), r=6, train="layers.*.bias")
    _, frozen0 = nn.split(a)
    y = jnp.sin(X[:, :4])
    loss = lambda m, b, key=None: jnp.mean((m(b[0]) - b[1]) ** 2)  # noqa: E731
    res = nn.train(a, loss, lambda t: (X, y), optax.adamw(1e-2, weight_decay=0.5), 100,
                   key=jax.random.key(0), progress=False)
    tr1, frozen1 = nn.split(res.model)
    for u, v in zip(jax.tree.leaves(frozen0), jax.tree.leaves(frozen1), strict=True):
        np.testing.assert_array_equal(u, v)
    assert res.losses[-1] < res.losses[0]


def test_targets_on_transformer_and_train_selector():
    lm = nn.TransformerLM(11, 8, 2, 2, 6, key=jax.random.key(0))
    a = ad.inject(lm, "lora", targets=["q_proj", "v_proj"], key=jax.random.key(1), r=2,
                  train="head.*")
    assert sorted(a.layers()) == sorted(
        f"blocks.{i}.attn.{p}" for i in range(2) for p in ("q_proj", "v_proj"))
    assert nn.count_params(a) == 4 * 2 * (8 + 8) + 11 * 8
    toks = jnp.arange(5)[None] % 11
    np.testing.assert_array_equal(fwd(a, toks), fwd(lm, toks))  # B = 0 at init: exactly the base


def test_bad_input():
    base = _base()
    k = jax.random.key(0)
    with pytest.raises(ValueError, match="`r`"):
        ad.inject(base, "lora", key=k, r=5)  # last layer is 4 x 16
    with pytest.raises(ValueError, match="targets"):
        ad.inject(base, "lora", targets="q_proj", key=k, r=2)
    with pytest.raises(ValueError, match="method"):
        ad.inject(base, "dora", key=k)
    with pytest.raises(ValueError, match="`d`"):
        ad.inject(base, "unilora", key=k, r=2, d=10**6)
    with pytest.raises(ValueError, match="vector_length"):
        ad.inject(base, "vblora", key=k, r=2, vector_length=3)
    with pytest.raises(ValueError, match="unknown"):
        ad.inject(base, "lora", key=k, rank=2)
    with pytest.raises(ValueError, match="`m`"):
        ad.stable_rank(jnp.ones(3))
    with pytest.raises(TypeError, match="adapted"):
        ad.merge(base)
