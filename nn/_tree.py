"""Trainable / frozen partition of a model.

A leaf is *trainable* when it is an inexact (floating or complex) JAX array that does not sit
inside a
:class:`Frozen` node. Everything else (integer arrays, static fields, anything wrapped in
``Frozen``) is
*frozen*. :func:`split` returns the two halves as equinox ``partition`` does, so an optimiser is
only ever
initialised and updated on the trainable half: weight decay cannot touch frozen arrays, because
optax never
sees them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax

__all__ = [
    "Frozen",
    "freeze",
    "unfreeze",
    "value",
    "trainable_mask",
    "split",
    "combine",
    "count_params",
]


def _stop(tree):
    return jax.tree.map(lambda a: jax.lax.stop_gradient(a) if eqx.is_inexact_array(a) else a, tree)


class Frozen(eqx.Module):
    """Marks everything inside ``value`` as frozen (never trained, never seen by the optimiser).

    ``value`` is a module or an array. Calling a ``Frozen`` module forwards to it with its arrays
    behind
    ``jax.lax.stop_gradient`` (so even a plain ``jax.grad`` of the whole model gives zero there);
    read a
    frozen array with :func:`value`.
    """

    value: Any

    def __call__(self, *args, **kwargs):
        return _stop(self.value)(*args, **kwargs)


def value(x):
    """Unwrap a :class:`Frozen` (with ``stop_gradient``) or return ``x`` unchanged."""
    return _stop(x.value) if isinstance(x, Frozen) else x


def _is_frozen(x) -> bool:
    return isinstance(x, Frozen)


def freeze(model, where: Callable):
    """Wrap the node(s) selected by ``where`` (as in ``eqx.tree_at``) in :class:`Frozen`.

    Example: ``freeze(lm, lambda m: (m.embed, m.pos_embed))``.
    """
    return eqx.tree_at(
        where, model, replace_fn=lambda node: node if _is_frozen(node) else Frozen(node)
    )


def unfreeze(model):
    """Remove every :class:`Frozen` wrapper."""
    return jax.tree.map(lambda n: n.value if _is_frozen(n) else n, model, is_leaf=_is_frozen)


def trainable_mask(model):
    """Boolean pytree (prefix of ``model``): True exactly at trainable leaves."""

    def mark(node):
        if _is_frozen(node):
            return jax.tree.map(lambda _: False, node)
        return eqx.is_inexact_array(node)

    return jax.tree.map(mark, model, is_leaf=_is_frozen)


def split(model):
    """``(trainable, frozen)`` halves of ``model``; ``combine(trainable, frozen)`` rebuilds it
    exactly."""
    return eqx.partition(model, trainable_mask(model))


def combine(trainable, frozen):
    """Inverse of :func:`split`."""
    return eqx.combine(trainable, frozen)


def count_params(model) -> int:
    """Number of trainable scalars."""
    trainable, _ = split(model)
    return int(sum(a.size for a in jax.tree.leaves(trainable)))
