"""Mamba2 (SSD) layer: a sequential scan and the chunked parallel form, and its init from attention.

Dao & Gu 2024, *Transformers are SSMs* (arXiv 2405.21060): per head, with scalar decay A < 0,

    H_t = exp(dt_t A) H_{t-1} + dt_t x_t B_t^T        (H_t: headdim x d_state)
    y_t = H_t C_t + D x_t                               (Sec. 3, eq. 2 with scalar-times-identity A)

- :func:`ssd_scan`: the recurrence by ``lax.scan`` (the decode path: constant state per step).
- :func:`ssd_chunked`: the state-space-dual block form (Sec. 6, "SSD algorithm"): inside a chunk of
  length Q the quadratic masked form y = (L o C B^T) (dt x) with L_ts = exp(sum_{s<u<=t} dt_u A);
  across chunks the states are passed by a scan over chunks. Zero-padded to a multiple of Q with
  dt = 0 (no input, no decay), so any length is exact.
- :class:`Mamba2`: Zebra-Llama's Mamba2 block (arXiv 2505.17272, Sec. 3; MambaInLlama, Wang et al.
  2024): in_proj rows [z | x | B | C | dt] with x, B at KV width (n_kv heads, repeated to n_h as in
  GQA), C at query width, headdim = d_state = d_h, a causal depthwise conv + SiLU on [x, B, C],
  gated RMSNorm(y * SiLU(z)) and out_proj.
- :func:`mamba2_decode`: recurrent decoding one token at a time on a constant-size state (the
  last ``d_conv - 1`` conv inputs and the SSM state ``(n_h, d_h, d_state)``), equal to
  ``Mamba2(u)``; its per-token cost does not grow with the context.
- :func:`mamba2_from_gqa`: the attention init (MambaInLlama ``init_with_kqvo``): x <- W^V, B <- W^K,
  C <- W^Q, out_proj <- W^O. With A = 0, dt = 1, D = 0 and no conv/gate/norm the layer is causal
  linear attention y_t = sum_{s<=t} (C_t . B_s) x_s, i.e. the teacher's attention without softmax.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    _is_tracer,
    check_array,
    check_instance,
    check_int,
    check_key,
    check_memory,
)

from ._layers import Linear
from .mla import GQAttention

__all__ = ["ssd_scan", "ssd_chunked", "Mamba2", "mamba2_decode", "mamba2_from_gqa"]


def _check_ssd(x, dt, A, B, C):
    """Check ``x (..., T, H, P)``, ``dt (..., T, H)`` >= 0, ``A (H,)`` <= 0 and ``B``, ``C``
    ``(..., T, H, N)``."""
    x = check_array(x, "x", min_ndim=3, max_abs=1e100)
    *lead, T, H, _ = x.shape
    dt = check_array(dt, "dt", max_abs=1e100)
    A = check_array(A, "A", ndim=1, max_abs=1e100)
    B = check_array(B, "B", min_ndim=3, max_abs=1e100)
    C = check_array(C, "C", min_ndim=3, max_abs=1e100)
    for name, a, want in (("dt", dt, (*lead, T, H)), ("A", A, (H,))):
        if tuple(a.shape) != want:
            raise ValueError(f"`{name}` must have shape {want}; got {tuple(a.shape)}.")
    for name, a in (("B", B), ("C", C)):
        if tuple(a.shape[:-1]) != (*lead, T, H) or a.shape[-1] < 1:
            raise ValueError(f"`{name}` must have shape {(*lead, T, H)} + (N,); got {a.shape}.")
    if 0 in x.shape:
        raise ValueError(f"`x` must be non-empty; got shape {x.shape}.")
    if not _is_tracer(dt) and np.asarray(dt).min() < 0:
        raise ValueError(f"`dt` must be >= 0 (step sizes); got min {float(np.min(dt)):.3g}.")
    if not _is_tracer(A) and np.asarray(A).max() > 0:
        raise ValueError(f"`A` must be <= 0 (a decaying state); got max {float(np.max(A)):.3g}.")
    return x, dt, A, B, C


def ssd_scan(x, dt, A, B, C, state=None):
    """Sequential SSD recurrence.

    ``x (..., T, H, P)``, ``dt (..., T, H)`` (> 0), ``A (H,)`` (<= 0), ``B, C (..., T, H, N)``;
    ``state (..., H, P, N)`` or None (zeros). Returns ``(y (..., T, H, P), final state)``.

    Examples
    --------
    >>> ones = jnp.ones((3, 1, 1))  # T = 3 steps of one head, P = N = 1
    >>> y, state = ssd_scan(ones, jnp.ones((3, 1)), jnp.array([-jnp.log(2.0)]), ones, ones)
    >>> [round(float(v), 5) for v in y[:, 0, 0]]  # h_t = exp(dt A) h_{t-1} + x_t = h_{t-1} / 2 + 1
    [1.0, 1.5, 1.75]
    """
    x, dt, A, B, C = _check_ssd(x, dt, A, B, C)
    if state is not None:
        state = check_array(state, "state", max_abs=1e100)
        if state.shape != (*x.shape[:-3], x.shape[-2], x.shape[-1], B.shape[-1]):
            raise ValueError(f"`state` must have shape (..., H, P, N); got {state.shape}.")
    if state is None:
        state = jnp.zeros((*x.shape[:-3], x.shape[-2], x.shape[-1], B.shape[-1]), x.dtype)

    def step(Hs, inp):
        xt, dtt, Bt, Ct = inp
        Hs = (
            jnp.exp(dtt * A)[..., None, None] * Hs
            + (dtt[..., None] * xt)[..., :, None] * Bt[..., None, :]
        )
        return Hs, jnp.einsum("...hpn,...hn->...hp", Hs, Ct)

    mv = lambda a: jnp.moveaxis(a, -3 if a.ndim == x.ndim else -2, 0)  # noqa: E731
    state, ys = jax.lax.scan(step, state, (mv(x), mv(dt), mv(B), mv(C)))
    return jnp.moveaxis(ys, 0, -3), state


def ssd_chunked(x, dt, A, B, C, chunk=16):
    """Chunked (state-space dual) evaluation of :func:`ssd_scan`; same arguments and output
    (without an initial state). Exact for any length (padding with dt = 0)."""
    chunk = check_int(chunk, "chunk", lower=1, upper=2**16)
    x, dt, A, B, C = _check_ssd(x, dt, A, B, C)
    T = x.shape[-3]
    chunk = min(chunk, T)  # a longer chunk only pads: the same result, exact for any chunk
    n_chunks = -(-T // chunk)
    lead = math.prod(x.shape[:-3]) * x.shape[-2]  # batch * heads
    check_memory(lead * n_chunks * chunk**2, "`chunk`, `x`", what="the intra-chunk decays")
    pad = (-T) % chunk
    if pad:

        def padT(a):
            return jnp.pad(
                a,
                [(0, 0)] * (a.ndim - (3 if a.ndim == x.ndim else 2))
                + [(0, pad)]
                + [(0, 0)] * (2 if a.ndim == x.ndim else 1),
            )

        x, dt, B, C = padT(x), padT(dt), padT(B), padT(C)
    nc = x.shape[-3] // chunk
    ch = lambda a, k: a.reshape(*a.shape[: -k - 1], nc, chunk, *a.shape[-k:])  # noqa: E731
    x, B, C, dt = ch(x, 2), ch(B, 2), ch(C, 2), ch(dt, 1)  # (..., nc, Q, H, .)
    a = dt * A  # (..., nc, Q, H) log decays
    cs = jnp.cumsum(a, axis=-2)
    # intra-chunk: L[t, s] = exp(cs_t - cs_s) for s <= t
    diff = cs[..., :, None, :] - cs[..., None, :, :]  # (..., nc, Qt, Qs, H)
    tri = jnp.tril(jnp.ones((chunk, chunk), bool))[:, :, None]
    Lmat = jnp.exp(jnp.where(tri, diff, -jnp.inf))
    xdt = x * dt[..., None]
    scores = jnp.einsum("...thn,...shn->...tsh", C, B) * Lmat
    y = jnp.einsum("...tsh,...shp->...thp", scores, xdt)
    # state contributed by each chunk, and the decay across it
    to_end = jnp.exp(cs[..., -1:, :] - cs)  # (..., nc, Q, H)
    S = jnp.einsum("...sh,...shp,...shn->...hpn", to_end, xdt, B)  # (..., nc, H, P, N)
    decay = jnp.exp(cs[..., -1, :])  # (..., nc, H)

    def carry(Hs, inp):
        Sc, dc = inp
        return dc[..., None, None] * Hs + Sc, Hs  # output: state entering this chunk

    H0 = jnp.zeros_like(S[..., 0, :, :, :])
    _, H_in = jax.lax.scan(carry, H0, (jnp.moveaxis(S, -4, 0), jnp.moveaxis(decay, -2, 0)))
    H_in = jnp.moveaxis(H_in, 0, -4)  # (..., nc, H, P, N)
    y = y + jnp.einsum("...th,...hpn,...thn->...thp", jnp.exp(cs), H_in, C)
    y = y.reshape(*y.shape[:-4], nc * chunk, *y.shape[-2:])
    return y[..., :T, :, :]


class Mamba2(eqx.Module):
    """Zebra-Llama / MambaInLlama Mamba2 block (module docstring); ``x (..., T, d_model)``.

    ``num_heads`` n_h SSM heads of ``head_dim`` (= d_state), x and B from ``num_kv_heads`` groups.
    ``mode="chunked"`` (default) or ``"scan"``; both give the same output.
    """

    in_proj: Linear
    conv_weight: jax.Array
    conv_bias: jax.Array
    dt_bias: jax.Array
    A_log: jax.Array
    D: jax.Array
    norm_scale: jax.Array
    out_proj: Linear
    num_heads: int = eqx.field(static=True)
    num_kv_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)
    chunk: int = eqx.field(static=True)

    def __init__(
        self, d_model, num_heads, num_kv_heads, head_dim, *, d_conv=4, chunk=16, dtype=None, key
    ):
        from .mla import _check_heads

        self.num_heads, self.num_kv_heads = _check_heads(num_heads, num_kv_heads)
        check_int(d_model, "d_model", lower=1, upper=2**16)
        self.head_dim = check_int(head_dim, "head_dim", lower=1, upper=2**16)
        d_conv = check_int(d_conv, "d_conv", lower=1, upper=2**10)
        self.chunk = check_int(chunk, "chunk", lower=1, upper=2**16)
        inner, xb = num_heads * head_dim, num_kv_heads * head_dim
        check_key(key)
        k1, k2, k3, k4 = jax.random.split(key, 4)
        self.in_proj = Linear(d_model, 2 * inner + 2 * xb + num_heads, False, dtype=dtype, key=k1)
        dtype = self.in_proj.weight.dtype
        ch = inner + 2 * xb
        lim = 1 / math.sqrt(d_conv)
        self.conv_weight = jax.random.uniform(k2, (ch, d_conv), dtype, -lim, lim)
        self.conv_bias = jnp.zeros((ch,), dtype)
        # dt ~ logU[1e-3, 0.1] through softplus^{-1}; A ~ U[1, 16] (Mamba2 defaults)
        dt = jnp.exp(jax.random.uniform(k3, (num_heads,), dtype, math.log(1e-3), math.log(0.1)))
        self.dt_bias = dt + jnp.log(-jnp.expm1(-dt))
        self.A_log = jnp.log(jax.random.uniform(k4, (num_heads,), dtype, 1.0, 16.0))
        self.D = jnp.ones((num_heads,), dtype)
        self.norm_scale = jnp.ones((inner,), dtype)
        self.out_proj = Linear(inner, d_model, False, dtype=dtype, key=jax.random.fold_in(key, 9))

    def _split(self, zxbcdt):
        inner, xb = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        idx = np.cumsum([inner, xb, xb, inner])
        return jnp.split(zxbcdt, idx, axis=-1)  # z, x, B, C, dt

    def _gate_out(self, y, x, z):
        H, P = self.num_heads, self.head_dim
        y = (y + self.D[:, None] * x).reshape(*y.shape[:-2], H * P) * jax.nn.silu(z)
        g = y.reshape(*y.shape[:-1], H, P)  # gated RMSNorm, group size head_dim
        g = g * jax.lax.rsqrt(jnp.mean(g**2, axis=-1, keepdims=True) + 1e-6)
        return self.out_proj(g.reshape(y.shape) * self.norm_scale)

    def _heads(self, x, B, C):
        H, G, P = self.num_heads, self.num_kv_heads, self.head_dim
        x = jnp.repeat(x.reshape(*x.shape[:-1], G, P), H // G, axis=-2)
        B = jnp.repeat(B.reshape(*B.shape[:-1], G, P), H // G, axis=-2)
        return x, B, C.reshape(*C.shape[:-1], H, P)

    def step(self, u_t, state):
        """One decode step: ``u_t (..., d_model)`` and ``state = (conv window (..., d_conv - 1,
        channels), SSM state (..., n_h, d_h, d_state))`` -> ``(y_t, new state)``."""
        window, Hs = state
        z, x, B, C, dt = self._split(self.in_proj(u_t))
        xBC = jnp.concatenate([x, B, C], axis=-1)
        full = jnp.concatenate([window, xBC[..., None, :]], axis=-2)  # oldest first
        conv = jnp.einsum("...kc,ck->...c", full, self.conv_weight)
        x, B, C = jnp.split(
            jax.nn.silu(conv + self.conv_bias), np.cumsum([x.shape[-1], B.shape[-1]]), axis=-1
        )
        x, B, C = self._heads(x, B, C)
        dt = jax.nn.softplus(dt + self.dt_bias)
        A = -jnp.exp(self.A_log)
        Hs = (
            jnp.exp(dt * A)[..., None, None] * Hs
            + (dt[..., None] * x)[..., :, None] * B[..., None, :]
        )
        y = jnp.einsum("...hpn,...hn->...hp", Hs, C)
        return self._gate_out(y, x, z), (full[..., 1:, :], Hs)

    def __call__(self, u, *, mode="chunked", key=None):
        T = u.shape[-2]
        z, x, B, C, dt = self._split(self.in_proj(u))
        xBC = jnp.concatenate([x, B, C], axis=-1)
        K = self.conv_weight.shape[-1]
        padded = jnp.pad(xBC, [(0, 0)] * (xBC.ndim - 2) + [(K - 1, 0), (0, 0)])
        conv = sum(padded[..., k : k + T, :] * self.conv_weight[:, k] for k in range(K))
        x, B, C = jnp.split(
            jax.nn.silu(conv + self.conv_bias), np.cumsum([x.shape[-1], B.shape[-1]]), axis=-1
        )
        x, B, C = self._heads(x, B, C)
        dt = jax.nn.softplus(dt + self.dt_bias)
        A = -jnp.exp(self.A_log)
        if mode == "scan":
            y, _ = ssd_scan(x, dt, A, B, C)
        elif mode == "chunked":
            y = ssd_chunked(x, dt, A, B, C, self.chunk)
        else:
            raise ValueError(f"`mode` must be 'chunked' or 'scan'; got {mode!r}.")
        return self._gate_out(y, x, z)


def mamba2_decode(layer: Mamba2, u):
    """Recurrent decoding of ``u (B, T, d_model)`` by :meth:`Mamba2.step` from a zero state (the
    constant-size decode cache); equals ``layer(u)``."""
    check_instance(layer, "layer", Mamba2)
    u = check_array(u, "u", ndim=3, max_abs=1e30)
    d = layer.in_proj.in_features
    if u.shape[-1] != d or np.dtype(u.dtype).kind != "f" or 0 in u.shape:
        raise ValueError(
            f"`u` must be a non-empty floating array (batch, T, {d}); got dtype {u.dtype}, "
            f"shape {tuple(u.shape)}."
        )
    return _mamba2_decode(layer, u)


@eqx.filter_jit
def _mamba2_decode(layer, u):
    Bsz = u.shape[0]
    ch = layer.conv_weight.shape[0]
    dt = jnp.result_type(u.dtype, layer.in_proj.weight.dtype)
    state = (
        jnp.zeros((Bsz, layer.conv_weight.shape[1] - 1, ch), dt),
        jnp.zeros((Bsz, layer.num_heads, layer.head_dim, layer.head_dim), dt),
    )
    _, ys = jax.lax.scan(lambda s, ut: layer.step(ut, s)[::-1], state, jnp.swapaxes(u, 0, 1))
    return jnp.swapaxes(ys, 0, 1)


def mamba2_from_gqa(gqa: GQAttention, *, chunk=16, key):
    """Mamba2 initialised from a teacher GQA layer (MambaInLlama ``init_with_kqvo``): the x, B, C
    rows of ``in_proj`` take W^V, W^K, W^Q and ``out_proj`` takes W^O; z and dt rows, conv, A, D and
    dt_bias keep their default init."""
    check_instance(gqa, "gqa", GQAttention)
    d = gqa.q_proj.in_features
    m = Mamba2(
        d,
        gqa.num_heads,
        gqa.num_kv_heads,
        gqa.head_dim,
        chunk=chunk,
        dtype=gqa.q_proj.weight.dtype,
        key=key,
    )
    inner, xb = gqa.num_heads * gqa.head_dim, gqa.num_kv_heads * gqa.head_dim
    W = m.in_proj.weight
    W = W.at[inner : inner + xb].set(gqa.v_proj.weight)
    W = W.at[inner + xb : inner + 2 * xb].set(gqa.k_proj.weight)
    W = W.at[inner + 2 * xb : 2 * inner + 2 * xb].set(gqa.q_proj.weight)
    return eqx.tree_at(lambda t: (t.in_proj.weight, t.out_proj.weight), m, (W, gqa.o_proj.weight))
