"""Curvature Tuning (Hu, Leyang et al. 2025, arXiv 2502.07783): the beta-parametrised activation.

``phi_{beta,c}(x) = c sigmoid(beta x / (1 - beta)) x + (1 - c)(1 - beta) softplus(x / (1 - beta))``
(official code ``utils/curvature_tuning.py``, with ``1 - beta`` floored at ``eps = 1e-6`` there).
``beta = 1`` is special-cased here as the exact ReLU, so a CT network at ``beta = 1`` *is* the
ReLU network bit for bit. Facts (derived in the note; tested):
``sup_x |phi - ReLU| <= (1 - beta)[c / (beta e) + (1 - c) ln 2]``, ``phi(0) = (1 - c)(1 - beta)
ln 2`` and ``phi'(0) = 1/2`` for every ``beta < 1``.

* Steering CT (:func:`ct_steer`): one global ``(beta, c)`` replaces every ReLU stored in the model
  (any equinox model: a function-valued field such as ``eqx.nn.MLP.activation`` or
  :class:`nn.MLP`'s static ``activation``, or an ``eqx.nn.Lambda(jax.nn.relu)`` leaf); nothing
  in the backbone trains (the paper fits a linear probe per ``beta`` and keeps the best).
* Trainable CT (:func:`ct_trainable`, on :class:`nn.MLP` s): per-channel ``beta =
  sigmoid(raw_beta)``, ``c = sigmoid(raw_c)``, init ``raw_beta = 1.386`` (beta ~ 0.8),
  ``raw_c = 0``; count ``2 sum_l C_l``.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp

import nn as _nn
from theory._validation import check_scalar

__all__ = ["ctu", "ct_gap_bound", "CTActivation", "CTLinear", "ct_steer", "ct_trainable"]


def ctu(x, beta, c=0.5):
    """``phi_{beta,c}(x)``; exact ReLU where ``beta == 1``. ``beta, c`` broadcast against ``x``."""
    beta = jnp.asarray(beta, x.dtype)
    c = jnp.asarray(c, x.dtype)
    one = beta >= 1
    t = jnp.where(one, 1.0, 1.0 - beta)  # safe denominator on the ReLU branch
    smooth = c * jax.nn.sigmoid(beta * x / t) * x + (1 - c) * t * jax.nn.softplus(x / t)
    return jnp.where(one, jax.nn.relu(x), smooth)


def ct_gap_bound(beta: float, c: float) -> float:
    """``(1 - beta)[c / (beta e) + (1 - c) ln 2]``, a bound on ``sup |phi_{beta,c} - ReLU|``."""
    beta = check_scalar(beta, "beta", lower=0, upper=1, closed="right")
    c = check_scalar(c, "c", lower=0, upper=1)
    return (1 - beta) * (c / (beta * math.e) + (1 - c) * math.log(2))


class CTActivation(eqx.Module):
    """A fixed ``phi_{beta,c}`` (static, hashable): the activation of steering CT."""

    beta: float = eqx.field(static=True)
    c: float = eqx.field(static=True)

    def __call__(self, x):
        return ctu(x, self.beta, self.c)


class CTLinear(eqx.Module):
    """``phi_{beta,c}(base(x))`` with trainable per-channel ``raw_beta``, ``raw_c`` (T-CT)."""

    base: _nn.Linear
    raw_beta: jax.Array
    raw_c: jax.Array

    def __call__(self, x, *, key=None):
        return ctu(self.base(x, key=key), jax.nn.sigmoid(self.raw_beta), jax.nn.sigmoid(self.raw_c))


def _replace_calls(node, match, new, found):
    """``node`` with every stored callable ``f`` for which ``match(f)`` replaced by ``new``:
    walks equinox modules field by field (static fields included), lists, tuples and dicts."""
    if isinstance(node, jax.Array):
        return node
    if isinstance(node, eqx.Module):
        changes = {}
        for f in dataclasses.fields(node):
            v = getattr(node, f.name, None)
            nv = _replace_calls(v, match, new, found)
            if nv is not v:
                changes[f.name] = nv
        if not changes:
            return node
        out = copy.copy(node)
        for k, v in changes.items():
            object.__setattr__(out, k, v)
        return out
    if callable(node) and match(node):
        found.append(node)
        return new
    if isinstance(node, (list, tuple)) and not hasattr(node, "_fields"):
        items = [_replace_calls(v, match, new, found) for v in node]
        if all(a is b for a, b in zip(items, node, strict=True)):
            return node
        return type(node)(items)
    if isinstance(node, dict):
        items = {k: _replace_calls(v, match, new, found) for k, v in node.items()}
        return node if all(items[k] is node[k] for k in node) else type(node)(items)
    return node


def ct_steer(model, beta: float, c: float = 0.5, *, activation=jax.nn.relu):
    """Replace every stored ``activation`` (default ReLU) of any model by ``phi_{beta,c}``.

    Works on any equinox model whose activation is a stored callable: a field of a module
    (``eqx.nn.MLP.activation``, :class:`nn.MLP`'s static ``activation``) or an
    ``eqx.nn.Lambda(jax.nn.relu)`` in an ``eqx.nn.Sequential``. An activation called inside a
    ``__call__`` without being stored cannot be reached; a model with none raises ``ValueError``.
    ``0 <= beta <= 1``; ``beta = 1`` is the ReLU itself.
    """
    beta = check_scalar(beta, "beta", lower=0, upper=1)
    c = check_scalar(c, "c", lower=0, upper=1)
    found = []
    out = _replace_calls(model, lambda f: f is activation, CTActivation(beta, c), found)
    if not found:
        raise ValueError(
            f"`model` stores no {getattr(activation, '__name__', activation)!r} "
            "activation (as a module field or an eqx.nn.Lambda) to replace."
        )
    return out


def _is_mlp(n):
    return isinstance(n, _nn.MLP)


def ct_trainable(model, *, beta0: float = 0.8, c0: float = 0.5, train=()):
    """Trainable CT: every hidden ReLU of every :class:`nn.MLP` gets per-channel ``(beta, c)``.

    Returns ``(model, mask)``: the hidden ``Linear`` of each MLP is wrapped in :class:`CTLinear`
    (the activation is applied inside it, the MLP's own activation set to the identity, which is
    the same function); ``mask`` (for :func:`nn.split`) is True at every ``raw_beta``, ``raw_c``
    and at the floating arrays whose dotted path starts with one of ``train`` (e.g. ``("head",)``
    for a linear probe). ``nn.count_params(model, mask)`` is then ``2 sum_l C_l`` plus the probe.
    """
    beta0 = check_scalar(beta0, "beta0", lower=0, upper=1, closed="neither")
    c0 = check_scalar(c0, "c0", lower=0, upper=1, closed="neither")
    rb, rc = math.log(beta0 / (1 - beta0)), math.log(c0 / (1 - c0))

    def swap(n):
        if not _is_mlp(n):
            return n
        if n.activation is not jax.nn.relu:
            raise ValueError(
                f"`model` must use jax.nn.relu in its MLPs for Curvature Tuning; "
                f"got {n.activation!r}."
            )
        hidden = []
        for lin in n.layers[:-1]:
            dt, ch = lin.weight.dtype, lin.out_features
            hidden.append(CTLinear(lin, jnp.full((ch,), rb, dt), jnp.full((ch,), rc, dt)))
        m = eqx.tree_at(lambda m: m.layers, n, (*hidden, n.layers[-1]))
        return _with_activation(m, _identity)

    mlps = [n for n in jax.tree.leaves(model, is_leaf=_is_mlp) if _is_mlp(n)]
    if not mlps:
        raise ValueError("`model` contains no nn.MLP whose ReLU could be replaced.")
    model = jax.tree.map(swap, model, is_leaf=_is_mlp)
    train = (train,) if isinstance(train, str) else tuple(train)

    def trainable(path, n):
        if not eqx.is_inexact_array(n):
            return False
        names = [str(getattr(k, "name", getattr(k, "idx", getattr(k, "key", k)))) for k in path]
        s = ".".join(names)
        return names[-1] in ("raw_beta", "raw_c") or any(s.startswith(t) for t in train)

    return model, jax.tree_util.tree_map_with_path(trainable, model)


def _identity(x):
    return x


def _with_activation(mlp, act):
    """A copy of ``mlp`` with its static ``activation`` field replaced (as ``nn.set_matmul``)."""
    new = copy.copy(mlp)
    object.__setattr__(new, "activation", act)
    return new
