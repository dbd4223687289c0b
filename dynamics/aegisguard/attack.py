"""The model-stealing attack as the anchor protocol runs it
(``docs/papers/aegisguard.md#as-implemented-here``, from
the TEESlice artifact ``ziqi-zhang/TEESlice-artifact``, ``model-stealing/knockoff``), on LoRA.

The threat model (Sec. 2): the host sees the public backbone and every *offloaded* adapter; the
*shielded* adapters live in the enclave. :func:`expose` is the only place that reads the victim's
adapters: it builds the attacker's :class:`ExposedView`, in which every shielded factor is
replaced by zeros of its shape (``jnp.zeros_like`` reads no value). :func:`attack` receives that
view, the query inputs and the victim's top-1 labels (``--argmaxed``: label-only outputs), and
never the victim itself; ``tests/dynamics/aegisguard/test_attack.py`` proves the surrogate does
not depend on a shielded array.

Surrogate (TEESlice's protocol, step 2; its LoRA analogue derived here): exposed adapters copied,
shielded ones re-initialised (``B = 0``, ``A`` drawn as LoRA draws it), then fine-tuned with the
KnockoffNets cross-entropy on the transfer set: Adam (TEESlice uses SGD-momentum;
``docs/papers/aegisguard.md#departures-and-why``), learning rate ``lr_shielded`` (TEESlice
``update_lr`` 1e-2) on re-initialised adapters and
``lr_exposed`` (``remain_lr`` 1e-3) on copied ones, ``epochs`` passes in minibatches of
``batch``. The backbone stays frozen (it is public and is not the attacker's target; a choice).

:func:`subset_masks` enumerates every shielded set of ``L`` layers, so that one ``vmap``-ed call
attacks all ``2^L`` of them with common random numbers (one compilation).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from _core.validation import as_array, check_int, check_key, check_scalar, to_array

from .victim import (
    _ce,
    adapter_arrays,
    check_data,
    check_inputs,
    check_layer_vector,
    check_victim,
    init_A,
    logits,
    with_adapters,
)

__all__ = [
    "ExposedView",
    "expose",
    "query_labels",
    "attack",
    "subset_masks",
    "subset_index",
    "leakage",
    "recover_adapter",
]


class ExposedView(eqx.Module):
    """What the host (and so the attacker) holds: the adapted model with the public backbone
    and the exposed adapters, the shielded ones zeroed, and which layers are ``shielded``."""

    model: eqx.Module
    As: tuple
    Bs: tuple
    shielded: jax.Array


def expose(model, As, Bs, shielded) -> ExposedView:
    """The attacker's view of a victim with factors ``As``, ``Bs`` when the layers where
    ``shielded`` (bool, one per layer) is True stay in the enclave.

    Examples
    --------
    >>> from dynamics.aegisguard.victim import ResMLP, adapted_model
    >>> model = adapted_model(ResMLP(4, 4, 1, 2, key=jax.random.key(0)), 1, key=jax.random.key(1))
    >>> view = expose(model, *adapter_arrays(model), jnp.array([True, False, False]))
    >>> float(jnp.abs(view.As[0]).sum()), bool(jnp.any(view.As[1] != 0))  # layer 0 is shielded
    (0.0, True)
    """
    As, Bs = check_victim(model, As, Bs)
    shielded = check_layer_vector(shielded, "shielded", len(As), kind="b")
    zA = tuple(jnp.where(shielded[i], jnp.zeros_like(a), a) for i, a in enumerate(As))
    zB = tuple(jnp.where(shielded[i], jnp.zeros_like(b), b) for i, b in enumerate(Bs))
    # the view's model keeps the backbone only: its own adapter leaves are zeroed too
    base = _zero_adapters(model)
    return ExposedView(base, zA, zB, shielded)


def _zero_adapters(model):
    As, Bs = adapter_arrays(model)
    return with_adapters(model, tuple(map(jnp.zeros_like, As)), tuple(map(jnp.zeros_like, Bs)))


def query_labels(model, As, Bs, X):
    """The deployed victim's answer to queries ``X``: top-1 labels only (label-only outputs).

    Examples
    --------
    >>> from dynamics.aegisguard.victim import ResMLP, adapted_model
    >>> backbone = ResMLP(4, 4, 1, 2, key=jax.random.key(0))
    >>> model = adapted_model(backbone, 1, key=jax.random.key(1))
    >>> X = jax.random.normal(jax.random.key(2), (8, 4))
    >>> bool((query_labels(model, *adapter_arrays(model), X) == jnp.argmax(backbone(X), -1)).all())
    True
    """
    As, Bs = check_victim(model, As, Bs)
    X = check_inputs(model, X)
    return jnp.argmax(logits(model, As, Bs, X), -1)


def attack(
    view: ExposedView,
    X_query,
    y_query,
    *,
    epochs: int = 30,
    batch: int = 32,
    lr_shielded: float = 1e-2,
    lr_exposed: float = 1e-3,
    key,
):
    """Fine-tune a surrogate from ``view`` on the transfer set ``(X_query, y_query)``.

    Returns the surrogate's ``(As, Bs)``. Traceable: ``vmap`` over views (shielded sets) and
    replicates compiles once.
    """
    if not isinstance(view, ExposedView):
        raise TypeError(f"`view` must be an ExposedView (from expose); got {type(view).__name__}.")
    X_query, y_query = check_data(view.model, X_query, y_query, ("X_query", "y_query"))
    epochs = check_int(epochs, "epochs", lower=1, upper=10**4)
    batch = check_int(batch, "batch", lower=1, upper=X_query.shape[0])
    lr_shielded = check_scalar(lr_shielded, "lr_shielded", lower=0, upper=10, closed="neither")
    lr_exposed = check_scalar(lr_exposed, "lr_exposed", lower=0, upper=10)
    check_key(key)
    lrs = jnp.asarray(lr_shielded), jnp.asarray(lr_exposed)
    return _attack(view, X_query, y_query, epochs, batch, *lrs, key)


@eqx.filter_jit
def _attack(view, X, y, epochs, batch, lr_shielded, lr_exposed, key):
    k_init, k_data = jax.random.split(key)
    fresh = init_A(view.As, key=k_init)
    s = view.shielded
    As = tuple(jnp.where(s[i], fresh[i], a) for i, a in enumerate(view.As))
    Bs = tuple(jnp.where(s[i], jnp.zeros_like(b), b) for i, b in enumerate(view.Bs))
    lrs = jnp.where(s, lr_shielded, lr_exposed)
    lr_tree = (tuple(lrs[i] for i in range(len(As))), tuple(lrs[i] for i in range(len(Bs))))
    # Adam direction, then a per-layer step size
    opt = optax.chain(
        optax.scale_by_adam(),
        optax.stateless(lambda u, _: jax.tree.map(lambda ui, lr: -lr * ui, u, lr_tree)),
    )
    n = X.shape[0]
    nb = max(1, n // batch)
    perms = jax.vmap(lambda k: jax.random.permutation(k, n)[: nb * batch])(
        jax.random.split(k_data, epochs)
    ).reshape(epochs * nb, -1)

    def loss(p, idx):
        As, Bs = p
        return _ce(view.model, As, Bs, X[idx], y[idx])

    params, _, _ = nn.fit(loss, opt, (As, Bs), perms)
    return params


def subset_masks(n_layers: int) -> np.ndarray:
    """Every subset of ``n_layers`` layers as a bool mask, ``(2^n_layers, n_layers)``: row
    ``j`` shields layer ``i`` iff bit ``i`` of ``j`` is set (row 0 shields nothing, the last row
    everything); :func:`subset_index` inverts it."""
    n_layers = check_int(n_layers, "n_layers", lower=1, upper=12)
    j = np.arange(2**n_layers)[:, None]
    return (j >> np.arange(n_layers)) & 1 == 1


def subset_index(mask) -> int:
    """The row of :func:`subset_masks` holding the bool ``mask``.

    Examples
    --------
    >>> subset_index(np.array([True, False, True])), subset_masks(3)[5].tolist()  # bits 0 and 2
    (5, [True, False, True])
    """
    m = to_array(mask, "mask")
    if m.ndim != 1 or m.dtype != bool:
        raise TypeError(f"`mask` must be a 1-D bool array; got {m.dtype} of shape {m.shape}.")
    if m.size > 63:  # the index is a bit set in a non-negative int64
        raise ValueError(f"`mask` must have at most 63 layers; got {m.size}.")
    return int(np.sum(m.astype(np.int64) << np.arange(m.size)))


def leakage(acc, acc_black_box, acc_white_box):
    """Normalised leakage ``(acc - acc_bb) / (acc_wb - acc_bb)`` (``docs/papers/aegisguard.md``,
    Q3): 0 at black-box level, 1 at white-box level.

    Examples
    --------
    >>> round(float(leakage(0.6, 0.4, 0.8)), 6)  # halfway from black-box to white-box accuracy
    0.5
    """
    acc, bb, wb = (
        as_array(v, n, lower=0, upper=1)
        for v, n in (
            (acc, "acc"),
            (acc_black_box, "acc_black_box"),
            (acc_white_box, "acc_white_box"),
        )
    )
    if np.any(wb <= bb):
        raise ValueError("`acc_white_box` must exceed `acc_black_box`.")
    return (acc - bb) / (wb - bb)


def recover_adapter(X, Y):
    """Least-squares recovery of a shielded adapter's update from its boundary traffic.

    If the host sees the inputs ``X (n, d_in)`` sent into the enclave and the adapter outputs
    ``Y = X dW^T (n, d_out)`` sent back, ``dW = (X^+ Y)^T`` (``numpy.linalg.lstsq``, float64):
    exact once ``X`` has rank ``d_in`` (``n >= d_in`` generic queries), the minimum-norm guess
    otherwise. The feature-leakage caveat G1 of ``docs/papers/aegisguard.md`` (out of the paper's
    scope).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X, dW = rng.standard_normal((6, 3)), rng.standard_normal((2, 3))
    >>> bool(np.allclose(recover_adapter(X, X @ dW.T), dW))  # exact once X has rank d_in
    True
    """
    X = as_array(X, "X", ndim=2)
    Y = as_array(Y, "Y", ndim=2)
    if X.shape[0] != Y.shape[0] or X.shape[0] < 1:
        raise ValueError(f"`Y` must have as many rows as `X` ({X.shape[0]}); got {Y.shape[0]}.")
    return np.linalg.lstsq(X, Y, rcond=None)[0].T
