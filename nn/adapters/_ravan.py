"""Ravan (Raje, Askin, Jhunjhunwala & Joshi 2025, arXiv 2506.05568): multi-head LoRA for federated
fine-tuning.

``Delta W = sum_{i=1}^{h} s_i B_i H_i A_i`` with frozen bases ``B_i in R^{m x r}``,
``A_i in R^{r x n}`` shared by all clients through a common seed, and trainable cores
``H_i in R^{r x r}`` and scalars ``s_i``; clients upload ``s_i H_i`` (abstract). Count
``h (r^2 + 1)``.

What was read. The paper's abstract (arXiv 2506.05568 and OpenReview gyn4n8oC9B) states the
forward formula, the trainable ``H_i, s_i`` and the upload of ``s_i H_i``. The method section
itself could not be read (the stored copy of the arXiv page holds only its first screen); the
algorithm below follows two third-party sources and is marked so: an auto-generated structured
summary of the paper [3rd] (initialisation "random normal" or "Gram-Schmidt" bases, ``H_i = 0``,
``s_i = 1``; each client trains only the ``K_c`` heads of highest score -- random, weight norm or
gradient norm -- and the server averages ``s_i H_i`` of head ``i`` over the clients that trained
it; every layer trains the same number of heads), and an independent re-implementation
(``boyi-liu/FedLLM-Factory``, ``alg/ravan.py``) [3rd] whose server sets ``H_i <- sum_c p_c s_i^c
H_i^c`` and ``s_i <- 1``.

Because the bases are common and frozen, ``sum_c p_c Delta W^c = sum_i B_i (sum_c p_c s_i^c
H_i^c) A_i``: the server averages the uploaded ``s_i H_i`` and FedAvg of the update is **exact**
(:func:`ravan_aggregate`), whereas FedAvg of LoRA's ``(B, A)`` gives ``avg(B) avg(A) !=
avg(BA)`` (:func:`fedavg`). With orthonormal stacked bases ``[B_1 ... B_h]`` and ``[A_1; ...;
A_h]`` the rank ``min(h r, m, n)`` is reachable (derived here;
``tests/nn/adapters/test_ravan.py::test_ravan_zero_at_init_count_and_rank``).

Initialisation: ``init="orthogonal"`` (the Gram-Schmidt option: one Haar-orthonormal ``m x hr``
and ``hr x n`` split into heads, so that the heads' subspaces are mutually orthogonal; needs
``h r <= min(m, n)``) or ``init="random"`` (the random-normal option; the scale is our choice:
``B_i`` entries ``N(0, 1/m)`` and ``A_i`` entries ``N(0, 1/n)``, so that each basis vector has
unit expected norm as in the orthogonal option); ``H_i = 0`` so the update is zero at step 0
while ``dL/dH_i = s_i B_i^T G A_i^T != 0``; ``s_i = 1``. Computational heterogeneity:
:func:`ravan_select_heads` picks the heads a client trains, ``ravan_aggregate(..., masks=...)``
averages each head over the clients that trained it.
"""

from __future__ import annotations

import math
from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import nn as _nn
from _core.validation import _is_tracer, check_choice, check_int, check_key
from nn import riemannian as _rm

from ._core import Adapted, AdapterLayer, register_method

__all__ = ["RavanLinear", "ravan_aggregate", "ravan_select_heads", "fedavg"]


@register_method("ravan")
class RavanLinear(AdapterLayer):
    """Ravan layer (arXiv 2506.05568, abstract): frozen ``B (h, out, r)``, ``A (h, r, in)``;
    trainable ``H (h, r, r)``, ``s``."""

    B: jax.Array
    A: jax.Array
    H: jax.Array
    s: jax.Array

    frozen = ("B", "A")

    options = ("r", "heads", "init")

    @classmethod
    def complete_config(cls, config, shapes):
        r = check_int(config.get("r", 4), "r", lower=1)
        h = check_int(config.get("heads", 4), "heads", lower=1)
        init = check_choice(config.get("init", "orthogonal"), "init", ("orthogonal", "random"))
        for m, n in shapes:
            k = min(m, n)
            if init == "orthogonal" and h * r > k:
                raise ValueError(
                    f"`r` * `heads` must be at most min(out, in) = {k} for orthogonal bases; got "
                    f"{r} * {h} = {r * h}."
                )
            if r > k:
                raise ValueError(f"`r` must be at most min(out, in) = {k}; got {r}.")
        return {"r": r, "heads": h, "init": init}

    @classmethod
    def build(cls, w, *, key, r, heads, init, **_):
        (m, n), h, dt = w.shape, heads, w.dtype
        kb, ka = jax.random.split(key)
        if init == "orthogonal":
            b = _rm.random_stiefel(m, h * r, key=kb, dtype=dt).reshape(m, h, r).transpose(1, 0, 2)
            a = _rm.random_stiefel(n, h * r, key=ka, dtype=dt).T.reshape(h, r, n)
        else:
            b = jax.random.normal(kb, (h, m, r), dt) / math.sqrt(m)
            a = jax.random.normal(ka, (h, r, n), dt) / math.sqrt(n)
        return cls((m, n), b, a, jnp.zeros((h, r, r), dt), jnp.ones((h,), dt))

    @classmethod
    def num_params(cls, shapes, *, r, heads, **_):
        """``sum_l h (r^2 + 1)``."""
        return len(shapes) * heads * (r * r + 1)

    def delta_weight(self, ctx):
        return jnp.einsum("h,hmr,hrs,hsn->mn", self.s, self.B, self.H, self.A)

    def delta(self, x, ctx, *, key=None):
        z = jnp.einsum("...n,hrn->...hr", x, self.A)
        z = jnp.einsum("...hs,hrs->...hr", z, self.H) * self.s[:, None]
        return jnp.einsum("...hr,hmr->...m", z, self.B)


def _check_clients(clients, weights):
    """The client weights as a ``(C,)`` array; values are checked where they are concrete (under
    ``jit`` a traced ``weights`` is checked for its shape only)."""
    if not isinstance(clients, list | tuple) or not all(isinstance(c, Adapted) for c in clients):
        raise TypeError(f"`clients` must be a list of Adapted models; got {clients!r:.60}.")
    if not clients:
        raise ValueError("`clients` must hold at least one Adapted model.")
    if len({(c.specs, c.active) for c in clients}) != 1:
        raise ValueError("`clients` must share one adapter spec (same method, targets, seed).")
    n = len(clients)
    if weights is None:
        return jnp.full((n,), 1.0 / n)
    w = weights
    if isinstance(w, list | tuple):
        w = jnp.stack([jnp.asarray(x) for x in w])
    if getattr(w, "shape", None) != (n,):
        raise ValueError(
            f"`weights` must be {n} nonnegative numbers summing to 1; got shape "
            f"{getattr(w, 'shape', None)} ({weights!r})."
        )
    if _is_tracer(w):
        return w
    v = np.asarray(w, dtype=float)
    if np.any(~np.isfinite(v)) or np.any(v < 0) or abs(v.sum() - 1) > 1e-12:
        raise ValueError(f"`weights` must be {n} nonnegative numbers summing to 1; got {weights}.")
    return jnp.asarray(w)


def _average(clients, w):
    halves = [_nn.split(c) for c in clients]
    avg = jax.tree.map(lambda *xs: sum(w[i] * x for i, x in enumerate(xs)), *[t for t, _ in halves])
    return _nn.combine(avg, halves[0][1])


def fedavg(clients: list[Adapted], weights=None) -> Adapted:
    """FedAvg of the trainable leaves: ``sum_c p_c theta^c`` leaf by leaf (McMahan et al. 2017).

    For LoRA this averages ``A`` and ``B`` separately, so the update is ``avg(B) avg(A)``, not
    ``avg(BA)``. Works under ``jit`` (``weights`` may be traced).

    >>> import nn
    >>> from nn.adapters import delta_weights, inject
    >>> a = inject(nn.MLP(4, 2, 3, 1, key=jax.random.key(0)), "lora", key=jax.random.key(1), r=2)
    >>> c1 = eqx.tree_at(lambda m: m.layers()["layers.0"].B, a, jnp.eye(3, 2))
    >>> c2 = eqx.tree_at(lambda m: m.layers()["layers.0"].A, a, 2 * a.layers()["layers.0"].A)
    >>> dw = [delta_weights(m)["layers.0"] for m in (c1, c2, fedavg([c1, c2]))]  # dw[1] = 0
    >>> bool(jnp.allclose(dw[2], 0.75 * dw[0])), bool(jnp.allclose(dw[2], dw[0] / 2))
    (True, False)

    (``avg(B) avg(A) = (B/2)(3A/2)``, not the average update ``BA/2``.)
    """
    return _average(clients, _check_clients(clients, weights))


def _ravan_layers(model: Adapted) -> dict[str, RavanLinear]:
    """``model.layers()`` of a Ravan-adapted model (checked by :func:`_check_ravan`), typed as
    the Ravan layers they are."""
    return cast(dict[str, RavanLinear], model.layers())


def _check_ravan(model, who):
    if not isinstance(model, Adapted) or model.spec.method != "ravan":
        method = model.spec.method if isinstance(model, Adapted) else type(model).__name__
        raise ValueError(f"`{who}` must be Ravan-adapted; got {method!r}.")


def ravan_aggregate(clients: list[Adapted], weights=None, masks=None) -> Adapted:
    """Ravan's server step: ``H_i <- sum_c p_c s_i^c H_i^c``, ``s_i <- 1`` (exact FedAvg of dW).

    Parameters
    ----------
    clients : Ravan-adapted models of one spec (the broadcast model after local training).
    weights : client weights ``p_c`` (nonnegative, summing to 1); uniform when None.
    masks : None when every client trained every head; else one dict per client mapping each
        adapted layer's path to a boolean ``(heads,)`` array of the heads it trained
        (:func:`ravan_select_heads`). Head ``i`` of a layer is then averaged over the clients
        ``S_i`` that trained it, ``H_i <- sum_{c in S_i} p_c s_i^c H_i^c / sum_{c in S_i} p_c``
        [3rd: the structured summary of the paper, see the module docstring]; a head no client
        trained keeps its broadcast ``s_i H_i``.

    Other trainable leaves (a task head) are averaged as in :func:`fedavg`.

    >>> import nn
    >>> from nn.adapters import delta_weights, inject
    >>> mlp = nn.MLP(4, 2, 3, 1, key=jax.random.key(0))
    >>> a = inject(mlp, "ravan", "layers.0", key=jax.random.key(1), r=1, heads=2)
    >>> hs = lambda m: (m.layers()["layers.0"].H, m.layers()["layers.0"].s)
    >>> c1 = eqx.tree_at(hs, a, (jnp.ones((2, 1, 1)), jnp.ones(2)))
    >>> c2 = eqx.tree_at(hs, a, (jnp.full((2, 1, 1), 3.0), jnp.full(2, 2.0)))
    >>> srv = ravan_aggregate([c1, c2], [0.25, 0.75])
    >>> [v.ravel().tolist() for v in hs(srv)]  # H_i = 0.25 * 1 * 1 + 0.75 * 2 * 3, s_i = 1
    [[4.75, 4.75], [1.0, 1.0]]
    >>> dw = [delta_weights(m)["layers.0"] for m in (c1, c2, srv)]
    >>> bool(jnp.allclose(dw[2], 0.25 * dw[0] + 0.75 * dw[1]))  # exact FedAvg of Delta W
    True
    """
    w = _check_clients(clients, weights)
    _check_ravan(clients[0], "clients")
    paths = list(clients[0].layers())
    h = _ravan_layers(clients[0])[paths[0]].s.shape[0]
    if masks is None:
        m = jnp.ones((len(clients), len(paths), h), bool)
    else:
        if len(masks) != len(clients):
            raise ValueError(
                f"`masks` must hold one dict per client ({len(clients)}); got {len(masks)}."
            )
        try:
            m = jnp.stack([jnp.stack([jnp.asarray(mc[p], bool) for p in paths]) for mc in masks])
        except KeyError as err:
            raise ValueError(
                f"`masks` must map every adapted layer path {paths}; missing {err}."
            ) from None
        if m.shape != (len(clients), len(paths), h):
            raise ValueError(
                f"each mask must be a boolean array of shape ({h},) per layer; got "
                f"shape {m.shape[2:]}."
            )
    out = _average(clients, w)
    new = []
    for j, p in enumerate(paths):
        sh = jnp.stack(
            [_ravan_layers(c)[p].s[:, None, None] * _ravan_layers(c)[p].H for c in clients]
        )
        wm = w[:, None] * m[:, j]  # (C, h)
        den = jnp.sum(wm, 0)
        avg = jnp.einsum("ch,chrs->hrs", wm, sh) / jnp.where(den > 0, den, 1.0)[:, None, None]
        new.append(jnp.where((den > 0)[:, None, None], avg, sh[0]))
    ones = [jnp.ones_like(q.s) for q in out.layers().values()]
    return eqx.tree_at(
        lambda m: [q.H for q in m.layers().values()] + [q.s for q in m.layers().values()],
        out,
        new + ones,
    )


def ravan_select_heads(
    model: Adapted, k: int, *, score: str = "random", grads=None, key=None
) -> dict[str, jax.Array]:
    """The ``k`` heads per layer a client of limited compute trains (computational heterogeneity).

    Returns ``{layer path: boolean (heads,) mask}`` with exactly ``k`` True per layer (every layer
    trains the same number of heads [3rd: the structured summary of the paper]). ``score``:
    ``"random"`` (uniform, needs ``key``), ``"weight"`` (largest ``||s_i H_i||_F``) or
    ``"gradient"`` (largest ``||dL/dH_i||_F``; ``grads`` is the gradient of the trainable half,
    e.g. from ``eqx.filter_grad``). Ties go to the lower head index. Train only the selected
    heads (zero the other heads' gradients) and pass the masks to :func:`ravan_aggregate`.

    >>> import nn
    >>> from nn.adapters import inject
    >>> mlp = nn.MLP(4, 2, 3, 1, key=jax.random.key(0))
    >>> a = inject(mlp, "ravan", "layers.0", key=jax.random.key(1), r=1, heads=3)
    >>> H = jnp.array([1.0, 3.0, 2.0]).reshape(3, 1, 1)  # s_i = 1: ||s_i H_i||_F = 1, 3, 2
    >>> a = eqx.tree_at(lambda m: m.layers()["layers.0"].H, a, H)
    >>> ravan_select_heads(a, 2, score="weight")["layers.0"].tolist()
    [False, True, True]
    """
    _check_ravan(model, "model")
    layers = _ravan_layers(model)
    h = next(iter(layers.values())).s.shape[0]
    k = check_int(k, "k", lower=1, upper=h)
    check_choice(score, "score", ("random", "weight", "gradient"))
    if score == "random":
        if key is None:
            raise ValueError("`key` must be given for score='random'.")
        check_key(key)
        scores = {
            p: jax.random.uniform(jax.random.fold_in(key, j), (h,)) for j, p in enumerate(layers)
        }
    elif score == "weight":
        scores = {
            p: jnp.linalg.norm(q.s[:, None, None] * q.H, axis=(1, 2)) for p, q in layers.items()
        }
    else:
        if not isinstance(grads, Adapted):
            raise ValueError(
                "`grads` must be the gradient of the trainable half (an Adapted "
                f"pytree) for score='gradient'; got {type(grads).__name__}."
            )
        glayers = _ravan_layers(grads)
        scores = {p: jnp.linalg.norm(glayers[p].H, axis=(1, 2)) for p in layers}
    out = {}
    for p, sc in scores.items():
        top = jnp.argsort(-sc, stable=True)[:k]
        out[p] = jnp.zeros((h,), bool).at[top].set(True)
    return out
