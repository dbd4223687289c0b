"""Training: the pure scan-based :func:`fit`, the jitted-step :func:`train` loop (both on one update
step), evaluation and checkpoints (optax optimisers are used directly)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from _core.validation import (
    NumericalError,
    _is_tracer,
    as_path,
    batch_source,
    check_array,
    check_bool,
    check_callable,
    check_finite_result,
    check_int,
    check_key,
    check_model,
    check_transform,
    to_array,
)

from ._tree import _none, combine, split

__all__ = [
    "cross_entropy",
    "lm_loss",
    "fit",
    "make_step",
    "TrainResult",
    "train",
    "evaluate",
    "save",
    "load",
]


def cross_entropy(logits, targets):
    """Mean token cross-entropy (nats), ``logits (..., V)``, integer ``targets (...)``: the
    standard ``-mean log softmax(logits)[target]``.

    >>> round(float(cross_entropy(jnp.zeros((2, 4)), jnp.array([0, 3]))), 6)  # uniform: log 4
    1.386294
    """
    logits = check_array(logits, "logits", min_ndim=1)
    if isinstance(targets, str | bytes) or not hasattr(targets, "dtype"):
        targets = check_array(
            to_array(targets, "targets") if targets is not None else None, "targets"
        )
    if np.dtype(targets.dtype).kind not in "iu":
        raise TypeError(f"`targets` must be an integer array; got dtype {targets.dtype}.")
    if tuple(targets.shape) != tuple(logits.shape[:-1]) or logits.shape[-1] < 1:
        raise ValueError(
            f"`targets` must have shape {tuple(logits.shape[:-1])} (the leading axes of `logits` "
            f"{tuple(logits.shape)}); got {tuple(targets.shape)}."
        )
    if not _is_tracer(targets) and targets.size:
        t = np.asarray(targets)
        if t.min() < 0 or t.max() >= logits.shape[-1]:
            raise ValueError(
                f"`targets` must lie in [0, {logits.shape[-1]}); got values in "
                f"[{t.min()}, {t.max()}]."
            )
    out = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, targets))
    return out if _is_tracer(out) else check_finite_result(out, "the cross-entropy")


def lm_loss(model, batch, *, key=None):
    """Next-token loss of a language model on ``batch`` of tokens ``(B, T + 1)``: the
    :func:`cross_entropy` of ``model(batch[..., :-1], key=key)`` against ``batch[..., 1:]``."""
    check_callable(model, "model")
    batch = check_array(batch, "batch", min_ndim=1)
    if np.dtype(batch.dtype).kind not in "iu" or batch.shape[-1] < 2:
        raise TypeError(
            f"`batch` must be integer tokens (..., T + 1) with T >= 1; got dtype {batch.dtype}, "
            f"shape {tuple(batch.shape)}."
        )
    logits = model(batch[..., :-1], key=key)
    return cross_entropy(logits, batch[..., 1:])


def _update(f, optimizer, trainable, opt_state, has_aux=False):
    """One optimiser step on ``f(trainable) -> scalar`` (``(scalar, aux)`` with ``has_aux``):
    ``(trainable, opt_state, loss)``, ``loss`` the value of ``f``."""
    loss, grads = eqx.filter_value_and_grad(f, has_aux=has_aux)(trainable)
    updates, opt_state = optimizer.update(grads, opt_state, trainable)
    return eqx.apply_updates(trainable, updates), opt_state, loss


def fit(
    loss_fn: Callable,
    optimizer: optax.GradientTransformation,
    trainable,
    xs=None,
    *,
    frozen=None,
    opt_state=None,
    length: int | None = None,
    unroll: int = 1,
    has_aux: bool = False,
):
    """``optimizer`` steps on ``loss_fn(model, x)``, one per ``x`` in ``xs``, in one ``lax.scan``.

    Pure, so it runs inside ``jit``, ``vmap`` (over seeds; over learning rates by building
    ``optimizer`` from a traced rate) and an outer ``scan`` (to evaluate every ``k`` steps, scan
    over chunks of ``xs`` and pass ``opt_state`` on). ``model`` is ``nn.combine(trainable,
    frozen)``, or ``trainable`` when ``frozen`` is None; only ``trainable`` is differentiated and
    seen by ``optimizer``. ``xs`` is any pytree with a leading step axis (batch indices, keys,
    ``jnp.arange(steps)``), or None with ``length`` steps, as in ``lax.scan``. ``opt_state``
    defaults to ``optimizer.init(trainable)``. With ``has_aux``, ``loss_fn`` returns ``(loss,
    aux)`` (as in ``jax.value_and_grad``) and ``aux`` is recorded at every step.

    Returns ``(trainable, opt_state, losses)``, ``losses[t]`` the loss before step ``t``'s update
    (with ``has_aux``, ``(losses, auxs)``, ``auxs`` stacked along a leading step axis). A
    primitive traced inside ``jit``/``vmap`` sweeps (where a diverged grid point is a result to
    compare, not an error), it returns a diverged run's NaN losses as they are; :func:`train`
    raises ``NumericalError`` on them.

    >>> import jax.numpy as jnp, optax
    >>> w, _, losses = fit(lambda w, _: jnp.sum((w - 3.0) ** 2), optax.sgd(0.25), jnp.zeros(2),
    ...                    length=2)
    >>> w.tolist(), losses.tolist()
    ([2.25, 2.25], [18.0, 4.5])
    """
    check_callable(loss_fn, "loss_fn")
    check_transform(optimizer, "optimizer")
    check_model(trainable, "trainable")
    if frozen is not None:
        combine(trainable, frozen)  # raises unless the two halves of one split
    unroll = check_int(unroll, "unroll", lower=1)
    has_aux = check_bool(has_aux, "has_aux")
    steps = jax.tree.leaves(xs)
    if length is not None:
        length = check_int(length, "length", lower=0, upper=10**9)
    elif not steps:
        raise ValueError("`xs` must have array leaves with a leading step axis, or give `length`.")
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in steps}
    if None in sizes or len(sizes) > 1 or (length is not None and sizes - {length}):
        want = "" if length is None else f" of length `length` = {length}"
        raise ValueError(
            f"`xs` leaves must share one leading step axis{want}; got leading sizes "
            f"{sorted(sizes, key=str)}."
        )

    holes = frozen is None and None in jax.tree.leaves(trainable, is_leaf=_none)

    def loss(tr, x):
        if frozen is not None:
            return loss_fn(combine(tr, frozen), x)
        try:
            return loss_fn(tr, x)
        except (AttributeError, TypeError) as err:
            if not holes:
                raise
            raise TypeError(
                "`frozen` is None, so `trainable` is the whole model, and `loss_fn` failed on it "
                f"({type(err).__name__}: {err}); if `trainable` is one half of nn.split, pass "
                "the other half as `frozen`."
            ) from err

    def step(carry, x):
        tr, st = carry
        tr, st, val = _update(lambda t: loss(t, x), optimizer, tr, st, has_aux)
        return (tr, st), val

    state = optimizer.init(trainable) if opt_state is None else opt_state
    (trainable, state), losses = jax.lax.scan(
        step, (trainable, state), xs, length=length, unroll=unroll
    )
    return trainable, state, losses


def _check_finite_run(losses, trainable):
    """Raise :class:`NumericalError` when a loss or a trained array is NaN or infinite."""
    losses = np.asarray(jax.device_get(losses), dtype=float).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
        raise NumericalError(
            f"the training loss is not finite at step {bad[0]} of this run; lower the "
            "learning rate or check `loss_fn`.",
            step=int(bad[0]),
            losses=losses,
        )
    for leaf in jax.tree.leaves(trainable):
        if eqx.is_inexact_array(leaf) and not bool(jnp.isfinite(leaf).all()):
            raise NumericalError(
                "the trained parameters are not finite after the last step (the losses were); "
                "lower the learning rate.",
                losses=losses,
            )


def make_step(loss_fn: Callable, optimizer: optax.GradientTransformation):
    """Jitted ``step(trainable, frozen, opt_state, batch, key) -> (trainable, opt_state, loss)``.

    ``loss_fn(model, batch, *, key) -> scalar``. Gradients are taken w.r.t. ``trainable`` only,
    and the optimiser only ever sees the trainable half (see :func:`nn.split`). Cached on
    ``(loss_fn, optimizer)`` when both are hashable: repeated :func:`train` calls with the same
    loss and optimiser (a resumed run, several seeds) reuse one step function and its compilations.
    """
    check_callable(loss_fn, "loss_fn")
    check_transform(optimizer, "optimizer")
    try:
        hash((loss_fn, optimizer))
    except TypeError:
        return _build_step(loss_fn, optimizer)
    return _cached_step(loss_fn, optimizer)


def _build_step(loss_fn, optimizer):
    @eqx.filter_jit
    def step(trainable, frozen, opt_state, batch, key):
        def f(tr):
            return loss_fn(combine(tr, frozen), batch, key=key)

        return _update(f, optimizer, trainable, opt_state)

    return step


_cached_step = functools.lru_cache(maxsize=64)(_build_step)


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """Outcome of :func:`train`: final ``model`` and ``opt_state``, per-step ``losses``, and
    evaluations."""

    model: Any
    opt_state: Any
    losses: np.ndarray
    eval_steps: np.ndarray
    eval_losses: np.ndarray

    def summary(self) -> str:
        lines = ["TrainResult", "-" * 36, f"{'steps':<18}{len(self.losses):>18d}"]
        if len(self.losses):
            lines.append(f"{'first loss':<18}{self.losses[0]:>18.6g}")
            lines.append(f"{'final loss':<18}{self.losses[-1]:>18.6g}")
        if len(self.eval_losses):
            lines.append(f"{'final eval loss':<18}{self.eval_losses[-1]:>18.6g}")
        return "\n".join(lines)

    def __repr__(self):
        last = f"{self.losses[-1]:.4g}" if len(self.losses) else "-"
        return f"TrainResult(steps={len(self.losses)}, final_loss={last})"


def train(
    model,
    loss_fn: Callable,
    batches,
    optimizer: optax.GradientTransformation,
    steps: int,
    *,
    key,
    opt_state=None,
    start_step: int = 0,
    eval_fn: Callable | None = None,
    eval_every: int | None = None,
    progress: bool = True,
    mask=None,
) -> TrainResult:
    """Train ``model`` for ``steps`` optimiser steps.

    Parameters
    ----------
    model : equinox module (an adapted model trains its adapters only, see :func:`nn.split`).
    loss_fn : ``loss_fn(model, batch, *, key) -> scalar``.
    batches : callable ``step -> batch`` or an iterable of batches.
    optimizer : an ``optax.GradientTransformation``.
    steps : number of steps.
    key : PRNG key; step ``t`` gets ``fold_in(key, t)`` (so a resumed run with ``start_step``
        continues the same key stream).
    opt_state : resume from this optimiser state (default ``optimizer.init`` of the trainable half).
    eval_fn : optional ``eval_fn(model) -> float`` run every ``eval_every`` steps and at the end.
    progress : tqdm bar (``disable=None``: off when not a terminal).
    mask : trainable mask (:func:`nn.trainable_mask`); default the model's own.

    A loss that turns non-finite (seen at each progress update and at the end), non-finite
    trained arrays or a non-finite ``eval_fn`` value raise ``NumericalError``.
    """
    check_model(model)
    check_callable(loss_fn, "loss_fn")
    steps = check_int(steps, "steps", lower=0, upper=10**9)
    start_step = check_int(start_step, "start_step", lower=0, upper=2**31 - 1 - steps)
    progress = check_bool(progress, "progress")
    check_key(key)
    if eval_fn is not None:
        check_callable(eval_fn, "eval_fn")
    if eval_every is not None and (not isinstance(eval_every, int) or eval_every < 1):
        raise ValueError(f"eval_every must be a positive int or None, got {eval_every!r}")
    check_transform(optimizer, "optimizer")
    get = batch_source(batches)
    trainable, frozen = split(model, mask)
    if opt_state is None:
        opt_state = optimizer.init(trainable)
    step_fn = make_step(loss_fn, optimizer)
    losses, ev_steps, ev_losses = [], [], []
    bar = tqdm(
        range(start_step, start_step + steps), disable=None if progress else True, leave=False
    )
    for t in bar:
        trainable, opt_state, loss = step_fn(
            trainable, frozen, opt_state, get(t), jax.random.fold_in(key, t)
        )
        losses.append(loss)
        if (
            eval_fn is not None
            and eval_every is not None
            and (t + 1 - start_step) % eval_every == 0
        ):
            ev_steps.append(t + 1)
            ev_losses.append(float(eval_fn(combine(trainable, frozen))))
        if (t - start_step) % max(1, steps // 50) == 0:
            if not np.isfinite(float(loss)):  # a diverged run stops here, not `steps` later
                _check_finite_run(losses, trainable)
            bar.set_postfix(loss=f"{float(loss):.4f}")
    _check_finite_run(losses, trainable)
    model = combine(trainable, frozen)
    if eval_fn is not None and (not ev_steps or ev_steps[-1] != start_step + steps):
        ev_steps.append(start_step + steps)
        ev_losses.append(float(eval_fn(model)))
    check_finite_result(np.asarray(ev_losses, float), "`eval_fn`'s value", steps=ev_steps)
    return TrainResult(
        model,
        opt_state,
        np.asarray(jax.device_get(losses), dtype=float).reshape(-1),
        np.asarray(ev_steps, int),
        np.asarray(ev_losses, float),
    )


@eqx.filter_jit
def _eval_one(model, loss_fn, batch, key):
    return loss_fn(model, batch, key=key)


def evaluate(model, loss_fn: Callable, batches: Iterable, *, key=None) -> float:
    """Mean of ``loss_fn(model, batch, key=...)`` over ``batches`` (equal weight per batch)."""
    check_model(model)
    check_callable(loss_fn, "loss_fn")
    check_key(key, optional=True)
    if isinstance(batches, str | bytes) or not hasattr(batches, "__iter__"):
        raise TypeError(f"`batches` must be an iterable of batches; got {type(batches).__name__}.")
    vals = []
    for i, b in enumerate(batches):
        k = None if key is None else jax.random.fold_in(key, i)
        vals.append(_eval_one(model, loss_fn, b, k))
    if not vals:
        raise ValueError("batches must contain at least one batch")
    out = float(jnp.mean(jnp.stack(vals)))
    return check_finite_result(out, "the mean of `loss_fn` over `batches`")


def save(path: str | os.PathLike, tree) -> None:
    """Write the array leaves of ``tree`` (a model, or ``(model, opt_state)``) to ``path``,
    bit-exact."""
    if not any(eqx.is_array(leaf) for leaf in jax.tree.leaves(tree)):
        raise TypeError(
            f"`tree` (a model, or (model, opt_state)) must be a pytree with array leaves; got "
            f"{repr(tree)[:60]} of type {type(tree).__name__}."
        )
    path = as_path(path, "path", kind="parent")
    with open(path, "wb") as f:
        eqx.tree_serialise_leaves(f, tree)


def load(path: str | os.PathLike, like):
    """Read a tree saved by :func:`save`; ``like`` supplies structure, static fields, shapes and
    dtypes."""
    path = as_path(path, "path", kind="file")
    with open(path, "rb") as f:
        try:
            tree = eqx.tree_deserialise_leaves(f, like)
        except (ValueError, TypeError, RuntimeError) as err:
            raise ValueError(
                f"`like` must have the structure, shapes and dtypes of the tree saved at "
                f"{path!r}: {err}"
            ) from err
        left = len(f.read())
    if left:  # a `like` with fewer leaves (None, a str, an object) reads part of the file
        raise ValueError(
            f"`like` must have the structure, shapes and dtypes of the tree saved at {path!r}; "
            f"got {type(like).__name__}, which leaves {left} byte(s) of the file unread."
        )
    return tree
