"""Held-out evaluation of DnD against its baselines and controls (``docs/papers/dnd.md``), and the
official timing protocol (``exploration/test_overhead/*``: warm-up calls, then the mean of the
next ones; ``docs/papers/dnd.md#mechanism-of-the-official-code``).

Every adapter is scored by merging it into the base through ``nn.adapters.merge`` and taking the
test MSE on fresh labelled inputs of the task. On each held-out task: the base network; the
training-LoRA average (the mean over all training checkpoints of their MSE on the task: the
paper's "training LoRAs" row); the mean adapter (the mean update ``s B A`` over all training
checkpoints, applied once); DnD (``gens`` fresh prompt batches of the task -> ``gens`` LoRAs, the
mean and the best of their MSEs); wrong-task prompts (prompt batches of the next held-out task);
and the same prompt batches in a shuffled order.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import check_array, check_callable, check_int, check_key
from nn import adapters as AD
from nn import dnd as D

from ._collect import Checkpoints, with_factors
from ._generator import GeneratorFit, _without_replacement
from ._tasks import TaskFamily, _check_family, _rbg, sample_inputs, task_targets

__all__ = ["HeldOut", "adapter_mse", "evaluate_heldout", "timed"]

GEN_WARMUP = 11  # the official overhead script averages iterations 12-20
GEN_REPEATS = 9


def _mse(model, X, y):
    return jnp.mean((model(X)[..., 0] - y) ** 2)


def _one_mse(template, fac, X, y):
    return _mse(AD.merge(with_factors(template, fac)), X, y)


def adapter_mse(template: AD.Adapted, factors, X, y) -> jax.Array:
    """Test MSE of LoRA ``factors`` (one adapter, in :func:`factors_of` order) merged into
    ``template``'s base, on inputs ``X (n, d)`` with targets ``y (n,)``.

    Examples
    --------
    >>> import nn
    >>> from dynamics.dnd import lora_template, factors_of
    >>> base = nn.MLP(2, 1, 4, 1, key=jax.random.key(0))
    >>> tpl = lora_template(base, 2, key=jax.random.key(1))
    >>> X = jnp.ones((3, 2))
    >>> bool(adapter_mse(tpl, factors_of(tpl), X, base(X)[:, 0]) < 1e-12)  # B = 0: the base itself
    True
    """
    if not isinstance(template, AD.Adapted):
        raise TypeError(
            f"`template` must be an nn.adapters.Adapted; got {type(template).__name__}."
        )
    X = jnp.asarray(check_array(X, "X", ndim=2, max_abs=1e6))
    y = jnp.asarray(check_array(y, "y", ndim=1, max_abs=1e6))
    d_in = template.spec_of(template.active[0]).shapes[0][1]
    if X.shape[0] != y.shape[0] or X.shape[1] != d_in:
        raise ValueError(
            f"`X` must be (n, {d_in}) and `y` (n,); got {tuple(X.shape)} and {tuple(y.shape)}."
        )
    return _jit_mse(template, with_factors(template, factors), X, y)


@eqx.filter_jit
def _jit_mse(template, adapted, X, y):
    return _mse(AD.merge(adapted), X.astype(jnp.float32), y.astype(jnp.float32))


@eqx.filter_jit
def _mse_grid(template, facs, X, y):
    """MSE of every adapter ``facs`` (leading axes S) on every task ``X (K, n, d)``: (K, S)."""
    per_task = jax.vmap(lambda f, x, t: _one_mse(template, f, x, t), in_axes=(None, 0, 0))
    return jax.vmap(per_task, in_axes=(0, None, None), out_axes=1)(facs, X, y)


@eqx.filter_jit
def _mean_adapter_mse(template, facs, X, y):
    scale = [lay.scale for lay in template.layers().values()]
    base = AD.unload(template)
    paths = list(template.layers())
    deltas = [s * jnp.mean(b @ a, axis=0) for s, (a, b) in zip(scale, facs, strict=True)]
    model = eqx.tree_at(
        lambda m: [_at(m, p).weight for p in paths],
        base,
        [_at(base, p).weight + d for p, d in zip(paths, deltas, strict=True)],
    )
    return jax.vmap(lambda x, t: _mse(model, x, t))(X, y)


def _at(model, path):
    for part in path.split("."):
        model = model[int(part)] if part.isdigit() else getattr(model, part)
    return model


@eqx.filter_jit
def _base_mse(template, X, y):
    return jax.vmap(lambda x, t: _mse(AD.unload(template), x, t))(X, y)


@eqx.filter_jit
def _centroid_mse(template, tokens, shapes, chunk, X, y):
    facs = D.detokenize(tokens, list(shapes), chunk)
    return jax.vmap(lambda x, t: _one_mse(template, facs, x, t))(X, y)


@eqx.filter_jit
def _own_mse(template, facs, X, y):
    """Task k's own adapter ``facs[k]`` on task k."""
    return jax.vmap(lambda f, x, t: _one_mse(template, f, x, t))(facs, X, y)


@eqx.filter_jit
def _generated_mse(template, gen, shapes, chunk, prompts, X, y):
    """``prompts (K, G, N, d)`` -> MSE (K, G) of the generated adapters on tasks ``X (K, n, d)``."""
    tok = gen(prompts)  # (K, G, T, h, w)
    facs = jax.vmap(jax.vmap(lambda t: D.detokenize(t, list(shapes), chunk)))(tok)
    per = jax.vmap(lambda f, x, t: _one_mse(template, f, x, t), in_axes=(0, None, None))
    return jax.vmap(per)(facs, X, y)


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """Per held-out task test MSEs (arrays of length K): ``base``, ``train_avg``, ``mean_adapter``,
    ``centroid`` (the decoded mean of the training tokens), ``dnd`` (mean over generations),
    ``dnd_best``, ``wrong`` (next task's prompts), ``permuted``
    (prompt order shuffled within each batch), ``full_shot`` (each task's own LoRA trained on its
    labels, the oracle; None when not given), ``spread`` (std over generations, mean over tasks)."""

    base: np.ndarray
    train_avg: np.ndarray
    mean_adapter: np.ndarray
    centroid: np.ndarray
    dnd: np.ndarray
    dnd_best: np.ndarray
    wrong: np.ndarray
    permuted: np.ndarray
    full_shot: np.ndarray | None
    spread: float

    def summary(self) -> str:
        rows = ["HeldOut (mean test MSE over tasks)", "-" * 36]
        names = ("base", "train_avg", "mean_adapter", "centroid", "dnd", "dnd_best", "wrong")
        for f in (*names, "permuted", "full_shot"):
            if getattr(self, f) is None:
                continue
            rows.append(f"{f:<18}{float(np.mean(getattr(self, f))):>18.5g}")
        return "\n".join(rows)


def evaluate_heldout(
    family: TaskFamily,
    checkpoints: Checkpoints,
    fit: GeneratorFit,
    *,
    gens: int = 10,
    n_eval: int = 512,
    pool: int = 256,
    full_shot: Checkpoints | None = None,
    key,
) -> HeldOut:
    """Score DnD and the baselines on ``family.theta_test`` (see the module doc);
    ``full_shot``: checkpoints of LoRAs trained on the held-out tasks themselves (the last one of
    each task is scored)."""
    _check_family(family)
    if not isinstance(checkpoints, Checkpoints):
        raise TypeError(f"`checkpoints` must be a Checkpoints; got {type(checkpoints).__name__}.")
    if not isinstance(fit, GeneratorFit):
        raise TypeError(f"`fit` must be a GeneratorFit; got {type(fit).__name__}.")
    if full_shot is not None and not isinstance(full_shot, Checkpoints):
        raise TypeError(
            f"`full_shot` must be a Checkpoints or None; got {type(full_shot).__name__}."
        )
    gens = check_int(gens, "gens", lower=1, upper=1000)
    n_eval = check_int(n_eval, "n_eval", lower=1, upper=10**6)
    n = fit.generator.decoder.layers[0].outer.in_channels
    pool = check_int(pool, "pool", lower=n, upper=10**6)
    check_key(key)
    th = family.theta_test
    K = th.shape[0]
    ke, kp, kg, ks = jax.random.split(_rbg(key), 4)
    X = sample_inputs(family, th, n_eval, key=ke)
    y = task_targets(family, th, X)
    pools = sample_inputs(family, th, pool, key=kp)  # unlabeled prompts of each held-out task
    pick = _without_replacement(kg, (K, gens), pool, n)
    prompts = pools[jnp.arange(K)[:, None, None], pick]  # (K, gens, n, d)
    tpl = checkpoints.template
    facs = [
        (a.reshape(-1, *a.shape[2:]), b.reshape(-1, *b.shape[2:])) for a, b in checkpoints.factors
    ]
    base = _base_mse(tpl, X, y)
    train = _mse_grid(tpl, facs, X, y).mean(axis=1)
    mean = _mean_adapter_mse(tpl, facs, X, y)
    gen, shapes, chunk = fit.generator, fit.shapes, fit.chunk
    centroid = _centroid_mse(tpl, fit.centroid, shapes, chunk, X, y)
    dnd = _generated_mse(tpl, gen, shapes, chunk, prompts, X, y)
    wrong = _generated_mse(tpl, gen, shapes, chunk, jnp.roll(prompts, 1, axis=0), X, y)
    perm = jax.random.permutation(ks, n)
    permuted = _generated_mse(tpl, gen, shapes, chunk, prompts[:, :, perm], X, y)
    if full_shot is None:
        own = None
    else:
        last = [(a[:, -1], b[:, -1]) for a, b in full_shot.factors]
        own = _own_mse(tpl, last, X, y)
    f = lambda a: np.asarray(a, np.float64)  # noqa: E731
    spread = float(np.mean(np.std(f(dnd), axis=1)))
    own = None if own is None else f(own)
    return HeldOut(
        f(base), f(train), f(mean), f(centroid), f(dnd.mean(1)), f(dnd.min(1)), f(wrong.mean(1)),
        f(permuted.mean(1)), own, spread,
    )  # fmt: skip


def _jit(f):
    """``f`` compiled once (the timed calls reuse it)."""
    return eqx.filter_jit(lambda *a: f(*a))


def timed(f: Callable, *args, warmup: int | None = None, repeats: int | None = None) -> float:
    """Mean wall-clock seconds of ``jit(f)(*args)`` over calls ``warmup + 1 .. warmup + repeats``
    (each waited for with ``block_until_ready``), the first ``warmup`` calls (compilation
    included) left out, as the official overhead script times its generator (defaults
    :data:`GEN_WARMUP` = 11 and :data:`GEN_REPEATS` = 9: the mean of calls 12-20).

    Examples
    --------
    >>> s = timed(jnp.sin, jnp.ones(3), warmup=1, repeats=2)  # compilation left out
    >>> 0.0 < s < 1.0
    True
    """
    check_callable(f, "f")
    warmup = GEN_WARMUP if warmup is None else warmup
    repeats = GEN_REPEATS if repeats is None else repeats
    warmup = check_int(warmup, "warmup", lower=0, upper=10**4)
    repeats = check_int(repeats, "repeats", lower=1, upper=10**4)
    g = _jit(f)

    def first(*a):  # the compiling call: a NumPy function cannot be traced
        try:
            return g(*a)
        except (jax.errors.JAXTypeError, jax.errors.ConcretizationTypeError) as err:
            raise TypeError(
                f"`f` must be traceable by jax.jit (jax.numpy, not NumPy); got {f!r:.60} "
                f"({err!s:.120})."
            ) from None

    calls = [first] + [g] * (warmup + repeats - 1)
    for c in calls[:warmup]:
        jax.block_until_ready(c(*args))
    t0 = time.perf_counter()
    for c in calls[warmup:]:
        jax.block_until_ready(c(*args))
    return (time.perf_counter() - t0) / repeats
