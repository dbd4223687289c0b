"""FP4 number formats, block quantisers and a fake-quantised matmul with its own VJP.

Source: Chmiel, Fishman, Banner & Soudry, "FP4 All the Way: Fully Quantized Training of LLMs",
NeurIPS 2025 (arXiv 2505.19115), Sec. 2-3 and Eqs. (4)-(6); formats per OCP MX v1.0 (MXFP4) and
NVIDIA's NVFP4 (two-level scale, as in TensorRT-ModelOpt ``compute_fp4_scales``).

Element formats
---------------
``"e2m1"`` (FP4: 0, 0.5, 1, 1.5, 2, 3, 4, 6), ``"e4m3"`` (OCP E4M3FN, max 448), ``"e5m2"``,
``"e3m4"`` (ml_dtypes IEEE-style), ``"e8m0"`` (powers of two 2^-127..2^127, no zero), and the 8-bit
scale formats of the paper's Fig. 1 without an ml_dtypes type, ``"e1m6"``, ``"e2m5"``, ``"e6m1"``
(bias 2^(E-1)-1, every exponent code normal, no Inf/NaN codes). :func:`round_to` rounds onto a grid:

* ``"nearest"``: round half to even. For the 8-bit formats with an ml_dtypes type this *is* the
  ``jnp.astype`` cast (bit-identical to ``ml_dtypes``) after saturating to ``+-max``; E2M1 and the
  formats without an ml_dtypes type use exact power-of-two grid arithmetic (for E2M1 a chain of
  three selects, ~3x faster on CPU than XLA's emulated float4 convert), checked bit for bit
  against the casts in ``tests/nn/test_quant.py``.
* ``"stochastic"``: with ``lo <= |x| <= hi`` the neighbouring grid points, returns ``hi`` with
  probability ``(|x| - lo) / (hi - lo)`` and ``lo`` otherwise: unbiased, variance
  ``(|x| - lo)(hi - |x|)`` (paper Sec. 3, "stochastic rounding").

Documented special values: finite values beyond ``max`` saturate to ``+-max`` (ml_dtypes already
saturates E2M1; it returns NaN for E4M3 above 464, which we do not copy); ``NaN`` and ``+-inf``
raise ``ValueError`` at the public functions and, inside ``jit`` (where values are not known:
the :class:`QuantMatmul` path), become NaN (never a silent finite value; ml_dtypes maps NaN to -0
in E2M1). E8M0 has no zero or sign:
zero/negative inputs give NaN, as in ml_dtypes.

Block formats
-------------
:class:`BlockFormat` ``(block_size, scale_fmt, tensor_scale, scale_rule)``; :data:`NVFP4` =
``(16, "e4m3", True, "nearest")``, :data:`MXFP4` = ``(32, "e8m0", False, "floor")``. Blocks are
``block_size`` consecutive elements along ``axis``. With amax_b the block's and amax_T the tensor's
largest finite magnitude, and elem_max = 6:

* per-tensor scale (NVFP4): ``s_enc = elem_max * scale_max / amax_T`` (1 if amax_T = 0; at most
  the largest float of the dtype, so a tensor with amax_T below ~7.9e-36 in float32 stays finite),
  block decode scale ``s_b = round_scale(amax_b / elem_max * s_enc)`` (so the largest block's
  scale is exactly 448);
* without it: ``s_b = round_scale(amax_b / elem_max)``, clamped to the scale format's range; for
  E8M0 ``scale_rule`` picks ``"floor"`` (OCP MX v1.0: 2^(floor(log2 amax_b) - 2), the block max
  may clip), ``"ceil"`` (2^ceil(log2(amax_b/6)), never clips; the paper's code) or ``"nearest"``;
  ``scale_fmt="fp32"`` keeps the exact unrounded scale amax_b/6.
* with ``rounding="stochastic"`` the block scale is rounded *up* on its grid (E8M0: the ``"ceil"``
  rule), so that no element clips and SR stays exactly unbiased (derived here: an RNE or floor scale
  can put the block maximum above 6, and saturating it biases SR; tested in ``test_quant.py``);
* elements: ``q = round_e2m1(|x| s_enc / s_b)`` (saturating at 6), dequantised
  ``x_hat = sign(x) q s_b / s_enc``.

All-zero blocks, and blocks whose scale underflows to 0, dequantise to exact zeros. A block
containing NaN or +-inf (inside ``jit``; concrete input raises) dequantises to all-NaN (the tensor
amax ignores non-finite values, so other blocks are unaffected). ``pad=True`` zero-pads the
blocked axis to a multiple of ``block_size``; otherwise a block size that does not divide it is a
``ValueError``.

Quantised matmul
----------------
:class:`QuantMatmul` is the ``matmul`` hook of :class:`nn.Linear`: ``y = Q(x) Q(W)^T`` with a
custom VJP in which the forward, input-gradient and weight-gradient GEMMs each quantise each
operand with its own :class:`Operand` (format, rounding), blocked along that GEMM's reduction axis,
re-quantised from the saved high-precision tensors (paper Eqs. 4-6; the official ``FP4LinearF``):

* forward ``y = Q_fx(x) Q_fw(W)^T`` (blocks along in_features),
* input grad ``dx = Q_bg(g) Q_bw(W)`` (blocks along out_features),
* weight grad ``dW = Q_ug(g)^T Q_ux(x)`` (blocks along tokens).

:meth:`QuantMatmul.fqt` is the paper's recipe (round-to-nearest for weights and forward activations,
stochastic rounding for the neural gradients and for the activations of the update GEMM);
:meth:`QuantMatmul.qaf` keeps the forward in FP4 and both backward GEMMs in high precision (the
paper's quantisation-aware finetuning). Everything outside ``Linear`` layers (attention score and
value products, softmax, norms, embeddings, loss, optimiser and master weights) stays in the model's
float dtype: the paper's code quantises only the linear layers.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    _is_tracer,
    as_array,
    check_bool,
    check_choice,
    check_int,
    check_key,
    check_memory,
)

__all__ = [
    "FloatFormat",
    "FORMATS",
    "round_to",
    "BlockFormat",
    "NVFP4",
    "MXFP4",
    "BlockQuantized",
    "quantize_blocks",
    "quantize",
    "Operand",
    "QuantMatmul",
    "sr_variance",
    "rounding_uniform",
]

_ROUNDINGS = ("nearest", "stochastic")


@dataclasses.dataclass(frozen=True)
class FloatFormat:
    """A floating grid (IEEE 754-style; OCP MX v1.0 for E2M1 and E8M0): ``man_bits`` mantissa bits,
    min normal exponent ``emin``, largest value
    ``max``.

    Spacing is ``2^(max(e, emin) - man_bits)`` on the binade ``[2^e, 2^(e+1))``; ``subnormal=False``
    (E8M0) means no zero and no subnormals. ``dtype`` names the ml_dtypes type when one exists.
    """

    name: str
    exp_bits: int
    man_bits: int
    emin: int
    emax: int
    max: float
    dtype: str | None
    subnormal: bool = True


def _generic(name, e, m):
    bias = 2 ** (e - 1) - 1
    emax = 2**e - 1 - bias
    return FloatFormat(name, e, m, 1 - bias, emax, 2.0**emax * (2 - 2.0**-m), None)


FORMATS = {
    "e2m1": FloatFormat("e2m1", 2, 1, 0, 2, 6.0, "float4_e2m1fn"),
    "e4m3": FloatFormat("e4m3", 4, 3, -6, 8, 448.0, "float8_e4m3fn"),
    "e5m2": FloatFormat("e5m2", 5, 2, -14, 15, 57344.0, "float8_e5m2"),
    "e3m4": FloatFormat("e3m4", 3, 4, -2, 3, 15.5, "float8_e3m4"),
    "e8m0": FloatFormat("e8m0", 8, 0, -127, 127, 2.0**127, "float8_e8m0fnu", subnormal=False),
    "e1m6": _generic("e1m6", 1, 6),
    "e2m5": _generic("e2m5", 2, 5),
    "e6m1": _generic("e6m1", 6, 1),
}


def _as_float(x, name="x", check_finite=True):
    """``x`` as a floating JAX array; concrete input must be finite (a tracer inside ``jit`` is
    not inspected: there NaN and inf propagate as documented in the module docstring).
    ``check_finite=False`` leaves that check to the caller (see :func:`_refuse_nonfinite`)."""
    if not hasattr(x, "dtype"):  # lists, scalars: refuse strings, complex, objects by name
        as_array(x, name, finite=False)
    if hasattr(x, "dtype") and not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"`{name}` must be a floating array; got dtype {x.dtype}.")
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"`{name}` must be a floating array; got dtype {x.dtype}.")
    if check_finite and not _is_tracer(x):
        _refuse_nonfinite(~jnp.all(jnp.isfinite(x)), name)
    if x.dtype.itemsize < 4:
        x = x.astype(jnp.float32)
    return x


def _refuse_nonfinite(flag, name="x"):
    """Raise the ValueError for non-finite concrete input when ``flag`` is set; a traced ``flag``
    (concrete input read inside an outer ``jit``) is not inspected."""
    if not _is_tracer(flag) and bool(flag):
        raise ValueError(
            f"`{name}` must be finite; got NaN or infinite value(s) (inside jit they propagate "
            "as NaN, see the module docstring)."
        )


def _bits(dtype):
    """(mantissa bits, exponent bias, unsigned and signed int types) of float32 / float64."""
    if jnp.dtype(dtype).itemsize == 8:
        return 52, 1023, jnp.uint64, jnp.int64
    return 23, 127, jnp.uint32, jnp.int32


def _floor_log2(a):
    """floor(log2 a) for finite a > 0, exact, read from the bits (subnormals: count leading
    zeros). A few integer ops, where ``jnp.frexp`` compiles to a long chain."""
    m, bias, ut, it = _bits(a.dtype)
    b = jax.lax.bitcast_convert_type(a, ut)
    e = (b >> m).astype(it)
    sub = (8 * jnp.dtype(ut).itemsize - 1 - jax.lax.clz(b)).astype(it) - (bias - 1 + m)
    return jnp.where(e == 0, sub, e - bias)


def _uniform(key, shape, dtype):
    """U[0, 1) draws on the grid ``k 2^-m`` (``m`` = 23 for float32, 52 for float64, as
    ``jax.random.uniform``), so stochastic rounding is biased by less than ``2^-m`` of a grid step.

    The bits come from one XLA ``RngBitGenerator`` op with the Threefry algorithm, keyed by the two
    words of ``key`` (counter starting at 0): same key, same draws. One HLO op compiles far faster
    than ``jax.random``'s Threefry loop, and on CPU it runs about 4x faster than the default
    (Philox) ``rbg`` stream (``benchmarks/fp4.py``). Under ``vmap`` JAX batches this op by drawing
    ``(batch, *shape)`` bits from the first key of the batch, so replicate ``i`` gets slice ``i``:
    distinct draws, but not the draws the same key gives outside ``vmap``."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    state = jnp.concatenate([key.astype(jnp.uint32), jnp.zeros(2, jnp.uint32)])
    wide = jnp.dtype(dtype).itemsize == 8
    m = 52 if wide else 23
    _, bits = jax.lax.rng_bit_generator(
        state, shape, jnp.uint64 if wide else jnp.uint32, jax.lax.RandomAlgorithm.RNG_THREE_FRY
    )
    return (bits >> (bits.dtype.itemsize * 8 - m)).astype(dtype) * (2.0**-m)


def rounding_uniform(shape, dtype=jnp.float32, *, key) -> jax.Array:
    """The U[0, 1) draws that stochastic rounding under ``key`` compares with (:func:`quantize`
    with ``rounding="stochastic"`` on an array of ``shape`` and ``dtype``): on the grid
    ``k 2^-m`` (``m`` = 23 for float32, 52 for float64), from one XLA ``RngBitGenerator`` op with
    the Threefry algorithm keyed by the two words of ``key``. Same key, same draws.

    >>> u = rounding_uniform((1000,), key=jax.random.key(0))
    >>> u.shape, bool((u >= 0).all() & (u < 1).all()), bool(abs(u.mean() - 0.5) < 0.05)
    ((1000,), True, True)
    """
    key = check_key(key)
    if not isinstance(shape, tuple | list):
        shape = (check_int(shape, "shape", lower=0),)
    shape = tuple(check_int(s, "shape", lower=0) for s in shape)
    try:
        dtype = jnp.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"`dtype` must be float32 or float64; got {dtype!r}.") from err
    if dtype not in (jnp.float32, jnp.float64):
        raise TypeError(f"`dtype` must be float32 or float64; got {dtype}.")
    check_memory(math.prod(shape), "`shape`", itemsize=dtype.itemsize, what="the draws")
    return _uniform(key, shape, dtype)


def _pow2(k, dtype):
    """2^k exactly, for integers k with 2^k representable in ``dtype`` (subnormals included),
    built from the bits: exponent field ``k + bias``, or for subnormals the single mantissa bit
    ``k + bias - 1 + m`` (no arithmetic, so XLA's flush-to-zero on CPU cannot touch it)."""
    m, bias, ut, it = _bits(dtype)
    k = k.astype(it)
    normal = k >= 1 - bias
    b = jnp.where(
        normal,
        jnp.maximum(k + bias, 0).astype(ut) << m,
        jnp.ones((), ut) << jnp.maximum(k + bias - 1 + m, 0).astype(ut),
    )
    return jax.lax.bitcast_convert_type(b, dtype)


def _grid(a, f: FloatFormat, rounding: str, u=None):
    """Round magnitudes ``0 <= a <= f.max`` (finite) onto the grid of ``f`` by exact arithmetic."""
    if f.emax - f.emin <= 4:  # few binades (E2M1): a chain of selects, cheap to compile and run
        ulp = jnp.full(a.shape, 2.0 ** (f.emin - f.man_bits), a.dtype)
        inv = jnp.full(a.shape, 2.0 ** (f.man_bits - f.emin), a.dtype)
        for e in range(f.emin + 1, f.emax + 1):
            ulp = jnp.where(a >= 2.0**e, 2.0 ** (e - f.man_bits), ulp)
            inv = jnp.where(a >= 2.0**e, 2.0 ** (f.man_bits - e), inv)
        t = a * inv  # = a / ulp exactly (powers of two), without a division per element
    else:
        e = jnp.clip(_floor_log2(jnp.where(a > 0, a, 1)), f.emin, f.emax)
        ulp = _pow2(e - f.man_bits, a.dtype)
        t = a / ulp  # exact: division by a power of two
    if rounding == "nearest":
        q = jnp.round(t)  # half to even
    elif rounding == "stochastic":
        lo = jnp.floor(t)
        q = jnp.where(u < t - lo, lo + 1, lo)
    elif rounding == "up":
        q = jnp.ceil(t)
    else:
        raise AssertionError(rounding)
    return q * ulp  # <= f.max: f.max is a grid point and a <= f.max


def _round_mag(a, f: FloatFormat, rounding: str, u=None, cast=True):
    """Magnitudes (finite, >= 0) onto the grid, saturating at ``f.max``."""
    a = jnp.minimum(a, f.max)
    few_binades = f.emax - f.emin <= 4  # E2M1: the select chain of _grid runs ~3x faster on CPU
    castable = cast and not few_binades and f.dtype is not None and f.subnormal
    if castable and rounding != "stochastic" and f.dtype is not None:
        c = a.astype(getattr(jnp, f.dtype))  # round half to even
        s = c.astype(a.dtype)
        if rounding == "nearest":
            return s
        if f.exp_bits + f.man_bits == 7:  # 8-bit codes: the next grid point up is code + 1
            up = jax.lax.bitcast_convert_type(c, jnp.uint8) + 1
            return jnp.where(s < a, jax.lax.bitcast_convert_type(up, c.dtype).astype(a.dtype), s)
    return _grid(a, f, rounding, u)


def round_to(x, fmt="e2m1", rounding="nearest", *, key=None):
    """Round ``x`` elementwise onto the grid of element format ``fmt`` (no scaling).

    Parameters
    ----------
    x : floating array.
    fmt : one of :data:`FORMATS` (``"e2m1"``, ``"e4m3"``, ``"e8m0"``, ...).
    rounding : ``"nearest"`` (half to even; equals the ml_dtypes cast for finite values in range)
        or ``"stochastic"`` (needs ``key``).

    Returns the rounded values in ``x``'s dtype; see the module docstring for saturation and NaN.

    >>> float(round_to(jnp.float32(2.5)))
    2.0
    """
    check_choice(fmt, "fmt", FORMATS)
    check_choice(rounding, "rounding", _ROUNDINGS)
    x = _as_float(x)
    check_key(key, optional=rounding != "stochastic")  # checked when given, needed for SR
    return _round_to(x, key, fmt, rounding)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _round_to(x, key, fmt, rounding):
    f = FORMATS[fmt]
    u = _uniform(key, x.shape, x.dtype) if rounding == "stochastic" else None
    a = jnp.abs(x)
    ok = jnp.isfinite(x)
    if not f.subnormal:  # E8M0: positive only, no zero
        ok = ok & (x > 0)
        q = jnp.maximum(_round_mag(jnp.where(ok, a, 1), f, rounding, u), 2.0**f.emin)
        return jnp.where(ok, q, jnp.nan).astype(x.dtype)
    q = _round_mag(jnp.where(ok, a, 0), f, rounding, u)
    return jnp.where(ok, jnp.where(jnp.signbit(x), -q, q), jnp.nan).astype(x.dtype)


def sr_variance(x, fmt="e2m1"):
    """Exact variance of stochastic rounding of ``x`` onto ``fmt``: ``(|x| - lo)(hi - |x|)``.

    Paper Sec. 3 (two-point distribution on the neighbouring grid points); for ``|x| >= max`` it
    is 0.

    Examples
    --------
    >>> sr_variance(jnp.array([2.5, 1.0, 6.0])).tolist()  # (2.5 - 2)(3 - 2.5); on the grid: 0
    [0.25, 0.0, 0.0]
    """
    check_choice(fmt, "fmt", FORMATS)
    x = _as_float(x)
    f = FORMATS[fmt]
    a = jnp.minimum(jnp.abs(x), f.max)
    e = jnp.clip(_floor_log2(jnp.where(a > 0, a, 1)), f.emin, f.emax)
    ulp = _pow2(e - f.man_bits, a.dtype)
    lo = jnp.floor(a / ulp) * ulp
    return (a - lo) * jnp.maximum(lo + ulp - a, 0) * (a < f.max)


# ----------------------------------------------------------------------------------------------
# block formats


_SCALE_RULES = ("nearest", "floor", "ceil")


@dataclasses.dataclass(frozen=True)
class BlockFormat:
    """Block-scaled E2M1: ``block_size`` elements share one scale in ``scale_fmt``.

    Parameters
    ----------
    block_size : int >= 1.
    scale_fmt : a :data:`FORMATS` name or ``"fp32"`` (exact, unrounded scale).
    tensor_scale : second-level FP32 per-tensor scale (NVFP4) or not (MXFP4).
    scale_rule : ``"nearest"``; for ``scale_fmt="e8m0"`` also ``"floor"`` (OCP MX) or ``"ceil"``.
    elem_fmt : element format, default ``"e2m1"``.
    """

    block_size: int = 16
    scale_fmt: str = "e4m3"
    tensor_scale: bool = True
    scale_rule: str = "nearest"
    elem_fmt: str = "e2m1"

    def __post_init__(self):
        check_int(self.block_size, "block_size", lower=1, upper=2**20)
        check_choice(self.scale_fmt, "scale_fmt", (*FORMATS, "fp32"))
        check_choice(self.elem_fmt, "elem_fmt", FORMATS)
        check_choice(self.scale_rule, "scale_rule", _SCALE_RULES)
        check_bool(self.tensor_scale, "tensor_scale")
        if self.scale_rule != "nearest" and self.scale_fmt != "e8m0":
            raise ValueError(
                f"`scale_rule` {self.scale_rule!r} needs `scale_fmt` 'e8m0'; got "
                f"{self.scale_fmt!r}."
            )
        if not FORMATS[self.elem_fmt].subnormal:
            raise ValueError(f"`elem_fmt` must have a zero (not 'e8m0'); got {self.elem_fmt!r}.")

    def replace(self, **kw) -> BlockFormat:
        return dataclasses.replace(self, **kw)


NVFP4 = BlockFormat(16, "e4m3", True, "nearest")
MXFP4 = BlockFormat(32, "e8m0", False, "floor")
_NAMED = {"nvfp4": NVFP4, "mxfp4": MXFP4}


class BlockQuantized(eqx.Module):
    """A block-quantised tensor: signed element values ``values (..., n_blocks, block_size)`` on the
    element grid, decode ``scales (..., n_blocks)`` in the scale format, FP32-style ``tensor_scale``
    (``s_enc``; 1 without a per-tensor scale). ``dequantize()`` gives ``values * scales /
    tensor_scale`` in the original shape (NaN blocks stay NaN)."""

    values: jax.Array
    scales: jax.Array
    tensor_scale: jax.Array
    nonfinite: jax.Array
    axis: int = eqx.field(static=True)
    length: int = eqx.field(static=True)

    def dequantize(self):
        c = (self.scales / self.tensor_scale)[..., None]
        out = jnp.where(self.nonfinite[..., None], jnp.nan, self.values * c)
        out = out.reshape(*out.shape[:-2], -1)[..., : self.length]
        return jnp.moveaxis(out, -1, self.axis)


def _resolve(fmt, name="fmt") -> BlockFormat:
    if isinstance(fmt, BlockFormat):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"`{name}` must be 'nvfp4', 'mxfp4' or a BlockFormat; got {fmt!r:.60}.")
    return _NAMED[check_choice(fmt, name, _NAMED)]


def _check_axis(axis, ndim):
    return check_int(axis, "axis", lower=-ndim, upper=ndim - 1) % ndim


def _max2(p, q):
    return jnp.maximum(p[0], q[0]), jnp.maximum(p[1], q[1])


def _block_amax(xb):
    """Per block (last axis): the largest finite magnitude (0 if none) and whether the block holds
    a NaN or inf, in one pass over ``xb``.

    Non-negative floats order as their bit patterns read as integers, and NaN and +-inf are the
    patterns at and above that of +inf, so both come from one two-output integer max-reduction.
    Unlike a float ``max`` of ``where(isfinite(x), |x|, 0)`` (which XLA on CPU hands to a library
    reduction after writing the masked copy out in full), XLA fuses it with the read of ``xb``."""
    m, bias, _, it = _bits(xb.dtype)
    b = jax.lax.bitcast_convert_type(jnp.abs(xb), it)
    inf = jnp.asarray((2 * bias + 1) << m, it)  # exponent field all ones: the pattern of +inf
    zero = jnp.zeros((), it)
    fin, every = jax.lax.reduce(
        (jnp.where(b < inf, b, zero), b), (zero, zero), _max2, (b.ndim - 1,)
    )
    return jax.lax.bitcast_convert_type(fin, xb.dtype), every >= inf


def _scales(amax_b, bf: BlockFormat, dtype, up=False):
    """Decode scales s_b and s_enc from block maxima (finite, >= 0); ``up``: never clip."""
    fe = FORMATS[bf.elem_fmt]
    if bf.scale_fmt == "fp32":
        return amax_b / fe.max, jnp.ones((), dtype)
    fs = FORMATS[bf.scale_fmt]
    if bf.tensor_scale:
        amax_t = jnp.max(amax_b)
        s_enc = jnp.where(amax_t > 0, (fe.max * fs.max) / jnp.where(amax_t > 0, amax_t, 1), 1)
        # below amax_T ~ 7.9e-36 (float32) the ratio overflows to inf and the output would be NaN:
        # the largest finite scale keeps every block scale finite (bits elsewhere unchanged)
        s_enc = jnp.minimum(s_enc, jnp.finfo(s_enc.dtype).max)
    else:
        s_enc = jnp.ones((), dtype)
    ideal = amax_b / fe.max * s_enc
    pos = ideal > 0
    if bf.scale_fmt == "e8m0":
        safe = jnp.where(pos, amax_b * s_enc, 1)
        # OCP MX v1.0 sec. 6.3: 2^(floor(log2 amax) - emax_elem)
        if bf.scale_rule == "floor" and not up:
            k = _floor_log2(safe) - int(math.floor(math.log2(fe.max)))
        elif bf.scale_rule == "ceil" or up:
            fl = _floor_log2(jnp.where(pos, ideal, 1))
            k = jnp.where(_pow2(fl, dtype) < ideal, fl + 1, fl)
        else:
            k = _floor_log2(_round_mag(jnp.where(pos, ideal, 1), fs, "nearest", cast=False))
        k = jnp.clip(k, fs.emin, fs.emax)
        s = _pow2(k, dtype)
    else:
        s = _round_mag(ideal, fs, "up" if up else "nearest")
    return jnp.where(pos, s, 0), s_enc


def quantize_blocks(
    x, fmt="nvfp4", rounding="nearest", *, key=None, axis=-1, pad=False
) -> BlockQuantized:
    """Block-quantise ``x`` along ``axis`` with a :class:`BlockFormat` (or ``"nvfp4"``/``"mxfp4"``).

    Returns a :class:`BlockQuantized` with the element values, block scales and tensor scale (see
    the module docstring for the scale rules, zero blocks and non-finite inputs).

    Examples
    --------
    >>> x = jnp.array([6.0, 3.0, 1.5, 0.5] * 4)  # one NVFP4 block of 16, every value on the grid
    >>> b = quantize_blocks(x)
    >>> b.values.shape, b.scales.shape, bool((b.dequantize() == x).all())
    ((1, 16), (1,), True)
    """
    concrete = not _is_tracer(x)
    x, bf, ax = _block_args(x, fmt, rounding, key, axis, pad)
    b = _quantize_blocks(x, key, bf, rounding, ax)
    if concrete:  # the finiteness check reads the per-block flags, not x again
        _refuse_nonfinite(jnp.any(b.nonfinite))
    return b


def _block_args(x, fmt, rounding, key, axis, pad):
    """The checked ``(x, BlockFormat, axis)`` of a block quantiser call; finiteness unchecked."""
    bf = _resolve(fmt)
    check_choice(rounding, "rounding", _ROUNDINGS)
    pad = check_bool(pad, "pad")  # checked on every call, not only where a block is short
    x = _as_float(x, check_finite=False)
    if x.ndim == 0 or x.size == 0:
        raise ValueError(f"`x` must have at least one axis and one entry; got shape {x.shape}.")
    ax = _check_axis(axis, x.ndim)
    n, B = x.shape[ax], bf.block_size
    if n % B and not pad:
        raise ValueError(
            f"`x`: block_size={B} must divide the length {n} of axis {axis} (or pass pad=True)"
        )
    check_key(key, optional=rounding != "stochastic")
    return x, bf, ax


def _block_scales(x, bf, rounding, ax):
    """``x`` as blocks ``(..., n_blocks, block_size)`` (zero-padded), the decode scales ``s_b``,
    the tensor scale ``s_enc``, the non-finite flags and the element divisors ``c``."""
    n, B = x.shape[ax], bf.block_size
    xm = jnp.moveaxis(x, ax, -1)
    if n % B:
        xm = jnp.pad(xm, [(0, 0)] * (xm.ndim - 1) + [(0, -n % B)])
    xb = xm.reshape(*xm.shape[:-1], -1, B)
    amax_b, nonfinite = _block_amax(xb)
    s_b, s_enc = _scales(amax_b, bf, x.dtype, up=rounding == "stochastic")
    return xb, s_b, s_enc, nonfinite, jnp.where(s_b == 0, 1, s_b / s_enc)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _quantize_blocks(x, key, bf, rounding, ax):
    xb, s_b, s_enc, nonfinite, c = _block_scales(x, bf, rounding, ax)
    u = _uniform(key, xb.shape, xb.dtype) if rounding == "stochastic" else None
    a = jnp.where(jnp.isfinite(xb), jnp.abs(xb), 0)
    q = _round_mag(a / c[..., None], FORMATS[bf.elem_fmt], rounding, u)
    q = jnp.where((s_b == 0)[..., None], 0, jnp.where(jnp.signbit(xb), -q, q))
    return BlockQuantized(
        q.astype(x.dtype),
        s_b.astype(x.dtype),
        jnp.asarray(s_enc, x.dtype),
        nonfinite,
        ax - x.ndim,
        x.shape[ax],
    )


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _fake_quantize(x, key, bf, rounding, ax):
    """``_quantize_blocks(...).dequantize()`` (bit for bit, compiled as one program) without
    writing the element values out: one pass over ``x`` for the block maxima, one to round and
    dequantise; also whether any block held a NaN or inf.

    The element loop multiplies the rounded magnitude by a per-block factor picked by the sign of
    ``x``: ``s_b / s_enc`` or ``-s_b / s_enc`` (+0 in zero blocks, NaN in non-finite ones), which
    folds in the sign, zero-block and NaN-block selects. Each factor ends in a division, so XLA
    computes it once per block; a chain ending in a select would be fused into the element loop,
    recomputing the block scale (its E4M3 rounding included) for every element."""
    xb, s_b, s_enc, nonfinite, c = _block_scales(x, bf, rounding, ax)
    u = _uniform(key, xb.shape, xb.dtype) if rounding == "stochastic" else None
    q = _round_mag(jnp.abs(xb) / c[..., None], FORMATS[bf.elem_fmt], rounding, u)
    pos = jnp.where(nonfinite, jnp.nan, s_b) / s_enc
    neg = jnp.where(nonfinite, jnp.nan, jnp.where(s_b == 0, 0, -s_b)) / s_enc
    out = q * jnp.where(jnp.signbit(xb), neg[..., None], pos[..., None])
    out = out.reshape(*out.shape[:-2], -1)[..., : x.shape[ax]]
    return jnp.moveaxis(out, -1, ax), jnp.any(nonfinite)


def quantize(
    x, fmt: str | BlockFormat = "nvfp4", rounding="nearest", *, key=None, axis=-1, pad=False
) -> jax.Array:
    """Fake-quantise ``x``: the dequantised values of ``x`` in format ``fmt``.

    Parameters
    ----------
    x : floating array.
    fmt : ``"nvfp4"`` (E2M1, blocks of 16, E4M3 scale, FP32 tensor scale), ``"mxfp4"`` (E2M1,
        blocks of 32, E8M0 scale, OCP floor rule), a :class:`BlockFormat`, or an element format
        ``"e2m1"`` / ``"e4m3"`` (elementwise :func:`round_to`, no scale; ``axis`` unused).
    rounding : ``"nearest"`` or ``"stochastic"`` (needs ``key``).
    key : PRNG key for stochastic rounding.
    axis : the axis along which blocks run.
    pad : allow a block size that does not divide the axis (zero padding).

    >>> x = jnp.linspace(-1.0, 1.0, 32)
    >>> bool(jnp.max(jnp.abs(quantize(x) - x)) <= 1 / 6)
    True
    """
    if isinstance(fmt, str) and fmt in ("e2m1", "e4m3"):
        check_bool(pad, "pad")  # unused here, checked all the same
        out = round_to(x, fmt, rounding, key=key)
        check_int(axis, "axis") if out.ndim == 0 else _check_axis(axis, out.ndim)
        return out
    if not isinstance(fmt, BlockFormat):
        if not isinstance(fmt, str):
            raise TypeError(
                f"`fmt` must be 'e2m1', 'e4m3', 'mxfp4', 'nvfp4' or a BlockFormat; got {fmt!r:.60}."
            )
        check_choice(fmt, "fmt", ("e2m1", "e4m3", "mxfp4", "nvfp4"))
    concrete = not _is_tracer(x)
    x, bf, ax = _block_args(x, fmt, rounding, key, axis, pad)
    out, nonfinite = _fake_quantize(x, key, bf, rounding, ax)
    if concrete:  # one pass over x, not a separate finiteness pass before it
        _refuse_nonfinite(nonfinite)
    return out


# ----------------------------------------------------------------------------------------------
# quantised matmul


@dataclasses.dataclass(frozen=True)
class Operand:
    """How one GEMM operand is quantised: a block ``fmt`` and a ``rounding``."""

    fmt: BlockFormat = NVFP4
    rounding: str = "nearest"

    def __post_init__(self):
        object.__setattr__(self, "fmt", _resolve(self.fmt))
        check_choice(self.rounding, "rounding", _ROUNDINGS)

    def __call__(self, x, axis, key):
        return quantize(x, self.fmt, self.rounding, key=key, axis=axis, pad=True)


_OPS = ("fwd_x", "fwd_w", "bwd_g", "bwd_w", "upd_g", "upd_x")


def _q(op: Operand | None, x, axis, key):
    return x if op is None else op(x, axis, key)


@dataclasses.dataclass(frozen=True)
class QuantMatmul:
    """``x @ W.T`` with each operand of each of the three GEMMs quantised on its own (None = exact).

    Fields (each an :class:`Operand` or None): ``fwd_x, fwd_w`` (forward ``Q(x) Q(W)^T``, blocks
    along in_features), ``bwd_g, bwd_w`` (input gradient ``Q(g) Q(W)``, blocks along out_features),
    ``upd_g, upd_x`` (weight gradient ``Q(g)^T Q(x)``, blocks along tokens). Paper Eqs. (4)-(6).
    Hashable, so it can be the static ``matmul`` field of :class:`nn.Linear`. A ``key`` is needed
    whenever an operand uses stochastic rounding.
    """

    fwd_x: Operand | None = None
    fwd_w: Operand | None = None
    bwd_g: Operand | None = None
    bwd_w: Operand | None = None
    upd_g: Operand | None = None
    upd_x: Operand | None = None

    def __post_init__(self):
        for name in _OPS:
            v = getattr(self, name)
            if v is not None and not isinstance(v, Operand):
                raise TypeError(f"`{name}` must be an Operand or None; got {v!r:.60}.")

    @classmethod
    def fqt(cls, fmt="nvfp4", *, sr_grad=True, sr_update_x=True) -> QuantMatmul:
        """The paper's fully quantised training recipe (Sec. 5): RtN weights and forward
        activations, SR for neural gradients (both GEMMs) and for the activations of the update
        GEMM."""
        sr_grad = check_bool(sr_grad, "sr_grad")
        sr_update_x = check_bool(sr_update_x, "sr_update_x")
        rn, sr = Operand(_resolve(fmt), "nearest"), Operand(_resolve(fmt), "stochastic")
        g = sr if sr_grad else rn
        return cls(rn, rn, g, rn, g, sr if sr_update_x else rn)

    @classmethod
    def qaf(cls, fmt="nvfp4") -> QuantMatmul:
        """Quantisation-aware finetuning (paper Sec. 5.2): forward in FP4 (RtN), backward exact."""
        rn = Operand(_resolve(fmt), "nearest")
        return cls(rn, rn, None, None, None, None)

    @classmethod
    def backward_only(cls, fmt="nvfp4") -> QuantMatmul:
        """Exact forward, FP4 backward per the recipe (the threshold experiment of paper Sec. 4)."""
        f = cls.fqt(fmt)
        return dataclasses.replace(f, fwd_x=None, fwd_w=None)

    @property
    def stochastic(self) -> bool:
        return any(
            getattr(self, n) is not None and getattr(self, n).rounding == "stochastic" for n in _OPS
        )

    def replace(self, **kw) -> QuantMatmul:
        return dataclasses.replace(self, **kw)

    def __call__(self, x, w, *, key=None):
        x, w = _as_float(x, "x"), _as_float(w, "w")
        if x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
            raise ValueError(
                f"`w` must be (out, in) with in = x.shape[-1]; got `x` {x.shape}, `w` {w.shape}."
            )
        check_key(key, optional=not self.stochastic)  # required by stochastic rounding
        if key is None:
            key = jax.random.key(0)
        lead = x.shape[:-1]
        y = _qmm(
            self,
            x.reshape(-1, x.shape[-1]),
            w,
            jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key,
        )
        # jax.custom_vjp's stub returns an untyped callable: y is the array _fwd returns
        return y.reshape(*lead, w.shape[0])  # pyright: ignore[reportAttributeAccessIssue]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _qmm(cfg: QuantMatmul, x, w, key):
    return _fwd(cfg, x, w, key)[0]


def _fwd(cfg, x, w, key):
    k = jax.random.split(key, 6)
    y = _q(cfg.fwd_x, x, -1, k[0]) @ _q(cfg.fwd_w, w, -1, k[1]).T
    return y, (x, w, key)


def _bwd(cfg, res, g):
    x, w, key = res
    k = jax.random.split(key, 6)
    dx = _q(cfg.bwd_g, g, -1, k[2]) @ _q(cfg.bwd_w, w, 0, k[3])
    dw = _q(cfg.upd_g, g, 0, k[4]).T @ _q(cfg.upd_x, x, 0, k[5])
    return dx, dw, np.zeros(key.shape, dtype=jax.dtypes.float0)


_qmm.defvjp(_fwd, _bwd)
