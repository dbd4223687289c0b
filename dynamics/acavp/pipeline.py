"""Pre-train the frozen source CNN, then adapt it to a target task by visual prompting or by a
linear probe, every method with the same optimiser, step budget and learning-rate grid.

Mechanism and protocol from ``docs/papers/acavp.md#small-scale-experiment``: only the method's own
parameters train
(:class:`nn.acavp.Prompted` / :class:`nn.acavp.LinearProbe` carry the trainable mask), the label
map is first-k (target class i = source logit i, the official code's default for non-CLIP
models), Adam (in place of the official code's normalised, clipped, loss-scaled SGD,
``docs/papers/acavp.md#departures-and-why``) with one learning rate per method and task chosen on a
validation split from
the same grid for every method. Replicates (seeds x learning rates) train as one vmapped step,
compiled once per method and run from a Python loop (:func:`_fit` says why not in ``lax.scan``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from _core.streams import stream_key
from _core.validation import (
    as_array,
    check_bool,
    check_choice,
    check_int,
    check_key,
    check_scalar,
)
from nn import acavp as P

from .augment import trivial_augment
from .data import SHIFTS, Task, source_task

__all__ = ["METHODS", "LR_GRID", "LABEL_MAPS", "TA_SIDE", "pretrain", "build", "AdaptResult",
           "adapt"]  # fmt: skip

#: ``zs`` frozen model, ``lp`` linear probe, ``pad`` Bahng et al., ``evp`` EVP, ``acavp`` and its
#: ablations (a stage switched off)
METHODS = ("zs", "lp", "pad", "evp", "acavp", "acavp_no_affine", "acavp_no_colour",
           "acavp_no_additive")  # fmt: skip
LR_GRID = (0.01, 0.03, 0.1)
#: output label maps of a prompted model: ``first_k`` (target i = source logit i, the official
#: default for non-CLIP models) or ``frequency`` (EVP's greedy frequency mapping, the official
#: ``--evp_output_mapping``, from the frozen model's predictions on the prompted training images)
LABEL_MAPS = ("first_k", "frequency")
#: the image side at which TrivialAugment's pixel ranges are stated (the paper's 224 px): its
#: translation (10 px there) is scaled to the canvas, ``10 W / 224`` px (3.1 % of the width)
TA_SIDE = 224


def pretrain(seed: int = 0, *, steps: int = 600, batch: int = 64, lr: float = 1e-2,
             channels=(8, 16, 32, 32)):  # fmt: skip
    """The source CNN trained with Adam (:func:`nn.train`) on ``seed``'s source digits; returns
    ``(model, source test accuracy)``."""
    seed = check_int(seed, "seed", lower=0, upper=2**32 - 1)
    steps = check_int(steps, "steps", lower=1, upper=100_000)
    batch = check_int(batch, "batch", lower=1, upper=4096)
    lr = check_scalar(lr, "lr", lower=0.0, upper=10.0, closed="right")
    xtr, ytr, xte, yte = source_task(seed)
    key = jax.random.key(seed)
    model = P.SmallCNN(channels, 10, key=jax.random.fold_in(key, 1))
    rng = np.random.default_rng(seed)
    order = rng.integers(0, len(ytr), (steps, batch))
    # a module-level loss and one optimiser per rate: nn.train's step (cached on both) compiles
    # once for every source CNN of a run, not once per seed
    res = nn.train(model, _source_loss, lambda t: (xtr[order[t]], ytr[order[t]]), _adam(lr),
                   steps, key=key, progress=False)  # fmt: skip
    return res.model, float(_accuracy(res.model, xte, yte))


def _source_loss(m, b, *, key=None):
    return nn.cross_entropy(m(b[0]), b[1])


@functools.cache
def _adam(lr: float):
    return optax.adam(lr)


@eqx.filter_jit
def _accuracy(model, x, y):
    return jnp.mean(jnp.argmax(model(x), -1) == y)


def build(method: str, backbone, *, key, shape=(3, 32, 32), width: int = 4, inner: int = 24,
          center: str = "image", t_range: float = 0.05, scale_init: float = 0.73):  # fmt: skip
    """The adapted model of ``method`` (one of :data:`METHODS` but ``zs``) on ``backbone`` for
    images of ``shape``; ``width`` (padding prompt), ``inner`` (EVP), ``center``, ``t_range``,
    ``scale_init`` (ACAVP) as in :mod:`nn.acavp`."""
    method = check_choice(method, "method", METHODS[1:])
    check_key(key)
    # every option is checked whichever method uses it: a bad `inner` with method="pad" is a bug
    check_int(width, "width", lower=1)
    check_int(inner, "inner", lower=2)
    check_choice(center, "center", P.CENTERS)
    check_scalar(t_range, "t_range", lower=0.0, upper=1.0)
    check_scalar(scale_init, "scale_init", lower=0.0, upper=1.0, closed="neither")
    if not isinstance(backbone, P.SmallCNN):
        raise TypeError(f"`backbone` must be an nn.acavp.SmallCNN; got {type(backbone).__name__}.")
    n = cast(int, backbone.head.out_features)  # eqx types it ``int | "scalar"``; SmallCNN's is int
    if method == "lp":
        return P.LinearProbe(backbone, n, key=key)
    if method == "pad":
        prompt = P.PaddingPrompt(shape, width, key=key)
    elif method == "evp":
        prompt = P.EVPPrompt(shape, inner)
    else:
        off = method.removeprefix("acavp_no_") if method != "acavp" else ""
        prompt = P.ACAVPPrompt(shape, scale_init=scale_init, t_range=t_range, center=center,
                               affine=off != "affine", colour=off != "colour",
                               additive=off != "additive")  # fmt: skip
    return P.Prompted(prompt, backbone, P.first_k_label_map(n, n))


@dataclasses.dataclass(frozen=True)
class AdaptResult:
    """Accuracies of the chosen learning rate per seed: ``test``, ``val``, ``train`` (on the
    seed's training subset) and ``shifted[name]`` ``(seeds,)`` (none with ``shifted=False``);
    ``lr`` the chosen rate (0 for ``zs``, which trains nothing),
    ``val_by_lr`` mean validation accuracy per rate of the grid; ``frozen_identical`` whether
    the backbone is bit-identical after the run; ``loss`` the mean training loss per step."""

    method: str
    task: str
    lr: float
    test: np.ndarray
    val: np.ndarray
    train: np.ndarray
    shifted: dict
    val_by_lr: np.ndarray
    frozen_identical: bool
    loss: np.ndarray


def _subsets(task, seeds, n_per_class, seed):
    """Per-seed training indices padded to the full training set's length (so the low-data and
    full-data runs of a method share one compiled step and evaluation), and their counts."""
    n = len(task.y_train)
    if n_per_class is None:
        return np.tile(np.arange(n), (seeds, 1)), np.full(seeds, n)
    rng = np.random.default_rng(seed + 12345)
    picks = [
        np.concatenate(
            [rng.permutation(np.flatnonzero(task.y_train == c))[:n_per_class] for c in range(10)]
        )
        for _ in range(seeds)
    ]
    counts = np.asarray([p.size for p in picks], np.int64)
    idx = np.zeros((seeds, n), np.int64)
    for s, pick in enumerate(picks):
        idx[s, : pick.size] = pick
    return idx, counts


def adapt(backbone, method: str, task: Task, *, seeds: int = 3, lrs=LR_GRID, steps: int = 150,
          batch: int = 32, n_per_class: int | None = None, augment: bool = False, seed: int = 0,
          label_map: str = "first_k", shifted: bool = True,
          **prompt_kw) -> AdaptResult:  # fmt: skip
    """Adapt the frozen ``backbone`` to ``task`` with ``method``: ``seeds`` replicates (prompt
    init, minibatches, augmentation draws and, with ``n_per_class``, the low-data training
    subset differ) for each rate of ``lrs``; report the rate with the best mean validation
    accuracy. ``augment`` applies :func:`~dynamics.acavp.augment.trivial_augment` to every
    training batch before the prompt, its translation scaled to the canvas (:data:`TA_SIDE`;
    rotation and shear are angles and ratios, the same at any size). ``label_map`` one of
    :data:`LABEL_MAPS` for the visual prompts (the frequency map from replicate 0's initial
    prompt, which every replicate then shares). ``shifted=False`` skips the shifted test sets
    (``AdaptResult.shifted`` then empty) for a caller that never reads them; the other
    accuracies are the same. ``prompt_kw`` go to :func:`build`."""
    method = check_choice(method, "method", METHODS)
    if not isinstance(task, Task):
        raise TypeError(f"`task` must be a dynamics.acavp.Task; got {type(task).__name__}.")
    seeds = check_int(seeds, "seeds", lower=2, upper=64)
    steps = check_int(steps, "steps", lower=1, upper=100_000)
    batch = check_int(batch, "batch", lower=1, upper=4096)
    augment = check_bool(augment, "augment")
    seed = check_int(seed, "seed", lower=0, upper=2**32 - 1)
    label_map = check_choice(label_map, "label_map", LABEL_MAPS)
    shifts = SHIFTS if check_bool(shifted, "shifted") else ()
    if n_per_class is not None:
        n_per_class = check_int(n_per_class, "n_per_class", lower=1, upper=10_000)
    lrs = as_array(lrs, "lrs", ndim=1, min_size=1, lower=0.0, upper=10.0, closed="right")
    if not isinstance(backbone, P.SmallCNN):
        raise TypeError(f"`backbone` must be an nn.acavp.SmallCNN; got {type(backbone).__name__}.")
    n_task = 1 + int(max(task.y_train.max(), task.y_val.max(), task.y_test.max()))
    if cast(int, backbone.head.out_features) < n_task:  # eqx: ``int | "scalar"``
        raise ValueError(
            f"`backbone` must have at least the task's {n_task} classes (first-k label map); got "
            f"{backbone.head.out_features}."
        )
    before = [np.asarray(v) for v in jax.tree.leaves(backbone)]
    idx, counts = _subsets(task, seeds, n_per_class, seed)
    evals = (task.x_val, task.y_val, task.x_test, task.y_test,
             *(task.shifted[s] for s in shifts))  # fmt: skip
    if method == "zs":
        acc = [float(_accuracy(backbone, evals[i], evals[i + 1])) for i in range(0, 4, 2)]
        acc += [float(_accuracy(backbone, task.shifted[s], task.y_test)) for s in shifts]
        tr = float(_accuracy(backbone, task.x_train, task.y_train))
        a = np.repeat(np.asarray([*acc, tr])[:, None], seeds, axis=1)
        return AdaptResult(method, task.name, 0.0, a[1], a[0], a[-1],
                           {s: a[2 + i] for i, s in enumerate(shifts)},
                           np.full(lrs.size, acc[0]), True, np.zeros(0))  # fmt: skip
    keys = jax.random.split(stream_key(seed, 3), seeds)
    shape = tuple(task.x_train.shape[1:])
    models = [build(method, backbone, key=k, shape=shape, **prompt_kw) for k in keys]
    if label_map == "frequency" and method != "lp":
        models = _frequency_mapped(models, task)
    x_pool = jnp.asarray(task.x_train)
    evals = tuple(jnp.asarray(e) for e in evals)
    if method == "lp":  # the probe is linear in frozen features: compute them once
        if augment:
            raise ValueError("`augment` applies to visual prompts; the linear probe runs without.")
        feats = eqx.filter_jit(backbone.features)
        x_pool = feats(x_pool)
        evals = tuple(feats(e) if e.ndim == 4 else e for e in evals)
        models = [cast(P.LinearProbe, m).head for m in models]  # build("lp") made probes
    tr0 = jax.tree.map(lambda *v: jnp.stack(v), *[nn.split(m)[0] for m in models])
    frozen = nn.split(models[0])[1]
    rep_tr = jax.tree.map(lambda v: jnp.concatenate([v] * lrs.size), tr0)
    rep_lr = jnp.repeat(jnp.asarray(lrs, jnp.float32), seeds)
    rep_keys = jnp.concatenate([keys] * lrs.size)
    rep_idx = jnp.asarray(np.tile(idx, (lrs.size, 1)))
    rep_n = jnp.asarray(np.tile(counts, lrs.size))
    y_pool = jnp.asarray(task.y_train)
    translate = 10.0 * shape[-1] / TA_SIDE if augment else None
    final, losses = _fit(rep_tr, frozen, rep_lr, rep_keys, rep_idx, rep_n, x_pool, y_pool, steps,
                         batch, translate)  # fmt: skip
    hits, best, accs = _evaluate(final, frozen, jnp.asarray(idx), jnp.asarray(counts), x_pool,
                                 y_pool, evals)  # fmt: skip
    val = np.asarray(hits).reshape(lrs.size, seeds) / len(task.y_val)
    val_by_lr, best = val.mean(axis=1), int(best)
    adapted = nn.combine(jax.tree.map(lambda v: v[0], final), frozen)
    after = backbone if method == "lp" else adapted.backbone  # the probe never holds it
    same = all(
        np.array_equal(a, np.asarray(b), equal_nan=True)
        for a, b in zip(before, jax.tree.leaves(after), strict=True)
    )
    a = np.asarray(accs)
    return AdaptResult(method, task.name, float(lrs[best]), a[0], val[best], a[-1],
                       {s: a[1 + i] for i, s in enumerate(shifts)}, val_by_lr, bool(same),
                       np.asarray(losses).reshape(lrs.size, seeds, -1)[best].mean(0))  # fmt: skip


def _frequency_mapped(models, task):
    """``models`` with EVP's frequency label map (:func:`nn.acavp.frequency_label_map`) from the
    frozen model's predictions on the training images through replicate 0's initial prompt."""
    m = models[0]
    logits = _source_logits(m.prompt, m.backbone, jnp.asarray(task.x_train))
    n = m.backbone.head.out_features
    idx = P.frequency_label_map(np.asarray(jnp.argmax(logits, -1)), task.y_train, n, n)
    return [P.Prompted(mm.prompt, mm.backbone, idx) for mm in models]


@eqx.filter_jit
def _source_logits(prompt, backbone, x):
    return backbone(prompt(x))


def _fit(tr0, frozen, lrs, keys, idx, counts, x_pool, y_pool, steps, batch, translate):
    """Train every replica ``steps`` Adam steps; returns the replicas and their losses.

    The vmapped step runs from a Python loop, not inside ``lax.scan``: XLA's CPU backend runs the
    CNN's convolutions about 9x slower inside a loop body than as a top-level program (a SmallCNN
    Adam step at batch 128: 36.7 ms in a scan, 4.0 ms jitted; JAX issue 12868); dense layers do
    not pay it. Step ``t`` draws its minibatch and augmentation from ``fold_in(key, t)``, in a
    program of its own (:func:`_batches`) that every method shares: TrivialAugment's graph
    compiles once per run, not once per method."""
    state = jax.vmap(optax.adam(1.0).init)(tr0)  # Adam's state does not depend on the rate
    losses = []
    for t in range(steps):
        xb, yb = _batches(keys, idx, counts, x_pool, y_pool, jnp.asarray(t), batch, translate)
        tr0, state, loss = _step(tr0, state, frozen, lrs, xb, yb)
        losses.append(loss)
    return tr0, jnp.stack(losses, axis=1)  # adapt asks steps >= 1


def _forward(m, x):
    return jax.vmap(m)(x) if isinstance(m, eqx.nn.Linear) else m(x)


@functools.partial(jax.jit, static_argnums=(6, 7))
def _batches(keys, idx, counts, x_pool, y_pool, t, batch, translate):
    """Every replica's minibatch at step ``t`` ``(replicas, batch, ...)`` and its labels.
    ``translate`` (static): TrivialAugment's largest translation in pixels, None for no
    augmentation."""

    def one(key, idx_r, n_r):
        k1, k2 = jax.random.split(jax.random.fold_in(key, t))
        ids = idx_r[jax.random.randint(k1, (batch,), 0, n_r)]
        xb = x_pool[ids]
        if translate is not None:
            xb = trivial_augment(xb, key=k2, max_translate=translate)
        return xb, y_pool[ids]

    return jax.vmap(one)(keys, idx, counts)


@eqx.filter_jit
def _step(tr, state, frozen, lrs, xb, yb):
    """One Adam step of every replica (vmapped) at its own rate on its minibatch; returns the
    losses before it."""

    def one(tr, st, lr, xb, yb):
        def loss(tr):
            return nn.cross_entropy(_forward(nn.combine(tr, frozen), xb), yb)

        value, grads = eqx.filter_value_and_grad(loss)(tr)
        updates, st = optax.adam(lr).update(grads, st, tr)
        return eqx.apply_updates(tr, updates), st, value

    return jax.vmap(one)(tr, state, lrs, xb, yb)


@eqx.filter_jit
def _evaluate(tr, frozen, idx, counts, x_pool, y_pool, evals):
    """Score the replicas (rate-major blocks of ``len(idx)`` seeds) in one compiled graph: every
    replica's validation hits ``(replicas,)``; the rate with the most in total (the first of a
    tie, as ``np.argmax``); and only that rate's replicas on the test set, each shifted test set
    and their training subset (its padding weighted out), accuracies ``(sets, seeds)``: the
    other rates' test scores are never read, so they are not computed."""
    seeds = idx.shape[0]

    def predict(tr, x):
        return jnp.argmax(_forward(nn.combine(tr, frozen), x), -1)

    hits = jax.vmap(lambda tr: jnp.sum(predict(tr, evals[0]) == evals[1]))(tr)
    best = jnp.argmax(hits.reshape(-1, seeds).sum(axis=1))
    chosen = jax.tree.map(lambda v: jax.lax.dynamic_slice_in_dim(v, best * seeds, seeds), tr)

    def one(tr, idx_r, n_r):
        xs = (evals[2], *evals[4:], x_pool[idx_r])
        ys = (*[evals[3]] * (len(evals) - 3), y_pool[idx_r])
        hit = predict(tr, jnp.concatenate(xs)) == jnp.concatenate(ys)
        bounds = np.cumsum([0, *(len(y) for y in ys)])
        accs = [jnp.mean(hit[a:b]) for a, b in zip(bounds[:-2], bounds[1:-1], strict=True)]
        w = (jnp.arange(idx_r.size) < n_r).astype(jnp.float32)
        accs.append(jnp.sum(w * hit[bounds[-2] :]) / n_r)
        return jnp.stack(accs)

    return hits, best, jax.vmap(one)(chosen, idx, counts).T
