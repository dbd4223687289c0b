"""Curvature Tuning (Hu, Leyang et al. 2025, arXiv 2502.07783): the beta-parametrised activation.

``phi_{beta,c}(x) = c sigmoid(beta x / (1 - beta)) x + (1 - c)(1 - beta) softplus(x / (1 - beta))``
(official code ``utils/curvature_tuning.py``, with ``1 - beta`` floored at ``eps = 1e-6`` there).
``beta = 1`` is special-cased here as the exact ReLU, so a CT network at ``beta = 1`` *is* the
ReLU network bit for bit. Facts (derived here; tested):
``sup_x |phi - ReLU| <= (1 - beta)[c / (beta e) + (1 - c) ln 2]``, ``phi(0) = (1 - c)(1 - beta)
ln 2`` and ``phi'(0) = 1/2`` for every ``beta < 1``.

* Steering CT (:func:`ct_steer`): one global ``(beta, c)`` replaces every ReLU stored in the model
  (any equinox model: a function-valued field such as ``eqx.nn.MLP.activation`` or
  :class:`nn.MLP`'s static ``activation``, or an ``eqx.nn.Lambda(jax.nn.relu)`` leaf); nothing
  in the backbone trains (the paper fits a linear probe per ``beta`` and keeps the best).
* Trainable CT (:func:`ct_trainable`, any equinox model): per-channel ``beta =
  sigmoid(raw_beta)``, ``c = sigmoid(raw_c)`` in :class:`nn.MLP` and ``eqx.nn.MLP`` (per
  neuron), one pair per other activation site; init ``raw_beta = 1.386`` (beta ~ 0.8),
  ``raw_c = 0``; count ``2 sum_l C_l`` on MLPs.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import sys

import equinox as eqx
import jax
import jax.numpy as jnp

import nn as _nn
from _core.validation import check_scalar

from ._core import _real_array

__all__ = [
    "ctu",
    "ct_gap_bound",
    "CTActivation",
    "CTLinear",
    "CTTrainable",
    "ct_steer",
    "ct_trainable",
]


def ctu(x, beta, c: float | jax.Array = 0.5):
    """``phi_{beta,c}(x)`` (arXiv 2502.07783, official ``utils/curvature_tuning.py``); exact ReLU
    where ``beta == 1``. ``beta, c`` broadcast against ``x``.

    >>> ctu(jnp.array([-1.0, 2.0]), 1.0).tolist()  # beta = 1: the ReLU
    [0.0, 2.0]
    """
    x = _real_array(x, "x")
    beta = _real_array(beta, "beta", lower=0, upper=1)
    c = _real_array(c, "c", lower=0, upper=1)
    beta, c = beta.astype(x.dtype), c.astype(x.dtype)
    one = beta >= 1
    t = jnp.where(one, 1.0, 1.0 - beta)  # safe denominator on the ReLU branch
    smooth = c * jax.nn.sigmoid(beta * x / t) * x + (1 - c) * t * jax.nn.softplus(x / t)
    return jnp.where(one, jax.nn.relu(x), smooth)


def ct_gap_bound(beta: float, c: float) -> float:
    """``(1 - beta)[c / (beta e) + (1 - c) ln 2]``, a bound on ``sup |phi_{beta,c} - ReLU|``
    (derived here, ``docs/papers/adapters_curvature.md#as-implemented-here``; tested).

    >>> round(ct_gap_bound(0.5, 0.0), 6)  # (1 - 0.5) ln 2
    0.346574
    """
    beta = check_scalar(beta, "beta", lower=0, upper=1, closed="right")
    c = check_scalar(c, "c", lower=0, upper=1)
    if c > 0 and beta * math.e < c / sys.float_info.max:  # c / (beta e) would overflow
        raise ValueError(f"`beta` must exceed c / (e * max float) for c = {c}; got {beta!r}.")
    return (1 - beta) * (c / (beta * math.e) + (1 - c) * math.log(2))


class CTActivation(eqx.Module):
    """A fixed ``phi_{beta,c}`` (static, hashable): the activation of steering CT (arXiv
    2502.07783, Sec. 4; ``docs/papers/adapters_curvature.md``)."""

    beta: float = eqx.field(static=True)
    c: float = eqx.field(static=True)

    def __call__(self, x):
        return ctu(x, self.beta, self.c)


class CTLinear(eqx.Module):
    """``phi_{beta,c}(base(x))`` with trainable per-channel ``raw_beta``, ``raw_c`` (T-CT,
    ``docs/papers/adapters_curvature.md``)."""

    base: _nn.Linear
    raw_beta: jax.Array
    raw_c: jax.Array

    def __call__(self, x, *, key=None):
        return ctu(self.base(x, key=key), jax.nn.sigmoid(self.raw_beta), jax.nn.sigmoid(self.raw_c))


def _rebuild(node, visit, field=None):
    """``node`` with every sub-node ``n`` for which ``visit(n, field)`` is not None replaced by
    that value; walks equinox modules field by field (static fields included; ``field`` is the
    dataclass field holding ``n``, inherited by list items), lists, tuples and dicts."""
    new = visit(node, field)
    if new is not None:
        return new
    if isinstance(node, jax.Array):
        return node
    if isinstance(node, eqx.Module):
        changes = {}
        for f in dataclasses.fields(node):
            v = getattr(node, f.name, None)
            nv = _rebuild(v, visit, f)
            if nv is not v:
                changes[f.name] = nv
        if not changes:
            return node
        out = copy.copy(node)
        for k, v in changes.items():
            object.__setattr__(out, k, v)
        return out
    if isinstance(node, (list, tuple)) and not hasattr(node, "_fields"):
        items = [_rebuild(v, visit, field) for v in node]
        if all(a is b for a, b in zip(items, node, strict=True)):
            return node
        return type(node)(items)
    if isinstance(node, dict):
        items = {k: _rebuild(v, visit, field) for k, v in node.items()}
        return node if all(items[k] is node[k] for k in node) else type(node)(items)
    return node


def _replace_calls(node, match, new, found):
    """``node`` with every stored callable ``f`` (not a module) for which ``match(f)`` replaced
    by ``new``; the replaced callables are appended to ``found``."""

    def visit(n, _):
        if isinstance(n, (jax.Array, eqx.Module)) or not callable(n) or not match(n):
            return None
        found.append(n)
        return new

    return _rebuild(node, visit)


def ct_steer(model, beta: float, c: float = 0.5, *, activation=jax.nn.relu):
    """Replace every stored ``activation`` (default ReLU) of any model by ``phi_{beta,c}``
    (steering CT, ``docs/papers/adapters_curvature.md``).

    Works on any equinox model whose activation is a stored callable: a field of a module
    (``eqx.nn.MLP.activation``, :class:`nn.MLP`'s static ``activation``) or an
    ``eqx.nn.Lambda(jax.nn.relu)`` in an ``eqx.nn.Sequential``. An activation called inside a
    ``__call__`` without being stored cannot be reached; a model with none raises ``ValueError``.
    ``0 <= beta <= 1``; ``beta = 1`` is the ReLU itself.

    >>> import nn
    >>> m = nn.MLP(4, 2, 3, 1, activation=jax.nn.relu, key=jax.random.key(0))
    >>> x = jnp.linspace(-1.0, 1.0, 4)
    >>> bool(jnp.array_equal(ct_steer(m, 1.0)(x), m(x))), ct_steer(m, 0.7).activation
    (True, CTActivation(beta=0.7, c=0.5))
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


class CTTrainable(eqx.Module):
    """A trainable ``phi_{beta,c}`` activation (T-CT, ``docs/papers/adapters_curvature.md``):
    ``beta = sigmoid(raw_beta)``, ``c = sigmoid(raw_c)``, broadcast against the input (scalars:
    one pair for the whole site)."""

    raw_beta: jax.Array
    raw_c: jax.Array

    def __call__(self, x, *, key=None):
        return ctu(x, jax.nn.sigmoid(self.raw_beta), jax.nn.sigmoid(self.raw_c))


def _ct_nn_mlp(n, rb, rc):
    """An :class:`nn.MLP` with a :class:`CTLinear` per hidden layer (per-channel pairs)."""
    if n.activation is not jax.nn.relu:
        raise ValueError(
            f"`model` must use jax.nn.relu in its MLPs for Curvature Tuning; got {n.activation!r}."
        )
    hidden = []
    for lin in n.layers[:-1]:
        dt, ch = lin.weight.dtype, lin.out_features
        hidden.append(CTLinear(lin, jnp.full((ch,), rb, dt), jnp.full((ch,), rc, dt)))
    m = eqx.tree_at(lambda m: m.layers, n, (*hidden, n.layers[-1]))
    return _with_activation(m, _identity)


def _ct_eqx_mlp(n, rb, rc, found):
    """An ``eqx.nn.MLP`` whose ReLU ``activation`` (and ``final_activation``) is a
    :class:`CTTrainable` with one pair per neuron: equinox vmaps a learnt activation over the
    layers and the width, so the arrays are ``(depth, width)`` (``(out,)`` for the final one)."""
    dt = n.layers[0].weight.dtype
    act, fin = n.activation, n.final_activation
    if act is jax.nn.relu and n.depth > 0:
        shape = (n.depth, n.width_size)
        act = CTTrainable(jnp.full(shape, rb, dt), jnp.full(shape, rc, dt))
        found.append("activation")
    if fin is jax.nn.relu and n.out_size != "scalar":
        fin = CTTrainable(jnp.full((n.out_size,), rb, dt), jnp.full((n.out_size,), rc, dt))
        found.append("final_activation")
    return eqx.tree_at(lambda m: (m.activation, m.final_activation), n, (act, fin))


def _ct_sites(node, rb, rc, dt, found):
    """``node`` with every ReLU that is a module field (non-static) or an ``eqx.nn.Lambda``
    replaced by a per-site scalar :class:`CTTrainable`; ``eqx.nn.MLP`` per neuron."""

    def visit(n, field):
        if isinstance(n, eqx.nn.MLP):
            return _ct_eqx_mlp(n, rb, rc, found)
        if isinstance(n, eqx.nn.Lambda) and n.fn is jax.nn.relu:
            n = n.fn
        elif n is not jax.nn.relu:
            return None
        elif field is not None and field.metadata.get("static"):
            raise ValueError(
                f"`model` stores jax.nn.relu in the static field {field.name!r}, which cannot "
                "hold trainable Curvature Tuning parameters."
            )
        found.append(n)
        return CTTrainable(jnp.asarray(rb, dt), jnp.asarray(rc, dt))

    return _rebuild(node, visit)


def ct_trainable(model, *, beta0: float = 0.8, c0: float = 0.5, train=()):
    """Trainable CT on any equinox model: every stored ReLU gets trainable ``(beta, c)``
    (``docs/papers/adapters_curvature.md``).

    * :class:`nn.MLP`: each hidden ``Linear`` is wrapped in :class:`CTLinear` (per-channel pairs;
      the MLP's static activation set to the identity, the same function);
    * ``eqx.nn.MLP``: its ``activation`` becomes a :class:`CTTrainable` with ``(depth, width)``
      arrays (equinox vmaps a learnt activation per neuron);
    * any other ReLU stored as a module field or an ``eqx.nn.Lambda`` (a CNN's activation): one
      :class:`CTTrainable` pair per site, shared by its channels (the channel count of such a site
      is not known before a call).

    Returns ``(model, mask)``: ``mask`` (for :func:`nn.split`) is True at every ``raw_beta``,
    ``raw_c`` and at the floating arrays whose dotted path starts with one of ``train`` (e.g.
    ``("head",)`` for a linear probe). A model with no reachable ReLU, or a ReLU in a static field
    other than :class:`nn.MLP`'s, raises ``ValueError``. On :class:`nn.MLP` s
    ``nn.count_params(model, mask)`` is ``2 sum_l C_l`` plus the probe.

    >>> import nn
    >>> m = nn.MLP(4, 2, 3, 1, activation=jax.nn.relu, key=jax.random.key(0))
    >>> t, mask = ct_trainable(m)  # beta = 0.8, c = 0.5 on each of the 3 hidden channels
    >>> x = jnp.linspace(-1.0, 1.0, 4)
    >>> nn.count_params(t, mask), bool(jnp.allclose(t(x), ct_steer(m, 0.8, 0.5)(x)))
    (6, True)
    """
    beta0 = check_scalar(beta0, "beta0", lower=0, upper=1, closed="neither")
    c0 = check_scalar(c0, "c0", lower=0, upper=1, closed="neither")
    rb, rc = math.log(beta0 / (1 - beta0)), math.log(c0 / (1 - c0))
    train = (train,) if isinstance(train, str) else tuple(train)
    for t in train:
        if not isinstance(t, str):
            raise TypeError(f"`train` must hold dotted path prefixes (str); got {t!r}.")
    mlps = [n for n in jax.tree.leaves(model, is_leaf=_is_mlp) if _is_mlp(n)]
    model = jax.tree.map(
        lambda n: _ct_nn_mlp(n, rb, rc) if _is_mlp(n) else n, model, is_leaf=_is_mlp
    )
    floats = [x for x in jax.tree.leaves(model) if eqx.is_inexact_array(x)]
    dt = floats[0].dtype if floats else jnp.result_type(float)
    found = []
    model = _ct_sites(model, rb, rc, dt, found)
    if not mlps and not found:
        raise ValueError(
            "`model` stores no jax.nn.relu (in an nn.MLP, an eqx.nn.MLP, a module field or an "
            "eqx.nn.Lambda) that Curvature Tuning could replace."
        )

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
