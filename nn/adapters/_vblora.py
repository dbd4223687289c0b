"""VB-LoRA (Li, Han & Ji, NeurIPS 2024, arXiv 2405.15179): LoRA factors drawn from a vector bank.

A global bank ``V in R^{h x b}`` (``adapted.shared["bank"]``); every length-``b`` sub-vector of
every ``A_l`` and ``B_l`` is a top-k mixture ``sum_{j in topk(z)} softmax(z_topk)_j V_j`` of bank
vectors, with per-sub-vector logits ``z in R^h`` (PEFT ``tuners/vblora``: ``logits_A (r, n/b, h)``,
``logits_B (m/b, r, h)``, init N(0, 0.1^2); bank U(-0.02, 0.02); defaults h = 256, b = 256,
k = 2; no ``alpha/r`` scaling). As a projection ``theta_D = (W(z) (x) I_b) vec(V)``: ``k``
nonnegative weights summing to 1 per row block, depending on the trained logits (not a fixed P).
Count ``h b + sum_l h r (m_l + n_l) / b``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from _core.validation import check_int, check_scalar

from ._core import AdapterLayer, _check_rank, _real_array, register_method

__all__ = ["VBLoRALinear", "topk_mixture_weights"]


def topk_mixture_weights(logits, k: int):
    """``(weights, index)``: the softmax over the top-``k`` logits (last axis) and their ids
    (VB-LoRA's top-k admixture, arXiv 2405.15179; PEFT ``tuners/vblora``).

    >>> w, idx = topk_mixture_weights(jnp.array([0.0, 5.0, 5.0]), 2)
    >>> w.tolist(), idx.tolist()
    ([0.5, 0.5], [1, 2])
    """
    logits = _real_array(logits, "logits", min_size=1)
    if logits.ndim < 1:
        raise ValueError(f"`logits` must have a last axis; got shape {logits.shape}.")
    k = check_int(k, "k", lower=1, upper=logits.shape[-1])
    vals, idx = jax.lax.top_k(logits, k)
    return jax.nn.softmax(vals, axis=-1), idx


def _mix(logits, bank, k):
    w, idx = topk_mixture_weights(logits, k)
    return jnp.einsum("...k,...kb->...b", w, jnp.take(bank, idx, axis=0))


@register_method("vblora")
class VBLoRALinear(AdapterLayer):
    """VB-LoRA layer (arXiv 2405.15179): trainable ``logits_A (r, n/b, h)``,
    ``logits_B (m/b, r, h)``."""

    logits_A: jax.Array
    logits_B: jax.Array
    k: int = eqx.field(static=True)

    options = (
        "r",
        "num_vectors",
        "vector_length",
        "topk",
        "init_logits_std",
        "init_vector_bank_bound",
    )

    @classmethod
    def complete_config(cls, config, shapes):
        r = _check_rank(config.get("r", 4), shapes)
        h = check_int(config.get("num_vectors", 256), "num_vectors", lower=1)
        b = check_int(config.get("vector_length", 256), "vector_length", lower=1)
        for m, n in shapes:
            if n % b or m % b:
                raise ValueError(
                    f"`vector_length` must divide every adapted layer's in and out sizes; got "
                    f"{b} for a layer of shape ({m}, {n})."
                )
        k = check_int(config.get("topk", 2), "topk", lower=1, upper=h)
        std = check_scalar(config.get("init_logits_std", 0.1), "init_logits_std", lower=0)
        bound = check_scalar(
            config.get("init_vector_bank_bound", 0.02), "init_vector_bank_bound", lower=0
        )
        return {
            "r": r,
            "num_vectors": h,
            "vector_length": b,
            "topk": k,
            "init_logits_std": std,
            "init_vector_bank_bound": bound,
        }

    @classmethod
    def build_shared(
        cls, shapes, *, key, dtype, num_vectors, vector_length, init_vector_bank_bound, **_
    ):
        bd = init_vector_bank_bound
        return {"bank": jax.random.uniform(key, (num_vectors, vector_length), dtype, -bd, bd)}

    @classmethod
    def build(cls, w, *, key, r, num_vectors, vector_length, topk, init_logits_std, **_):
        (m, n), b, h, dt = w.shape, vector_length, num_vectors, w.dtype
        ka, kb = jax.random.split(key)
        la = init_logits_std * jax.random.normal(ka, (r, n // b, h), dt)
        lb = init_logits_std * jax.random.normal(kb, (m // b, r, h), dt)
        return cls((m, n), la, lb, topk)

    @classmethod
    def num_params(cls, shapes, *, r, num_vectors, vector_length, **_):
        h, b = num_vectors, vector_length
        return h * b + sum(h * r * (m + n) // b for m, n in shapes)

    def factors(self, ctx):
        bank = ctx["bank"]
        r = self.logits_A.shape[0]
        m, n = self.shape
        a = _mix(self.logits_A, bank, self.k).reshape(r, n)  # (r, n/b, b) -> (r, n)
        bm = _mix(self.logits_B, bank, self.k)  # (m/b, r, b)
        b = jnp.swapaxes(bm, 1, 2).reshape(m, r)
        return a, b

    def delta_weight(self, ctx):
        a, b = self.factors(ctx)
        return b @ a

    def delta(self, x, ctx, *, key=None):
        a, b = self.factors(ctx)
        return (x @ a.T) @ b.T
