"""The layers an adapter can target, each seen as a matrix ``W (out, fan_in)`` acting on vectors.

* Linear (:class:`nn.Linear`, ``eqx.nn.Linear``): ``W = weight``, the input as it is.
* Convolution (``eqx.nn.Conv1d/2d/3d``, ``groups = 1``): ``W = weight.reshape(out, in * prod(k))``
  (PEFT's LoRA on the reshaped kernel), the input is its patches at each output position
  (``jax.lax.conv_general_dilated_patches``, channel-major like the reshaped kernel), and the
  ``(..., out)`` result is moved back to channels-first.
* Embedding (:class:`nn.Embedding`, ``eqx.nn.Embedding``): the table is ``(num, dim)`` and the layer
  is the linear map ``one_hot(id) -> W one_hot(id)`` with ``W = weight.T (dim, num)`` (PEFT's
  ``lora_embedding_A (r, num)``, ``lora_embedding_B (dim, r)``).

An adapter computes ``Delta W`` and ``Delta W x`` in this matrix view, so every method works on
every kind, and merging writes ``W + Delta W`` back in the layer's own layout.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

import nn as _nn

__all__ = ["Target", "target_of"]


@dataclasses.dataclass(frozen=True)
class Target:
    """How one kind of layer is seen as a matrix; ``kind`` in {"linear", "conv", "embedding"}."""

    kind: str

    def weight(self, base):
        """``W (out, fan_in)``."""
        if self.kind == "linear":
            return base.weight
        if self.kind == "conv":
            return base.weight.reshape(base.weight.shape[0], -1)
        return base.weight.T

    def with_weight(self, base, w):
        """``base`` with its weight replaced by the matrix ``w`` (back in the layer's layout)."""
        if self.kind == "conv":
            w = w.reshape(base.weight.shape)
        elif self.kind == "embedding":
            w = w.T
        return eqx.tree_at(lambda b: b.weight, base, w.astype(base.weight.dtype))

    def bias(self, base):
        """The ``(out,)`` bias, or None."""
        b = getattr(base, "bias", None)
        return None if b is None else b.reshape(-1)

    def inputs(self, base, x):
        """The vectors ``W`` multiplies, ``(..., fan_in)``."""
        if self.kind == "linear":
            return x
        if self.kind == "embedding":
            return jax.nn.one_hot(x, base.weight.shape[0], dtype=base.weight.dtype)
        padding = base.padding
        if base.padding_mode != "ZEROS":
            x, padding = base._nonzero_pad(x), "VALID"
        p = jax.lax.conv_general_dilated_patches(
            x[None], base.kernel_size, base.stride, padding, rhs_dilation=base.dilation
        )[0]
        return jnp.moveaxis(p, 0, -1)

    def outputs(self, y):
        """``(..., out)`` back to the layer's output layout."""
        return jnp.moveaxis(y, -1, 0) if self.kind == "conv" else y


def target_of(node) -> Target | None:
    """The :class:`Target` of an adaptable layer, None for any other node (a grouped convolution
    and a scalar ``eqx.nn.Linear`` are not adaptable: no matrix view of the kind PEFT adapts)."""
    if isinstance(node, (_nn.Linear, eqx.nn.Linear)):
        if isinstance(node, eqx.nn.Linear) and "scalar" in (node.in_features, node.out_features):
            return None
        return Target("linear")
    if isinstance(node, eqx.nn.Conv):
        return Target("conv") if node.groups == 1 else None
    if isinstance(node, (_nn.Embedding, eqx.nn.Embedding)):
        return Target("embedding")
    return None
