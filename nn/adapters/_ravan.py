"""Ravan (Raje, Askin, Jhunjhunwala & Joshi 2025, arXiv 2506.05568): multi-head LoRA for federated
fine-tuning.

``Delta W = sum_{i=1}^{h} s_i B_i H_i A_i`` with frozen bases ``B_i in R^{m x r}``,
``A_i in R^{r x n}`` shared by all clients through a common seed, and trainable cores
``H_i in R^{r x r}`` and scalars ``s_i`` (abstract; eq. (1) of the paper). Count ``h (r^2 + 1)``.

Because the bases are common and frozen, ``sum_c p_c Delta W^c = sum_i B_i (sum_c p_c s_i^c H_i^c)
A_i``: the server averages the uploaded ``s_i H_i`` and FedAvg of the update is **exact**
(:func:`ravan_aggregate`), whereas FedAvg of LoRA's ``(B, A)`` gives ``avg(B) avg(A) !=
avg(BA)`` (:func:`fedavg`). With orthonormal stacked bases ``[B_1 ... B_h]`` and ``[A_1; ...;
A_h]`` the rank ``min(h r, m, n)`` is reachable (derived here; tested).

Initialisation [the paper's Algorithm 1 could not be read; this is our choice, stated]: bases
``"orthogonal"`` (one Haar-orthonormal ``m x hr`` and ``hr x n`` split into heads; needs
``h r <= min(m, n)``) or ``"random"`` (Kaiming-uniform, VeRA's init); ``H_i = 0`` so the update
is zero at step 0 while ``dL/dH_i = s_i B_i^T G A_i^T != 0``; ``s_i = 1``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

import nn as _nn
from nn import riemannian as _rm
from theory._validation import check_choice, check_int

from ._core import Adapted, AdapterLayer, register_method

__all__ = ["RavanLinear", "ravan_aggregate", "fedavg"]


@register_method("ravan")
class RavanLinear(AdapterLayer):
    """Ravan layer: frozen ``B (h, out, r)``, ``A (h, r, in)``; trainable ``H (h, r, r)``, ``s``."""

    B: _nn.Frozen
    A: _nn.Frozen
    H: jax.Array
    s: jax.Array

    @classmethod
    def check_config(cls, config, linears):
        unknown = set(config) - {"r", "heads", "init"}
        if unknown:
            raise ValueError(f"unknown Ravan option(s) {sorted(unknown)}; use r, heads, init.")
        r = check_int(config.get("r", 4), "r", lower=1)
        h = check_int(config.get("heads", 4), "heads", lower=1)
        init = check_choice(config.get("init", "orthogonal"), "init", ("orthogonal", "random"))
        for lin in linears:
            k = min(lin.out_features, lin.in_features)
            if init == "orthogonal" and h * r > k:
                raise ValueError(
                    f"`r` * `heads` must be at most min(out, in) = {k} for orthogonal bases; got "
                    f"{r} * {h} = {r * h}."
                )
            if r > k:
                raise ValueError(f"`r` must be at most min(out, in) = {k}; got {r}.")
        return {"r": r, "heads": h, "init": init}

    @classmethod
    def build(cls, linear, *, key, r, heads, init, **_):
        m, n, h = linear.out_features, linear.in_features, heads
        dt = _nn.value(linear.weight).dtype
        kb, ka = jax.random.split(key)
        if init == "orthogonal":
            b = _rm.random_stiefel(m, h * r, key=kb, dtype=dt).reshape(m, h, r).transpose(1, 0, 2)
            a = _rm.random_stiefel(n, h * r, key=ka, dtype=dt).T.reshape(h, r, n)
        else:
            b = jax.random.uniform(kb, (h, m, r), dt, -1 / math.sqrt(r), 1 / math.sqrt(r))
            a = jax.random.uniform(ka, (h, r, n), dt, -1 / math.sqrt(n), 1 / math.sqrt(n))
        fz = _nn.Frozen
        return cls(fz(linear), fz(b), fz(a), jnp.zeros((h, r, r), dt), jnp.ones((h,), dt))

    @classmethod
    def num_params(cls, shapes, *, r, heads, **_):
        """``sum_l h (r^2 + 1)``."""
        return len(shapes) * heads * (r * r + 1)

    def delta_weight(self, ctx):
        b, a = _nn.value(self.B), _nn.value(self.A)
        return jnp.einsum("h,hmr,hrs,hsn->mn", self.s, b, self.H, a)

    def delta(self, x, ctx, *, key=None):
        b, a = _nn.value(self.B), _nn.value(self.A)
        z = jnp.einsum("...n,hrn->...hr", x, a)
        z = jnp.einsum("...hs,hrs->...hr", z, self.H) * self.s[:, None]
        return jnp.einsum("...hr,hmr->...m", z, b)


def _check_clients(clients, weights):
    if not clients:
        raise ValueError("`clients` must hold at least one Adapted model.")
    if weights is None:
        weights = [1.0 / len(clients)] * len(clients)
    if len(weights) != len(clients) or min(weights) < 0 or abs(sum(weights) - 1) > 1e-12:
        raise ValueError(
            f"`weights` must be {len(clients)} nonnegative numbers summing to 1; got {weights}."
        )
    specs = {c.spec for c in clients}
    if len(specs) != 1:
        raise ValueError("`clients` must share one adapter spec (same method, targets, seed).")
    return jnp.asarray(weights)


def fedavg(clients: list[Adapted], weights=None) -> Adapted:
    """FedAvg of the trainable leaves: ``sum_c p_c theta^c`` leaf by leaf (McMahan et al. 2017).

    For LoRA this averages ``A`` and ``B`` separately, so the update is ``avg(B) avg(A)``, not
    ``avg(BA)``.
    """
    w = _check_clients(clients, weights)
    halves = [_nn.split(c) for c in clients]
    avg = jax.tree.map(lambda *xs: sum(wi * x for wi, x in zip(w, xs, strict=True)),
                       *[t for t, _ in halves])
    return _nn.combine(avg, halves[0][1])


def ravan_aggregate(clients: list[Adapted], weights=None) -> Adapted:
    """Ravan's server step: ``H_i <- sum_c p_c s_i^c H_i^c``, ``s_i <- 1`` (exact FedAvg of dW).

    Other trainable leaves (a task head) are averaged as in :func:`fedavg`.
    """
    w = _check_clients(clients, weights)
    if clients[0].spec.method != "ravan":
        raise ValueError(f"`clients` must be Ravan-adapted; got {clients[0].spec.method!r}.")
    out = fedavg(clients, list(map(float, w)))

    def is_r(n):
        return isinstance(n, RavanLinear)

    per_client = [
        [n for n in jax.tree.leaves(c.model, is_leaf=is_r) if is_r(n)] for c in clients
    ]
    it = iter(range(len(per_client[0])))

    def fix(node):
        if not is_r(node):
            return node
        j = next(it)
        prod = sum(wi * cl[j].s[:, None, None] * cl[j].H
                   for wi, cl in zip(w, per_client, strict=True))
        return RavanLinear(node.base, node.B, node.A, prod, jnp.ones_like(node.s))

    model = jax.tree.map(fix, out.model, is_leaf=is_r)
    return Adapted(model, out.shared, out.spec)
