"""Llama-style language models whose token mixers are GQA, MLA or Mamba2, and the hybrid student
built from a GQA teacher (Zebra-Llama, Yang, Rezagholizadeh et al., arXiv 2505.17272, Sec. 3).

Each layer is pre-norm: ``x + mixer(RMSNorm x)`` then ``x + SwiGLU(RMSNorm x)``; the LM has an
embedding, no learned positions (RoPE inside the mixers, or none), a final RMSNorm and an untied
head. :func:`hybrid_from_teacher` keeps the teacher's embedding, norms, MLPs and head and replaces
each attention by MLA (SVD init, :func:`nn.mla.mla_from_gqa`) or Mamba2 (attention init,
:func:`nn.mamba2.mamba2_from_gqa`) -- the structured initialisation -- or by randomly initialised
mixers of the same shapes (``init="random"``, the ablation baseline).
:func:`compose_hybrid` assembles a student from an all-MLA and an all-Mamba2 model layer by layer
(the paper's Stage 2 after the two ILD runs); :func:`select_mla_layers` is the layer-selection rule
(SMART, Sec. 3.4 as a digest of the paper summarises it, ``docs/papers/hybrid.md``: sensitivity
scores, first layer kept,
near-uniform spacing, maximal total score).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import as_array, check_bool, check_choice, check_instance, check_int
from _core.validation import check_key as _check_key  # a layer's key, before it is split

from ._layers import Embedding, Linear, RMSNorm
from .mamba2 import Mamba2, mamba2_from_gqa
from .mla import MLA, GQAttention, mla_from_gqa

__all__ = [
    "SwiGLU",
    "HybridLayer",
    "HybridLM",
    "hybrid_from_teacher",
    "compose_hybrid",
    "select_mla_layers",
    "KINDS",
]

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
        _check_key(key)
        k1, k2, k3 = jax.random.split(key, 3)
        self.gate = Linear(d_model, hidden, False, dtype=dtype, key=k1)
        self.up = Linear(d_model, hidden, False, dtype=dtype, key=k2)
        self.down = Linear(hidden, d_model, False, dtype=dtype, key=k3)

    def __call__(self, x, *, key=None):
        return self.down(jax.nn.silu(self.gate(x)) * self.up(x))


class HybridLayer(eqx.Module):
    """Pre-norm decoder layer with any token mixer (Zebra-Llama, arXiv 2505.17272, Sec. 3;
    ``docs/papers/hybrid.md``); ``parts(x) -> (mixer output, layer output)``."""

    norm1: RMSNorm
    mixer: eqx.Module
    norm2: RMSNorm
    mlp: SwiGLU

    def parts(self, x):
        a = self.mixer(self.norm1(x))  # pyright: ignore[reportCallIssue]  # eqx.Module: no __call__ declared
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
        check_int(rope_dim, "rope_dim", lower=0, upper=head_dim)  # also where no layer is MLA
        check_int(chunk, "chunk", lower=1, upper=2**16)
        _check_key(key)
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
    """A hybrid student from an all-GQA ``teacher`` (Zebra-Llama, Sec. 3.1, Alg. 1;
    ``docs/papers/hybrid.md``):
    embedding, norms, MLPs and head copied; layer i's attention replaced by ``kinds[i]`` ("gqa"
    copies it). ``init="structured"``: SVD (MLA) / kqvo (Mamba2) from the teacher's weights;
    ``"random"``: default init of that mixer."""
    check_choice(init, "init", ("structured", "random"))
    check_instance(teacher, "teacher", HybridLM)
    check_int(rope_dim, "rope_dim", lower=0)
    check_int(chunk, "chunk", lower=1, upper=2**16)
    kinds = _check_kinds(kinds)
    if len(kinds) != len(teacher.layers):
        raise ValueError(
            f"`kinds` must have one entry per teacher layer ({len(teacher.layers)}); "
            f"got {len(kinds)}."
        )
    if any(k != "gqa" for k in teacher.kinds):
        raise ValueError(f"`teacher` must be all-GQA; got kinds {teacher.kinds}.")
    _check_key(key)
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


def compose_hybrid(mla_model: HybridLM, mamba2_model: HybridLM, kinds):
    """The student whose layer i is ``mla_model``'s layer i where ``kinds[i] == "mla"`` and
    ``mamba2_model``'s elsewhere (Zebra-Llama Sec. 3.3: layers taken from the MLA-ILD and the
    Mamba2-ILD model); embedding, final norm and head from ``mamba2_model`` (ILD leaves them at the
    teacher's in both)."""
    check_instance(mla_model, "mla_model", HybridLM)
    check_instance(mamba2_model, "mamba2_model", HybridLM)
    kinds = _check_kinds(kinds)
    L = len(mamba2_model.layers)
    if len(kinds) != L or len(mla_model.layers) != L:
        raise ValueError(
            f"`kinds` and `mla_model` must have one entry per layer of mamba2_model ({L}); got "
            f"{len(kinds)} kinds and {len(mla_model.layers)} layers."
        )
    for name, model, want in (
        ("mla_model", mla_model, "mla"),
        ("mamba2_model", mamba2_model, "mamba2"),
    ):
        bad = [i for i, k in enumerate(kinds) if k == want and model.kinds[i] != want]
        if bad or any(k not in ("mla", "mamba2") for k in kinds):
            raise ValueError(
                f"`{name}` must have a {want} mixer at every layer `kinds` marks {want!r}, and "
                f"`kinds` may hold only 'mla' and 'mamba2'; got kinds {kinds}, {name} kinds "
                f"{model.kinds}."
            )
    layers = tuple(
        (mla_model if k == "mla" else mamba2_model).layers[i] for i, k in enumerate(kinds)
    )
    student = eqx.tree_at(lambda m: m.layers, mamba2_model, layers)
    object.__setattr__(student, "kinds", kinds)
    return student


def select_mla_layers(scores, num_mla, *, keep_first=True, slack=1):
    """Which of ``L = len(scores)`` layers become MLA: the ``num_mla`` indices (sorted) with the
    largest total sensitivity ``sum scores[i]`` among placements whose consecutive MLA layers are
    at least ``max(1, floor(L / num_mla) - slack)`` apart, layer 0 included when ``keep_first``.

    Zebra-Llama's SMART rule (Sec. 3.4, Alg. 2) as a digest of the paper gives it
    (unverified; ``docs/papers/hybrid.md#open-readings-as-options``): terminal preservation,
    near-uniform spread, maximal total score. The
    authors' configs keep layer 0 but never the last layer, so only the first is kept here; the
    spacing tolerance ``slack`` is this library's reading of "near-uniform" (every shipped config,
    e.g. 1B 4MLA [0, 5, 10, 14] and 8B 8MLA [0, 4, ..., 25, 30], satisfies it with ``slack=1``).
    Solved exactly by dynamic programming over (count, last index); ties go to lower indices.

    Examples
    --------
    >>> select_mla_layers([5.0, 1.0, 1.0, 9.0, 1.0, 1.0], 2)  # layer 0 kept; the next >= 2 apart
    (0, 3)
    """
    s = as_array(scores, "scores", ndim=1, min_size=1)
    L = s.size
    n = check_int(num_mla, "num_mla", lower=0, upper=L)
    keep_first = check_bool(keep_first, "keep_first")
    slack = check_int(slack, "slack", lower=0, upper=2**31)
    if n == 0:
        return ()
    gap = max(1, L // n - slack)
    NEG = -np.inf
    best = np.full((n + 1, L), NEG)  # best[k, i]: k layers chosen, the last at i
    prev = np.full((n + 1, L), -1, int)
    best[1] = np.where(np.arange(L) == 0, s, NEG) if keep_first else s
    for k in range(2, n + 1):
        for i in range(L):
            for j in range(i - gap + 1):
                v = best[k - 1, j] + s[i]
                if v > best[k, i]:
                    best[k, i], prev[k, i] = v, j
    i = int(np.argmax(best[n]))
    if not np.isfinite(best[n, i]):
        raise ValueError(
            f"`num_mla`={n}: no placement of {n} of {L} layers is {gap} apart"
            + (" starting at layer 0" if keep_first else "")
            + f"; lower num_mla or raise slack (got {slack})."
        )
    out = [i]
    for k in range(n, 1, -1):
        i = int(prev[k, i])
        out.append(i)
    return tuple(sorted(out))
