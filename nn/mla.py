"""Grouped-query attention (the teacher) and multi-head latent attention (MLA) with its SVD init.

- :func:`rope`: rotary position embedding, half-split (Llama) layout (Su et al. 2021, eq. 34).
- :class:`GQAttention`: grouped-query attention (Ainslie et al. 2023), optional RoPE; the
  Llama-style teacher attention.
- :class:`MLA`: DeepSeek-V2 multi-head latent attention (arXiv 2405.04434, Sec. 2.1, eqs. 9-19):
  optional low-rank query, a joint KV latent c = W^{DKV} h of rank ``kv_rank`` plus one shared
  decoupled RoPE key k^R (cached per token: ``kv_rank + rope_dim`` elements), per-KV-head up maps
  [k^C; v] = W^{UKV} c repeated to the query heads as in GQA (Zebra-Llama's ``num_kv_heads``).
  ``MLA(x)`` materialises keys and values (the naive path); ``MLA(x, absorbed=True)`` absorbs W^{UK}
  into the query and W^{UV} into the output and attends to the latent directly (DeepSeek-V2 Sec.
  2.1.2); :func:`mla_decode` is the cached one-token decode on the latent cache. All three agree.
- :func:`gqa_decode`: the teacher's cached decode (per-token K/V cache of ``2 n_kv d_h``
  elements), equal to ``GQAttention(x)``; the baseline of the decode-time comparison.
- :func:`mla_from_gqa`: the structured init of Zebra-Llama (arXiv 2505.17272, Alg. 1 "SVD
  initialization for MLA"; X-EcoMLA arXiv 2503.11132): truncated SVD of the stacked per-KV-head
  [W^K; W^V] into W^{UKV} W^{DKV} (Eckart-Young optimal in Frobenius norm), of W^Q into W^{UQ}
  W^{DQ}.

Documented choices. (1) Only the rows MLA keeps are factorised: the first ``d_h - rope_dim`` rows of
each key head and all value rows (the authors' code factorises all key rows, then drops the RoPE
rows of U; with ``rope_dim = 0`` the two coincide). (2) The RoPE key rows are the mean over KV heads
of the last ``rope_dim`` rows of each key head, rotated in the half-split layout of that slice; the
teacher's RoPE pairs dim k with k + d_h/2, so with RoPE the init is not the teacher (the negative
control ``hybrid.svd_init`` measures).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    _is_tracer,
    as_array,
    check_array,
    check_instance,
    check_int,
    check_key,
    check_scalar,
)

from ._layers import Linear

_DIM = 2**16  # widths, heads and head sizes beyond this cannot be allocated on one machine

__all__ = [
    "rope",
    "GQAttention",
    "MLA",
    "gqa_decode",
    "mla_decode",
    "mla_from_gqa",
    "svd_factor",
]


def rope(x, positions, theta=10000.0):
    """Rotary embedding of ``x (..., T, D)`` at integer ``positions (T,)``, D even, half-split
    layout (dim k rotates with dim k + D/2 at frequency theta^{-2k/D}; Su et al. 2021, eq. 34).

    Examples
    --------
    >>> x = jnp.ones((2, 4))
    >>> y = rope(x, jnp.array([0, 3]))
    >>> bool(jnp.allclose(y[0], x[0])), round(float(jnp.linalg.norm(y[1])), 5)  # a rotation
    (True, 2.0)
    """
    x = check_array(x, "x", min_ndim=2, max_abs=1e100)
    positions = check_array(positions, "positions", ndim=1)
    if positions.shape[0] != x.shape[-2] or np.dtype(positions.dtype).kind not in "iu":
        raise ValueError(
            f"`positions` must be {x.shape[-2]} integers (one per row of `x`); got dtype "
            f"{positions.dtype}, shape {tuple(positions.shape)}."
        )
    if not _is_tracer(theta):
        check_scalar(theta, "theta", lower=1.0, upper=1e100)
    D = x.shape[-1]
    if D == 0:
        return x
    half = D // 2
    inv = theta ** (-np.arange(half) * 2.0 / D)
    ang = jnp.asarray(positions, x.dtype)[:, None] * jnp.asarray(inv, x.dtype)
    cos, sin = jnp.cos(ang), jnp.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def _masked_softmax(s, q_pos, k_len):
    mask = jnp.arange(k_len)[None, :] <= jnp.asarray(q_pos)[:, None]
    return jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1)


def _heads(y, n, dh):
    return jnp.swapaxes(y.reshape(*y.shape[:-1], n, dh), -2, -3)  # (..., n, T, dh)


def _merge(o):
    o = jnp.swapaxes(o, -2, -3)
    return o.reshape(*o.shape[:-2], -1)


def _check_heads(num_heads, num_kv_heads):
    num_heads = check_int(num_heads, "num_heads", lower=1, upper=_DIM)
    num_kv_heads = check_int(num_kv_heads, "num_kv_heads", lower=1, upper=_DIM)
    if num_heads % num_kv_heads:
        raise ValueError(f"`num_kv_heads` must divide num_heads={num_heads}; got {num_kv_heads}.")
    return num_heads, num_kv_heads


class GQAttention(eqx.Module):
    """Causal grouped-query attention: ``num_heads`` query heads share ``num_kv_heads`` K/V heads;
    RoPE on all of q, k when ``rope_theta`` is set (NoPE when None). ``x (..., T, d_model)``."""

    q_proj: Linear
    k_proj: Linear
    v_proj: Linear
    o_proj: Linear
    num_heads: int = eqx.field(static=True)
    num_kv_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)
    rope_theta: float | None = eqx.field(static=True)

    def __init__(
        self, d_model, num_heads, num_kv_heads, head_dim, *, rope_theta=None, dtype=None, key
    ):
        d_model = check_int(d_model, "d_model", lower=1, upper=_DIM)
        self.num_heads, self.num_kv_heads = _check_heads(num_heads, num_kv_heads)
        self.head_dim = check_int(head_dim, "head_dim", lower=1, upper=_DIM)
        if rope_theta is not None and head_dim % 2:
            raise ValueError(f"`head_dim` must be even with RoPE; got {head_dim}.")
        self.rope_theta = rope_theta
        check_key(key)
        kq, kk, kv, ko = jax.random.split(key, 4)
        self.q_proj = Linear(d_model, num_heads * head_dim, False, dtype=dtype, key=kq)
        self.k_proj = Linear(d_model, num_kv_heads * head_dim, False, dtype=dtype, key=kk)
        self.v_proj = Linear(d_model, num_kv_heads * head_dim, False, dtype=dtype, key=kv)
        self.o_proj = Linear(num_heads * head_dim, d_model, False, dtype=dtype, key=ko)

    def __call__(self, x, *, key=None):
        T, g = x.shape[-2], self.num_heads // self.num_kv_heads
        q = _heads(self.q_proj(x), self.num_heads, self.head_dim)
        k = _heads(self.k_proj(x), self.num_kv_heads, self.head_dim)
        v = _heads(self.v_proj(x), self.num_kv_heads, self.head_dim)
        if self.rope_theta is not None:
            pos = jnp.arange(T)
            q, k = rope(q, pos, self.rope_theta), rope(k, pos, self.rope_theta)
        k, v = jnp.repeat(k, g, axis=-3), jnp.repeat(v, g, axis=-3)
        s = jnp.einsum("...td,...sd->...ts", q, k) / math.sqrt(self.head_dim)
        o = jnp.einsum("...ts,...sd->...td", _masked_softmax(s, jnp.arange(T), T), v)
        return self.o_proj(_merge(o))


class MLA(eqx.Module):
    """DeepSeek-V2 multi-head latent attention with ``num_kv_heads`` latent up-projection groups.

    Parameters: ``kv_rank`` r_kv (<= d_model and <= num_kv_heads (nope_dim + v_dim)); ``rope_dim``
    d_rope of the decoupled RoPE query/key (0: no positional encoding); ``nope_dim`` and ``v_dim``
    per head; ``q_rank`` None for a full-rank query. Scale (nope_dim + rope_dim)^{-1/2}.
    """

    q_down: Linear | None
    q_up: Linear
    kv_down: Linear
    kv_up: Linear
    o_proj: Linear
    num_heads: int = eqx.field(static=True)
    num_kv_heads: int = eqx.field(static=True)
    nope_dim: int = eqx.field(static=True)
    rope_dim: int = eqx.field(static=True)
    v_dim: int = eqx.field(static=True)
    kv_rank: int = eqx.field(static=True)
    rope_theta: float = eqx.field(static=True)

    def __init__(
        self,
        d_model,
        num_heads,
        num_kv_heads,
        *,
        kv_rank,
        nope_dim,
        v_dim,
        rope_dim=0,
        q_rank=None,
        rope_theta=10000.0,
        dtype=None,
        key,
    ):
        d_model = check_int(d_model, "d_model", lower=1, upper=_DIM)
        self.num_heads, self.num_kv_heads = _check_heads(num_heads, num_kv_heads)
        self.nope_dim = check_int(nope_dim, "nope_dim", lower=0, upper=_DIM)
        self.v_dim = check_int(v_dim, "v_dim", lower=1, upper=_DIM)
        self.rope_dim = check_int(rope_dim, "rope_dim", lower=0, upper=_DIM)
        if rope_dim % 2:
            raise ValueError(f"`rope_dim` must be even; got {rope_dim}.")
        if nope_dim + rope_dim < 1:
            raise ValueError("`nope_dim + rope_dim` must be >= 1; got 0.")
        kv_out = num_kv_heads * (nope_dim + v_dim)
        self.kv_rank = check_int(kv_rank, "kv_rank", lower=1, upper=min(d_model, kv_out))
        qk = nope_dim + rope_dim
        if q_rank is not None:
            q_rank = check_int(q_rank, "q_rank", lower=1, upper=min(d_model, num_heads * qk))
        self.rope_theta = check_scalar(rope_theta, "rope_theta", lower=0.0, closed="neither")
        check_key(key)
        k1, k2, k3, k4, k5 = jax.random.split(key, 5)
        if q_rank is None:
            self.q_down = None
            self.q_up = Linear(d_model, num_heads * qk, False, dtype=dtype, key=k1)
        else:
            self.q_down = Linear(d_model, q_rank, False, dtype=dtype, key=k1)
            self.q_up = Linear(q_rank, num_heads * qk, False, dtype=dtype, key=k2)
        self.kv_down = Linear(d_model, kv_rank + rope_dim, False, dtype=dtype, key=k3)
        self.kv_up = Linear(kv_rank, kv_out, False, dtype=dtype, key=k4)
        self.o_proj = Linear(num_heads * v_dim, d_model, False, dtype=dtype, key=k5)

    # pieces shared by the three paths
    def query(self, x, positions):
        """``(q_nope (..., H, T, nope), q_rope (..., H, T, rope))``, RoPE applied."""
        q = self.q_up(x if self.q_down is None else self.q_down(x))
        q = _heads(q, self.num_heads, self.nope_dim + self.rope_dim)
        return q[..., : self.nope_dim], rope(q[..., self.nope_dim :], positions, self.rope_theta)

    def latent(self, x, positions):
        """The cached per-token state: ``(c (..., T, kv_rank), k_rope (..., T, rope_dim))``."""
        a = self.kv_down(x)
        return a[..., : self.kv_rank], rope(a[..., self.kv_rank :], positions, self.rope_theta)

    def _up(self):
        w = self.kv_up.weight.reshape(self.num_kv_heads, self.nope_dim + self.v_dim, -1)
        return w[:, : self.nope_dim], w[:, self.nope_dim :]  # W^UK (G, nope, r), W^UV (G, v, r)

    def _scale(self):
        return 1.0 / math.sqrt(self.nope_dim + self.rope_dim)

    def __call__(self, x, *, absorbed=False, key=None):
        T = x.shape[-2]
        pos = jnp.arange(T)
        qc, qr = self.query(x, pos)
        c, kr = self.latent(x, pos)
        if absorbed:
            return self.attend_latent(qc, qr, c, kr, pos)
        g = self.num_heads // self.num_kv_heads
        kv = _heads(self.kv_up(c), self.num_kv_heads, self.nope_dim + self.v_dim)
        kc = jnp.repeat(kv[..., : self.nope_dim], g, axis=-3)
        v = jnp.repeat(kv[..., self.nope_dim :], g, axis=-3)
        s = (
            jnp.einsum("...htd,...hsd->...hts", qc, kc) + jnp.einsum("...htd,...sd->...hts", qr, kr)
        ) * self._scale()
        o = jnp.einsum("...hts,...hsd->...htd", _masked_softmax(s, pos, T), v)
        return self.o_proj(_merge(o))

    def attend_latent(self, qc, qr, c, kr, q_pos):
        """Absorbed attention of queries at ``q_pos`` to a latent cache ``c (..., S, r)``,
        ``kr (..., S, rope)``: scores (W^UK_j^T q^C_i) . c_s + q^R_i . k^R_s, output
        W^UV_j sum_s p_s c_s (DeepSeek-V2 Sec. 2.1.2)."""
        wuk, wuv = self._up()
        g = self.num_heads // self.num_kv_heads
        wuk, wuv = jnp.repeat(wuk, g, axis=0), jnp.repeat(wuv, g, axis=0)  # per query head
        q_lat = jnp.einsum("...htn,hnr->...htr", qc, wuk)
        s = (
            jnp.einsum("...htr,...sr->...hts", q_lat, c)
            + jnp.einsum("...htd,...sd->...hts", qr, kr)
        ) * self._scale()
        o_lat = jnp.einsum("...hts,...sr->...htr", _masked_softmax(s, q_pos, c.shape[-2]), c)
        return self.o_proj(_merge(jnp.einsum("...htr,hvr->...htv", o_lat, wuv)))


def _check_decode_input(x, d_model):
    x = check_array(x, "x", ndim=3, max_abs=1e30)
    if x.shape[-1] != d_model:
        raise ValueError(f"`x` must have last axis d_model = {d_model}; got {tuple(x.shape)}.")
    if np.dtype(x.dtype).kind != "f" or 0 in x.shape:
        raise TypeError(
            f"`x` must be a non-empty floating array (batch, T, d_model); got dtype {x.dtype}, "
            f"shape {tuple(x.shape)}."
        )
    return x


def gqa_decode(layer: GQAttention, x):
    """Cached decoding of ``x (B, T, d)`` one token at a time with a K/V cache ``(B, n_kv, T,
    d_h)`` each (RoPE applied at the token's position before caching); equals ``layer(x)``."""
    check_instance(layer, "layer", GQAttention)
    return _gqa_decode(layer, _check_decode_input(x, layer.q_proj.in_features))


@eqx.filter_jit
def _gqa_decode(layer, x):
    B, T, _ = x.shape
    G, dh, g = layer.num_kv_heads, layer.head_dim, layer.num_heads // layer.num_kv_heads

    def step(cache, t):
        kc, vc = cache
        xt = jax.lax.dynamic_slice_in_dim(x, t, 1, axis=1)
        q = _heads(layer.q_proj(xt), layer.num_heads, dh)  # (B, H, 1, dh)
        k = _heads(layer.k_proj(xt), G, dh)
        v = _heads(layer.v_proj(xt), G, dh)
        if layer.rope_theta is not None:
            q, k = rope(q, t[None], layer.rope_theta), rope(k, t[None], layer.rope_theta)
        kc = jax.lax.dynamic_update_slice_in_dim(kc, k, t, axis=2)
        vc = jax.lax.dynamic_update_slice_in_dim(vc, v, t, axis=2)
        qg = q.reshape(B, G, g, dh)  # query heads grouped by their KV head
        s = jnp.einsum("bgqd,bgsd->bgqs", qg, kc) / math.sqrt(dh)
        p = _masked_softmax(s.reshape(B, G * g, T), jnp.zeros(G * g, int) + t, T)
        o = jnp.einsum("bgqs,bgsd->bgqd", p.reshape(B, G, g, T), vc).reshape(B, G * g, 1, dh)
        return (kc, vc), layer.o_proj(_merge(o))[:, 0]

    dt = jnp.result_type(x.dtype, layer.k_proj.weight.dtype)
    init = (jnp.zeros((B, G, T, dh), dt), jnp.zeros((B, G, T, dh), dt))
    _, ys = jax.lax.scan(step, init, jnp.arange(T))
    return jnp.swapaxes(ys, 0, 1)


def mla_decode(layer: MLA, x):
    """Cached decoding of ``x (B, T, d)`` one token at a time on the latent cache
    ``(B, T, kv_rank + rope_dim)`` with absorbed weights; equals ``layer(x)``."""
    check_instance(layer, "layer", MLA)
    return _mla_decode(layer, _check_decode_input(x, layer.kv_down.in_features))


@eqx.filter_jit
def _mla_decode(layer, x):
    B, T, _ = x.shape
    dt = x.dtype

    def step(cache, t):
        c_cache, kr_cache = cache
        xt = jax.lax.dynamic_slice_in_dim(x, t, 1, axis=1)
        pos = t[None]
        qc, qr = layer.query(xt, pos)
        c, kr = layer.latent(xt, pos)
        c_cache = jax.lax.dynamic_update_slice_in_dim(c_cache, c, t, axis=1)
        kr_cache = jax.lax.dynamic_update_slice_in_dim(kr_cache, kr, t, axis=1)
        out = layer.attend_latent(qc, qr, c_cache, kr_cache, pos)
        return (c_cache, kr_cache), out[:, 0]

    init = (jnp.zeros((B, T, layer.kv_rank), dt), jnp.zeros((B, T, layer.rope_dim), dt))
    _, ys = jax.lax.scan(step, init, jnp.arange(T))
    return jnp.swapaxes(ys, 0, 1)


def svd_factor(W, rank):
    """Truncated SVD ``W ~ U_r (S_r V_r^T)``: returns ``(up (m, r), down (r, n), tail)`` with
    ``tail = sqrt(sum_{i>r} s_i^2)``, the Frobenius error (Eckart & Young 1936).

    Examples
    --------
    >>> up, down, tail = svd_factor(np.diag([3.0, 2.0, 1.0]), 2)
    >>> up.shape, down.shape, round(tail, 6)  # the error is the dropped singular value
    ((3, 2), (2, 3), 1.0)
    """
    W = as_array(W, "W", ndim=2, min_size=1, lower=-1e100, upper=1e100)
    rank = check_int(rank, "rank", lower=1, upper=min(W.shape))
    U, s, Vt = np.linalg.svd(W, full_matrices=False)
    return U[:, :rank], s[:rank, None] * Vt[:rank], float(np.sqrt(np.sum(s[rank:] ** 2)))


def mla_from_gqa(gqa: GQAttention, kv_rank, *, rope_dim=0, q_rank=None, key=None):
    """Structured MLA init from a teacher GQA layer (Zebra-Llama Alg. 1; module docstring).

    Per KV head j the kept rows are [W^K_j[:nope]; W^V_j] (nope = d_h - rope_dim), stacked over j
    and factorised by :func:`svd_factor`; the RoPE key rows are the mean over j of W^K_j[nope:]; W^Q
    is copied (``q_rank=None``) or factorised; W^O copied. ``rope_theta`` is the teacher's (10000 if
    NoPE). Returns ``(mla, info)`` with ``info = {"kv_tail": ..., "kv_norm": ...}``.
    """
    check_instance(gqa, "gqa", GQAttention)
    H, G, dh = gqa.num_heads, gqa.num_kv_heads, gqa.head_dim
    rope_dim = check_int(rope_dim, "rope_dim", lower=0, upper=dh)
    nope = dh - rope_dim
    d = gqa.q_proj.in_features
    dtype = gqa.q_proj.weight.dtype
    mla = MLA(
        d,
        H,
        G,
        kv_rank=kv_rank,
        nope_dim=nope,
        v_dim=dh,
        rope_dim=rope_dim,
        q_rank=q_rank,
        rope_theta=gqa.rope_theta or 10000.0,
        dtype=dtype,
        key=jax.random.key(0) if key is None else key,
    )
    WK = np.asarray(gqa.k_proj.weight, np.float64).reshape(G, dh, d)
    WV = np.asarray(gqa.v_proj.weight, np.float64).reshape(G, dh, d)
    stacked = np.concatenate([WK[:, :nope], WV], axis=1).reshape(G * (nope + dh), d)
    up, down, tail = svd_factor(stacked, kv_rank)
    down = np.concatenate([down, WK[:, nope:].mean(0)], axis=0)
    WQ = np.asarray(gqa.q_proj.weight, np.float64)
    cast = lambda a: jnp.asarray(a, dtype)  # noqa: E731
    mla = eqx.tree_at(
        lambda m: (m.kv_up.weight, m.kv_down.weight, m.o_proj.weight),
        mla,
        (cast(up), cast(down), gqa.o_proj.weight),
    )
    if q_rank is None:
        mla = eqx.tree_at(lambda m: m.q_up.weight, mla, cast(WQ))
    else:
        qu, qd, _ = svd_factor(WQ, q_rank)
        mla = eqx.tree_at(lambda m: (m.q_up.weight, m.q_down.weight), mla, (cast(qu), cast(qd)))
    return mla, {"kv_tail": tail, "kv_norm": float(np.linalg.norm(stacked))}
