"""The victim of AegisGuard's threat model: a public backbone, a planted private task, LoRA on
every linear map, trained on the private labels (``docs/papers/aegisguard.md``, variant V2).

* :class:`ResMLP` -- the public backbone ``h = GELU(W_0 x)``, ``h += GELU(W_b h)`` per block, then
  ``W_head h``; its ``blocks + 2`` linear maps are the adaptable layers, indexed by depth (input
  map 0, head last).
* :func:`planted_task` -- the private task with a known sensitive set (V2): the teacher is the
  backbone plus rank-``planted_rank`` updates ``dW*_l`` of graded Frobenius norms
  ``grades[j] * ||W_l||_F`` on a random set ``S*`` of ``len(grades)`` layers; labels are the
  teacher's argmax on Gaussian inputs. (The digits variant V1 is not built.)
* :func:`train_victim` -- LoRA (``nn.adapters.inject(..., "lora")``, rank ``r`` on every linear
  map) trained with Adam on the private labels; ``vmap``-able over replicates (one compilation).

A victim's adapters are carried as ``(As, Bs)``, tuples of arrays in depth order;
:func:`adapter_arrays` / :func:`with_adapters` move between those and the ``Adapted`` model.
"""

from __future__ import annotations

import math
from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.core import Tracer

import nn
from _core.validation import (
    check_array,
    check_instance,
    check_int,
    check_key,
    check_scalar,
    to_array,
)
from nn import adapters as ad

# the entry points; adapter_arrays, with_adapters, logits and init_A are helpers (no validation)
__all__ = ["ResMLP", "Task", "planted_task", "adapted_model", "accuracy", "train_victim"]


class ResMLP(eqx.Module):
    """Residual GELU MLP: ``inp`` (width x d_in), ``blocks`` (width x width) and ``head``."""

    inp: nn.Linear
    blocks: tuple
    head: nn.Linear

    def __init__(self, d_in: int, width: int, n_blocks: int, n_classes: int, *, dtype=None, key):
        check_int(d_in, "d_in", lower=1, upper=4096)
        check_int(width, "width", lower=1, upper=4096)
        check_int(n_blocks, "n_blocks", lower=0, upper=64)
        check_int(n_classes, "n_classes", lower=2, upper=4096)
        check_key(key)
        k = jax.random.split(key, n_blocks + 2)
        self.inp = nn.Linear(d_in, width, dtype=dtype, key=k[0])
        self.blocks = tuple(
            nn.Linear(width, width, dtype=dtype, key=k[i + 1]) for i in range(n_blocks)
        )
        self.head = nn.Linear(width, n_classes, dtype=dtype, key=k[-1])

    def __call__(self, x, *, key=None):
        h = jax.nn.gelu(self.inp(x))
        for b in self.blocks:
            h = h + jax.nn.gelu(b(h))
        return self.head(h)


class Task(eqx.Module):
    """A private task: train/test inputs and teacher labels, the planted set ``S*`` (a bool
    mask over layers) and the public ``backbone`` (a pytree: ``vmap`` stacks replicates)."""

    backbone: ResMLP
    X_train: jax.Array
    y_train: jax.Array
    X_test: jax.Array
    y_test: jax.Array
    planted: jax.Array


def _weights(model: ResMLP):
    return [model.inp.weight, *(b.weight for b in model.blocks), model.head.weight]


def _set_weights(model: ResMLP, ws):
    ws = list(ws)
    model = eqx.tree_at(lambda m: (m.inp.weight, m.head.weight), model, (ws[0], ws[-1]))
    if not model.blocks:  # tree_at cannot iterate an empty tuple of blocks
        return model
    return eqx.tree_at(lambda m: [b.weight for b in m.blocks], model, ws[1:-1])


def planted_task(
    *,
    key,
    d_in: int = 16,
    width: int = 32,
    n_blocks: int = 6,
    n_classes: int = 8,
    n_train: int = 2048,
    n_test: int = 2048,
    grades=(1.5, 1.0, 0.6),
    planted_rank: int = 2,
    dtype=jnp.float32,
) -> Task:
    """Variant V2 of ``docs/papers/aegisguard.md``: a teacher ``backbone + dW*`` on a random set
    ``S*`` of ``len(grades)`` layers, labels its argmax on ``N(0, I)`` inputs.

    ``dW*_l = g ||W_l||_F U V^T / ||U V^T||_F`` with Gaussian ``U (out, planted_rank)`` and
    ``V (in, planted_rank)``. The public backbone is random, its head bias shifted so that its
    mean logit over the inputs is zero; the teacher's logits are centred the same way before the
    argmax (both keep the classes balanced; a choice made here, not in the paper).

    ``dtype`` is that of the backbone and the inputs, hence of the adapters trained on them:
    float32 by default, as the paper's models run, whatever JAX's default (float64 doubled a
    replicate's time for no verdict of ``paper_checks.aegisguard`` changed).
    """
    check_key(key)
    n_layers = check_int(n_blocks, "n_blocks", lower=0, upper=64) + 2
    check_int(d_in, "d_in", lower=1, upper=4096)
    check_int(width, "width", lower=1, upper=4096)
    check_int(n_classes, "n_classes", lower=2, upper=4096)
    check_int(n_train, "n_train", lower=8, upper=10**6)
    check_int(n_test, "n_test", lower=8, upper=10**6)
    check_int(planted_rank, "planted_rank", lower=1, upper=min(width, d_in, n_classes))
    if not isinstance(grades, tuple | list) or not 1 <= len(grades) <= n_layers:
        raise ValueError(
            f"`grades` must be a tuple of 1..{n_layers} norms (n_blocks + 2 layers); got "
            f"{grades!r}."
        )
    grades = [check_scalar(g, "grades", lower=0, upper=100) for g in grades]
    kb, ks, kp, kx = jax.random.split(key, 4)
    try:
        floating = jnp.issubdtype(dtype, jnp.floating)
    except TypeError:
        floating = False
    if not floating:
        raise TypeError(f"`dtype` must be a floating dtype; got {dtype!r}.")
    backbone = ResMLP(d_in, width, n_blocks, n_classes, dtype=dtype, key=kb)
    chosen = jax.random.choice(ks, n_layers, (len(grades),), replace=False)
    mask = jnp.zeros(n_layers, bool).at[chosen].set(True)
    ws = _weights(backbone)
    gl = jnp.zeros(n_layers).at[chosen].set(jnp.asarray(grades))
    new = []
    for i, w in enumerate(ws):
        ku, kv = jax.random.split(jax.random.fold_in(kp, i))
        d = jax.random.normal(ku, (w.shape[0], planted_rank), dtype) @ jax.random.normal(
            kv, (planted_rank, w.shape[1]), dtype
        )
        new.append(w + gl[i].astype(dtype) * jnp.linalg.norm(w) * d / jnp.linalg.norm(d))
    X = jax.random.normal(kx, (n_train + n_test, d_in), dtype)
    out = backbone(X)
    # eqx types Linear.bias as optional; this head is built with one
    bias = backbone.head.bias - out.mean(0)  # pyright: ignore[reportOptionalOperand]
    backbone = eqx.tree_at(lambda m: m.head.bias, backbone, bias)
    teacher = _set_weights(backbone, new)
    t = teacher(X)
    y = jnp.argmax(t - t.mean(0), axis=-1)
    return Task(backbone, X[:n_train], y[:n_train], X[n_train:], y[n_train:], mask)


# inject() records its key's bits in the (static) spec, so it needs a concrete key; the
# per-replicate A factors are drawn from ``key`` afterwards (traceable under vmap)
_SPEC_KEY = np.zeros(2, np.uint32)


def adapted_model(backbone: ResMLP, r: int = 4, *, key) -> ad.Adapted:
    """``backbone`` with LoRA of rank ``r`` (alpha = r) on every linear map
    (``nn.adapters.inject``): ``B = 0`` and ``A_l ~ U(-1/sqrt(n_l), 1/sqrt(n_l))`` drawn from
    ``fold_in(key, l)`` (PEFT's init, as ``inject`` draws it). Traceable: ``vmap`` over keys
    and backbones.

    Examples
    --------
    >>> model = adapted_model(ResMLP(4, 4, 1, 2, key=jax.random.key(0)), 1, key=jax.random.key(1))
    >>> As, Bs = adapter_arrays(model)  # one rank-1 LoRA per linear map, depth order
    >>> len(As), As[0].shape, Bs[-1].shape, float(sum(jnp.abs(b).sum() for b in Bs))  # B = 0
    (3, (1, 4), (2, 1), 0.0)
    """
    check_instance(backbone, "backbone", ResMLP)
    check_int(r, "r", lower=1, upper=min(backbone.head.out_features, backbone.inp.in_features))
    check_key(key)
    model = ad.inject(backbone, "lora", "all-linear", key=_SPEC_KEY, r=r)
    As, Bs = adapter_arrays(model)
    return with_adapters(model, init_A(As, key=key), Bs)


def init_A(As, *, key) -> tuple:
    """Fresh LoRA down-projections of the shapes of ``As``: ``U(-1/sqrt(n), 1/sqrt(n))``, layer
    ``l`` from ``fold_in(key, l)`` (PEFT's Kaiming-uniform init, ``nn.adapters`` LoRA)."""
    return tuple(
        jax.random.uniform(jax.random.fold_in(key, i), a.shape, a.dtype, -1.0, 1.0)
        / math.sqrt(a.shape[1])
        for i, a in enumerate(As)
    )


def _lora_layers(model: ad.Adapted) -> list[ad.LoRALinear]:
    # the victim's adapter is ``inject(..., "lora")`` (see :func:`lora_model`)
    return list(cast(dict[str, ad.LoRALinear], model.layers()).values())


def adapter_arrays(model: ad.Adapted):
    """``(As, Bs)``: the LoRA factors of every layer, in depth order."""
    layers = _lora_layers(model)
    return tuple(lay.A for lay in layers), tuple(lay.B for lay in layers)


def with_adapters(model: ad.Adapted, As, Bs) -> ad.Adapted:
    """``model`` with its LoRA factors replaced by ``As``, ``Bs`` (depth order)."""
    return eqx.tree_at(
        lambda m: [x for lay in _lora_layers(m) for x in (lay.A, lay.B)],
        model,
        [x for a, b in zip(As, Bs, strict=True) for x in (a, b)],
    )


def logits(model: ad.Adapted, As, Bs, X):
    """The adapted model's logits on ``X`` with factors ``As``, ``Bs``.

    Computed by a direct forward pass over the unloaded backbone, ``W_l h + b_l + s B_l A_l h``
    per layer, which equals ``with_adapters(model, As, Bs)(X)`` (the ``nn.adapters`` call; test:
    ``tests/dynamics/aegisguard/test_victim.py``) and traces in a fraction of the time.
    """
    base = ad.unload(model)
    scale = _lora_layers(model)[0].scale
    lin = [base.inp, *base.blocks, base.head]

    def layer(i, h):
        return lin[i](h) + scale * ((h @ As[i].T) @ Bs[i].T)

    h = jax.nn.gelu(layer(0, X))
    for i in range(1, len(lin) - 1):
        h = h + jax.nn.gelu(layer(i, h))
    return layer(len(lin) - 1, h)


def accuracy(model: ad.Adapted, As, Bs, X, y):
    """Top-1 accuracy of the adapted model on ``(X, y)``.

    Examples
    --------
    >>> backbone = ResMLP(4, 4, 1, 2, key=jax.random.key(0))
    >>> model = adapted_model(backbone, 1, key=jax.random.key(1))
    >>> X = jax.random.normal(jax.random.key(2), (8, 4))
    >>> float(accuracy(model, *adapter_arrays(model), X, jnp.argmax(backbone(X), -1)))  # B = 0
    1.0
    """
    As, Bs = check_victim(model, As, Bs)
    X, y = check_data(model, X, y)
    return jnp.mean(jnp.argmax(logits(model, As, Bs, X), -1) == y)


def check_model(model, name="model"):
    """Validate an adapted victim model (from :func:`adapted_model`)."""
    check_instance(model, name, ad.Adapted, "an nn.adapters.Adapted model (adapted_model)")
    if not isinstance(ad.unload(model), ResMLP):
        raise TypeError(f"`{name}` must adapt a ResMLP backbone (adapted_model).")
    return model


def check_victim(model, As, Bs):
    """Validate an adapted model and factors ``As``, ``Bs`` of its adapters' shapes; returns
    the factors as tuples."""
    check_model(model)
    A0, B0 = adapter_arrays(model)
    out = []
    for name, got, want in (("As", As, A0), ("Bs", Bs, B0)):
        if not isinstance(got, tuple | list) or len(got) != len(want):
            raise TypeError(f"`{name}` must be a tuple of {len(want)} arrays; got {got!r:.60}.")
        arrays = []
        for g, w in zip(got, want, strict=True):
            if not hasattr(g, "dtype"):  # nested lists: read in the adapters' dtype
                g = jnp.asarray(check_array(to_array(g, name), name), w.dtype)
            check_array(g, name)
            if tuple(g.shape) != tuple(w.shape):
                shapes = [tuple(x.shape) for x in want]
                raise ValueError(f"`{name}` must hold arrays of shapes {shapes}; got {g.shape}.")
            arrays.append(g)
        out.append(tuple(arrays))
    return out[0], out[1]


def check_inputs(model, X, name="X"):
    """Validate inputs ``X (n, d_in)`` for ``model``; returns a JAX array."""
    d_in = adapter_arrays(model)[0][0].shape[1]
    if X is None or isinstance(X, str | bytes):
        raise TypeError(f"`{name}` must be an array of shape (n, {d_in}); got {X!r}.")
    X = check_array(X if hasattr(X, "dtype") else np.asarray(X), name, ndim=2, max_abs=1e6)
    if np.dtype(X.dtype).kind != "f":
        raise TypeError(f"`{name}` must hold floats; got dtype {X.dtype}.")
    if X.shape[1] != d_in or X.shape[0] < 1:
        raise ValueError(f"`{name}` must have shape (n >= 1, {d_in}); got {tuple(X.shape)}.")
    return jnp.asarray(X)


def check_data(model, X, y, names=("X", "y")):
    """Validate inputs ``X (n, d_in)`` for ``model`` and integer labels ``y (n,)``."""
    X = check_inputs(model, X, names[0])
    if y is None or isinstance(y, str | bytes):
        raise TypeError(f"`{names[1]}` must be an array of integer labels; got {y!r}.")
    y = check_array(y if hasattr(y, "dtype") else to_array(y, names[1]), names[1], ndim=1)
    if np.dtype(y.dtype).kind not in "iu":
        raise TypeError(f"`{names[1]}` must hold integer labels; got dtype {y.dtype}.")
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"`{names[1]}` must have {X.shape[0]} labels (the rows of `{names[0]}`); got {y.shape}."
        )
    n_classes = adapter_arrays(model)[1][-1].shape[0]
    if not isinstance(y, Tracer) and (np.min(y) < 0 or np.max(y) >= n_classes):
        raise ValueError(
            f"`{names[1]}` must lie in [0, {n_classes}); got [{np.min(y)}, {np.max(y)}]."
        )
    return X, jnp.asarray(y)


def check_layer_vector(v, name, n_layers=None, *, kind="f"):
    """Validate a per-layer vector: ``kind`` "b" (bool mask) or "f" (finite reals), shape
    ``(n_layers,)`` (any non-empty 1-D when None); returns it as a JAX array."""
    if v is None or isinstance(v, str | bytes):
        raise TypeError(f"`{name}` must be a 1-D array over the layers; got {v!r}.")
    if not hasattr(v, "dtype"):
        v = to_array(v, name)
    if kind == "b":
        if np.dtype(v.dtype).kind != "b":
            raise TypeError(f"`{name}` must be a bool mask over the layers; got dtype {v.dtype}.")
    else:
        check_array(v, name, max_abs=1e6)
    if v.ndim != 1 or v.shape[0] < 1 or n_layers not in (None, v.shape[0]):
        want = "(L,)" if n_layers is None else f"({n_layers},)"
        raise ValueError(f"`{name}` must have shape {want}; got {tuple(v.shape)}.")
    return jnp.asarray(v)


def _ce(model, As, Bs, X, y):
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits(model, As, Bs, X), y))


def _batch(key, X, y, size):
    i = jax.random.randint(key, (size,), 0, X.shape[0])
    return X[i], y[i]


def train_victim(
    model: ad.Adapted,
    X,
    y,
    *,
    steps: int = 400,
    batch: int = 128,
    lr: float = 1e-2,
    key,
):
    """Plain LoRA fine-tuning (victim (a) of ``docs/papers/aegisguard.md``): Adam on the
    cross-entropy of every adapter's factors, minibatches drawn with replacement.

    Returns ``(As, Bs)``. Traceable: ``vmap`` over replicates compiles once.
    """
    check_model(model)
    X, y = check_data(model, X, y)
    steps = check_int(steps, "steps", lower=1, upper=10**5)
    batch = check_int(batch, "batch", lower=1, upper=10**5)
    lr = check_scalar(lr, "lr", lower=0, upper=10, closed="neither")
    check_key(key)
    return _train(model, X, y, steps, batch, jnp.asarray(lr), key)


@eqx.filter_jit
def _train(model, X, y, steps, batch, lr, key):
    def loss(p, t):
        As, Bs = p
        return _ce(model, As, Bs, *_batch(jax.random.fold_in(key, t), X, y, batch))

    params, _, _ = nn.fit(loss, optax.adam(lr), adapter_arrays(model), jnp.arange(steps))
    return params
