"""inject / split / merge / save-load, named adapters, dropout, file errors (every method)."""

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
    leaves = [
        x + 0.1 * jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, keys, strict=True)
    ]
    return nn.combine(jax.tree.unflatten(td, leaves), fr)


X = jax.random.normal(jax.random.key(7), (5, 8))
fwd = eqx.filter_jit(lambda m, x: m(x))  # one compile per model structure, not per op


@pytest.mark.slow  # the default run checks every method on every target kind in test_models.py
@pytest.mark.parametrize("name", list(CONFIGS))
def test_merge_equals_unmerged_float64(name):
    y0 = fwd(_base(), X)
    for seed in range(2):
        a = _perturbed(name, seed)
        merged = ad.merge(a)
        assert eqx.tree_equal(jax.tree.structure(merged), jax.tree.structure(_base()))
        y, ym = fwd(a, X), fwd(merged, X)
        assert float(jnp.max(jnp.abs(y - y0))) > 1e-6  # the adapter does something
        np.testing.assert_allclose(ym, y, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(y))))


@pytest.mark.slow  # test_models.py saves and loads every method in the default run
@pytest.mark.parametrize("name", list(CONFIGS))
def test_save_load_round_trip_regenerates_frozen(name, tmp_path):
    a = _perturbed(name, 3)
    path = tmp_path / "adapter.safetensors"
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
    assert header["method"] == METHOD.get(name, name) and header["name"] == "default"
    assert (tmp_path / "adapter.json").is_file()


def test_load_rejects_other_base(tmp_path):
    a = _perturbed("lora", 0)
    ad.save_adapter(tmp_path / "a.safetensors", a)
    other = nn.MLP(8, 4, 12, 2, key=jax.random.key(0))
    with pytest.raises(ValueError, match="model"):
        ad.load_adapter(tmp_path / "a.safetensors", other)


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
    res = nn.train(
        a,
        loss,
        lambda t: (X, y),
        optax.adamw(1e-2, weight_decay=0.5),
        100,
        key=jax.random.key(0),
        progress=False,
    )
    tr1, frozen1 = nn.split(res.model)
    for u, v in zip(jax.tree.leaves(frozen0), jax.tree.leaves(frozen1), strict=True):
        np.testing.assert_array_equal(u, v)
    assert res.losses[-1] < res.losses[0]


def test_targets_on_transformer_and_train_selector():
    lm = nn.TransformerLM(11, 8, 2, 2, 6, key=jax.random.key(0))
    a = ad.inject(
        lm, "lora", targets=["q_proj", "v_proj"], key=jax.random.key(1), r=2, train="head.*"
    )
    assert sorted(a.layers()) == sorted(
        f"blocks.{i}.attn.{p}" for i in range(2) for p in ("q_proj", "v_proj")
    )
    assert nn.count_params(a) == 4 * 2 * (8 + 8) + 11 * 8
    toks = jnp.arange(5)[None] % 11
    np.testing.assert_array_equal(fwd(a, toks), fwd(lm, toks))  # B = 0 at init: exactly the base


@pytest.mark.parametrize("method", sorted(set(ad.METHODS) - {"tfb"}))
def test_unknown_option_rejected_by_every_method(method):
    """One check in ``AdapterLayer.check_config``: every method names its options and rejects others
    (``tfb`` is built from a trained LoRA, not by ``inject``)."""
    cls = ad.METHODS[method]
    assert cls.options and "rank" not in cls.options
    with pytest.raises(ValueError, match=r"takes the options .*unknown option\(s\) \['rank'\]"):
        ad.inject(_base(), method, key=jax.random.key(0), rank=2)


def test_bad_input():
    base = _base()
    k = jax.random.key(0)
    with pytest.raises(ValueError, match="`r`"):
        ad.inject(base, "lora", key=k, r=5)  # last layer is 4 x 16
    with pytest.raises(ValueError, match="targets"):
        ad.inject(base, "lora", targets="q_proj", key=k, r=2)
    with pytest.raises(ValueError, match="adaptable"):
        ad.inject(base.layers[0].weight, "lora", key=k, r=2)
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
    with pytest.raises(ValueError, match="`r`.*got 0"):
        ad.lora_scale(0, 1.0)
    with pytest.raises(ValueError, match="`alpha`"):
        ad.lora_scale(2, -1.0, rslora=True)


def test_load_errors_name_the_path(tmp_path):
    a = _perturbed("lora", 0)
    path = tmp_path / "a.safetensors"
    with pytest.raises(ValueError, match="does not exist") as err:
        ad.load_adapter(path, _base())
    assert str(path) in str(err.value)
    (tmp_path / "d.safetensors").mkdir()
    with pytest.raises(ValueError, match="directory"):
        ad.load_adapter(tmp_path / "d.safetensors", _base())
    with pytest.raises(ValueError, match=".safetensors"):
        ad.load_adapter(tmp_path, _base())
    ad.save_adapter(path, a)
    cfg = tmp_path / "a.json"
    good = cfg.read_text()
    for bad, msg in (
        ("{not json", "not valid JSON"),
        ('{"format": "peft"}', "theorylab-adapter"),
        (good.replace('"method": "lora"', '"method": "dora"'), "method"),
    ):
        cfg.write_text(bad)
        with pytest.raises(ValueError, match=msg) as err:
            ad.load_adapter(path, _base())
        assert "a.json" in str(err.value)
    cfg.write_text(good)
    path.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="safetensors") as err:
        ad.load_adapter(path, _base())
    assert str(path) in str(err.value)


def test_named_adapters_set_active_disable_unload_merge():
    base = _base()
    a = _perturbed("lora", 0)
    with pytest.raises(ValueError, match="name"):
        ad.inject(a, "vera", key=jax.random.key(1), r=6)  # a second inject is never implicit
    with pytest.raises(ValueError, match="already"):
        ad.inject(a, "vera", key=jax.random.key(1), name="default", r=6)
    with pytest.raises(ValueError, match="Adapted"):
        ad.inject(a.model, "vera", key=jax.random.key(1), name="b", r=6)
    b = _perturbed("vera", 1)
    ab = ad.inject(a, "vera", key=jax.random.key(1), name="b", r=6)
    ab = eqx.tree_at(lambda m: m.banks["b"]["theta"], ab, b.banks["default"]["theta"])
    assert ab.names == ("default", "b") and ab.active == ("default",)
    y0, ya, yb = fwd(base, X), fwd(a, X), fwd(b, X)
    np.testing.assert_array_equal(fwd(ab, X), ya)  # adding does not change the active adapter
    np.testing.assert_allclose(fwd(ab.set_active("b"), X), yb, rtol=0, atol=1e-13)
    both = ab.set_active("default", "b")
    merged = ad.merge(both)  # the two updates add in every layer
    da, db = ad.delta_weights(ab, name="default"), ad.delta_weights(ab, name="b")
    for i, p in enumerate(sorted(da)):
        np.testing.assert_allclose(
            merged.layers[i].weight, base.layers[i].weight + da[p] + db[p], rtol=0, atol=1e-13
        )
    np.testing.assert_allclose(fwd(merged, X), fwd(both, X), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(fwd(both.disable(), X), y0)
    with ad.disabled(both) as off:
        np.testing.assert_array_equal(fwd(off, X), y0)
    np.testing.assert_array_equal(fwd(both.disable().enable(), X), fwd(both, X))
    assert eqx.tree_equal(ad.unload(both), base)
    # only the active adapters train; the mask sits beside the model
    assert nn.count_params(ab) == nn.count_params(a)
    assert nn.count_params(ab.set_active("b")) == nn.count_params(b)
    assert nn.count_params(both) == nn.count_params(a) + nn.count_params(b)
    with pytest.raises(ValueError, match="2 adapters"):
        both.layers()
    assert set(both.layers("b")) == set(a.layers())
    with pytest.raises(ValueError, match="name"):
        ab.set_active("c")


def test_named_adapter_files_round_trip(tmp_path):
    a = _perturbed("lora", 0)
    ab = ad.inject(a, "ravan", key=jax.random.key(1), name="fed", r=2, heads=2)
    ab = eqx.tree_at(
        lambda m: [q.H for q in m.layers("fed").values()],
        ab,
        [jnp.ones_like(q.H) for q in ab.layers("fed").values()],
    )
    ad.save_adapter(tmp_path / "fed.safetensors", ab, name="fed")
    loaded = ad.load_adapter(tmp_path / "fed.safetensors", a)  # added to an adapted model
    assert loaded.names == ("default", "fed")
    np.testing.assert_array_equal(fwd(loaded.set_active("fed"), X), fwd(ab.set_active("fed"), X))


def test_adapter_dropout_is_unbiased_and_off_without_a_key():
    """PEFT's lora_dropout: the adapter branch sees dropout(x) (inverted, rate p) when called with
    a key; E[B A dropout(x)] = B A x, checked within 4 standard errors over draws."""
    a = ad.inject(_base(), "lora", targets="layers.0", key=jax.random.key(0), r=2, dropout=0.5)
    a = eqx.tree_at(lambda m: m.layers()["layers.0"].B, a, jnp.ones((16, 2)))
    layer = a.bind().layers[0]
    x = X[0]
    ref = layer(x)
    np.testing.assert_array_equal(fwd(a, X), fwd(a, X))  # no key: deterministic, no dropout
    draws = jax.vmap(lambda k: layer(x, key=k))(jax.random.split(jax.random.key(1), 4000))
    assert float(jnp.max(jnp.abs(draws[0] - ref))) > 1e-3
    mean, se = draws.mean(0), draws.std(0, ddof=1) / np.sqrt(4000)
    assert np.all(np.abs(mean - ref) < 4 * se + 1e-12)
    with pytest.raises(ValueError, match="dropout"):
        ad.inject(_base(), "lora", key=jax.random.key(0), r=2, dropout=1.0)


def test_package_embedding_and_linear_targets_merge():
    lm = nn.TransformerLM(11, 8, 2, 1, 6, key=jax.random.key(0))
    assert ad.target_paths(lm)["embed"] == "embedding"
    a = ad.inject(
        lm, "lora", targets=["embed", "pos_embed", "q_proj", "head"], key=jax.random.key(1), r=2
    )
    a = eqx.tree_at(
        lambda m: [q.B for q in m.layers().values()],
        a,
        [jnp.full_like(q.B, 0.1) for q in a.layers().values()],
    )
    toks = jnp.arange(5)[None] % 11
    y = fwd(a, toks)
    assert float(jnp.max(jnp.abs(y - fwd(lm, toks)))) > 1e-3
    np.testing.assert_allclose(
        fwd(ad.merge(a), toks), y, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(y)))
    )


def test_a_method_name_is_registered_once():
    """Another class under a taken name is refused; the same class definition imported a second
    time (pytest's importlib mode runs a module file anew) keeps the first registration."""
    from nn.adapters._core import METHODS, register_method

    first = METHODS["lora"]

    class Other(ad.AdapterLayer):
        pass

    with pytest.raises(ValueError, match="'lora' is registered twice"):
        register_method("lora")(Other)
    twin = type(first.__name__, (first,), {"__module__": first.__module__})
    twin.__qualname__ = first.__qualname__
    assert register_method("lora")(twin) is twin
    assert METHODS["lora"] is first


def test_keys_and_trees_are_named_when_wrong():
    mlp = nn.MLP(4, 2, 3, 1, key=jax.random.key(0))
    for bad in (None, np.random.default_rng(0), jax.random.split(jax.random.key(0), 2)):
        with pytest.raises((TypeError, ValueError), match="`key`"):
            ad.inject(mlp, "lora", key=bad, r=1)
    with pytest.raises(ValueError, match="`tree`"):
        ad.stiefel_mask(ad.inject(mlp, "lora", key=jax.random.key(1), r=1))
    a = ad.inject(mlp, "ravan", "layers.0", key=jax.random.key(1), r=1, heads=3)
    with pytest.raises((TypeError, ValueError), match="`key`"):
        ad.ravan_select_heads(a, 1, key="seed")
