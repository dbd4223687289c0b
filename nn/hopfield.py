"""Modern Hopfield attention (MHA): attention logits carried across layers as a Hopfield hidden
state.

Masumura & Taki, *On the Role of Hidden States of Modern Hopfield Network in Transformer*, NeurIPS
2025 (arXiv 2511.20698). An explicit Euler step of the continuous modern Hopfield network with the
step index read as the layer index gives, per head,

    h_n     = alpha' h_{n-1} + (1 - alpha') S_n,      S_n = Q_n K_n^T * scale
    x_{n+1} = alpha x_n + (1 - alpha) softmax(h_n) V_n

(the paper's MHA update; alpha' = 0 is ordinary attention, the adiabatic limit). No parameter is
added: ``alpha`` and ``alpha_prime`` are fixed scalars.

Choices the paper's body could not be read for (documented, exposed as arguments):

- ``init="first"`` (default): h_1 = S_1, the first layer is plain attention (as the public
  re-implementation); ``init="zero"``: h_0 = 0, so h_1 = (1 - alpha') S_1.
- ``scale`` defaults to 1/sqrt(head_dim) (the Transformer's); 1/sqrt(2 head_dim) is one argument
away.
- ``alpha`` replaces the residual around attention only; the MLP keeps its residual unless
  ``mlp_residual=False`` (the skip-free experiments). ``alpha=None`` is the ordinary residual
  x + Attn(x), so ``alpha=None, alpha_prime=0`` is exactly :class:`nn.TransformerBlock`.
- The hidden state is kept **unmasked**; the causal mask acts inside the softmax only, so
  alpha' in {0, 1} never forms 0 * (-inf).

Cached decoding: the query row of layer n at step t needs only h_n[t, :t+1] = alpha' h_{n-1}[t,
:t+1]
+ (1 - alpha') s_n[t, :t+1], the same row one layer down, so decoding passes one row per head up the
stack and adds no cache across time (:func:`decode`, equal to the full prefill).
"""

from __future__ import annotations

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    _is_tracer,
    check_array,
    check_bool,
    check_choice,
    check_int,
    check_key,
    check_scalar,
)

from ._layers import MLP, Embedding, Linear, RMSNorm, TransformerLM, _keys, default_float

__all__ = [
    "hidden_update",
    "hopfield_attention",
    "HopfieldAttention",
    "HopfieldBlock",
    "hopfield_block",
    "hopfield_lm",
    "decode",
    "HopfieldViT",
    "patchify",
]


_DIM = 2**16  # widths, heads and head sizes beyond this cannot be allocated on one machine


def _dims(**dims):
    """Check each named width as an integer in [1, 2**16] (counts of layers: [0, 10_000])."""
    for name, v in dims.items():
        if name == "num_layers":
            check_int(v, name, lower=0, upper=10_000)
        else:
            check_int(v, name, lower=1, upper=2**24 if name == "num_patches" else _DIM)


def _arr(x, name, min_ndim):
    """A real array of at least ``min_ndim`` axes, finite and moderate when concrete."""
    return check_array(x, name, min_ndim=min_ndim, max_abs=1e100)


def _check_alpha(v, name, allow_none=False):
    if v is None and allow_none:
        return None
    return check_scalar(v, name, lower=0.0, upper=1.0)


def hidden_update(h_prev, s, alpha_prime):
    """Hopfield hidden-state step ``h_n = alpha' h_{n-1} + (1 - alpha') S_n``.

    Masumura & Taki 2025, MHA update (explicit Euler step of the MCHN hidden state with
    alpha' = 1 - dt/tau_h).

    Examples
    --------
    >>> hidden_update(jnp.zeros(2), jnp.ones(2), 0.75).tolist()  # 0.75 * 0 + 0.25 * 1
    [0.25, 0.25]
    """
    h_prev, s = _arr(h_prev, "h_prev", 0), _arr(s, "s", 0)
    if h_prev.shape != s.shape:
        raise ValueError(f"`h_prev` and `s` must have one shape; got {h_prev.shape}, {s.shape}.")
    if not _is_tracer(alpha_prime):
        _check_alpha(alpha_prime, "alpha_prime")
    return alpha_prime * h_prev + (1.0 - alpha_prime) * s


def hopfield_attention(
    q,
    k,
    v,
    h_prev=None,
    *,
    alpha_prime,
    causal=True,
    scale=None,
    init="first",
    q_offset=None,
    return_weights=False,
):
    """Modern Hopfield attention of one layer: ``softmax(h) v`` with ``h`` the carried logits.

    Parameters
    ----------
    q : ``(..., H, Tq, dh)``; k, v : ``(..., H, Tk, dh)``.
    h_prev : ``(..., H, Tq, Tk)`` hidden state of the layer below, or None at the first layer.
    alpha_prime : float in [0, 1], the weight of the carried state.
    causal : mask key j for query i unless ``j <= q_offset + i``.
    scale : logit scale, default ``1/sqrt(dh)``.
    init : ``"first"`` (h_1 = S_1) or ``"zero"`` (h_0 = 0); used when ``h_prev`` is None.
    q_offset : position of the first query row, an int in ``[0, Tk)`` (or a traced int); default
        ``Tk - Tq`` (causal attention then needs ``Tq <= Tk``).

    Returns ``(out (..., H, Tq, dh), h (..., H, Tq, Tk))`` and the weights if asked. ``h`` is never
    masked (Masumura & Taki 2025, MHA; the mask acts in the softmax only).

    Examples
    --------
    >>> q = k = jnp.ones((1, 2, 1))  # one head, two tokens, d_h = 1
    >>> v, h0 = jnp.array([[[1.0], [3.0]]]), jnp.zeros((1, 2, 2))
    >>> out, h = hopfield_attention(q, k, v, h0, alpha_prime=1.0)  # only the carried h = 0 counts
    >>> out[0, :, 0].tolist()  # uniform causal weights: the running means of v
    [1.0, 2.0]
    """
    if not _is_tracer(alpha_prime):
        _check_alpha(alpha_prime, "alpha_prime")
    check_choice(init, "init", ("first", "zero"))
    causal, return_weights = (
        check_bool(causal, "causal"),
        check_bool(return_weights, "return_weights"),
    )
    q, k, v = _arr(q, "q", 2), _arr(k, "k", 2), _arr(v, "v", 2)
    if k.shape != v.shape or q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"`q`, `k`, `v` must have shapes (..., H, Tq, dh), (..., H, Tk, dh) twice; got "
            f"{q.shape}, {k.shape}, {v.shape}."
        )
    if 0 in q.shape or 0 in k.shape:
        raise ValueError(f"`q` and `k` must be non-empty; got {q.shape}, {k.shape}.")
    if scale is not None and not _is_tracer(scale):
        scale = check_scalar(scale, "scale", lower=0.0, upper=1e50, closed="right")
    if h_prev is not None:
        h_prev = _arr(h_prev, "h_prev", 2)
    Tq, Tk = q.shape[-2], k.shape[-2]
    if q_offset is not None:  # every query row must see key 0: no empty softmax row
        if _is_tracer(q_offset):
            if q_offset.ndim or np.dtype(q_offset.dtype).kind not in "iu":
                raise TypeError(f"`q_offset` must be an integer scalar; got {q_offset.dtype}.")
        else:
            q_offset = check_int(q_offset, "q_offset", lower=0, upper=Tk - 1)
    elif causal and Tq > Tk:
        raise ValueError(
            f"`q` must have at most as many rows as `k` when causal (the first query sits at "
            f"position Tk - Tq); got Tq = {Tq} > Tk = {Tk}: give `q_offset` or more keys."
        )
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = jnp.einsum("...td,...sd->...ts", q, k) * scale
    if h_prev is None:
        h = s if init == "first" else (1.0 - alpha_prime) * s
    else:
        h = hidden_update(h_prev, s, alpha_prime)
    logits = h
    if causal:
        off = Tk - Tq if q_offset is None else q_offset
        mask = jnp.arange(Tk)[None, :] <= (off + jnp.arange(Tq))[:, None]
        logits = jnp.where(mask, h, -jnp.inf)
    w = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("...ts,...sd->...td", w, v)
    return (out, h, w) if return_weights else (out, h)


class HopfieldAttention(eqx.Module):
    """Multi-head MHA with the four maps of :class:`nn.CausalSelfAttention` (same parameters).

    ``attn(x, h_prev) -> (out, h)``, ``x`` of shape ``(..., T, d_model)``. The key consumption of
    ``__init__`` mirrors ``CausalSelfAttention``, so equal keys give equal weights.
    """

    q_proj: Linear
    k_proj: Linear
    v_proj: Linear
    o_proj: Linear
    num_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)
    alpha_prime: float = eqx.field(static=True)
    causal: bool = eqx.field(static=True)
    scale: float | None = eqx.field(static=True)
    init: str = eqx.field(static=True)

    def __init__(
        self,
        d_model,
        num_heads,
        *,
        alpha_prime,
        causal=True,
        scale=None,
        init="first",
        use_bias=False,
        dtype=None,
        key,
    ):
        _dims(d_model=d_model, num_heads=num_heads)
        if d_model % num_heads:
            raise ValueError(f"`num_heads` must divide d_model={d_model}; got {num_heads}.")
        self.alpha_prime = check_scalar(alpha_prime, "alpha_prime", lower=0.0, upper=1.0)
        self.init = check_choice(init, "init", ("first", "zero"))
        if scale is not None:
            scale = check_scalar(scale, "scale", lower=0.0, closed="neither")
        self.scale, self.causal = scale, check_bool(causal, "causal")
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        check_key(key)
        kq, kk, kv, ko = jax.random.split(key, 4)
        self.q_proj = Linear(d_model, d_model, use_bias, dtype=dtype, key=kq)
        self.k_proj = Linear(d_model, d_model, use_bias, dtype=dtype, key=kk)
        self.v_proj = Linear(d_model, d_model, use_bias, dtype=dtype, key=kv)
        self.o_proj = Linear(d_model, d_model, use_bias, dtype=dtype, key=ko)

    def _heads(self, y):
        y = y.reshape(*y.shape[:-1], self.num_heads, self.head_dim)
        return jnp.swapaxes(y, -2, -3)  # (..., H, T, dh)

    def _merge(self, o, key):
        o = jnp.swapaxes(o, -2, -3)
        return self.o_proj(o.reshape(*o.shape[:-2], -1), key=key)

    def _attend(self, q, k, v, h_prev, q_offset=None):
        return hopfield_attention(
            q,
            k,
            v,
            h_prev,
            alpha_prime=self.alpha_prime,
            causal=self.causal,
            scale=self.scale,
            init=self.init,
            q_offset=q_offset,
        )

    def __call__(self, x, h_prev=None, *, key=None):
        kq, kk, kv, ko = _keys(key, 4)
        q = self._heads(self.q_proj(x, key=kq))
        k = self._heads(self.k_proj(x, key=kk))
        v = self._heads(self.v_proj(x, key=kv))
        out, h = self._attend(q, k, v, h_prev)[:2]
        return self._merge(out, ko), h

    def decode_step(self, x_t, h_row, k_cache, v_cache, t):
        """One cached step: ``x_t (B, 1, d)`` at position ``t``; caches ``(B, H, T_max, dh)``.

        Writes this token's key and value at ``t``, attends over positions ``<= t`` and returns
        ``(out (B, 1, d), h_row (B, H, 1, T_max), k_cache, v_cache)``; ``h_row`` is the only
        state passed to the next layer (columns beyond ``t`` are never read through the mask).
        """
        q = self._heads(self.q_proj(x_t))
        k = self._heads(self.k_proj(x_t))
        v = self._heads(self.v_proj(x_t))
        k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, k, t, axis=-2)
        v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, v, t, axis=-2)
        out, h = self._attend(q, k_cache, v_cache, h_row, q_offset=t)[:2]
        return self._merge(out, None), h, k_cache, v_cache


class HopfieldBlock(eqx.Module):
    """Pre-norm block with MHA (Masumura & Taki 2025, arXiv 2511.20698, Sec. 3): ``x <-
    alpha x + (1 - alpha) Attn(norm x)`` (``alpha=None``: ``x + Attn(norm x)``), then ``x <- x +
    MLP(norm x)`` (``mlp_residual=False``: ``MLP(norm x)``).

    Called as ``blk(x, h_prev) -> (x, h)`` (``carries_state``; :class:`nn.TransformerLM` passes the
    state up its stack). With ``alpha=None, alpha_prime=0`` it equals :class:`nn.TransformerBlock`
    built from the same key.
    """

    carries_state = True

    norm1: RMSNorm
    attn: HopfieldAttention
    norm2: RMSNorm
    mlp: MLP
    alpha: float | None = eqx.field(static=True)
    mlp_residual: bool = eqx.field(static=True)

    def __init__(
        self,
        d_model,
        num_heads,
        *,
        alpha_prime,
        alpha=None,
        mlp_residual=True,
        causal=True,
        scale=None,
        init="first",
        mlp_ratio=4,
        use_bias=False,
        dtype=None,
        key,
    ):
        _dims(d_model=d_model, num_heads=num_heads, mlp_ratio=mlp_ratio)
        check_bool(mlp_residual, "mlp_residual")
        check_key(key)
        ka, km = jax.random.split(key)
        self.norm1 = RMSNorm(d_model, dtype=dtype)
        self.attn = HopfieldAttention(
            d_model,
            num_heads,
            alpha_prime=alpha_prime,
            causal=causal,
            scale=scale,
            init=init,
            use_bias=use_bias,
            dtype=dtype,
            key=ka,
        )
        self.norm2 = RMSNorm(d_model, dtype=dtype)
        self.mlp = MLP(
            d_model, d_model, mlp_ratio * d_model, 1, use_bias=use_bias, dtype=dtype, key=km
        )
        self.alpha = _check_alpha(alpha, "alpha", allow_none=True)
        self.mlp_residual = bool(mlp_residual)

    def _skip(self, x, a):
        return x + a if self.alpha is None else self.alpha * x + (1.0 - self.alpha) * a

    def _mlp(self, x, key=None):
        m = self.mlp(self.norm2(x), key=key)
        return x + m if self.mlp_residual else m

    def __call__(self, x, h_prev=None, *, key=None):
        ka, km = _keys(key, 2)
        a, h = self.attn(self.norm1(x), h_prev, key=ka)
        return self._mlp(self._skip(x, a), km), h

    def decode_step(self, x_t, h_row, k_cache, v_cache, t):
        a, h_row, k_cache, v_cache = self.attn.decode_step(
            self.norm1(x_t), h_row, k_cache, v_cache, t
        )
        return self._mlp(self._skip(x_t, a)), h_row, k_cache, v_cache


def hopfield_block(*, alpha_prime, alpha=None, mlp_residual=True, scale=None, init="first"):
    """The ``block`` factory of :class:`nn.TransformerLM` that builds :class:`HopfieldBlock`s.

    >>> import jax, nn
    >>> lm = nn.TransformerLM(32, 16, 2, 3, 8, block=hopfield_block(alpha_prime=0.5, alpha=0.5),
    ...                       key=jax.random.key(0))
    """
    _check_alpha(alpha_prime, "alpha_prime")
    _check_alpha(alpha, "alpha", allow_none=True)
    check_bool(mlp_residual, "mlp_residual")  # here, not at the first model built
    check_choice(init, "init", ("first", "zero"))
    return functools.partial(
        HopfieldBlock,
        alpha_prime=alpha_prime,
        alpha=alpha,
        mlp_residual=mlp_residual,
        scale=scale,
        init=init,
    )


def hopfield_lm(
    vocab_size, d_model, num_heads, num_layers, max_len, *, alpha_prime, alpha=None, key, **kwargs
):
    """:class:`nn.TransformerLM` with MHA blocks (the model switch); ``kwargs`` go to the LM.

    Examples
    --------
    >>> lm = hopfield_lm(32, 16, 2, 3, 8, alpha_prime=0.5, alpha=0.5, key=jax.random.key(0))
    >>> len(lm.blocks), type(lm.blocks[0]).__name__
    (3, 'HopfieldBlock')
    """
    return TransformerLM(
        vocab_size,
        d_model,
        num_heads,
        num_layers,
        max_len,
        block=hopfield_block(alpha_prime=alpha_prime, alpha=alpha),
        key=key,
        **kwargs,
    )


def decode(lm, tokens):
    """Logits ``(B, T, V)`` of an MHA :class:`nn.TransformerLM` by cached one-token decoding.

    A ``lax.scan`` over positions; each step computes one query row per head and layer, keeps
    K/V caches ``(B, H, T, dh)`` per layer and passes the hidden row up the stack (no cache
    across time for the hidden state). Equals ``lm(tokens)`` (tests:
    ``test_decode_equals_prefill``).
    """
    if not isinstance(lm, TransformerLM) or not all(
        isinstance(b, HopfieldBlock) for b in lm.blocks
    ):
        raise TypeError("`lm` must be a TransformerLM built with hopfield_block blocks.")
    tokens = check_array(tokens, "tokens", ndim=2)
    V = lm.embed.weight.shape[0]
    if np.dtype(tokens.dtype).kind not in "iu" or 0 in tokens.shape:
        raise TypeError(
            f"`tokens` must be a non-empty integer array (batch, T); got dtype {tokens.dtype}, "
            f"shape {tuple(tokens.shape)}."
        )
    if tokens.shape[1] > lm.max_len:
        raise ValueError(f"`tokens` must have T <= max_len = {lm.max_len}; got {tokens.shape}.")
    if not _is_tracer(tokens) and not (
        0 <= np.asarray(tokens).min() <= np.asarray(tokens).max() < V
    ):
        raise ValueError(f"`tokens` must lie in [0, {V}).")
    return _decode(lm, tokens)


@eqx.filter_jit
def _decode(lm, tokens):
    B, T = tokens.shape
    dtype = lm.embed.weight.dtype
    caches = tuple(
        (jnp.zeros((B, b.attn.num_heads, T, b.attn.head_dim), dtype),) * 2 for b in lm.blocks
    )

    def step(caches, t):
        x = (lm.embed(tokens[:, t]) + lm.pos_embed(t))[:, None, :]
        h, new = None, []
        for blk, (kc, vc) in zip(lm.blocks, caches, strict=True):
            x, h, kc, vc = blk.decode_step(x, h, kc, vc, t)
            new.append((kc, vc))
        return tuple(new), lm.head(lm.norm(x))[:, 0]

    _, logits = jax.lax.scan(step, caches, jnp.arange(T))
    return jnp.swapaxes(logits, 0, 1)


def patchify(images, patch):
    """``(..., H, W)`` images -> ``(..., (H/p)(W/p), p*p)`` non-overlapping patches, row-major."""
    check_int(patch, "patch", lower=1)
    images = _arr(images, "images", 2)
    H, W = images.shape[-2:]
    if H % patch or W % patch:
        raise ValueError(f"`patch` must divide the image size {(H, W)}; got {patch}.")
    x = images.reshape(*images.shape[:-2], H // patch, patch, W // patch, patch)
    x = jnp.swapaxes(x, -3, -2)
    return x.reshape(*images.shape[:-2], (H // patch) * (W // patch), patch * patch)


class HopfieldViT(eqx.Module):
    """A small ViT (CLS token, learned positions, pre-norm) with :class:`HopfieldBlock`s.

    ``vit(patches (..., T, patch_dim)) -> logits (..., num_classes)``. ``alpha_prime=0`` is the
    vanilla ViT; ``alpha=0, mlp_residual=False`` is the skip-free network of the paper's
    skip-free experiment.
    """

    embed: Linear
    cls: jax.Array
    pos: jax.Array
    blocks: tuple
    norm: RMSNorm
    head: Linear

    def __init__(
        self,
        num_patches,
        patch_dim,
        num_classes,
        d_model,
        num_heads,
        num_layers,
        *,
        alpha_prime,
        alpha=None,
        mlp_residual=True,
        mlp_ratio=2,
        dtype=None,
        key,
    ):
        num_patches = check_int(num_patches, "num_patches", lower=1)
        _dims(patch_dim=patch_dim, num_classes=num_classes, d_model=d_model)
        _dims(num_heads=num_heads, num_layers=num_layers, mlp_ratio=mlp_ratio)
        _dims(num_patches=num_patches)
        check_bool(mlp_residual, "mlp_residual")
        check_key(key)
        ke, kc, kp, kb, kh = jax.random.split(key, 5)
        dt = default_float(dtype)
        self.embed = Linear(patch_dim, d_model, dtype=dtype, key=ke)
        self.cls = 0.02 * jax.random.normal(kc, (1, d_model), dt)
        self.pos = Embedding(num_patches + 1, d_model, dtype=dtype, key=kp).weight
        self.blocks = tuple(
            HopfieldBlock(
                d_model,
                num_heads,
                alpha_prime=alpha_prime,
                alpha=alpha,
                mlp_residual=mlp_residual,
                causal=False,
                mlp_ratio=mlp_ratio,
                dtype=dtype,
                key=k,
            )
            for k in jax.random.split(kb, num_layers)
        )
        self.norm = RMSNorm(d_model, dtype=dtype)
        self.head = Linear(d_model, num_classes, dtype=dtype, key=kh)

    def features(self, patches):
        """Token states after the last block, ``(..., T + 1, d_model)`` (CLS first)."""
        x = self.embed(patches)
        cls = jnp.broadcast_to(self.cls, (*x.shape[:-2], 1, x.shape[-1]))
        x = jnp.concatenate([cls, x], axis=-2) + self.pos
        h = None
        for blk in self.blocks:
            x, h = blk(x, h)
        return x

    def __call__(self, patches, *, key=None):
        return self.head(self.norm(self.features(patches)[..., 0, :]))
