"""Training encoders ``f, g`` for the Koopman SVD with the LoRA objective or a baseline loss.

The networks are :class:`nn.MLP`; training runs :func:`nn.fit` (Adam steps in one ``lax.scan``)
in jitted chunks on device-resident data, about 3x faster per step than a Python loop of jitted
steps for these small models.
After training, :meth:`KoopmanModel.readout` returns the CCA + LoRA read-out (Jeong et al. 2025,
Sec. 3.2.1) from full-data float64 moments.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from _core.validation import (
    NumericalError,
    as_array,
    check_bool,
    check_choice,
    check_int,
    check_key,
    check_memory,
    check_scalar,
)

from ._baselines import dpnet_loss, vamp2_loss, vampe_loss
from ._objective import ESTIMATORS, NESTINGS, lora_loss
from ._readout import KoopmanReadout, cca_readout, edmd_readout

__all__ = ["LOSSES", "Encoders", "KoopmanModel", "fit_koopman", "fit_koopman_batch"]

LOSSES = ("lora", "vamp2", "vampe", "dpnet", "dpnet_relaxed")
EMBEDDINGS = ("standardize", "fourier")


class Encoders(eqx.Module):
    """Two MLP encoders (or one shared), each with ``k`` outputs, ``k - 1`` learned plus the
    constant function 1 prepended when ``include_constant``.

    ``embedding``: ``"standardize"`` (affine map to zero mean, unit variance per coordinate) or
    ``"fourier"`` (``[sin 2 pi x, cos 2 pi x]`` per coordinate, for states on the torus [0, 1)^d,
    the encoder of the paper's logistic-map experiment).
    """

    f: nn.MLP
    g: nn.MLP | None
    shift: tuple = eqx.field(static=True)
    scale: tuple = eqx.field(static=True)
    embedding: str = eqx.field(static=True)
    include_constant: bool = eqx.field(static=True)

    def _embed(self, x):
        if self.embedding == "fourier":
            t = 2 * jnp.pi * x
            return jnp.concatenate([jnp.sin(t), jnp.cos(t)], axis=-1)
        shift = jnp.asarray(self.shift, x.dtype)
        scale = jnp.asarray(self.scale, x.dtype)
        return (x - shift) / scale

    def _out(self, net, x):
        z = net(self._embed(x))
        if self.include_constant:
            z = jnp.concatenate([jnp.ones(z.shape[:-1] + (1,), z.dtype), z], axis=-1)
        return z

    def left(self, x):
        """``f(x)``: (B, d) -> (B, k)."""
        return self._out(self.f, x)

    def right(self, y):
        """``g(y)``: (B, d) -> (B, k)."""
        return self._out(self.f if self.g is None else self.g, y)


class _RateState(NamedTuple):
    """The step count and the learning rate of :func:`_optimizer`'s last stage."""

    count: jax.Array
    lr: jax.Array


@functools.cache
def _optimizer(steps, schedule):
    """Adam whose learning rate is a value in its state (:func:`_with_rate` sets it), not a
    constant of the program: the compiled loop serves every rate (and replicates at different
    rates train side by side); cached so that repeated fits with one configuration reuse it.
    The same numbers as ``optax.adam(optax.cosine_decay_schedule(lr, steps))`` (or
    ``optax.adam(lr)``): the rate multiplies the unit schedule ``1.0 * decay`` exactly where
    optax multiplies ``lr * decay``, in the dtype a Python float takes there."""
    unit = optax.cosine_decay_schedule(1.0, steps) if schedule == "cosine" else None

    def init(params):
        del params
        return _RateState(jnp.zeros([], jnp.int32), jnp.zeros([], jnp.result_type(float)))

    def update(updates, state, params=None):
        del params
        rate = state.lr if unit is None else state.lr * unit(state.count)
        updates = jax.tree.map(lambda g: jnp.array(-rate, dtype=g.dtype) * g, updates)
        return updates, _RateState(jnp.asarray(optax.safe_increment(state.count)), state.lr)

    return optax.chain(optax.scale_by_adam(), optax.GradientTransformation(init, update))


def _with_rate(opt_state, lr):
    """``opt_state`` of :func:`_optimizer` with learning rate(s) ``lr`` (one per replicate when
    the state is batched), in the dtype a Python float takes."""
    adam, rate = opt_state
    return adam, rate._replace(lr=jnp.broadcast_to(jnp.asarray(lr, jnp.result_type(float)),
                                                   rate.count.shape))  # fmt: skip


@functools.cache
def _loss_fn(loss, nesting, estimator, gamma):
    def fn(model, batch, *, key=None):
        x, y = batch
        f, g = model.left(x), model.right(y)
        if callable(loss):
            return loss(f, g)
        if loss == "lora":
            return lora_loss(f, g, nesting=nesting, estimator=estimator)
        if model.include_constant:  # baselines centre / whiten; drop the fixed constant
            f, g = f[:, 1:], g[:, 1:]
        if loss == "vamp2":
            return vamp2_loss(f, g)
        if loss == "vampe":
            return vampe_loss(f, g)
        return dpnet_loss(f, g, gamma=gamma, relaxed=loss == "dpnet_relaxed", center=True)

    return fn


@eqx.filter_jit
def _apply(model, x, right):
    return model.right(x) if right else model.left(x)


@dataclasses.dataclass(frozen=True)
class KoopmanModel:
    """Trained encoders with their training history; ``losses`` per optimiser step."""

    encoders: Encoders
    losses: np.ndarray
    k: int
    loss: str
    nesting: str | None
    estimator: str
    state_dim: int

    def _eval(self, x, right, name):
        x = as_array(x, name)
        x = x.reshape(-1, 1) if x.ndim == 1 else x
        if x.ndim != 2 or x.shape[1] != self.state_dim:
            raise ValueError(f"`{name}` must have shape (n, {self.state_dim}); got {x.shape}.")
        dtype = self.encoders.f.layers[0].weight.dtype
        out = [
            np.asarray(_apply(self.encoders, jnp.asarray(x[i : i + 65536], dtype), right))
            for i in range(0, x.shape[0], 65536)
        ]
        return np.concatenate(out).astype(np.float64)

    def f(self, x):
        """Left features ``f(x)`` as float64, shape (n, k)."""
        return self._eval(x, False, "x")

    def g(self, y):
        """Right features ``g(y)`` as float64, shape (n, k)."""
        return self._eval(y, True, "y")

    def readout(self, X, Y) -> KoopmanReadout:
        """CCA + LoRA read-out on pairs ``(X, Y)`` (float64 moments; Koopman matrix from f(Y))."""
        return cca_readout(self.f(X), self.g(Y), self.f(Y))

    def edmd(self, X, Y, *, basis="f"):
        """EDMD on the learned basis ``f`` or ``g`` (Jeong et al. 2025, Sec. 3.2.2)."""
        b = self.f if check_choice(basis, "basis", ("f", "g")) == "f" else self.g
        return edmd_readout(b(X), b(Y))

    def summary(self):
        lines = [
            "KoopmanModel",
            "-" * 36,
            f"{'loss':<18}{self.loss:>18}",
            f"{'nesting':<18}{str(self.nesting):>18}",
            f"{'estimator':<18}{self.estimator:>18}",
            f"{'k':<18}{self.k:>18d}",
            f"{'steps':<18}{self.losses.size:>18d}",
        ]
        if self.losses.size:
            lines.append(f"{'final loss':<18}{self.losses[-1]:>18.6g}")
        return "\n".join(lines)

    def __repr__(self):
        return (
            f"KoopmanModel(loss={self.loss!r}, nesting={self.nesting!r}, k={self.k}, "
            f"steps={self.losses.size})"
        )


def _pairs(X, Y, xn="X", yn="Y"):
    # |entries| <= 1e30: the data are cast to the networks' dtype (float32 by default) before
    # they are standardised
    X = as_array(X, xn, lower=-1e30, upper=1e30)
    Y = as_array(Y, yn, lower=-1e30, upper=1e30)
    X = X.reshape(-1, 1) if X.ndim == 1 else X
    Y = Y.reshape(-1, 1) if Y.ndim == 1 else Y
    if X.ndim != 2:
        raise ValueError(f"`{xn}` must be 1-D or 2-D (n, d); got shape {X.shape}.")
    if Y.shape != X.shape:
        raise ValueError(f"`{yn}` must have the shape of `{xn}` {X.shape}; got {Y.shape}.")
    return X, Y


def _batch_indices(n, batch_size, steps, rng):
    """(steps, batch_size) row indices: epochs of a fresh permutation, remainder of each dropped."""
    per_epoch = n // batch_size
    epochs = -(-steps // per_epoch)
    rows = [
        rng.permutation(n)[: per_epoch * batch_size].reshape(per_epoch, batch_size)
        for _ in range(epochs)
    ]
    return np.concatenate(rows)[:steps].astype(np.int32)


_CHUNK = 250


@eqx.filter_jit
def _fit_chunk(trainable, frozen, opt_state, X, Y, idx, loss_fn, opt):
    """``len(idx)`` Adam steps by :func:`nn.fit`, step ``t`` on the rows ``idx[t]``."""

    def loss(model, ix):
        return loss_fn(model, (X[ix], Y[ix]))

    return nn.fit(loss, opt, trainable, idx, frozen=frozen, opt_state=opt_state)


@eqx.filter_jit
def _fit_chunk_batch(trainable, frozen, opt_state, X, Y, idx, loss_fn, opt):
    def one(tr, st, x, y, ix):
        return _fit_chunk(tr, frozen, st, x, y, ix, loss_fn, opt)

    return eqx.filter_vmap(one)(trainable, opt_state, X, Y, idx)


def _train_scan(model, loss_fn, opt, lr, X, Y, idx, progress, batched=False):
    """Adam steps by :func:`nn.fit` (one ``lax.scan``) in jitted chunks of at most ``_CHUNK``
    steps, of equal length where they divide the run (one compilation); trainable/frozen split
    by :func:`nn.split`. ``batched``: ``model``, ``X``, ``Y`` and ``idx`` carry a leading
    replicate axis and the replicates train side by side (one program, ``vmap``-ed), each at its
    rate of ``lr`` (a value, not a constant of the program: one compilation serves every rate).
    """
    from tqdm.auto import tqdm

    trainable, frozen = nn.split(model)
    opt_state = (eqx.filter_vmap(opt.init) if batched else opt.init)(trainable)
    opt_state = _with_rate(opt_state, lr)
    run = _fit_chunk_batch if batched else _fit_chunk
    steps = idx.shape[-2]
    c = -(-steps // -(-steps // _CHUNK))
    out = []
    for i in tqdm(range(0, steps, c), disable=None if progress else True, leave=False):
        ix = jnp.asarray(idx[..., i : i + c, :])
        trainable, opt_state, vals = run(trainable, frozen, opt_state, X, Y, ix, loss_fn, opt)
        out.append(np.asarray(vals))
    return nn.combine(trainable, frozen), np.concatenate(out, -1)


def fit_koopman(
    X,
    Y,
    k,
    *,
    loss="lora",
    nesting="jnt",
    estimator="unbiased",
    width=64,
    depth=2,
    embedding="standardize",
    shared=False,
    include_constant=True,
    batch_size=256,
    steps=3000,
    lr=1e-3,
    gamma=0.01,
    schedule="cosine",
    dtype=jnp.float32,
    key,
    progress=True,
) -> KoopmanModel:
    """Learn the top-``k`` Koopman singular functions from pairs ``(X, Y)`` (``Y`` one lag after
    ``X``).

    Parameters
    ----------
    X, Y : (n,) or (n, d) arrays of states and their successors.
    k : number of modes, counting the constant mode when ``include_constant`` (then the networks
        output ``k - 1`` functions and mode 0 is the trivial pair ``s_0 = 1``).
    loss : ``"lora"`` (Jeong et al. 2025, Sec. 3.1) or a baseline ``"vamp2"``, ``"vampe"``,
        ``"dpnet"``, ``"dpnet_relaxed"`` (see :mod:`dynamics.koopman._baselines`), or a callable
        ``loss(f, g) -> scalar`` on the (B, k) features, constant column included (e.g. another
        library's loss, for like-for-like comparisons; it must be hashable).
    nesting : None, ``"jnt"`` or ``"seq"`` (LoRA only). estimator : ``"unbiased"`` or ``"plugin"``.
    width, depth : MLP hidden width and number of hidden layers (GELU).
    embedding : ``"standardize"`` or ``"fourier"`` (periodic states in [0, 1)).
    shared : one network for f and g (valid for reversible stationary systems).
    batch_size, steps, lr, schedule : Adam with ``"cosine"`` decay or ``"constant"`` rate; batches
        are drawn without replacement, reshuffled each epoch.
    key : PRNG key (keyword-only): initialisation and batch order.

    Returns
    -------
    :class:`KoopmanModel`; call ``.readout(X, Y)`` for singular values, eigenvalues, forecasts.
    """
    return _fit(
        [X],
        [Y],
        k,
        [key],
        False,
        loss=loss,
        nesting=nesting,
        estimator=estimator,
        width=width,
        depth=depth,
        embedding=embedding,
        shared=shared,
        include_constant=include_constant,
        batch_size=batch_size,
        steps=steps,
        lr=lr,
        gamma=gamma,
        schedule=schedule,
        dtype=dtype,
        progress=progress,
    )[0]


def fit_koopman_batch(Xs, Ys, k, *, keys, **options) -> list[KoopmanModel]:
    """:func:`fit_koopman` on ``R`` data sets ``(Xs[i], Ys[i])`` (equal shapes) with ``keys[i]``,
    trained side by side: one ``vmap``-ed program, compiled once for all replicates (the way to
    run seeds of one configuration). ``options`` as for :func:`fit_koopman`; with
    ``embedding="standardize"`` the shift and scale come from all replicates pooled. Replicate
    ``i`` draws its initialisation and batch order from ``keys[i]`` as :func:`fit_koopman` does."""
    for v, name in ((Xs, "Xs"), (Ys, "Ys"), (keys, "keys")):
        if isinstance(v, str | bytes) or not hasattr(v, "__len__") or getattr(v, "ndim", 1) == 0:
            raise TypeError(f"`{name}` must be a sequence (one per replicate); got {v!r:.60}.")
    if len(Xs) != len(Ys) or len(Xs) != len(keys) or not len(Xs):
        raise ValueError(
            f"`Xs`, `Ys` and `keys` must be non-empty and of one length; got "
            f"{len(Xs)}, {len(Ys)} and {len(keys)}."
        )
    defaults = fit_koopman.__kwdefaults__ or {}  # options not given take fit_koopman's defaults
    return _fit(list(Xs), list(Ys), k, list(keys), True, **{**defaults, **options})


def _fit(
    Xs,
    Ys,
    k,
    keys,
    batched,
    *,
    loss,
    nesting,
    estimator,
    width,
    depth,
    embedding,
    shared,
    include_constant,
    batch_size,
    steps,
    lr,
    gamma,
    schedule,
    dtype,
    progress,
):  # the defaults are fit_koopman's, stated once there
    for key in keys:
        check_key(key, "keys" if batched else "key")
    include_constant = check_bool(include_constant, "include_constant")
    shared = check_bool(shared, "shared")
    progress = check_bool(progress, "progress")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dtype is None or dt.name not in ("float32", "float64"):
        raise TypeError(f"`dtype` must be float32 or float64; got {dtype!r}.")
    names = ("Xs", "Ys") if batched else ("X", "Y")
    pairs = [_pairs(X, Y, *names) for X, Y in zip(Xs, Ys, strict=True)]
    X, Y = pairs[0]
    if any(p[0].shape != X.shape for p in pairs):
        raise ValueError(f"every `Xs[i]` must have the shape of `Xs[0]` {X.shape}.")
    n, d = X.shape
    if not callable(loss):
        loss = check_choice(loss, "loss", LOSSES)
    if loss != "lora":
        nesting = None
    nesting = check_choice(nesting, "nesting", NESTINGS)
    estimator = check_choice(estimator, "estimator", ESTIMATORS)
    embedding = check_choice(embedding, "embedding", EMBEDDINGS)
    schedule = check_choice(schedule, "schedule", ("cosine", "constant"))
    k = check_int(k, "k", lower=2 if include_constant else 1, upper=10**4)
    width = check_int(width, "width", lower=1, upper=10**5)
    depth = check_int(depth, "depth", lower=0, upper=100)
    steps = check_int(steps, "steps", lower=1, upper=10**8)
    batch_size = check_int(batch_size, "batch_size", lower=2, upper=n)
    lr = check_scalar(lr, "lr", lower=0, upper=1e3, closed="right")
    gamma = check_scalar(gamma, "gamma", lower=0, upper=1e100)
    check_memory(len(keys) * steps * batch_size, "`steps`, `batch_size`", what="the batch order")
    check_memory(len(keys) * 2 * width * (width * depth + 2 * d + k), "`width`, `depth`, `k`")
    m = k - 1 if include_constant else k
    if loss != "lora" and m < 1:
        raise ValueError("`k` must leave at least one learned function for a baseline loss.")
    if depth == 0 and m > (2 * d if embedding == "fourier" else d):
        raise ValueError(
            f"`k` = {k} exceeds the feature dimension of a linear encoder "
            f"({2 * d if embedding == 'fourier' else d} + constant)."
        )
    d_in = 2 * d if embedding == "fourier" else d
    both = np.concatenate([a for p in pairs for a in p])
    shift, scale = tuple(both.mean(0).tolist()), tuple(np.maximum(both.std(0), 1e-12).tolist())

    def encoders(key):
        kf, kg = jax.random.split(jax.random.fold_in(key, 0))
        f_net = nn.MLP(d_in, m, width, depth, dtype=dtype, key=kf)
        g_net = None if shared else nn.MLP(d_in, m, width, depth, dtype=dtype, key=kg)
        return Encoders(f_net, g_net, shift, scale, embedding, bool(include_constant))

    def order(key):
        rng = np.random.default_rng(np.asarray(jax.random.key_data(jax.random.fold_in(key, 1))))
        return _batch_indices(n, batch_size, steps, rng)

    opt = _optimizer(steps, schedule)
    fn = _loss_fn(loss, nesting, estimator, gamma)
    if batched:
        enc = eqx.filter_vmap(encoders)(jnp.stack(keys))
        model, losses = _train_scan(
            enc,
            fn,
            opt,
            lr,
            jnp.asarray(np.stack([p[0] for p in pairs]), dtype),
            jnp.asarray(np.stack([p[1] for p in pairs]), dtype),
            np.stack([order(key) for key in keys]),
            progress,
            True,
        )
        models = [
            jax.tree.map(lambda a, i=i: a[i] if eqx.is_array(a) else a, model)
            for i in range(len(keys))
        ]
    else:
        model, losses = _train_scan(
            encoders(keys[0]),
            fn,
            opt,
            lr,
            jnp.asarray(X, dtype),
            jnp.asarray(Y, dtype),
            order(keys[0]),
            progress,
        )
        models, losses = [model], losses[None]
    if not np.all(np.isfinite(losses)):
        step = int(np.argmax(~np.isfinite(losses).all(axis=0)))
        raise NumericalError(
            f"training diverged: the loss is not finite from step {step} (loss={loss!r}); lower "
            "`lr` or check the data's scale.",
            step=step,
            final=losses[:, -1],
        )
    name = loss if isinstance(loss, str) else getattr(loss, "__name__", "custom")
    return [
        KoopmanModel(mo, lo, k, name, nesting, estimator, d)
        for mo, lo in zip(models, losses, strict=True)
    ]
