"""LoRA checkpoints collected along short training runs, one run per task, as DnD's official
pipeline collects them (``prepare/training_scripts/**``;
``docs/papers/dnd.md#mechanism-of-the-official-code``).

Every task's LoRA starts from the same initialisation (:data:`LORA_SEED` = 42, LLaMA-Factory's
default seed, for every dataset), runs a "pretrain" phase of ``steps`` Adam steps on a cosine
schedule planned over ``horizon`` steps, then is resumed from that checkpoint for ``keep`` more
steps with a checkpoint saved after every step (``save_steps: 1``). All tasks train at once: the
adapters are stacked along a task axis and the loss is the sum of the per-task losses, so each
task's gradient (and Adam's elementwise update) is exactly its own run; one ``nn.train`` step
function serves every task and every resume.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import nn
from _core.validation import check_array, check_int, check_key, check_scalar, to_array
from nn import adapters as AD

from ._tasks import TaskFamily, _check_family, _rbg, sample_inputs, task_targets

__all__ = ["Checkpoints", "lora_template", "factors_of", "with_factors", "collect_checkpoints"]

LORA_SEED = 42  # LLaMA-Factory's default seed: one LoRA initialisation for every run


def lora_template(base, r: int = 2, *, key) -> AD.Adapted:
    """``base`` (an ``nn.MLP``) with LoRA of rank ``r`` and ``alpha = 2 r`` (LLaMA-Factory's
    default) on its hidden linear maps (all but the read-out), at its initialisation.

    Examples
    --------
    >>> tpl = lora_template(nn.MLP(2, 1, 4, 1, key=jax.random.key(0)), 2, key=jax.random.key(1))
    >>> [(a.shape, b.shape) for a, b in factors_of(tpl)]  # the hidden map only, rank 2
    [((2, 2), (4, 2))]
    """
    r = check_int(r, "r", lower=1, upper=4096)
    check_key(key)
    if not isinstance(base, nn.MLP) or len(base.layers) < 2:
        raise TypeError(f"`base` must be an nn.MLP with a hidden layer; got {base!r:.60}.")
    targets = [f"layers.{i}" for i in range(len(base.layers) - 1)]
    return AD.inject(base, "lora", targets, key=key, r=r, alpha=float(2 * r))


def factors_of(adapted: AD.Adapted) -> list[tuple[jax.Array, jax.Array]]:
    """The ``(A, B)`` of every LoRA layer of ``adapted``, in path order (the tokenizer's order).

    Examples
    --------
    >>> tpl = lora_template(nn.MLP(2, 1, 4, 1, key=jax.random.key(0)), 2, key=jax.random.key(1))
    >>> (A, B), = factors_of(tpl)
    >>> A.shape, B.shape, float(jnp.abs(B).sum())  # LoRA starts at B = 0
    ((2, 2), (4, 2), 0.0)
    """
    if not isinstance(adapted, AD.Adapted):
        raise TypeError(f"`adapted` must be an nn.adapters.Adapted; got {type(adapted).__name__}.")
    layers = list(adapted.layers().values())
    for lay in layers:
        if not (hasattr(lay, "A") and hasattr(lay, "B")):
            raise TypeError(
                f"`adapted` must hold LoRA layers (factors A, B); got a layer of type "
                f"{type(lay).__name__}."
            )
    return [(lay.A, lay.B) for lay in cast(list[Any], layers)]  # checked just above


def with_factors(adapted: AD.Adapted, factors) -> AD.Adapted:
    """``adapted`` with its LoRA factors replaced by ``factors`` (same shapes and order).

    Examples
    --------
    >>> tpl = lora_template(nn.MLP(2, 1, 4, 1, key=jax.random.key(0)), 2, key=jax.random.key(1))
    >>> (A, B), = factors_of(tpl)
    >>> (A2, B2), = factors_of(with_factors(tpl, [(A, B + 1.0)]))
    >>> bool((A2 == A).all()), float(B2.sum())
    (True, 8.0)
    """
    old = factors_of(adapted)
    if not isinstance(factors, list | tuple) or len(factors) != len(old):
        raise ValueError(f"`factors` must hold {len(old)} (A, B) pairs; got {factors!r:.80}.")
    for (a, b), ab in zip(old, factors, strict=True):
        if not isinstance(ab, list | tuple) or len(ab) != 2:
            raise ValueError(f"`factors` must hold (A, B) pairs; got {ab!r:.80}.")
        for x in ab:  # real and finite (concrete), whatever container holds them
            check_array(x if hasattr(x, "dtype") else to_array(x, "factors"), "factors")
        if tuple(jnp.shape(ab[0])) != a.shape or tuple(jnp.shape(ab[1])) != b.shape:
            raise ValueError(
                f"`factors` shapes {jnp.shape(ab[0])}, {jnp.shape(ab[1])} must be {a.shape}, "
                f"{b.shape}."
            )
    new = [jnp.asarray(x, a.dtype) for (a, _), ab in zip(old, factors, strict=True) for x in ab]
    return eqx.tree_at(lambda m: [x for ab in factors_of(m) for x in ab], adapted, new)


class _Stack(eqx.Module):
    """Adapters of K tasks stacked on a leading axis beside one frozen base (trains the stack)."""

    adapters: Any
    frozen: Any

    def trainable_mask(self):
        return _Stack(
            jax.tree.map(eqx.is_inexact_array, self.adapters),
            jax.tree.map(lambda _: False, self.frozen),
        )


def _task_mse(trainable, frozen, X, y):
    return jnp.mean((nn.combine(trainable, frozen)(X)[..., 0] - y) ** 2)


def _stack_loss(model: _Stack, batch, *, key):
    """Sum over tasks of each task's minibatch MSE (one shared minibatch index per step)."""
    X, y, bs = batch  # bs: zeros whose length is the minibatch size (a static shape)
    idx = jax.random.randint(key, (bs.shape[0],), 0, X.shape[1])
    per = jax.vmap(_task_mse, in_axes=(0, None, 0, 0))(
        model.adapters, model.frozen, X[:, idx], y[:, idx]
    )
    return jnp.sum(per)


@functools.lru_cache(maxsize=16)
def _optimizer(lr: float, horizon: int):
    return optax.adam(optax.cosine_decay_schedule(lr, horizon))


@dataclasses.dataclass(frozen=True)
class Checkpoints:
    """``factors``: per layer ``(A (K, J, r, d_in), B (K, J, d_out, r))`` of K tasks x J
    consecutive-step checkpoints; ``template`` the adapted base at initialisation; ``steps`` the
    optimiser step of each checkpoint; ``seconds`` wall time of the collection (with
    compilation)."""

    template: Any
    factors: list
    steps: jax.Array
    seconds: float

    def checkpoint(self, task: int, j: int) -> list:
        return [(a[task, j], b[task, j]) for a, b in self.factors]

    def __repr__(self):
        k, j = self.factors[0][0].shape[:2]
        return f"Checkpoints(tasks={k}, per_task={j}, steps={self.steps.tolist()})"


def collect_checkpoints(
    family: TaskFamily,
    theta,
    *,
    r: int = 2,
    steps: int = 200,
    keep: int = 20,
    horizon: int = 300,
    n_points: int = 512,
    batch: int = 64,
    lr: float = 1e-2,
    key,
) -> Checkpoints:
    """Train one LoRA per task ``theta (K, k)`` on ``n_points`` labelled inputs of its own law
    and keep ``keep`` consecutive-step checkpoints after ``steps`` steps (see the module doc)."""
    _check_family(family)
    r = check_int(r, "r", lower=1, upper=64)
    steps = check_int(steps, "steps", lower=0, upper=10**6)
    keep = check_int(keep, "keep", lower=1, upper=10**4)
    horizon = check_int(horizon, "horizon", lower=1, upper=10**7)
    n_points = check_int(n_points, "n_points", lower=1, upper=10**6)
    batch = check_int(batch, "batch", lower=1, upper=n_points)
    lr = check_scalar(lr, "lr", lower=0, upper=10, closed="right")
    check_key(key)
    t0 = time.perf_counter()
    kd, kt = jax.random.split(_rbg(key))
    X = sample_inputs(family, theta, n_points, key=kd)
    y = task_targets(family, theta, X)
    template = lora_template(family.base, r, key=jax.random.key(LORA_SEED))
    tr, fr = nn.split(template)
    K = X.shape[0]
    stack = _Stack(jax.tree.map(lambda a: jnp.broadcast_to(a, (K, *a.shape)), tr), fr)
    data = (X, y, jnp.zeros(batch))
    opt = _optimizer(lr, horizon)
    res = nn.train(stack, _stack_loss, lambda t: data, opt, steps, key=kt, progress=False)
    saved = []
    for j in range(keep):  # the resumed run, a checkpoint after every step
        res = nn.train(
            res.model, _stack_loss, lambda t: data, opt, 1, key=kt, opt_state=res.opt_state,
            start_step=steps + j, progress=False,
        )  # fmt: skip
        saved.append(res.model.adapters)
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs, axis=1), *saved)
    facs = [(lay.A, lay.B) for lay in _stacked_layers(template, stacked)]
    jax.block_until_ready(facs)
    return Checkpoints(
        template, facs, jnp.arange(steps + 1, steps + keep + 1), time.perf_counter() - t0
    )


def _stacked_layers(template, trainable):
    return list(nn.combine(trainable, nn.split(template)[1]).layers().values())
