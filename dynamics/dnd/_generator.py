"""Training DnD's prompt -> LoRA generator and generating adapters
(``docs/papers/dnd.md#mechanism-of-the-official-code``).

A training sample is ``(checkpoint q, fresh prompt batch of q's task)``: ``q`` uniform over the
``D J`` checkpoints, its task ``q // J`` (the official ``Text2Qwen25LoRA_FullCondDataset``
indexing), and ``N`` prompts drawn without replacement from that task's pool at every access.
The loss is :func:`nn.dnd.dnd_loss` with :func:`nn.dnd.criterion_weight` from the training
checkpoints, noise ``1e-4`` on the condition and ``1e-5`` on the target tokens; AdamW with
weight decay 0.1, clipping at 1 and one warm-up step before a cosine decay to 0.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from _core.validation import check_array, check_int, check_key, check_scalar
from nn import dnd as D

from ._tasks import _rbg

__all__ = ["GeneratorFit", "train_generator", "generate_tokens"]

COND_NOISE = 1e-4  # the code's noise_enhance on the encoder output
TARGET_NOISE = 1e-5  # 0.1 x the condition amplitude, on the target tokens


def _prompt_task(q, n_tasks, per_task):
    """The task whose prompts pair with checkpoint ``q`` (checkpoints listed task by task)."""
    return q // per_task


def _without_replacement(key, batch, P, N):
    """``batch + (N,)`` indices, each row a uniform N-subset of ``range(P)`` in random order (the
    top N of P iid uniforms; cheaper to compile than a vmapped permutation)."""
    return jax.lax.top_k(jax.random.uniform(key, (*batch, P)), N)[1]


def _gen_loss(gen, batch, *, key):
    tokens, pools, weight, shape = batch  # shape: zeros (B, N), the batch and prompt counts
    (B, N), (DJ, P) = shape.shape, (tokens.shape[0], pools.shape[1])
    D_, J = pools.shape[0], DJ // pools.shape[0]
    kq, kp, kc, kt = jax.random.split(_rbg(key), 4)
    q = jax.random.randint(kq, (B,), 0, DJ)
    task = _prompt_task(q, D_, J)
    pick = _without_replacement(kp, (B,), P, N)
    prompts = pools[task[:, None], pick]  # (B, N, d), fresh without replacement
    target = tokens[q]
    target = target + TARGET_NOISE * jax.random.normal(kt, target.shape, target.dtype)
    return D.dnd_loss(gen(prompts, key=kc, noise=COND_NOISE), target, weight)


@functools.lru_cache(maxsize=16)
def _optimizer(lr: float, steps: int, weight_decay: float):
    sched = optax.warmup_cosine_decay_schedule(0.0, lr, 1, max(steps, 2))
    return optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(sched, weight_decay=weight_decay)
    )


@dataclasses.dataclass(frozen=True)
class GeneratorFit:
    """A trained :class:`nn.dnd.DnDGenerator` with its per-tile ``weight``, the ``centroid`` of
    the training tokens (the MSE-optimal output when prompts carry no information,
    ``docs/papers/dnd.md`` D2; 0 at padding positions, which decoding ignores), per-step ``losses``,
    the ``chunk`` and
    layer ``shapes`` its tokens decode to, and the training ``seconds``."""

    generator: Any
    weight: jax.Array
    centroid: jax.Array
    losses: np.ndarray
    chunk: int
    shapes: tuple
    seconds: float

    def __repr__(self):
        return f"GeneratorFit(steps={len(self.losses)}, final_loss={self.losses[-1]:.4g})"


def train_generator(
    factors,
    pools,
    *,
    chunk: int = 8,
    prompts: int = 32,
    steps: int = 2000,
    batch: int = 16,
    lr: float = 1e-3,
    weight_decay: float = 0.1,
    hidden=((6, 10),),
    key,
) -> GeneratorFit:
    """Train a generator on checkpoints ``factors`` (per layer ``(A (D, J, r, d_in),
    B (D, J, d_out, r))``, as :attr:`Checkpoints.factors`) and unlabeled prompt ``pools
    (D, P, d)`` of the same D tasks (see the module doc)."""
    if not isinstance(factors, list | tuple) or not factors:
        raise TypeError(f"`factors` must be a non-empty list of (A, B) pairs; got {factors!r:.60}.")
    pools = check_array(pools, "pools", ndim=3, max_abs=1e6)
    chunk = check_int(chunk, "chunk", lower=2, upper=4096)
    prompts = check_int(prompts, "prompts", lower=1, upper=pools.shape[1])
    steps = check_int(steps, "steps", lower=1, upper=10**6)
    batch = check_int(batch, "batch", lower=1, upper=4096)
    lr = check_scalar(lr, "lr", lower=0, upper=1, closed="right")
    weight_decay = check_scalar(weight_decay, "weight_decay", lower=0, upper=10)
    check_key(key)
    a0 = check_array(factors[0][0], "factors", ndim=4)
    if a0.shape[0] != pools.shape[0]:
        raise ValueError(
            f"`factors` hold {a0.shape[0]} tasks but `pools` {pools.shape[0]}; they must match."
        )
    t0 = time.perf_counter()
    D_, J = a0.shape[:2]
    flat = [(a.reshape(D_ * J, *a.shape[2:]), b.reshape(D_ * J, *b.shape[2:])) for a, b in factors]
    tokens = jax.vmap(lambda f: D.tokenize(f, chunk))(flat)  # (DJ, T, h, w)
    weight = D.criterion_weight(tokens.reshape(D_, J, *tokens.shape[1:]))
    shapes = tuple((int(b.shape[-2]), int(a.shape[-1])) for a, b in factors)
    kg, kt = jax.random.split(_rbg(key))
    gen = D.DnDGenerator(
        pools.shape[2], prompts, tokens.shape[1], tokens.shape[2:], hidden=hidden, key=kg
    )
    mask = nn.trainable_mask(gen, frozen=lambda g: g.encoder)
    data = (tokens, jnp.asarray(pools, jnp.float32), weight, jnp.zeros((batch, prompts)))
    res = nn.train(
        gen, _gen_loss, lambda t: data, _optimizer(lr, steps, weight_decay), steps, key=kt,
        progress=False, mask=mask,
    )  # fmt: skip
    return GeneratorFit(
        res.model,
        weight,
        jnp.where(D.token_mask(tokens[0]), tokens.mean(axis=0), 0.0),
        res.losses,
        chunk,
        shapes,
        time.perf_counter() - t0,
    )


def generate_tokens(fit: GeneratorFit, prompts) -> jax.Array:
    """Tokens for prompt batch(es) ``prompts (..., N, d)``: one forward pass, no gradient step."""
    if not isinstance(fit, GeneratorFit):
        raise TypeError(f"`fit` must be a GeneratorFit; got {type(fit).__name__}.")
    prompts = check_array(prompts, "prompts", min_ndim=2, max_abs=1e6)
    n = fit.generator.decoder.layers[0].outer.in_channels
    if prompts.shape[-2] != n or prompts.shape[-1] != fit.generator.encoder.R.shape[1]:
        raise ValueError(
            f"`prompts` must have shape (..., {n}, {fit.generator.encoder.R.shape[1]}); got "
            f"{tuple(prompts.shape)}."
        )
    return _forward(fit.generator, jnp.asarray(prompts, jnp.float32))


@eqx.filter_jit
def _forward(gen, prompts):
    return gen(prompts)
