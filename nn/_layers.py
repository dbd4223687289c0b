"""Batch-native equinox layers: every module acts on arrays with arbitrary leading (batch) axes.

Unlike ``equinox.nn`` (one example at a time, batched with ``vmap``), these layers see the whole
batch, which is what a block-quantised matmul needs (its weight-gradient GEMM reduces over tokens).
Every ``__call__`` takes a keyword-only ``key=None`` that is split and passed down to each
``Linear``;
it is only consumed by a stochastic ``matmul`` (e.g. FP4 stochastic rounding, :mod:`nn.quant`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.core import Tracer

from _core.validation import (
    check_array,
    check_bool,
    check_callable,
    check_int,
    check_key,
    check_memory,
    check_scalar,
)

__all__ = [
    "default_float",
    "uniform_fan_in",
    "Linear",
    "MLP",
    "Embedding",
    "RMSNorm",
    "causal_attention",
    "CausalSelfAttention",
    "TransformerBlock",
    "TransformerLM",
    "set_matmul",
]

Initializer = Callable[[jax.Array, tuple, jnp.dtype], jax.Array]


def default_float(dtype=None):
    """``dtype`` if given, else JAX's default float (float64 under x64, float32 otherwise)."""
    return jnp.dtype(jnp.result_type(float) if dtype is None else dtype)


#: flat draw sizes of :func:`_uniform_draw` (powers of 4); larger tensors are drawn as shaped
_DRAW_SIZES = tuple(4**k for k in range(5, 11))


def _uniform_draw(key, shape, dtype, lo, hi):
    """``jax.random.uniform(key, shape, dtype, lo, hi)``, bit for bit, compiled once per size of
    :data:`_DRAW_SIZES` instead of once per shape.

    Outside a trace every new shape compiles JAX's threefry sampler again (0.4-0.6 s each on CPU;
    a U-Net or a segmentation backbone has 20-30 parameter shapes). With threefry's
    partitionable counters (JAX's default) element ``i`` of a draw depends on the key and ``i``
    alone, so the first ``n`` values of a longer flat draw, reshaped, are the shaped draw; other
    key implementations, traced keys and tensors past the largest size are drawn directly.
    """
    n = math.prod(shape)
    size = next((m for m in _DRAW_SIZES if m >= n), None)
    if (
        size is None
        or isinstance(key, Tracer)
        or not jax.config.jax_threefry_partitionable  # pyright: ignore[reportAttributeAccessIssue]
        or not _is_threefry(key)
    ):
        return jax.random.uniform(key, shape, dtype, lo, hi)
    return jax.random.uniform(key, (size,), dtype, lo, hi)[:n].reshape(shape)


def _is_threefry(key) -> bool:
    if jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key):
        return str(jax.random.key_impl(key)) == "threefry2x32"
    impl = jax.config.jax_default_prng_impl  # pyright: ignore[reportAttributeAccessIssue]
    return impl == "threefry2x32"  # a raw uint32 key


def uniform_fan_in(fan_in: int) -> Initializer:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the PyTorch / equinox ``Linear`` default (the fan-in
    scaling of LeCun et al. 1998, Efficient BackProp, Sec. 4.6).

    >>> w = uniform_fan_in(4)(jax.random.key(0), (1000,), jnp.float32)
    >>> bool(jnp.all(jnp.abs(w) <= 0.5))
    True
    """
    lim = 1.0 / math.sqrt(check_int(fan_in, "fan_in", lower=1))

    def init(key, shape, dtype):
        return _uniform_draw(key, shape, dtype, -lim, lim)

    return init


def _keys(key, n):
    return [None] * n if key is None else list(jax.random.split(key, n))


def _check_dim(name, v):
    return check_int(v, name, lower=1, upper=2**31)


def _check_params(n, names, dtype):
    """Refuse, before allocating, ``n`` parameters of ``dtype`` that this machine cannot hold."""
    check_memory(n, names, itemsize=default_float(dtype).itemsize, what="the parameters")


def _check_options(use_bias=True, key=None, **callables):
    """The options every layer shares: a bool ``use_bias``, a PRNG ``key``, callables or None."""
    check_bool(use_bias, "use_bias")
    check_key(key)
    for name, f in callables.items():
        if f is not None:
            check_callable(f, name)


class Linear(eqx.Module):
    """Affine map ``y = x @ W.T + b`` on the last axis (a plain layer; the equinox ``Linear``).

    Parameters
    ----------
    in_features, out_features : int
    use_bias : bool
    init, bias_init : initializer ``(key, shape, dtype) -> array`` (``jax.nn.initializers`` style);
        default :func:`uniform_fan_in` for both.
    matmul : callable ``matmul(x, weight, *, key) -> x @ weight.T`` or None (plain ``jnp.matmul``).
        The hook that fake-quantised training uses (:class:`nn.quant.QuantMatmul`); a static field,
        so it must be hashable. Replace it with :func:`set_matmul` or ``eqx.tree_at``.
    dtype : floating dtype, default JAX's default float.
    key : PRNG key (keyword-only).

    Attributes ``weight`` has shape ``(out_features, in_features)``, ``bias`` ``(out_features,)``
    or None.

    >>> lin = Linear(3, 2, key=jax.random.key(0))
    >>> lin(jnp.zeros(3)).shape, bool(jnp.all(lin(jnp.zeros(3)) == lin.bias))
    ((2,), True)
    """

    weight: jax.Array
    bias: jax.Array | None
    in_features: int = eqx.field(static=True)
    out_features: int = eqx.field(static=True)
    matmul: Callable | None = eqx.field(static=True, default=None)

    def __init__(
        self,
        in_features,
        out_features,
        use_bias=True,
        *,
        init=None,
        bias_init=None,
        matmul=None,
        dtype=None,
        key,
    ):
        _check_dim("in_features", in_features)
        _check_dim("out_features", out_features)
        _check_options(use_bias, key, init=init, bias_init=bias_init, matmul=matmul)
        _check_params((in_features + 1) * out_features, "`in_features`, `out_features`", dtype)
        dtype = default_float(dtype)
        wkey, bkey = jax.random.split(key)
        init = uniform_fan_in(in_features) if init is None else init
        self.weight = jnp.asarray(init(wkey, (out_features, in_features), dtype), dtype)
        if use_bias:
            bias_init = uniform_fan_in(in_features) if bias_init is None else bias_init
            self.bias = jnp.asarray(bias_init(bkey, (out_features,), dtype), dtype)
        else:
            self.bias = None
        self.in_features, self.out_features, self.matmul = in_features, out_features, matmul

    def __call__(self, x, *, key=None):
        w = self.weight
        if x.shape[-1] != self.in_features:
            raise ValueError(f"x must have last axis {self.in_features}, got shape {x.shape}")
        y = jnp.matmul(x, w.T) if self.matmul is None else self.matmul(x, w, key=key)
        if self.bias is not None:
            y = y + self.bias
        return y


def set_matmul(model, matmul):
    """Return ``model`` with the ``matmul`` hook of every :class:`Linear` set to ``matmul`` (a
    callable, or None for ``jnp.matmul``); a model without a ``Linear`` raises ``ValueError``."""
    if matmul is not None:
        check_callable(matmul, "matmul")
    if not any(map(_is_linear, jax.tree.leaves(model, is_leaf=_is_linear))):
        raise ValueError(
            f"`model` must contain an nn.Linear whose matmul to set; got {type(model).__name__}."
        )

    def swap(node):
        if not isinstance(node, Linear):
            return node
        new = copy.copy(node)
        object.__setattr__(new, "matmul", matmul)
        return new

    return jax.tree.map(swap, model, is_leaf=_is_linear)


def _is_linear(node) -> bool:
    return isinstance(node, Linear)


class MLP(eqx.Module):
    """``depth`` hidden layers of width ``width``: Linear, activation, ..., Linear (a plain
    multilayer perceptron)."""

    layers: tuple
    activation: Callable = eqx.field(static=True)
    final_activation: Callable = eqx.field(static=True)

    def __init__(
        self,
        in_features,
        out_features,
        width,
        depth,
        *,
        activation=jax.nn.gelu,
        final_activation=lambda x: x,
        use_bias=True,
        dtype=None,
        key,
    ):
        _check_dim("in_features", in_features)
        _check_dim("out_features", out_features)
        _check_dim("width", width)
        check_int(depth, "depth", lower=0, upper=10_000)
        check_callable(activation, "activation")
        check_callable(final_activation, "final_activation")
        _check_options(use_bias, key)
        sizes = [in_features] + [width] * depth + [out_features]
        n = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=False))
        _check_params(n, "`in_features`, `out_features`, `width`, `depth`", dtype)
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = tuple(
            Linear(a, b, use_bias, dtype=dtype, key=k)
            for a, b, k in zip(sizes[:-1], sizes[1:], keys, strict=False)
        )
        self.activation, self.final_activation = activation, final_activation

    def __call__(self, x, *, key=None):
        keys = _keys(key, len(self.layers))
        for lin, k in zip(self.layers[:-1], keys[:-1], strict=False):
            x = self.activation(lin(x, key=k))
        return self.final_activation(self.layers[-1](x, key=keys[-1]))


class Embedding(eqx.Module):
    """Lookup table ``weight`` of shape ``(num_embeddings, dim)``, init N(0, init_std^2) (GPT-2's
    0.02, Radford et al. 2019).

    >>> emb = Embedding(10, 4, key=jax.random.key(0))
    >>> bool(jnp.all(emb(jnp.array([3])) == emb.weight[3]))
    True
    """

    weight: jax.Array

    def __init__(self, num_embeddings, dim, *, init_std=0.02, dtype=None, key):
        _check_dim("num_embeddings", num_embeddings)
        _check_dim("dim", dim)
        init_std = check_scalar(init_std, "init_std", lower=0.0, upper=1e100)
        check_key(key)
        _check_params(num_embeddings * dim, "`num_embeddings`, `dim`", dtype)
        self.weight = init_std * jax.random.normal(key, (num_embeddings, dim), default_float(dtype))

    def __call__(self, ids, *, key=None):
        if not jnp.issubdtype(jnp.asarray(ids).dtype, jnp.integer):
            raise TypeError(f"ids must be an integer array, got dtype {jnp.asarray(ids).dtype}")
        return jnp.take(self.weight, ids, axis=0)


class RMSNorm(eqx.Module):
    """``x / rms(x) * scale`` over the last axis (Zhang & Sennrich 2019).

    >>> y = RMSNorm(2)(jnp.array([3.0, 4.0]))  # rms = 5 / sqrt(2)
    >>> [round(float(v), 3) for v in y**2]
    [0.72, 1.28]
    """

    scale: jax.Array
    eps: float = eqx.field(static=True)

    def __init__(self, dim, *, eps=1e-6, dtype=None):
        _check_dim("dim", dim)
        eps = check_scalar(eps, "eps", lower=0.0, upper=1e100, closed="right")
        _check_params(dim, "`dim`", dtype)
        self.scale = jnp.ones((dim,), default_float(dtype))
        self.eps = eps

    def __call__(self, x, *, key=None):
        ms = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(ms + self.eps) * self.scale


def causal_attention(q, k, v, *, return_weights=False):
    """Softmax attention with a causal mask, ``q, k, v`` of shape ``(..., heads, T, head_dim)``.

    ``softmax(q k^T / sqrt(head_dim) + mask) v`` (Vaswani et al. 2017, eq. 1), mask ``-inf`` above
    the diagonal. Returns the output ``(..., heads, T, head_dim)`` (and the weights
    ``(..., heads, T, T)``).

    >>> v = jnp.arange(3.0).reshape(1, 3, 1)  # one head, T = 3, equal scores
    >>> causal_attention(jnp.zeros((1, 3, 1)), jnp.zeros((1, 3, 1)), v)[0, :, 0].tolist()  # means
    [0.0, 0.5, 1.0]
    """
    check_bool(return_weights, "return_weights")
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_array(a, name, min_ndim=2, max_abs=1e100)
        if a.shape[-1] == 0 or a.shape[-2] == 0:
            raise ValueError(f"`{name}` must have non-empty last two axes; got shape {a.shape}.")
    if k.shape != v.shape or q.shape != k.shape:  # self-attention: one T, a square mask
        raise ValueError(
            f"`q`, `k`, `v` must have one shape (..., heads, T, head_dim); got {q.shape}, "
            f"{k.shape}, {v.shape}."
        )
    T = q.shape[-2]
    s = jnp.einsum("...td,...sd->...ts", q, k) / math.sqrt(q.shape[-1])
    mask = jnp.tril(jnp.ones((T, k.shape[-2]), bool))
    s = jnp.where(mask, s, -jnp.inf)
    w = jax.nn.softmax(s, axis=-1)
    out = jnp.einsum("...ts,...sd->...td", w, v)
    return (out, w) if return_weights else out


class CausalSelfAttention(eqx.Module):
    """Multi-head causal self-attention; ``num_heads=1`` is single-head attention.

    Four :class:`Linear` maps ``q_proj, k_proj, v_proj, o_proj`` (so adapters and quantised
    matmuls apply to each). ``x`` has shape ``(..., T, d_model)``. Vaswani et al. 2017, Sec. 3.2.2.
    """

    q_proj: Linear
    k_proj: Linear
    v_proj: Linear
    o_proj: Linear
    num_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)

    def __init__(self, d_model, num_heads, *, head_dim=None, use_bias=False, dtype=None, key):
        _check_dim("d_model", d_model)
        _check_dim("num_heads", num_heads)
        _check_options(use_bias, key)
        if head_dim is None:
            if d_model % num_heads:
                raise ValueError(f"`num_heads` must divide d_model={d_model}; got {num_heads}.")
            head_dim = d_model // num_heads
        _check_dim("head_dim", head_dim)
        inner = num_heads * head_dim
        _check_params(4 * (d_model + 1) * inner, "`d_model`, `num_heads`, `head_dim`", dtype)
        kq, kk, kv, ko = jax.random.split(key, 4)
        self.q_proj = Linear(d_model, inner, use_bias, dtype=dtype, key=kq)
        self.k_proj = Linear(d_model, inner, use_bias, dtype=dtype, key=kk)
        self.v_proj = Linear(d_model, inner, use_bias, dtype=dtype, key=kv)
        self.o_proj = Linear(inner, d_model, use_bias, dtype=dtype, key=ko)
        self.num_heads, self.head_dim = num_heads, head_dim

    def _heads(self, y):
        y = y.reshape(*y.shape[:-1], self.num_heads, self.head_dim)
        return jnp.swapaxes(y, -2, -3)  # (..., H, T, dh)

    def __call__(self, x, *, key=None, return_weights=False):
        kq, kk, kv, ko = _keys(key, 4)
        q = self._heads(self.q_proj(x, key=kq))
        k = self._heads(self.k_proj(x, key=kk))
        v = self._heads(self.v_proj(x, key=kv))
        out, w = causal_attention(q, k, v, return_weights=True)
        out = jnp.swapaxes(out, -2, -3)
        out = self.o_proj(out.reshape(*out.shape[:-2], -1), key=ko)
        return (out, w) if return_weights else out


class TransformerBlock(eqx.Module):
    """Pre-norm block: ``x + attn(norm(x))`` then ``x + mlp(norm(x))`` (Vaswani et al. 2017,
    Sec. 3.1, with the pre-norm placement of Xiong et al. 2020)."""

    norm1: RMSNorm
    attn: CausalSelfAttention
    norm2: RMSNorm
    mlp: MLP

    def __init__(self, d_model, num_heads, *, mlp_ratio=4, use_bias=False, dtype=None, key):
        _check_dim("d_model", d_model)
        _check_dim("mlp_ratio", mlp_ratio)
        _check_options(use_bias, key)
        _check_params((4 + 2 * mlp_ratio) * (d_model + 1) ** 2, "`d_model`, `mlp_ratio`", dtype)
        ka, km = jax.random.split(key)
        self.norm1 = RMSNorm(d_model, dtype=dtype)
        self.attn = CausalSelfAttention(d_model, num_heads, use_bias=use_bias, dtype=dtype, key=ka)
        self.norm2 = RMSNorm(d_model, dtype=dtype)
        self.mlp = MLP(
            d_model, d_model, mlp_ratio * d_model, 1, use_bias=use_bias, dtype=dtype, key=km
        )

    def __call__(self, x, *, key=None):
        ka, km = _keys(key, 2)
        x = x + self.attn(self.norm1(x), key=ka)
        return x + self.mlp(self.norm2(x), key=km)


class TransformerLM(eqx.Module):
    """Small decoder-only Transformer language model (GPT-style, Radford et al. 2019; pre-norm
    RMSNorm, learned positions).

    ``model(tokens)`` maps integer tokens ``(..., T)`` with ``T <= max_len`` to logits
    ``(..., T, vocab_size)``. The output head is an untied :class:`Linear` without bias.
    ``block`` (the model switch): a factory ``block(d_model, num_heads, *, mlp_ratio, use_bias,
    dtype, key)``, default :class:`TransformerBlock`; a block class with ``carries_state = True`` is
    called ``blk(x, state) -> (x, state)`` (e.g. ``nn.hopfield.hopfield_block``).
    """

    embed: Embedding
    pos_embed: Embedding
    blocks: tuple
    norm: RMSNorm
    head: Linear
    max_len: int = eqx.field(static=True)

    def __init__(
        self,
        vocab_size,
        d_model,
        num_heads,
        num_layers,
        max_len,
        *,
        mlp_ratio=4,
        use_bias=False,
        dtype=None,
        block=None,
        key,
    ):
        _check_dim("vocab_size", vocab_size)
        _check_dim("d_model", d_model)
        _check_dim("num_heads", num_heads)
        _check_dim("max_len", max_len)
        _check_dim("mlp_ratio", mlp_ratio)
        check_int(num_layers, "num_layers", lower=0, upper=10_000)
        _check_options(use_bias, key, block=block)
        n = (2 * vocab_size + max_len) * d_model + num_layers * (4 + 2 * mlp_ratio) * d_model**2
        names = "`vocab_size`, `d_model`, `max_len`, `num_layers`, `mlp_ratio`"
        _check_params(n, names, dtype)
        ke, kp, kh, kb = jax.random.split(key, 4)
        self.embed = Embedding(vocab_size, d_model, dtype=dtype, key=ke)
        self.pos_embed = Embedding(max_len, d_model, dtype=dtype, key=kp)
        make = TransformerBlock if block is None else block
        self.blocks = tuple(
            make(d_model, num_heads, mlp_ratio=mlp_ratio, use_bias=use_bias, dtype=dtype, key=k)
            for k in jax.random.split(kb, num_layers)
        )
        self.norm = RMSNorm(d_model, dtype=dtype)
        self.head = Linear(d_model, vocab_size, False, dtype=dtype, key=kh)
        self.max_len = max_len

    def hidden(self, tokens, *, key=None):
        """The residual stream after the last block, ``(..., T, d_model)`` (what the final norm
        reads)."""
        T = tokens.shape[-1]
        if T > self.max_len:
            raise ValueError(f"tokens must have length <= max_len={self.max_len}, got {T}")
        x = self.embed(tokens) + self.pos_embed(jnp.arange(T))
        state = None  # carried up the stack by blocks with ``carries_state`` (nn.hopfield)
        for blk, k in zip(self.blocks, _keys(key, len(self.blocks)), strict=False):
            if getattr(blk, "carries_state", False):
                x, state = blk(x, state, key=k)
            else:
                x = blk(x, key=k)
        return x

    def __call__(self, tokens, *, key=None):
        keys = _keys(key, 2)
        return self.head(self.norm(self.hidden(tokens, key=keys[0])), key=keys[1])
