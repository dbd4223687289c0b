"""Every method on third-party-style equinox models: a CNN (eqx.nn.Conv2d + eqx.nn.Linear) and an
attention model (eqx.nn.Embedding + eqx.nn.MultiheadAttention + eqx.nn.Linear), side by side with
the package's nn.Embedding and nn.Linear: inject, train a few AdamW steps with weight decay
(frozen arrays bit-identical), merge (== unmerged to 1e-12 in float64; per layer in the slow
test), save, load (same outputs). Three methods run in the default set (LoRA, a shared-vector
method and a non-mergeable routed one), the others in the slow set: each method costs its own
compilation of the whole model. Curvature Tuning (trainable) on the CNN and an ``eqx.nn.MLP``."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nn
import nn.adapters as ad


class CNN(eqx.Module):
    conv1: eqx.nn.Conv2d
    conv2: eqx.nn.Conv2d
    fc: eqx.nn.Linear
    act: eqx.nn.Lambda

    def __init__(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(2, 4, 3, padding=1, key=k1)
        self.conv2 = eqx.nn.Conv2d(4, 8, 3, stride=2, key=k2)
        self.fc = eqx.nn.Linear(8, 4, key=k3)
        self.act = eqx.nn.Lambda(jax.nn.relu)

    def __call__(self, x, *, key=None):  # one image (2, 8, 8)
        h = self.act(self.conv2(self.act(self.conv1(x))))
        return self.fc(jnp.mean(h, axis=(1, 2)))


class Attention(eqx.Module):
    embed: eqx.nn.Embedding
    attn: eqx.nn.MultiheadAttention
    head: eqx.nn.Linear

    def __init__(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.embed = eqx.nn.Embedding(12, 8, key=k1)
        self.attn = eqx.nn.MultiheadAttention(2, 8, key=k2)
        self.head = eqx.nn.Linear(8, 4, key=k3)

    def __call__(self, ids, *, key=None):  # one sequence of token ids (T,)
        h = jax.vmap(self.embed)(ids)
        h = h + self.attn(h, h, h)
        return self.head(jnp.mean(h, axis=0))


class Zoo(eqx.Module):
    """The two third-party-style models side by side with the package's own layers, so that one
    adapter covers every target kind: ``cnn(image) + attention(ids) + head(mean(embed(ids)))``."""

    cnn: CNN
    attention: Attention
    embed: nn.Embedding
    head: nn.Linear

    def __init__(self, key):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.cnn, self.attention = CNN(k1), Attention(k2)
        self.embed = nn.Embedding(12, 8, init_std=1.0, key=k3)
        self.head = nn.Linear(8, 4, key=k4)

    def __call__(self, x, *, key=None):
        image, ids = x
        return self.cnn(image) + self.attention(ids) + self.head(jnp.mean(self.embed(ids), axis=0))


TARGETS = [
    "cnn.conv*",
    "cnn.fc",
    "attention.embed",
    "attention.attn.*_proj",
    "attention.head",
    "embed",
    "head",
]
KINDS = {
    "cnn.conv1": "conv (eqx Conv2d)",
    "cnn.conv2": "conv (eqx Conv2d)",
    "cnn.fc": "linear (eqx Linear)",
    "attention.embed": "embedding (eqx Embedding)",
    "attention.head": "linear (eqx Linear)",
    "embed": "embedding (nn.Embedding)",
    "head": "linear (nn.Linear)",
}


@functools.cache
def _zoo():
    """The base model, built once (one compilation of its initialisers)."""
    return eqx.filter_jit(Zoo)(jax.random.key(0))


@functools.cache
def _data(n=6):
    rng = np.random.default_rng(1)
    image = jnp.asarray(rng.standard_normal((n, 2, 8, 8)))
    ids = jnp.asarray(rng.integers(0, 12, (n, 5)))
    return (image, ids), jnp.asarray(rng.integers(0, 4, n))


CONFIGS = {
    "lora": dict(r=2),
    "polar": dict(r=2),
    "unilora": dict(r=2, d=20),
    "vera": dict(r=4),
    "tied_lora": dict(r=2),
    "vblora": dict(r=2, num_vectors=6, vector_length=2),
    "ravan": dict(r=2, heads=2),
    "moore": dict(r=2, num_experts=4, task_dim=3),
    "tfb": dict(r=2),  # a trained LoRA, Bayesianised
}


def _at(tree, path):
    for k in path.split("."):
        tree = tree[int(k)] if isinstance(tree, (list, tuple)) else getattr(tree, k)
    return tree


@eqx.filter_jit
def _apply(layer, x):
    return layer(x)


def layer_merge_errors(a, merged, key):
    """``{path: (kind, max |merged layer(x) - adapted layer(x)| / max |adapted layer(x)|)}``."""
    bound = a.bind()
    out = {}
    for i, (p, kind) in enumerate(ad.target_paths(a).items()):
        base = _at(a.model, p).base
        k = jax.random.fold_in(key, i)
        if kind == "conv":
            x = jax.random.normal(k, (base.in_channels, 8, 8))
        elif kind == "embedding":
            x = jnp.asarray(7)
        else:
            x = jax.random.normal(k, (base.weight.shape[1],))
        y = _apply(_at(bound, p), x)
        out[p] = (
            kind,
            float(jnp.max(jnp.abs(_apply(_at(merged, p), x) - y)) / jnp.max(jnp.abs(y))),
        )
    return out


def _kind(path):
    return KINDS.get(path, "linear (eqx MultiheadAttention projection)")


def _adapt_and_train(method, steps=3, dropout=0.0):
    base = _zoo()
    x, y = _data()
    a = ad.inject(
        base,
        "lora" if method == "tfb" else method,
        TARGETS,
        key=jax.random.key(4),
        dropout=dropout,
        **CONFIGS[method],
    )

    def loss(m, key):
        logits = jax.vmap(lambda xi, ki: m(xi, key=ki))(x, jax.random.split(key, y.shape[0]))
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

    opt = optax.adamw(0.05, weight_decay=0.5)

    @eqx.filter_jit
    def step(tr, fr, state, key):
        g = eqx.filter_grad(lambda t: loss(nn.combine(t, fr), key))(tr)
        upd, state = opt.update(g, state, tr)
        return eqx.apply_updates(tr, upd), state

    tr0, fr = nn.split(a)
    tr, state = tr0, opt.init(tr0)
    for t in range(steps):
        tr, state = step(tr, fr, state, jax.random.key(10 + t))
    return base, x, a, tr0, fr, nn.combine(tr, fr)


fwd = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))


DEFAULT_SET = ("lora", "unilora", "moore")


@pytest.mark.parametrize(
    "method",
    [m if m in DEFAULT_SET else pytest.param(m, marks=pytest.mark.slow) for m in CONFIGS],
)
def test_every_method_on_equinox_models(method, tmp_path):
    base, x, a, tr0, fr, trained = _adapt_and_train(method)
    assert sorted(a.layers()) == sorted(ad.target_paths(a))
    assert set(ad.target_paths(a).values()) == {"linear", "conv", "embedding"}
    # the frozen half never moved (the base included, under weight decay); every adapter did
    tr1, fr1 = nn.split(trained)
    for u, v in zip(jax.tree.leaves(fr), jax.tree.leaves(fr1), strict=True):
        np.testing.assert_array_equal(u, v)
    assert all(
        not np.array_equal(u, v)
        for u, v in zip(jax.tree.leaves(tr0), jax.tree.leaves(tr1), strict=True)
    )
    if method == "tfb":
        trained = ad.tfb_bayesianize(trained, 0.05)
        assert nn.count_params(trained) == 0
    out = fwd(trained, x)
    assert float(jnp.max(jnp.abs(out - fwd(base, x)))) > 1e-4  # the adapters do something
    if method == "moore":
        with pytest.raises(ValueError, match="not mergeable"):
            ad.merge(trained)
    else:
        merged = ad.merge(trained)
        assert jax.tree.structure(merged) == jax.tree.structure(base)  # plain layers again
        np.testing.assert_allclose(
            fwd(merged, x), out, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(out)))
        )
    path = tmp_path / "adapter.safetensors"
    ad.save_adapter(path, trained)
    loaded = ad.load_adapter(path, base)
    np.testing.assert_array_equal(fwd(loaded, x), out)


@pytest.mark.slow
@pytest.mark.parametrize("method", [m for m in CONFIGS if m != "moore"])
def test_merge_error_per_target_kind(method):
    """Layer by layer (each target kind on its own input): merged == unmerged to 1e-12."""
    *_, trained = _adapt_and_train(method, dropout=0.0 if method == "tfb" else 0.1)
    if method == "tfb":
        trained = ad.tfb_bayesianize(trained, 0.05)
    merged = ad.merge(trained)
    for p, (kind, err) in layer_merge_errors(trained, merged, jax.random.key(5)).items():
        assert err < 1e-12, (p, kind, err)


def test_trainable_ct_on_equinox_models():
    """``ct_trainable`` on the CNN (an ``eqx.nn.Lambda(relu)``: one (beta, c) per site) and on an
    ``eqx.nn.MLP`` (per neuron, ``(depth, width)``): at beta -> 1 the model is the ReLU model, the
    mask holds exactly the CT parameters and the probe, and the loss moves every one of them."""
    cnn = _zoo().cnn
    mlp = eqx.nn.MLP(3, 2, 5, 2, key=jax.random.key(7))
    (image, _), y = _data()
    xm = jnp.asarray(np.random.default_rng(2).standard_normal((6, 3)))
    for model, x, probe, count in ((cnn, image, "fc", 2 + 8 * 4 + 4), (mlp, xm, (), 2 * 2 * 5)):
        ct, mask = ad.ct_trainable(model, train=probe)
        assert nn.count_params(ct, mask) == count
        near_relu, _ = ad.ct_trainable(model, beta0=1 - 1e-12)
        np.testing.assert_allclose(fwd(near_relu, x), fwd(model, x), atol=1e-9)
        tr, fr = nn.split(ct, mask)

        @eqx.filter_jit
        def grad(t, fr, x):
            logits = jax.vmap(nn.combine(t, fr))(x)
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y % 2))

        g = eqx.filter_grad(grad)(tr, fr, x)
        assert all(float(jnp.min(jnp.abs(v))) > 0 for v in jax.tree.leaves(g))
    with pytest.raises(ValueError, match="no jax.nn.relu"):
        ad.ct_trainable(_zoo().attention)
