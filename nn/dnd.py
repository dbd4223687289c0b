"""Drag-and-Drop LLMs: prompt batch -> LoRA weights in one forward pass (Liang et al. 2025,
arXiv 2506.16406; mechanism from the official code ``jerryliang24/Drag-and-Drop-LLMs``,
``docs/papers/dnd.md#mechanism-of-the-official-code``).

* the parameter tokenizer (``workspace/dnd/tokenizer/tokenizer.py::LoraTokenizer2D_Qwen``,
  ``Tokenizer2D.with_scales_wrapper``): :func:`tokenize` cuts every ``A (r, d_in)`` and
  ``B^T (r, d_out)`` into ``(r, c)`` chunks, standardises each chunk by its own mean and std and
  writes the codes ``8 mu`` and ``log(0.9 sigma + 0.1) + 1.6`` into two extra rows and columns
  (tile ``(r + 2, c + 2)``, NaN where a chunk runs past the matrix); :func:`detokenize` is its
  exact inverse (averaging the redundant code copies); :func:`token_mask` is ``~isnan``;
* the per-tile loss weight :func:`criterion_weight` (``datasets/criterion_weight_for_0.5B.py``)
  and the masked weighted MSE :func:`dnd_loss` (``model/decoderonly.py::criterion``);
* the frozen condition encoder :class:`ConditionEncoder` (a random-feature stand-in for the
  token-level Sentence-BERT states, ``docs/papers/dnd.md``) and the hyper-convolutional decoder
  :class:`HyperConvLayer` / :class:`HyperConvDecoder` (``module/hyperconv.py``), joined in
  :class:`DnDGenerator`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp

from _core.validation import (
    _is_tracer,
    check_array,
    check_finite_result,
    check_int,
    check_key,
)

__all__ = [
    "MEAN_SCALE",
    "STD_BIAS",
    "tile_shape",
    "num_tiles",
    "tokenize",
    "detokenize",
    "token_mask",
    "criterion_weight",
    "dnd_loss",
    "ConditionEncoder",
    "HyperConvLayer",
    "HyperConvDecoder",
    "DnDGenerator",
]

#: the code's ``mean_scale``: the mean is stored as ``8 mu``
MEAN_SCALE = 8.0
#: the code's ``std_bias``: the std is stored as ``log(0.9 sigma + 0.1) + 1.6``
STD_BIAS = 1.6
_MAX_DIM = 2**20


def tile_shape(r: int, chunk: int) -> tuple[int, int]:
    """``(r + 2, chunk + 2)``: an ``(r, chunk)`` data block plus two code rows and columns.

    Examples
    --------
    >>> tile_shape(2, 4)  # rank-2 data rows of 4 columns, plus two code rows and columns
    (4, 6)
    """
    r = check_int(r, "r", lower=1, upper=_MAX_DIM)
    chunk = _check_chunk(chunk)
    return r + 2, chunk + 2


def _check_chunk(chunk):
    chunk = check_int(chunk, "chunk", lower=2, upper=_MAX_DIM)
    if chunk % 2:
        raise ValueError(f"`chunk` must be even (codes alternate m', s' along a row); got {chunk}.")
    return chunk


def _check_shapes(shapes) -> list[tuple[int, int]]:
    if not isinstance(shapes, list | tuple) or not shapes:
        raise TypeError(f"`shapes` must be a non-empty list of (out, in) pairs; got {shapes!r}.")
    out = []
    for s in shapes:
        if not isinstance(s, list | tuple) or len(s) != 2:
            raise ValueError(f"`shapes` must hold (out, in) pairs; got {s!r}.")
        out.append(tuple(check_int(d, "shapes", lower=1, upper=_MAX_DIM) for d in s))
    return out


def num_tiles(shapes, chunk: int) -> int:
    """Tiles of the layers of ``(d_out, d_in)`` ``shapes``: ``sum ceil(d_in/c) + ceil(d_out/c)``."""
    chunk = _check_chunk(chunk)
    return sum(-(-i // chunk) - (-o // chunk) for o, i in _check_shapes(shapes))


def _encode(m):
    """``(r, c)`` block (NaN-padded) -> ``(r + 2, c + 2)`` tile with its scale codes."""
    r, c = m.shape
    mu = jnp.nanmean(m)
    sigma = jnp.nanstd(m, ddof=1)
    # the code's fallback for a NaN std (one valid element); a zero std falls back too (derived
    # here, so that a constant chunk, e.g. LoRA's zero-initialised B, round-trips)
    sigma = jnp.where(jnp.isnan(sigma) | (sigma == 0), 1.0, sigma).astype(m.dtype)
    mc = MEAN_SCALE * mu
    sc = jnp.log(0.9 * sigma + 0.1) + STD_BIAS
    codes = jnp.where(jnp.arange(c + 2) % 2 == 0, mc, sc).astype(m.dtype)
    body = jnp.concatenate(
        [(m - mu) / sigma, jnp.broadcast_to(jnp.stack([mc, sc]).astype(m.dtype), (r, 2))], axis=1
    )
    return jnp.concatenate([body, jnp.broadcast_to(codes, (2, c + 2))], axis=0)


def _decode_scales(tile):
    """``(mu, sigma)`` of a tile: the mean of the row-band and column-band copies of each code,
    inverted (``mu = m'/8``, ``sigma = (exp(s' - 1.6) - 0.1)/0.9``)."""
    r = tile.shape[0] - 2
    rows = tile[r:]
    m = 0.5 * (jnp.mean(rows[:, 0::2]) + jnp.mean(tile[:, -2]))
    s = 0.5 * (jnp.mean(rows[:, 1::2]) + jnp.mean(tile[:, -1]))
    return m / MEAN_SCALE, (jnp.exp(s - STD_BIAS) - 0.1) / 0.9


def _destandardise(tile):
    mu, sigma = _decode_scales(tile)
    r, c = tile.shape[0] - 2, tile.shape[1] - 2
    return tile[:r, :c] * sigma + mu


def _chunks(m, chunk):
    """``(r, d)`` -> ``(ceil(d/c), r, c)`` chunks along ``d``, NaN past the end."""
    r, d = m.shape
    n = -(-d // chunk)
    m = jnp.pad(m, ((0, 0), (0, n * chunk - d)), constant_values=jnp.nan)
    return m.reshape(r, n, chunk).transpose(1, 0, 2)


def _unchunk(tiles, d):
    n, r, c = tiles.shape
    return tiles.transpose(1, 0, 2).reshape(r, n * c)[:, :d]


def _check_factors(factors):
    if not isinstance(factors, list | tuple) or not factors:
        raise TypeError(f"`factors` must be a non-empty list of (A, B) pairs; got {factors!r}.")
    rank = None
    for i, ab in enumerate(factors):
        if not isinstance(ab, list | tuple) or len(ab) != 2:
            raise TypeError(f"`factors` must hold (A, B) pairs; entry {i} is {ab!r}.")
        a = check_array(ab[0], "factors", ndim=2)
        b = check_array(ab[1], "factors", ndim=2)
        if a.shape[0] != b.shape[1] or 0 in a.shape or 0 in b.shape:
            raise ValueError(
                f"`factors` entry {i}: A must be (r, d_in) and B (d_out, r); got {a.shape} and "
                f"{b.shape}."
            )
        if rank is not None and a.shape[0] != rank:
            raise ValueError(f"`factors` must share one rank; got {rank} and {a.shape[0]}.")
        rank = a.shape[0]
    return rank


def tokenize(factors: Sequence, chunk: int) -> jax.Array:
    """LoRA factors -> parameter tokens ``(T, r + 2, chunk + 2)`` (NaN at padding).

    ``factors`` is a list of ``(A (r, d_in), B (d_out, r))``, one per adapted layer in a fixed
    module order. Each ``A`` is cut along ``d_in`` and each ``B^T`` along ``d_out`` into ``(r, c)``
    chunks; chunk ``x`` becomes ``(x - mu)/sigma`` (``sigma`` the sample std over its valid
    entries) with ``m' = 8 mu`` and ``s' = log(0.9 sigma + 0.1) + 1.6`` written into the last two
    columns of every row and alternately along the last two rows (``docs/papers/dnd.md``, from
    the official ``LoraTokenizer2D_Qwen`` / ``with_scales_wrapper``). jit- and vmap-safe; keeps the
    factors' dtype.

    Examples
    --------
    >>> A, B = jnp.arange(8.0).reshape(2, 4), jnp.arange(6.0).reshape(3, 2)
    >>> t = tokenize([(A, B)], 4)  # one tile for A (2, 4), one for B^T (2, 3) padded to 4 columns
    >>> t.shape, int(jnp.isnan(t).sum()), round(float(t[1, 0, 4]), 6)  # m' = 8 mean(B) = 20
    ((2, 4, 6), 2, 20.0)
    """
    _check_factors(factors)
    chunk = _check_chunk(chunk)
    blocks = []
    for a, b in factors:
        blocks += [_chunks(jnp.asarray(a), chunk), _chunks(jnp.asarray(b).T, chunk)]
    return jax.vmap(_encode)(jnp.concatenate(blocks))


def detokenize(tokens, shapes, chunk: int) -> list[tuple[jax.Array, jax.Array]]:
    """The inverse of :func:`tokenize`: ``(T, r + 2, chunk + 2)`` tokens -> ``[(A, B), ...]`` for
    layers of ``(d_out, d_in)`` ``shapes``. Each tile is un-standardised with the average of its
    redundant code copies (``docs/papers/dnd.md``); padding positions are ignored, so generated
    tokens (no NaN) decode the same way. ``detokenize(tokenize(f, c), shapes, c)`` returns ``f``
    to float rounding (tests/nn/test_dnd.py).

    Examples
    --------
    >>> A, B = jnp.arange(8.0).reshape(2, 4), jnp.arange(6.0).reshape(3, 2)
    >>> ((A2, B2),) = detokenize(tokenize([(A, B)], 4), [(3, 4)], 4)
    >>> bool(jnp.allclose(A2, A, atol=1e-4)), bool(jnp.allclose(B2, B, atol=1e-4))
    (True, True)
    """
    shapes = _check_shapes(shapes)
    chunk = _check_chunk(chunk)
    tokens = check_array(tokens, "tokens", ndim=3, finite=False)
    want = num_tiles(shapes, chunk)
    if tokens.shape[0] != want or tokens.shape[2] != chunk + 2 or tokens.shape[1] < 3:
        raise ValueError(
            f"`tokens` must have shape ({want}, r + 2, {chunk + 2}) for `shapes` {shapes} and "
            f"`chunk` {chunk}; got {tuple(tokens.shape)}."
        )
    data = jax.vmap(_destandardise)(jnp.asarray(tokens))
    out, i = [], 0
    for o, d in shapes:
        na, nb = -(-d // chunk), -(-o // chunk)
        a = _unchunk(data[i : i + na], d)
        bt = _unchunk(data[i + na : i + na + nb], o)
        out.append((a, bt.T))
        i += na + nb
    if not _is_tracer(tokens) and not all(bool(jnp.isfinite(x).all()) for ab in out for x in ab):
        raise ValueError(
            "`tokens` decode to NaN or infinite weights: a data or scale-code position holds NaN, "
            "inf, or a value too large to invert."
        )
    return out


def token_mask(tokens) -> jax.Array:
    """``~isnan(tokens)``: the positions a loss may compare (the code's mask).

    Examples
    --------
    >>> t = tokenize([(jnp.arange(8.0).reshape(2, 4), jnp.arange(6.0).reshape(3, 2))], 4)
    >>> m = token_mask(t)
    >>> m.shape, int((~m).sum())  # the two padding entries of B^T's tile
    ((2, 4, 6), 2)
    """
    tokens = check_array(tokens, "tokens", min_ndim=2, finite="inf")
    return ~jnp.isnan(jnp.asarray(tokens))


def criterion_weight(tokens) -> jax.Array:
    """Per-tile loss weight from checkpoints ``(D, J, T, h, w)`` (D datasets, J checkpoints).

    Per dataset, the element-wise std over its J checkpoints ``s_e``; tile ``t`` weighs
    ``mean_{e in t} s_e / mean_e s_e`` (valid entries only); the weight is the mean over the D
    datasets (official ``criterion_weight_for_0.5B.py`` / ``calculate_mean_criterion_weight``,
    ``docs/papers/dnd.md``). Shape ``(T,)``.

    Examples
    --------
    >>> tokens = jnp.zeros((1, 2, 2, 1, 1)).at[0, 1, :, 0, 0].set(jnp.array([2.0, 1.0]))
    >>> [round(float(w), 4) for w in criterion_weight(tokens)]  # tile 0 moves twice as much
    [1.3333, 0.6667]
    """
    tokens = check_array(tokens, "tokens", ndim=5, finite="inf")
    if tokens.shape[1] < 2:
        raise ValueError(f"`tokens` needs >= 2 checkpoints per dataset; got {tokens.shape}.")
    s = jnp.std(jnp.asarray(tokens), axis=1, ddof=1)  # (D, T, h, w), NaN at padding
    per_tile = jnp.nanmean(s, axis=(2, 3))
    glob = jnp.nanmean(s, axis=(1, 2, 3))[:, None]
    out = jnp.mean(per_tile / jnp.where(glob > 0, glob, 1.0), axis=0)
    return out if _is_tracer(out) else check_finite_result(out, "the criterion weight")


def dnd_loss(pred, target, weight) -> jax.Array:
    """Masked, per-tile weighted MSE: target NaN -> 0 and mask ``M = ~isnan(target)``; masked-out
    entries are zeroed in both tensors, then ``mean_e w_t(e) (M (pred - target))^2`` over all
    entries (``decoderonly.py::forward/criterion``, ``docs/papers/dnd.md``). ``pred``/``target``
    ``(..., T, h, w)``, ``weight (T,)``.

    Examples
    --------
    >>> target = jnp.array([[[1.0, jnp.nan]]])  # one (1, 2) tile, its second entry padding
    >>> round(float(dnd_loss(jnp.zeros((1, 1, 2)), target, jnp.array([2.0]))), 6)  # 2 (1 + 0) / 2
    1.0
    """
    pred = check_array(pred, "pred", min_ndim=3)
    target = check_array(target, "target", min_ndim=3, finite="inf")
    weight = check_array(weight, "weight", ndim=1)
    if pred.shape != target.shape or weight.shape[0] != pred.shape[-3]:
        raise ValueError(
            f"`pred` {tuple(pred.shape)} and `target` {tuple(target.shape)} must match and "
            f"`weight` must have shape ({pred.shape[-3]},); got {tuple(weight.shape)}."
        )
    if not _is_tracer(weight) and bool(jnp.any(jnp.asarray(weight) < 0)):
        raise ValueError(
            f"`weight` must be >= 0 (per-tile loss weights); got {float(jnp.min(weight)):g}."
        )
    if not _is_tracer(target) and target.size and bool(jnp.isnan(jnp.asarray(target)).all()):
        raise ValueError("`target` must hold at least one non-NaN entry (NaN is padding).")
    mask = ~jnp.isnan(target)
    diff = jnp.where(mask, pred, 0.0) - jnp.where(mask, target, 0.0)
    out = jnp.mean(weight[:, None, None] * diff**2)
    return out if _is_tracer(out) else check_finite_result(out, "the DnD loss")


class ConditionEncoder(eqx.Module):
    """Frozen random-feature encoder ``e(x) = tanh(R x + b)``, reshaped to ``(H, W)`` per prompt:
    the stand-in for the official frozen Sentence-BERT token states (``docs/papers/dnd.md``). ``R ~
    N(0, 1/d)``, ``b ~ N(0, 1)``; ``(N, d) -> (N, H, W)``."""

    R: jax.Array
    b: jax.Array
    shape: tuple = eqx.field(static=True)

    def __init__(self, dim, shape=(8, 8), *, dtype=jnp.float32, key):
        dim = check_int(dim, "dim", lower=1, upper=_MAX_DIM)
        if not isinstance(shape, tuple | list) or len(shape) != 2:
            raise TypeError(f"`shape` must be an (H, W) pair; got {shape!r}.")
        shape = tuple(check_int(s, "shape", lower=1, upper=4096) for s in shape)
        check_key(key)
        k1, k2 = jax.random.split(_fast_key(key))
        self.R = jax.random.normal(k1, (shape[0] * shape[1], dim), dtype) / math.sqrt(dim)
        self.b = jax.random.normal(k2, (shape[0] * shape[1],), dtype)
        self.shape = shape

    def __call__(self, x):
        h = jnp.tanh(jnp.asarray(x, self.R.dtype) @ self.R.T + self.b)
        return h.reshape(*x.shape[:-1], *self.shape)


def _fast_key(key):
    """A counter-based ``"rbg"`` key drawn from ``key`` for the initialisers: XLA's
    RngBitGenerator compiles in a fraction of the time threefry takes per new shape on CPU."""
    return jax.random.wrap_key_data(jax.random.bits(key, (4,), jnp.uint32), impl="rbg")


def _conv(cin, cout, k, bias, key, dtype):
    return eqx.nn.Conv2d(cin, cout, k, padding="SAME", use_bias=bias, dtype=dtype, key=key)


class HyperConvLayer(eqx.Module):
    """One step ``(N, H, W) -> (N', H', W')`` of the hyper-convolutional decoder
    (official ``module/hyperconv.py``; ``docs/papers/dnd.md``).

    LayerNorm over ``(H, W)`` with an elementwise affine; branch 1 convolves W -> W' (W as
    channels, over the (H, N) plane) then H -> H' (over (N, W')), linear; branch 2 convolves
    H -> H' (over (N, W)) then W -> W' (over (H', N)) and applies tanh; the mix
    ``(b1 + b2 + beta)/3``; the outer conv N -> N' (with bias) over (H', W'); a residual only when
    the shapes match. Kernel ``k``, stride 1, "same" padding; branch convs without bias.
    """

    norm: eqx.nn.LayerNorm
    w1: eqx.nn.Conv2d
    h1: eqx.nn.Conv2d
    h2: eqx.nn.Conv2d
    w2: eqx.nn.Conv2d
    beta: jax.Array
    outer: eqx.nn.Conv2d
    residual: bool = eqx.field(static=True)

    def __init__(self, shape_in, shape_out, k=3, *, dtype=jnp.float32, key):
        (n, h, w), (n2, h2, w2) = (
            _check_nhw(shape_in, "shape_in"),
            _check_nhw(shape_out, "shape_out"),
        )
        k = check_int(k, "k", lower=1, upper=63)
        check_key(key)
        ks = jax.random.split(_fast_key(key), 6)
        self.norm = eqx.nn.LayerNorm((h, w), dtype=dtype)
        self.w1 = _conv(w, w2, k, False, ks[0], dtype)
        self.h1 = _conv(h, h2, k, False, ks[1], dtype)
        self.h2 = _conv(h, h2, k, False, ks[2], dtype)
        self.w2 = _conv(w, w2, k, False, ks[3], dtype)
        lim = 1.0 / (h2 * w2)
        self.beta = jax.random.uniform(ks[4], (h2, w2), dtype, -lim, lim)
        self.outer = _conv(n, n2, k, True, ks[5], dtype)
        self.residual = (n, h, w) == (n2, h2, w2)

    def __call__(self, x):
        """``x (N, H, W)`` -> ``(N', H', W')`` (one sample; vmap over a batch), in the layer's
        dtype."""
        x = jnp.asarray(x, self.beta.dtype)
        z = jax.vmap(self.norm)(x)  # per prompt, over (H, W)
        # branch 1, width-first: (W, H, N) -> W' ; then (H, N, W') -> H'
        b1 = self.w1(z.transpose(2, 1, 0))  # (W', H, N)
        b1 = self.h1(b1.transpose(1, 2, 0))  # (H', N, W')
        b1 = b1.transpose(1, 0, 2)  # (N, H', W')
        # branch 2, height-first: (H, N, W) -> H' ; then (W, H', N) -> W' ; tanh
        b2 = self.h2(z.transpose(1, 0, 2))  # (H', N, W)
        b2 = jnp.tanh(self.w2(b2.transpose(2, 0, 1)))  # (W', H', N)
        b2 = b2.transpose(2, 1, 0)  # (N, H', W')
        y = self.outer((b1 + b2 + self.beta) / 3.0)
        return x + y if self.residual else y


def _check_nhw(s, name):
    if not isinstance(s, tuple | list) or len(s) != 3:
        raise TypeError(f"`{name}` must be an (N, H, W) triple; got {s!r}.")
    return tuple(check_int(v, name, lower=1, upper=4096) for v in s)


class HyperConvDecoder(eqx.Module):
    """A cascade of :class:`HyperConvLayer` over ``features = [(N0, H0, W0), ..., (T, h, w)]``,
    one layer per consecutive pair (the official ``features`` schedule, ``docs/papers/dnd.md``)."""

    layers: tuple

    def __init__(self, features, k=3, *, dtype=jnp.float32, key):
        if not isinstance(features, list | tuple) or len(features) < 2:
            raise TypeError(f"`features` must list >= 2 (N, H, W) shapes; got {features!r}.")
        feats = [_check_nhw(f, "features") for f in features]
        check_key(key)
        keys = jax.random.split(key, len(feats) - 1)
        self.layers = tuple(
            HyperConvLayer(a, b, k, dtype=dtype, key=kk)
            for a, b, kk in zip(feats[:-1], feats[1:], keys, strict=True)
        )

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class DnDGenerator(eqx.Module):
    """Prompt batch ``(N, d)`` -> parameter tokens ``(T, r + 2, c + 2)`` (DnD, arXiv 2506.16406;
    ``docs/papers/dnd.md``): the frozen
    :class:`ConditionEncoder` then the :class:`HyperConvDecoder` from ``(N, H, W)`` through
    ``hidden`` to ``(T, r + 2, c + 2)``. Freeze the encoder when training
    (``nn.trainable_mask(gen, frozen=lambda g: g.encoder)``)."""

    encoder: ConditionEncoder
    decoder: HyperConvDecoder

    def __init__(
        self,
        dim,
        prompts,
        n_tiles,
        tile,
        hidden=((6, 10),),
        enc_shape=(8, 8),
        k=3,
        *,
        dtype=jnp.float32,
        key,
    ):
        prompts = check_int(prompts, "prompts", lower=1, upper=4096)
        n_tiles = check_int(n_tiles, "n_tiles", lower=1, upper=4096)
        if not isinstance(tile, tuple | list) or len(tile) != 2:
            raise TypeError(f"`tile` must be an (h, w) pair; got {tile!r}.")
        tile = tuple(check_int(t, "tile", lower=1, upper=4096) for t in tile)
        if not isinstance(hidden, tuple | list):
            raise TypeError(f"`hidden` must be a list of (H, W) pairs; got {hidden!r}.")
        for hw in hidden:
            if not isinstance(hw, tuple | list) or len(hw) != 2:
                raise TypeError(f"`hidden` must hold (H, W) pairs; got {hw!r}.")
        if not isinstance(enc_shape, tuple | list) or len(enc_shape) != 2:
            raise TypeError(f"`enc_shape` must be an (H, W) pair; got {enc_shape!r}.")
        enc_shape = tuple(check_int(s, "enc_shape", lower=1, upper=4096) for s in enc_shape)
        check_key(key)
        k1, k2 = jax.random.split(key)
        self.encoder = ConditionEncoder(dim, enc_shape, dtype=dtype, key=k1)
        feats = [(prompts, *self.encoder.shape)]
        feats += [(prompts, *hw) for hw in hidden] + [(n_tiles, *tile)]
        self.decoder = HyperConvDecoder(feats, k, dtype=dtype, key=k2)

    def __call__(self, prompts, *, key=None, noise=0.0):
        """``prompts (N, d)`` (or ``(B, N, d)``) -> tokens; ``noise`` adds ``noise * xi`` to the
        condition (the code's 1e-4 augmentation) when ``key`` is given."""
        c = self.encoder(prompts)
        if key is not None:
            c = c + noise * jax.random.normal(key, c.shape, c.dtype)
        f = self.decoder
        for _ in range(c.ndim - 3):
            f = jax.vmap(f)
        return f(c)
