"""Shared pieces of the adapter claims: a jitted training loop, stacking of seeds' models for one
``vmap``-ed compilation, and a small ReLU MLP pretrained here on a synthetic teacher together with
shifted tasks (the teacher's hidden weight moved by a low-rank perturbation)."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn


def train_loop(loss, opt):
    """A jitted loop ``(tr, fr, xs, *data) -> (tr, losses)``: one ``opt`` step on
    ``loss(model, x, *data)`` per element ``x`` of ``xs`` (one ``lax.scan``). Passing the data as
    arguments rather than closing over it lets every seed reuse one compilation."""

    @eqx.filter_jit
    def go(tr, fr, xs, *data):
        def step(c, x):
            tr, st = c
            val, g = eqx.filter_value_and_grad(lambda t: loss(nn.combine(t, fr), x, *data))(tr)
            u, st = opt.update(g, st, tr)
            return (eqx.apply_updates(tr, u), st), val

        (tr, _), ls = jax.lax.scan(step, (tr, opt.init(tr)), xs)
        return tr, ls

    return go


def stack_trees(trees, like=None):
    """Stack pytrees leaf by leaf along a new axis 0, in the structure of ``like`` (default
    ``trees[0]``). Adapted models of different seeds or sizes differ only in static metadata
    (the spec's seed and sizes), which the forward pass does not read, so one structure serves
    them all and every seed runs in one ``vmap``-ed compilation."""
    leaves = zip(*map(jax.tree.leaves, trees), strict=True)
    ref = trees[0] if like is None else like
    return jax.tree.unflatten(jax.tree.structure(ref), [jnp.stack(v) for v in leaves])


def fit(model, loss, opt, steps):
    """Full-batch training of the trainable half of ``model`` for ``steps`` (one jitted scan)."""
    tr, fr = nn.split(model)
    tr, ls = train_loop(lambda m, _: loss(m), opt)(tr, fr, jnp.arange(steps))
    return nn.combine(tr, fr), np.asarray(ls)


D_IN, WIDTH, D_OUT = 16, 32, 4


@functools.cache
def pretrained(scale: str = "quick"):
    """Teacher, student pretrained on it, and the data draws."""
    with jax.enable_x64(True):
        n = 256 if scale == "quick" else 2048
        teacher = nn.MLP(D_IN, D_OUT, WIDTH, 2, activation=jax.nn.relu, key=jax.random.key(100))
        x = jax.random.normal(jax.random.key(1), (n, D_IN))
        student = nn.MLP(D_IN, D_OUT, WIDTH, 2, activation=jax.nn.relu, key=jax.random.key(0))
        student, ls = fit(student, lambda m: jnp.mean((m(x) - teacher(x)) ** 2), optax.adam(3e-3),
                          800 if scale == "quick" else 4000)
        return teacher, student, float(ls[-1])


def shifted_task(scale: str, seed: int, rank: int = 4, size: float = 1.0):
    """A shifted teacher: hidden weight + ``size * U diag(1 .. 0.5) V^T`` of rank ``rank``."""
    teacher, student, _ = pretrained(scale)
    rng = np.random.default_rng(seed)
    u = np.linalg.qr(rng.standard_normal((WIDTH, rank)))[0]
    v = np.linalg.qr(rng.standard_normal((WIDTH, rank)))[0]
    pert = size * u @ np.diag(np.linspace(1.0, 0.5, rank)) @ v.T
    t2 = eqx.tree_at(lambda m: m.layers[1].weight, teacher, teacher.layers[1].weight + pert)
    n = 256 if scale == "quick" else 2048
    x = jax.random.normal(jax.random.key(10 + seed), (n, D_IN))
    xt = jax.random.normal(jax.random.key(20 + seed), (1024, D_IN))
    return student, (x, t2(x)), (xt, t2(xt))


def xent(logits, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits, y)
