"""Trainable / frozen partition of a model by a boolean mask kept *beside* the model.

A mask is a pytree of bools with the model's structure (an equinox filter spec): True at the
leaves that train. Nothing is wrapped, so every layer of the model (equinox's own included) keeps
its arrays and keeps working. :func:`split` is ``eqx.partition`` by that mask: the optimiser is
initialised and updated on the trainable half only, so weight decay cannot touch a frozen array
(optax never sees it). Filtering by ``eqx.is_inexact_array`` alone would put every floating array,
the frozen base included, in the trainable half, and ``optax.adamw`` decays an array even where
its gradient is zero.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax

from _core.validation import check_callable, check_model

__all__ = ["trainable_mask", "split", "combine", "count_params"]


def trainable_mask(model, frozen: Callable | None = None):
    """Boolean pytree over ``model``: True exactly at its trainable leaves.

    The default is the model's own mask when it defines ``trainable_mask()`` (an adapted model,
    :class:`nn.adapters.Adapted`: only adapter leaves train), else every inexact array.
    ``frozen`` (a ``where`` as in ``eqx.tree_at``, applied to the mask) sets the selected
    sub-trees to False, e.g. ``trainable_mask(lm, frozen=lambda m: (m.embed, m.head.weight))``.
    """
    check_model(model)
    if frozen is not None:
        check_callable(frozen, "frozen")
    own = getattr(model, "trainable_mask", None)
    mask = own() if callable(own) else jax.tree.map(eqx.is_inexact_array, model)
    if frozen is None:
        return mask
    return eqx.tree_at(frozen, mask, replace_fn=lambda node: jax.tree.map(lambda _: False, node))


def split(model, mask=None):
    """``(trainable, frozen)`` halves of ``model`` by ``mask`` (default :func:`trainable_mask`).

    ``mask`` is any equinox filter spec (a prefix of ``model`` with bools or callables).
    ``combine(trainable, frozen)`` rebuilds ``model`` exactly. Give the optimiser the trainable
    half only: ``optax.adamw(...).init(trainable)``.
    """
    if mask is None:
        return eqx.partition(model, trainable_mask(model))
    check_model(model)
    try:
        return eqx.partition(model, mask)
    except (ValueError, TypeError) as err:
        raise ValueError(
            f"`mask` must be a filter spec over `model` (bools or callables, a prefix of its "
            f"structure, e.g. nn.trainable_mask(model)); got {type(mask).__name__} ({err})."
        ) from err


def combine(trainable, frozen):
    """Inverse of :func:`split`."""
    if jax.tree.structure(trainable, is_leaf=_none) != jax.tree.structure(frozen, is_leaf=_none):
        raise ValueError(
            "`trainable` and `frozen` must be the two halves of one nn.split (the same tree "
            f"structure); got {type(trainable).__name__} and {type(frozen).__name__}."
        )
    return eqx.combine(trainable, frozen)


def _none(x):
    return x is None


def count_params(model, mask=None) -> int:
    """Number of trainable scalars (under ``mask``, default :func:`trainable_mask`)."""
    trainable, _ = split(model, mask)
    return int(sum(a.size for a in jax.tree.leaves(trainable)))
