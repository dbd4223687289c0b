"""Shared pieces of the adapter claims: a jitted training loop, stacking of seeds' models for one
``vmap``-ed compilation, a small ReLU MLP pretrained here on a synthetic teacher, and its numpy
forward pass for drawing data (eager JAX operations each compile, which dominates small runs)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from paper_checks import memo


def train_loop(loss, opt):
    """A jitted loop ``(tr, fr, xs, *data) -> (tr, losses)``: one ``opt`` step on
    ``loss(model, x, *data)`` per element ``x`` of ``xs`` (:func:`nn.fit`). Passing the data as
    arguments rather than closing over it lets every seed reuse one compilation."""

    @eqx.filter_jit
    def go(tr, fr, xs, *data):
        tr, _, ls = nn.fit(lambda m, x: loss(m, x, *data), opt, tr, xs, frozen=fr)
        return tr, ls

    return go


def stack_trees(trees, like=None):
    """Stack pytrees leaf by leaf along a new axis 0, in the structure of ``like`` (default
    ``trees[0]``). Adapted models of different seeds or sizes differ only in static metadata
    (the spec's seed and sizes), which the forward pass does not read, so one structure serves
    them all and every seed runs in one ``vmap``-ed compilation."""
    leaves = zip(*map(jax.tree.leaves, trees), strict=True)
    ref = trees[0] if like is None else like

    def stack(v):  # through numpy (an eager jnp.stack compiles per shape); keys as they are
        if isinstance(v[0], jax.Array) and jax.dtypes.issubdtype(v[0].dtype, jax.dtypes.prng_key):
            return jnp.stack(v)
        return jnp.asarray(np.stack([np.asarray(a) for a in v]))

    return jax.tree.unflatten(jax.tree.structure(ref), [stack(v) for v in leaves])


def cast_floats(tree, dtype):
    """``tree`` with every floating-point array cast to ``dtype`` (integer leaves, keys and
    static fields as they are); float32 needs ``jax.enable_x64(False)``, float64 ``True``."""

    def cast(a):  # through numpy: an eager JAX cast compiles a program per shape
        return jnp.asarray(np.asarray(a).astype(dtype)) if eqx.is_inexact_array(a) else a

    return jax.tree.map(cast, tree)


def fit(model, loss, opt, steps):
    """Full-batch training of the trainable half of ``model`` for ``steps`` (one jitted scan)."""
    tr, fr = nn.split(model)
    tr, ls = train_loop(lambda m, _: loss(m), opt)(tr, fr, jnp.arange(steps))
    return nn.combine(tr, fr), np.asarray(ls)


D_IN, WIDTH, D_OUT = 16, 32, 4


@memo
def pretrained(n: int, steps: int, seed: int = 0):
    """Teacher (a random ReLU MLP), a student pretrained on it by full-batch Adam on ``n`` inputs
    for ``steps``, and the student's final loss; every draw from ``seed``."""
    with jax.enable_x64(True):
        kt, kx, ks = jax.random.split(jax.random.key(seed), 3)
        teacher = nn.MLP(D_IN, D_OUT, WIDTH, 2, activation=jax.nn.relu, key=kt)
        x = jax.random.normal(kx, (n, D_IN))
        student = nn.MLP(D_IN, D_OUT, WIDTH, 2, activation=jax.nn.relu, key=ks)
        student, ls = fit(
            student, lambda m: jnp.mean((m(x) - teacher(x)) ** 2), optax.adam(3e-3), steps
        )
        return teacher, student, float(ls[-1])


def np_mlp(mlp, x, weights=None):
    """The forward pass of a ReLU ``nn.MLP`` in numpy (float64), with the hidden weights
    optionally replaced by ``weights`` (a dict index -> array): data generation without
    compiling JAX operations one by one."""
    h = np.asarray(x, np.float64)
    layers = mlp.layers
    for i, lin in enumerate(layers):
        w = np.asarray((weights or {}).get(i, lin.weight), np.float64)
        h = h @ w.T + np.asarray(lin.bias, np.float64)
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h


def xent(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y)
