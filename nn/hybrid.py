"""Llama-style language models whose token mixers are GQA, MLA or Mamba2, and the hybrid student
built from a GQA teacher (Zebra-Llama, Yang, Rezagholizadeh et al., arXiv 2505.17272, Sec. 3).

Each layer is pre-norm: ``x + mixer(RMSNorm x)`` then ``x + SwiGLU(RMSNorm x)``; the LM has an
embedding, no learned positions (RoPE inside the mixers, or none), a final RMSNorm and an untied
head. :func:`hybrid_from_teacher` keeps the teacher's embedding, norms, MLPs and head and replaces
each attention by MLA (SVD init, :func:`nn.mla.mla_from_gqa`) or Mamba2 (attention init,
:func:`nn.mamba2.mamba2_from_gqa`) -- the structured initialisation -- or by randomly initialised
mixers of the same shapes (``init="random"``, the ablation baseline).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from theory._validation import check_choice, check_instance, check_int

from ._layers import Embedding, Linear, RMSNorm
from .mamba2 import Mamba2, mamba2_from_gqa
from .mla import MLA, GQAttention, mla_from_gqa

__all__ = ["SwiGLU", "HybridLayer", "HybridLM", "hybrid_from_teacher", "KINDS"]

KINDS = ("gqa", "mla", "mamba2")


def _check_kinds(kinds):
    if isinstance(kinds, str) or not isinstance(kinds, list | tuple) or not kinds:
        raise TypeError(f"`kinds` must be a non-empty list or tuple of {KINDS}; got {kinds!r:.60}.")
    return tuple(check_choice(k, "kinds", KINDS) for k in kinds)


class SwiGLU(eqx.Module):
    """``down(silu(gate x) * up x)`` (Shazeer 2020), no biases (Llama)."""

    gate: Linear
    up: Linear
    down: Linear

    def __init__(self, d_model, hidden, *, dtype=None, key):
        check_int(d_model, "d_model", lower=1, upper=2**16)
        check_int(hidden, "hidden", lower=1, upper=2**20)
        k1, k2, k3 = jax.random.split(key, 3)
        self.gate = Linear(d_model, hidden, False, dtype=dtype, key=k1)
        self.up = Linear(d_model, hidden, False, dtype=dtype, key=k2)
        self.down = Linear(hidden, d_model, False, dtype=dtype, key=k3)

    def __call__(self, x, *, key=None):
        return self.down(jax.nn.silu(self.gate(x)) * self.up(x))


class HybridLayer(eqx.Module):
    """Pre-norm decoder layer with any token mixer; ``parts(x) -> (mixer output, layer output)``."""

    norm1: RMSNorm
    mixer: eqx.Module
    norm2: RMSNorm
    mlp: SwiGLU

    def parts(self, x):
        a = self.mixer(self.norm1(x))
        x = x + a
        return a, x + self.mlp(self.norm2(x))

    def __call__(self, x, *, key=None):
        return self.parts(x)[1]


def _mixer(kind, d, H, G, dh, *, kv_rank, rope_dim, rope_theta, chunk, dtype, key):
    if kind == "gqa":
        return GQAttention(d, H, G, dh, rope_theta=rope_theta, dtype=dtype, key=key)
    if kind == "mla":
        return MLA(
            d,
            H,
            G,
            kv_rank=kv_rank,
            nope_dim=dh - rope_dim,
            v_dim=dh,
            rope_dim=rope_dim,
            rope_theta=rope_theta or 10000.0,
            dtype=dtype,
            key=key,
        )
    return Mamba2(d, H, G, dh, chunk=chunk, dtype=dtype, key=key)


class HybridLM(eqx.Module):
    """Decoder-only LM with one mixer kind per layer (``kinds``, each in :data:`KINDS`).

    ``kv_rank`` / ``rope_dim``: MLA latent rank and RoPE key width; ``rope_theta``: RoPE base for
    GQA (None: no positional encoding). ``model(tokens (..., T)) -> logits (..., T, vocab)``.
    """

    embed: Embedding
    layers: tuple
    norm: RMSNorm
    head: Linear
    kinds: tuple = eqx.field(static=True)

    def __init__(
        self,
        vocab_size,
        d_model,
        num_heads,
        num_kv_heads,
        head_dim,
        kinds,
        *,
        mlp_hidden,
        kv_rank=None,
        rope_dim=0,
        rope_theta=None,
        chunk=16,
        dtype=None,
        key,
    ):
        kinds = _check_kinds(kinds)
        if "mla" in kinds:
            check_int(kv_rank, "kv_rank", lower=1)
        check_int(vocab_size, "vocab_size", lower=1, upper=2**24)
        check_int(d_model, "d_model", lower=1, upper=2**16)
        check_int(head_dim, "head_dim", lower=1, upper=2**16)
        check_int(num_heads, "num_heads", lower=1, upper=2**16)
        check_int(mlp_hidden, "mlp_hidden", lower=1, upper=2**20)
        ke, kh, kl = jax.random.split(key, 3)
        self.embed = Embedding(vocab_size, d_model, init_std=1.0, dtype=dtype, key=ke)
        layers = []
        for kind, k in zip(kinds, jax.random.split(kl, len(kinds)), strict=True):
            km, kf = jax.random.split(k)
            layers.append(
                HybridLayer(
                    RMSNorm(d_model, dtype=dtype),
                    _mixer(
                        kind,
                        d_model,
                        num_heads,
                        num_kv_heads,
                        head_dim,
                        kv_rank=kv_rank,
                        rope_dim=rope_dim,
                        rope_theta=rope_theta,
                        chunk=chunk,
                        dtype=dtype,
                        key=km,
                    ),
                    RMSNorm(d_model, dtype=dtype),
                    SwiGLU(d_model, mlp_hidden, dtype=dtype, key=kf),
                )
            )
        self.layers = tuple(layers)
        self.norm = RMSNorm(d_model, dtype=dtype)
        self.head = Linear(d_model, vocab_size, False, dtype=dtype, key=kh)
        self.kinds = kinds

    def layer_io(self, tokens):
        """Per layer ``(input, mixer output, output)`` arrays stacked on axis 0 (ILD targets)."""
        x = self.embed(tokens)
        ins, mix, outs = [], [], []
        for layer in self.layers:
            a, y = layer.parts(x)
            ins.append(x), mix.append(a), outs.append(y)
            x = y
        return jnp.stack(ins), jnp.stack(mix), jnp.stack(outs)

    def __call__(self, tokens, *, key=None):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def hybrid_from_teacher(
    teacher: HybridLM, kinds, *, kv_rank=None, rope_dim=0, init="structured", chunk=16, key
):
    """A hybrid student from an all-GQA ``teacher``: embedding, norms, MLPs and head copied;
    layer i's attention replaced by ``kinds[i]`` ("gqa" copies it). ``init="structured"``: SVD
    (MLA) / kqvo (Mamba2) from the teacher's weights; ``"random"``: default init of that mixer."""
    check_choice(init, "init", ("structured", "random"))
    check_instance(teacher, "teacher", HybridLM)
    kinds = _check_kinds(kinds)
    if len(kinds) != len(teacher.layers):
        raise ValueError(
            f"`kinds` must have one entry per teacher layer ({len(teacher.layers)}); "
            f"got {len(kinds)}."
        )
    if any(k != "gqa" for k in teacher.kinds):
        raise ValueError(f"`teacher` must be all-GQA; got kinds {teacher.kinds}.")
    layers = []
    for i, (kind, layer) in enumerate(zip(kinds, teacher.layers, strict=True)):
        g: GQAttention = layer.mixer
        k = jax.random.fold_in(key, i)
        if kind == "gqa":
            mixer = g
        elif init == "structured" and kind == "mla":
            mixer = mla_from_gqa(g, kv_rank, rope_dim=rope_dim, key=k)[0]
        elif init == "structured":
            mixer = mamba2_from_gqa(g, chunk=chunk, key=k)
        else:
            mixer = _mixer(
                kind,
                g.q_proj.in_features,
                g.num_heads,
                g.num_kv_heads,
                g.head_dim,
                kv_rank=kv_rank,
                rope_dim=rope_dim,
                rope_theta=g.rope_theta,
                chunk=chunk,
                dtype=g.q_proj.weight.dtype,
                key=k,
            )
        layers.append(eqx.tree_at(lambda lay: lay.mixer, layer, mixer))
    student = eqx.tree_at(lambda m: m.layers, teacher, tuple(layers))
    object.__setattr__(student, "kinds", kinds)
    return student
