"""Pretraining, adaptation and evaluation of the MixPrompt study
(``docs/papers/mixprompt.md#as-implemented-here``) on the scenes of :mod:`.scenes`.

:func:`pretrain_backbone` trains :class:`nn.mixprompt.Backbone` with a head on the RGB-only source
task and returns the backbone (then frozen). :func:`adapt` trains one method on the target task for
several seeds and a learning-rate grid at once: the replicas (seed x learning rate) are stacked on
a leading axis and trained by one :func:`nn.train` call whose loss is the sum of the replicas'
losses (``eqx.filter_vmap``); AdamW is elementwise, so each replica follows exactly its own AdamW
trajectory at its own learning rate. Every method gets the same steps, batch, weight decay and
learning-rate grid; the rate is chosen per method on a validation split (best mean mIoU over
seeds) and test mIoU is reported at that rate. :func:`adapt_group` trains the methods of one of
:data:`GROUPS` (models of one structure) as one compiled program, with common random numbers.
Models take the pretrained backbone's dtype, float32 by default.

Methods (:data:`METHODS`): ``rgb_frozen`` (M0), ``rgb_finetune`` (M1), ``two_branch`` (M2,
CMX-style), ``dplnet`` (M3: fresh patch embed on depth, one sub-space, no mixing, no LayerNorm),
``mixprompt`` (M4), ``mixprompt_nomix`` (M4 with no mixing matrix), ``mixprompt_random``
(M4 with a randomly initialised extractor).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from _core.runtime import trim_heap
from _core.validation import as_array, check_choice, check_int, check_key, check_scalar
from nn import mixprompt as M

from .metrics import miou
from .scenes import CLASSES, SOURCE_CLASSES, rgbd_scenes
from .sensor import depth_channels, depth_sensor

__all__ = [
    "METHODS",
    "Split",
    "target_data",
    "build",
    "pretrain_backbone",
    "AdaptResult",
    "adapt",
    "adapt_group",
    "GROUPS",
]

METHODS = (
    "rgb_frozen",
    "rgb_finetune",
    "two_branch",
    "dplnet",
    "mixprompt",
    "mixprompt_nomix",
    "mixprompt_random",
)


@dataclasses.dataclass(frozen=True)
class Split:
    """Network inputs of one split: ``rgb`` and ``aux`` ``(n, H, W, 3)`` float32, ``labels``
    ``(n, H, W)`` int32."""

    rgb: np.ndarray
    aux: np.ndarray
    labels: np.ndarray


def _split(n, size, kind, rng):
    sc = rgbd_scenes(n, size, kind=kind, rng=rng)
    aux = depth_channels(depth_sensor(sc.depth, rng=rng))
    return Split((sc.rgb - 0.5).astype(np.float32), aux, sc.labels)


def target_data(n_train, n_val, n_test, size=16, *, seed=0) -> dict[str, Split]:
    """Train / val / test splits of the target RGB-D task for one ``seed`` (depth through the
    sensor model with its defaults: noise 0.02, 5 % holes).

    Examples
    --------
    >>> d = target_data(2, 1, 1, size=8, seed=0)
    >>> sorted(d), d["train"].rgb.shape, d["train"].aux.shape, d["test"].labels.shape
    (['test', 'train', 'val'], (2, 8, 8, 3), (2, 8, 8, 3), (1, 8, 8))
    """
    sizes = [
        check_int(v, k, lower=1, upper=20_000)
        for k, v in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test))
    ]
    size = check_int(size, "size", lower=8, upper=128)
    seed = check_int(seed, "seed", lower=0, upper=2**32 - 1)  # a 32-bit stream seed
    g = np.random.default_rng([seed, 17])
    return {
        k: _split(n, size, "target", g)
        for k, n in zip(("train", "val", "test"), sizes, strict=True)
    }


def build(method, backbone, num_classes=4, *, key):
    """The model of ``method`` (:data:`METHODS`) around the pretrained ``backbone``."""
    method = check_choice(method, "method", METHODS)
    check_key(key)
    if method.startswith("rgb"):
        return M.RGBSegmenter(backbone, num_classes, method == "rgb_finetune", key=key)
    if method == "two_branch":
        return M.two_branch(backbone, num_classes, key=key)
    if method == "dplnet":
        kw: dict[str, Any] = dict(subspaces=1, mix="none", norm=False, extractor="embed")
    else:
        kw = dict(
            mix="none" if method == "mixprompt_nomix" else "rgb",
            extractor="random" if method == "mixprompt_random" else "pretrained",
        )
    return M.mixprompt(backbone, num_classes, key=key, **kw)


#: methods whose models share one structure, trained together by :func:`adapt_group` as one
#: compiled program (``mixprompt_nomix`` as MixPrompt with ``Omega = I`` held at a zero rate)
GROUPS = (("mixprompt", "mixprompt_nomix", "mixprompt_random"),)


def _stack(models):
    arrays, static = eqx.partition(models[0], eqx.is_array)
    parts = [eqx.partition(m, eqx.is_array)[0] for m in models]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *parts)
    return eqx.combine(stacked, static)


def _replica(model, r):
    """Replica ``r`` of a stacked model."""
    arrays, static = eqx.partition(model, eqx.is_array)
    return eqx.combine(jax.tree.map(lambda a: a[r], arrays), static)


def _pixel_ce(model, rgb, aux, labels):
    """Mean pixel cross-entropy, written with a one-hot mask: optax's integer-label form
    gathers, and the gradient's scatter was constant-folded by XLA for over a second per
    compiled training step."""
    logits = model(rgb, aux)
    hot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
    return -jnp.mean(jnp.sum(hot * jax.nn.log_softmax(logits), -1))


def _loss(model, batch, *, key=None):
    """Sum over replicas of each replica's mean pixel cross-entropy."""
    return jnp.sum(eqx.filter_vmap(_pixel_ce)(model, *batch))


def _replica_lr(lr, still=()):
    """``u -> -lr_r u`` on the leading (replica) axis of every update; the ``omega`` leaves
    (mixing matrices) of the replicas in ``still`` get rate 0 (they stay bit-identical)."""
    held = jnp.asarray([r not in still for r in range(lr.shape[0])], lr.dtype) * lr

    def scale(updates, params=None):
        def one(path, u):
            rate = held if still and any(getattr(k, "name", "") == "omega" for k in path) else lr
            return -rate.reshape((-1,) + (1,) * (u.ndim - 1)) * u

        return jax.tree_util.tree_map_with_path(one, updates)

    return optax.stateless(scale)


@functools.lru_cache(maxsize=16)
def _adamw(lrs, weight_decay, owner="adapt", still=()):
    """AdamW (optax's ``scale_by_adam``, ``add_decayed_weights``, learning rate) with one
    learning rate per replica (0 on the mixing matrices of the replicas ``still``); one per
    ``owner`` (a method or group), so that each has a step function of its own whose compiled
    programs :func:`_release` can drop."""
    lr = jnp.asarray(lrs, jnp.float32)
    return optax.chain(
        optax.scale_by_adam(), optax.add_decayed_weights(weight_decay), _replica_lr(lr, still)
    )


def _argmax(model, rgb, aux):
    return eqx.filter_vmap(lambda m, x, a: jnp.argmax(m(x, a), -1))(model, rgb, aux)


@functools.lru_cache(maxsize=16)
def _predictor(method):
    """The jitted prediction of ``method``'s models (one per method: see :func:`_release`)."""
    return eqx.filter_jit(_argmax)


def _release(*jitted):
    """Drop the compiled programs of ``jitted`` (equinox ``filter_jit`` functions whose programs
    no later call reads: each method's training step and prediction compile once per run) and
    hand the heap that compiling them freed back to the OS.

    Compiling one method's training step holds about 0.6 GB while it runs and its programs
    about 0.2 GB after it; glibc keeps the freed compile heap, and the programs of all seven
    methods stayed alive to the end of the area, so the area's resident peak reached 4.2 GB
    (quick, 2 threads). Numbers do not change: a program is dropped only after its last call."""
    for f in jitted:
        clear = getattr(getattr(f, "_cached", None), "clear_cache", None)
        if callable(clear):
            clear()
    trim_heap()


def _fit(
    models,
    splits,
    owner,
    lrs,
    steps,
    batch,
    weight_decay,
    seed,
    method="adapt",
    still=(),
    draw=None,
):
    """Train stacked ``models`` (replica ``r`` on ``splits[owner[r]]`` at ``lrs[r]``, its batch
    the ``draw[r]``-th row of each step's index draw: replicas of one draw row see the same
    batches; default one row each); the training step's compiled programs are released when
    it is done."""
    stacked = _stack(models)
    rgb = np.stack([s.rgb for s in splits])
    aux = np.stack([s.aux for s in splits])
    lab = np.stack([s.labels for s in splits])
    n = rgb.shape[1]
    own = np.asarray(owner)[:, None]
    draw = np.arange(len(owner)) if draw is None else np.asarray(draw)

    def get(t):
        idx = np.random.default_rng([seed, t, 5]).integers(0, n, (draw.max() + 1, batch))[draw]
        return rgb[own, idx], aux[own, idx], lab[own, idx]

    opt = _adamw(tuple(lrs), weight_decay, method, tuple(still))
    res = nn.train(stacked, _loss, get, opt, steps, key=jax.random.key(seed), progress=False)
    _release(nn.make_step(_loss, opt))  # the step function nn.train ran (cached on loss, opt)
    return res.model, res.losses


def _scores(model, splits, owner, num_classes, chunk=128, method="adapt"):
    """mIoU of every replica on its owner's split, predicted ``chunk`` images at a time; the
    split is padded (edge images) to whole chunks, so one compiled prediction serves every split
    of a model (a model's pixels do not depend on the other images of its batch)."""
    n = len(splits[owner[0]].labels)
    pad = ((0, 0), (0, -n % chunk)) + ((0, 0),) * 3
    rgb = np.pad(np.stack([splits[o].rgb for o in owner]), pad, mode="edge")
    aux = np.pad(np.stack([splits[o].aux for o in owner]), pad, mode="edge")
    pred = np.concatenate(
        [
            np.asarray(_predictor(method)(model, rgb[:, i : i + chunk], aux[:, i : i + chunk]))
            for i in range(0, rgb.shape[1], chunk)
        ],
        1,
    )[:, :n]
    return np.array(
        [miou(p, splits[o].labels, num_classes) for p, o in zip(pred, owner, strict=True)],
        np.float64,
    )


def pretrain_backbone(
    *,
    channels=(16, 32, 64),
    depths=(1, 1, 4),
    size=16,
    n_train=512,
    steps=300,
    batch=32,
    lr=3e-3,
    seed=0,
    dtype=jnp.float32,
):
    """Backbone pretrained (with a :class:`nn.mixprompt.SegHead`, AdamW) on the RGB-only source
    task (:func:`.scenes.rgbd_scenes` with ``kind="source"``); returns ``(backbone, miou)`` with
    the source-task test mIoU of the pretrained model. ``dtype``: of the backbone, and so of
    every model built on it (float32: the images are float32, and float64 trained 1.8-3x
    slower on CPU for the same verdicts)."""
    steps = check_int(steps, "steps", lower=0, upper=100_000)
    batch = check_int(batch, "batch", lower=1, upper=4096)
    lr = check_scalar(lr, "lr", lower=0.0, upper=1.0, closed="right")
    n_train = check_int(n_train, "n_train", lower=1, upper=20_000)
    seed = check_int(seed, "seed", lower=0, upper=2**31 - 1)
    g = np.random.default_rng([seed, 3])
    train, test = (_split(n, size, "source", g) for n in (n_train, max(8, n_train // 4)))
    bb = M.Backbone(channels, 3, depths, dtype=dtype, key=jax.random.key(seed))
    model = M.RGBSegmenter(
        bb, len(SOURCE_CLASSES), True, key=jax.random.fold_in(jax.random.key(seed), 1)
    )
    model, _ = _fit([model], [train], [0], [lr], steps, batch, 1e-4, seed, "pretrain")
    score = _scores(model, [test], [0], len(SOURCE_CLASSES), method="pretrain")[0]
    _release(_predictor("pretrain"))
    return _replica(model, 0).backbone, float(score)


def _check_datasets(datasets):
    """``datasets``: a non-empty list of :func:`target_data` dicts, each with the splits
    ``train``, ``val``, ``test`` (:class:`Split`: ``rgb``/``aux`` ``(n, H, W, 3)`` finite,
    ``labels`` ``(n, H, W)`` integers in ``[0, len(CLASSES))``), one shape per split."""
    if not isinstance(datasets, list | tuple) or not datasets:
        raise TypeError("`datasets` must be a non-empty list of target_data dicts.")
    first = {}
    for i, d in enumerate(datasets):
        if not isinstance(d, dict):
            raise TypeError(f"`datasets`[{i}] must be a target_data dict; got {type(d).__name__}.")
        for name in ("train", "val", "test"):
            sp = d.get(name)
            if not isinstance(sp, Split):
                raise ValueError(
                    f"`datasets`[{i}] must hold a Split under {name!r} (target_data's train / "
                    f"val / test); got {type(sp).__name__}."
                )
            rgb = as_array(sp.rgb, "datasets", ndim=4, dtype=np.float32)  # pyright: ignore[reportArgumentType]  # _core as_array's dtype is unannotated
            shapes = (rgb.shape, np.shape(sp.aux), np.shape(sp.labels))
            if rgb.shape[-1] != 3 or shapes[1] != rgb.shape or shapes[2] != rgb.shape[:-1]:
                raise ValueError(
                    f"`datasets`[{i}][{name!r}] must have rgb and aux (n, H, W, 3) and labels "
                    f"(n, H, W); got shapes {shapes}."
                )
            if first.setdefault(name, shapes) != shapes:
                raise ValueError(
                    f"`datasets`[{i}][{name!r}] must have the shapes of dataset 0 "
                    f"{first[name]}; got {shapes}."
                )
            as_array(sp.aux, "datasets", dtype=np.float32)  # pyright: ignore[reportArgumentType]  # _core as_array's dtype is unannotated
            lab = np.asarray(sp.labels)
            if lab.dtype.kind not in "iu" or lab.min() < 0 or lab.max() >= len(CLASSES):
                raise ValueError(
                    f"`datasets`[{i}][{name!r}].labels must be integers in [0, {len(CLASSES)}); "
                    f"got dtype {lab.dtype}, range [{lab.min()}, {lab.max()}]."
                )


@dataclasses.dataclass(frozen=True)
class AdaptResult:
    """One method over seeds x learning rates: ``val``/``test`` mIoU ``(seeds, len(lrs))``,
    ``lr_index`` chosen on validation, ``test_at_lr`` ``(seeds,)``, parameter counts
    (``trainable``, ``total``, per model), final ``losses`` ``(steps,)`` (summed over replicas)
    and the trained stacked ``model`` (replica ``s * len(lrs) + l``)."""

    method: str
    lrs: tuple
    val: np.ndarray
    test: np.ndarray
    lr_index: int
    test_at_lr: np.ndarray
    trainable: int
    total: int
    losses: np.ndarray
    model: object = dataclasses.field(repr=False)


def adapt(
    method, backbone, datasets, *, lrs=(1e-3, 3e-3), steps=200, batch=16, weight_decay=1e-4, seed=0
) -> AdaptResult:
    """Train ``method`` on each seed's data of ``datasets`` (a list of :func:`target_data`
    dicts) at every learning rate of ``lrs``; the frozen parts stay bit-identical."""
    method = check_choice(method, "method", METHODS)
    return adapt_group(
        (method,),
        backbone,
        datasets,
        lrs=lrs,
        steps=steps,
        batch=batch,
        weight_decay=weight_decay,
        seed=seed,
    )[method]


def _group_model(method, methods, backbone, key):
    """``method``'s model as trained within ``methods``: ``mixprompt_nomix`` beside the other
    MixPrompt variants is MixPrompt with ``Omega = I`` (held at rate 0): mixing by the identity
    is exact, so it computes the model without mixing, in the structure of the others."""
    if method != "mixprompt_nomix" or methods == (method,):
        return build(method, backbone, key=key)
    model = M.mixprompt(backbone, len(CLASSES), key=key)
    n = model.adapters[0].omega.shape[0]
    eye = jnp.eye(n, dtype=model.adapters[0].omega.dtype)
    return eqx.tree_at(lambda m: [a.omega for a in m.adapters], model, [eye] * len(model.adapters))


def adapt_group(
    methods, backbone, datasets, *, lrs=(1e-3, 3e-3), steps=200, batch=16, weight_decay=1e-4, seed=0
) -> dict[str, AdaptResult]:
    """:func:`adapt` of each of ``methods`` (one method, or methods of one of :data:`GROUPS`),
    trained together as one compiled program: replica ``(method, seed s, lr l)`` starts from the
    key of seed ``s`` and sees the batches of ``(s, l)`` whatever its method (common random
    numbers: the same runs as :func:`adapt` of each method alone, up to float rounding)."""
    if isinstance(methods, str) or not isinstance(methods, tuple | list) or not methods:
        raise TypeError(f"`methods` must be a non-empty tuple of methods; got {methods!r}.")
    methods = tuple(check_choice(m, "methods", METHODS) for m in methods)
    if len(methods) > 1 and not any(set(methods) <= set(g) for g in GROUPS):
        raise ValueError(
            f"`methods` must be one method or methods of one group of {GROUPS}; got {methods!r}."
        )
    if len(set(methods)) != len(methods):
        raise ValueError(f"`methods` must not repeat a method; got {methods!r}.")
    if not isinstance(lrs, tuple | list) or not lrs:
        raise TypeError(f"`lrs` must be a non-empty tuple of learning rates; got {lrs!r}.")
    lrs = tuple(check_scalar(v, "lrs", lower=0.0, upper=1.0, closed="right") for v in lrs)
    steps = check_int(steps, "steps", lower=0, upper=100_000)
    batch = check_int(batch, "batch", lower=1, upper=4096)
    weight_decay = check_scalar(weight_decay, "weight_decay", lower=0.0, upper=1.0)
    seed = check_int(seed, "seed", lower=0, upper=2**31 - 1)
    _check_datasets(datasets)
    S, L, G = len(datasets), len(lrs), len(methods)
    R = S * L  # replicas per method
    owner = [s for _ in methods for s in range(S) for _ in range(L)]
    key = jax.random.key(seed)
    models = [
        _group_model(m, methods, backbone, jax.random.fold_in(key, s))
        for m in methods
        for s in range(S)
        for _ in range(L)
    ]
    still = [r for g, m in enumerate(methods) if m == "mixprompt_nomix" and G > 1
             for r in range(g * R, (g + 1) * R)]  # fmt: skip
    name = "+".join(methods)
    model, losses = _fit(
        models,
        [d["train"] for d in datasets],
        owner,
        [lrs[r % L] for r in range(G * R)],
        steps,
        batch,
        weight_decay,
        seed,
        name,
        still,
        [r % R for r in range(G * R)],
    )
    k = len(CLASSES)
    val = _scores(model, [d["val"] for d in datasets], owner, k, method=name).reshape(G, S, L)
    test = _scores(model, [d["test"] for d in datasets], owner, k, method=name).reshape(G, S, L)
    _release(_predictor(name))
    out = {}
    for g, m in enumerate(methods):
        li = int(np.argmax(val[g].mean(0)))
        ref = build(m, backbone, key=key)  # the method's own structure, for its counts
        out[m] = AdaptResult(
            m,
            lrs,
            val[g],
            test[g],
            li,
            test[g][:, li],
            nn.count_params(ref),
            int(sum(a.size for a in jax.tree.leaves(eqx.filter(ref, eqx.is_inexact_array)))),
            losses,
            _rows(model, g * R, (g + 1) * R),
        )
    return out


def _rows(model, a, b):
    """Replicas ``a`` to ``b`` of a stacked model."""
    arrays, static = eqx.partition(model, eqx.is_array)
    return eqx.combine(jax.tree.map(lambda x: x[a:b], arrays), static)
