"""The victim of AegisGuard's threat model: a public backbone, a planted private task, LoRA on
every linear map, trained on the private labels (``aegisguard.md`` Sec. 2 and 8.1, variant V2).

* :class:`ResMLP` -- the public backbone ``h = GELU(W_0 x)``, ``h += GELU(W_b h)`` per block, then
  ``W_head h``; its ``blocks + 2`` linear maps are the adaptable layers, indexed by depth (input
  map 0, head last).
* :func:`planted_task` -- the private task with a known sensitive set (V2): the teacher is the
  backbone plus rank-``planted_rank`` updates ``dW*_l`` of graded Frobenius norms
  ``grades[j] * ||W_l||_F`` on a random set ``S*`` of ``len(grades)`` layers; labels are the
  teacher's argmax on Gaussian inputs. (The digits variant V1 of the note is not built.)
* :func:`train_victim` -- LoRA (``nn.adapters.inject(..., "lora")``, rank ``r`` on every linear
  map) trained with Adam on the private labels; ``vmap``-able over replicates (one compilation).

A victim's adapters are carried as ``(As, Bs)``, tuples of arrays in depth order;
:func:`adapter_arrays` / :func:`with_adapters` move between those and the ``Adapted`` model.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from nn import adapters as ad
from theory._validation import check_int, check_key, check_scalar

__all__ = [
    "ResMLP",
    "Task",
    "planted_task",
    "adapted_model",
    "adapter_arrays",
    "with_adapters",
    "logits",
    "accuracy",
    "train_victim",
    "init_A",
]


class ResMLP(eqx.Module):
    """Residual GELU MLP: ``inp`` (width x d_in), ``blocks`` (width x width) and ``head``."""

    inp: nn.Linear
    blocks: tuple
    head: nn.Linear

    def __init__(self, d_in: int, width: int, n_blocks: int, n_classes: int, *, key):
        check_int(d_in, "d_in", lower=1, upper=4096)
        check_int(width, "width", lower=1, upper=4096)
        check_int(n_blocks, "n_blocks", lower=0, upper=64)
        check_int(n_classes, "n_classes", lower=2, upper=4096)
        check_key(key)
        k = jax.random.split(key, n_blocks + 2)
        self.inp = nn.Linear(d_in, width, key=k[0])
        self.blocks = tuple(nn.Linear(width, width, key=k[i + 1]) for i in range(n_blocks))
        self.head = nn.Linear(width, n_classes, key=k[-1])

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
    return eqx.tree_at(
        lambda m: [m.inp.weight, *(b.weight for b in m.blocks), m.head.weight], model, list(ws)
    )


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
) -> Task:
    """Variant V2 of ``aegisguard.md`` Sec. 8.1: a teacher ``backbone + dW*`` on a random set
    ``S*`` of ``len(grades)`` layers, labels its argmax on ``N(0, I)`` inputs.

    ``dW*_l = g ||W_l||_F U V^T / ||U V^T||_F`` with Gaussian ``U (out, planted_rank)`` and
    ``V (in, planted_rank)``. The public backbone is random, its head bias shifted so that its
    mean logit over the inputs is zero; the teacher's logits are centred the same way before the
    argmax (both keep the classes balanced; a choice made here, not in the note).
    """
    check_key(key)
    n_layers = check_int(n_blocks, "n_blocks", lower=0, upper=64) + 2
    check_int(n_train, "n_train", lower=8, upper=10**6)
    check_int(n_test, "n_test", lower=8, upper=10**6)
    check_int(planted_rank, "planted_rank", lower=1, upper=min(width, d_in, n_classes))
    if not isinstance(grades, tuple | list) or not 1 <= len(grades) <= n_layers:
        raise ValueError(f"`grades` must be a tuple of 1..{n_layers} norms; got {grades!r}.")
    grades = [check_scalar(g, "grades", lower=0, upper=100) for g in grades]
    kb, ks, kp, kx = jax.random.split(key, 4)
    backbone = ResMLP(d_in, width, n_blocks, n_classes, key=kb)
    chosen = jax.random.choice(ks, n_layers, (len(grades),), replace=False)
    mask = jnp.zeros(n_layers, bool).at[chosen].set(True)
    ws = _weights(backbone)
    gl = jnp.zeros(n_layers).at[chosen].set(jnp.asarray(grades))
    new = []
    for i, w in enumerate(ws):
        ku, kv = jax.random.split(jax.random.fold_in(kp, i))
        d = jax.random.normal(ku, (w.shape[0], planted_rank)) @ jax.random.normal(
            kv, (planted_rank, w.shape[1])
        )
        new.append(w + gl[i] * jnp.linalg.norm(w) * d / jnp.linalg.norm(d))
    X = jax.random.normal(kx, (n_train + n_test, d_in))
    out = backbone(X)
    backbone = eqx.tree_at(lambda m: m.head.bias, backbone, backbone.head.bias - out.mean(0))
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
    and backbones."""
    check_int(r, "r", lower=1, upper=64)
    check_key(key)
    model = ad.inject(backbone, "lora", "all-linear", key=_SPEC_KEY, r=r)
    As, Bs = adapter_arrays(model)
    return with_adapters(model, init_A(As, key), Bs)


def init_A(As, key) -> tuple:
    """Fresh LoRA down-projections of the shapes of ``As``: ``U(-1/sqrt(n), 1/sqrt(n))``, layer
    ``l`` from ``fold_in(key, l)`` (PEFT's Kaiming-uniform init, ``nn.adapters`` LoRA)."""
    return tuple(
        jax.random.uniform(jax.random.fold_in(key, i), a.shape, a.dtype, -1.0, 1.0)
        / np.sqrt(a.shape[1])
        for i, a in enumerate(As)
    )


def _lora_layers(model: ad.Adapted):
    return list(model.layers().values())


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
    """Top-1 accuracy of the adapted model on ``(X, y)``."""
    return jnp.mean(jnp.argmax(logits(model, As, Bs, X), -1) == y)


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
    """Plain LoRA fine-tuning (victim (a) of ``aegisguard.md`` Sec. 8.1): Adam on the
    cross-entropy of every adapter's factors, minibatches drawn with replacement.

    Returns ``(As, Bs)``. Traceable: ``vmap`` over replicates compiles once.
    """
    steps = check_int(steps, "steps", lower=1, upper=10**6)
    batch = check_int(batch, "batch", lower=1, upper=10**6)
    lr = check_scalar(lr, "lr", lower=0, upper=10, closed="neither")
    return _train(model, X, y, steps, batch, lr, key)


def _train(model, X, y, steps, batch, lr, key):
    opt = optax.adam(lr)
    params = adapter_arrays(model)
    loss = jax.grad(lambda p, xb, yb: _ce(model, *p, xb, yb))

    def step(carry, t):
        p, s = carry
        xb, yb = _batch(jax.random.fold_in(key, t), X, y, batch)
        u, s = opt.update(loss(p, xb, yb), s, p)
        return (optax.apply_updates(p, u), s), None

    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), jnp.arange(steps))
    return params
