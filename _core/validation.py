"""Validation at the public boundary, shared by every package of theorylab.

Each helper raises ``TypeError`` for a value of the wrong kind and ``ValueError`` for a value out of
range, and its message names the argument, the requirement and the value received, in one style:
"`eta` must satisfy 0 < eta < 2/beta = 2; got 2.5." Internals trust their inputs.

Numerical faults inside a valid call (a diverging run, a singular solve, an iteration cap reached)
raise :class:`NumericalError` (or its subclass :class:`ConvergenceError`) with a ``diagnostics``
dict, never a NaN in a result.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal, TypeVar, overload

import numpy as np

if TYPE_CHECKING:
    from jax import Array

_T = TypeVar("_T")

__all__ = [
    "NumericalError",
    "ConvergenceError",
    "as_array",
    "to_array",
    "check_array",
    "check_scalar",
    "check_int",
    "check_bool",
    "check_choice",
    "as_generator",
    "check_key",
    "check_instance",
    "check_model",
    "check_callable",
    "call_real",
    "call_scalar",
    "check_transform",
    "as_path",
    "check_memory",
    "batch_source",
    "check_finite_result",
]


class NumericalError(ArithmeticError):
    """A valid call whose computation failed numerically (diverged, singular, non-finite).

    ``diagnostics`` holds what was observed (step, value, condition number, ...) so the caller can
    decide what to change; the message says it in words.
    """

    def __init__(self, message: str, **diagnostics):
        super().__init__(message)
        self.diagnostics = diagnostics


class ConvergenceError(NumericalError):
    """An iterative solver or integrator reached its cap (iterations, steps, time) unconverged.

    The message names the cap and the argument that raises it.
    """


def _is_tracer(x) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.core.Tracer)


def _show(value, limit=60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_KINDS = {
    "c": "complex",
    "U": "string",
    "S": "bytes",
    "O": "object",
    "V": "structured",
    "M": "datetime",
    "m": "timedelta",
    "b": "boolean",
}


def as_array(
    x,
    name,
    *,
    ndim=None,
    shape=None,
    finite: bool | Literal["nan"] = True,
    dtype=np.float64,
    min_size=None,
    allow_bool=False,
    lower=None,
    upper=None,
    closed="both",
):
    """Return ``x`` as a ``dtype`` (default float64) array, strictly: no silent reshaping or cast.

    Rejects complex, string, object and (unless ``allow_bool``) boolean input with ``TypeError``
    rather than dropping an imaginary part or parsing text. ``shape`` may hold ``None`` for a free
    axis; ``min_size`` is the least number of elements; ``lower``/``upper``/``closed`` bound every
    entry as in :func:`check_scalar`. ``finite="nan"`` rejects NaN but admits infinities. JAX
    tracers are checked for dtype and shape only.
    """
    if isinstance(x, str | bytes) or x is None:
        raise TypeError(f"`{name}` must be array-like of real numbers; got {_show(x)}.")
    if _is_tracer(x):
        arr = x
        kind = np.dtype(x.dtype).kind
    else:
        try:
            arr = np.asarray(x)
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"`{name}` must be array-like of real numbers; got {type(x).__name__} ({err})."
            ) from err
        kind = arr.dtype.kind
    if kind in _KINDS and not (kind == "b" and allow_bool):
        raise TypeError(
            f"`{name}` must hold real numbers; got an array of {_KINDS[kind]} dtype {arr.dtype}."
        )
    if not _is_tracer(arr):
        try:
            with np.errstate(over="raise"):
                arr = arr.astype(dtype, copy=False)
        except FloatingPointError as err:  # e.g. 1e300 into float32
            raise ValueError(f"`{name}` must fit in {np.dtype(dtype)}; got larger values.") from err
        except (TypeError, ValueError, OverflowError) as err:
            raise TypeError(
                f"`{name}` must be convertible to {np.dtype(dtype)}; got dtype {arr.dtype}."
            ) from err
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-D; got shape {tuple(arr.shape)}.")
    if shape is not None:
        if arr.ndim != len(shape) or any(
            s is not None and s != t for s, t in zip(shape, arr.shape, strict=True)
        ):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape)
            want += ",)" if len(shape) == 1 else ")"
            raise ValueError(f"`{name}` must have shape {want}; got shape {tuple(arr.shape)}.")
    if min_size is not None and arr.size < min_size:
        raise ValueError(
            f"`{name}` must hold at least {min_size} element(s); got shape {tuple(arr.shape)}."
        )
    if _is_tracer(arr):
        return arr
    if finite and np.issubdtype(arr.dtype, np.inexact):
        bad = np.isnan(arr) if finite == "nan" else ~np.isfinite(arr)
        if bad.any():
            what = "NaN" if finite == "nan" else "NaN or infinite"
            raise ValueError(
                f"`{name}` must be {'free of NaN' if finite == 'nan' else 'finite'}; "
                f"got {int(bad.sum())} {what} value(s)."
            )
    if (lower is not None or upper is not None) and arr.size:
        lo_ok = (
            True if lower is None else (arr >= lower if closed in ("both", "left") else arr > lower)
        )
        hi_ok = (
            True
            if upper is None
            else (arr <= upper if closed in ("both", "right") else arr < upper)
        )
        bad = ~(lo_ok & hi_ok)
        if np.any(bad):
            left = "[" if closed in ("both", "left") else "("
            right = "]" if closed in ("both", "right") else ")"
            lo = "-inf" if lower is None else f"{lower:g}"
            hi = "inf" if upper is None else f"{upper:g}"
            first = arr[bad].ravel()[0] if np.ndim(bad) else arr.item()
            raise ValueError(
                f"`{name}` must lie in {left}{lo}, {hi}{right}; got {first:g}"
                f"{'' if arr.ndim == 0 else ' among its entries'}."
            )
    return arr


def to_array(x, name) -> np.ndarray:
    """``np.asarray(x)`` keeping its dtype, for callers that check the dtype themselves: ragged
    nesting or an object NumPy cannot read raises ``TypeError`` naming ``name``, not NumPy's
    "setting an array element with a sequence"."""
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{name}` must be array-like; got {type(x).__name__} ({err}).") from err


def check_array(
    x, name, *, ndim=None, min_ndim=None, finite: bool | Literal["inf"] = True, max_abs=None
):
    """Validate a NumPy/JAX array (or tracer) without converting it: real floating or integer
    dtype, ``ndim`` (or at least ``min_ndim``) axes, finite entries (at most ``max_abs`` in
    magnitude) when concrete. ``finite="inf"`` rejects infinities but admits NaN (a padding or
    missing-value marker). Returns ``x`` (lists and scalars go through :func:`as_array`)."""
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        x = as_array(x, name, ndim=ndim, finite=finite is True)
    kind = np.dtype(x.dtype).kind if not str(x.dtype).startswith("key") else "V"
    if kind not in "iuf":
        raise TypeError(f"`{name}` must hold real numbers; got an array of dtype {x.dtype}.")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-D; got shape {tuple(x.shape)}.")
    if min_ndim is not None and x.ndim < min_ndim:
        raise ValueError(
            f"`{name}` must have at least {min_ndim} axes; got shape {tuple(x.shape)}."
        )
    if finite and not _is_tracer(x) and kind == "f":
        arr = np.asarray(x)
        if finite == "inf" and np.isinf(arr).any():
            raise ValueError(
                f"`{name}` must be free of infinities (NaN marks a missing entry); got "
                f"{int(np.isinf(arr).sum())} infinite value(s)."
            )
        if finite is True and not np.all(np.isfinite(arr)):
            raise ValueError(f"`{name}` must be finite; got NaN or infinite value(s).")
    if max_abs is not None and not _is_tracer(x) and x.size:
        # float64 before comparing: max_abs cast to a narrow dtype (bfloat16, float16) overflows
        top = float(np.abs(np.asarray(x, dtype=np.float64)).max())
        if top > max_abs:
            raise ValueError(
                f"`{name}` must have entries of magnitude <= {max_abs:g}; got {top:.3g}."
            )
    return x


def _dtype_kind(value) -> str:
    """NumPy kind of ``value.dtype``; "V" for dtypes NumPy cannot read (JAX PRNG keys)."""
    try:
        return np.dtype(value.dtype).kind
    except TypeError:
        return "V"


def _real(value, name, what="a real number"):
    """``value`` as a Python number, accepting 0-d arrays (NumPy or JAX) of a real dtype."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"`{name}` must be {what}; got the boolean {value!r}.")
    if not isinstance(value, numbers.Number) and getattr(value, "ndim", None) == 0:
        if _dtype_kind(value) in "iuf":
            value = value.item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(
            f"`{name}` must be {what}; got {_show(value)} of type {type(value).__name__}."
        )
    return value


def check_scalar(value, name, *, lower=None, upper=None, closed="both", finite=True):
    """Return ``value`` as a float, checking ``lower <= value <= upper``.

    ``closed`` in {"both", "left", "right", "neither"} says which ends are allowed. NaN is always
    rejected, infinities unless ``finite=False``; integers too large for a float are rejected.
    """
    if _is_tracer(value):  # inside jit: the dtype and shape are all there is to check
        if value.ndim or np.dtype(value.dtype).kind not in "iuf":
            raise TypeError(
                f"`{name}` must be a real scalar; got a traced {value.dtype} array "
                f"of shape {value.shape}."
            )
        return value
    value = _real(value, name)
    try:
        value = float(value)
    except OverflowError as err:
        raise ValueError(
            f"`{name}` must be representable as a float; got an integer of "
            f"{len(str(abs(math.trunc(value))))} digits."
        ) from err
    if math.isnan(value) or (finite and math.isinf(value)):
        raise ValueError(f"`{name}` must be finite; got {value}.")
    lo_ok = lower is None or (value >= lower if closed in ("both", "left") else value > lower)
    hi_ok = upper is None or (value <= upper if closed in ("both", "right") else value < upper)
    if not (lo_ok and hi_ok):
        left = "[" if closed in ("both", "left") else "("
        right = "]" if closed in ("both", "right") else ")"
        lo = "-inf" if lower is None else f"{lower:g}"
        hi = "inf" if upper is None else f"{upper:g}"
        raise ValueError(f"`{name}` must lie in {left}{lo}, {hi}{right}; got {value:g}.")
    return value + 0.0  # -0.0 -> 0.0: a signed zero flips the sign of what is built from it


def check_int(value, name, *, lower=None, upper=None):
    """Return ``value`` as an int, checking ``lower <= value <= upper``.

    Floats are rejected even when integral (``2.0``): a size given as a float is usually a bug.
    """
    if not isinstance(value, numbers.Integral) and getattr(value, "ndim", None) == 0:
        if _dtype_kind(value) in "iu":
            value = value.item()
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"`{name}` must be an integer; got {_show(value)} of type {type(value).__name__}."
        )
    value = int(value)
    if abs(value) >= 2**63:
        raise ValueError(
            f"`{name}` must fit in 64 bits; got an integer of {len(str(abs(value)))} digits."
        )
    if (lower is not None and value < lower) or (upper is not None and value > upper):
        lo = "-inf" if lower is None else lower
        hi = "inf" if upper is None else upper
        raise ValueError(f"`{name}` must be an integer in [{lo}, {hi}]; got {value}.")
    return value


def check_bool(value, name) -> bool:
    """Return ``value`` as a bool; only ``True``/``False`` (Python or NumPy) are accepted.

    ``"no"``, ``0``, ``1`` and ``None`` are rejected: a flag given as anything else is a bug.
    """
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise TypeError(
        f"`{name}` must be a bool (True or False); got {_show(value)} of type "
        f"{type(value).__name__}."
    )


def _same_kind(a, b) -> bool:
    if isinstance(a, str | bytes) or isinstance(b, str | bytes):
        return type(a) is type(b)
    if isinstance(a, bool | np.bool_) or isinstance(b, bool | np.bool_):
        return isinstance(a, bool | np.bool_) and isinstance(b, bool | np.bool_)
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return isinstance(a, numbers.Integral) == isinstance(b, numbers.Integral)
    return type(a) is type(b)


def check_choice(value, name, options: Iterable):
    """Return ``value`` if it is one of ``options``; else a ``ValueError`` listing them."""
    options = tuple(options)
    try:
        ok = any(_same_kind(value, o) and value == o for o in options)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(
            f"`{name}` must be one of {', '.join(map(repr, options))}; got {_show(value)}."
        )
    return value


def as_generator(rng, name="rng") -> np.random.Generator:
    """Return a ``np.random.Generator`` from None, a non-negative int, a Generator, a
    BitGenerator or a SeedSequence; anything else raises naming ``name``."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence | np.random.BitGenerator):
        return np.random.default_rng(rng)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool | np.bool_):
        check_int(rng, name, lower=0)
        return np.random.default_rng(int(rng))
    if isinstance(rng, list | tuple | np.ndarray) and len(rng):
        seq = rng.ravel().tolist() if isinstance(rng, np.ndarray) else list(rng)
        if all(
            isinstance(s, numbers.Integral)
            and not isinstance(s, bool | np.bool_)
            and 0 <= int(s) < 2**63
            for s in seq
        ):
            return np.random.default_rng([int(s) for s in seq])
    raise TypeError(
        f"`{name}` must be None, a non-negative int seed (or a sequence of them), a "
        f"numpy.random.Generator or a SeedSequence; got {_show(rng)} of type "
        f"{type(rng).__name__}."
    )


@overload
def check_key(key, name: str = "key", *, optional: Literal[False] = False) -> Array: ...
@overload
def check_key(key, name: str = "key", *, optional: bool) -> Array | None: ...
def check_key(key, name="key", *, optional=False):
    """Return ``key`` if it is one JAX PRNG key: a typed key (``jax.random.key(seed)``, shape ())
    or its raw data (``jax.random.key_data(key)``: uint32, shape (2,)). ``optional`` admits
    None."""
    if key is None and optional:
        return None
    want = (
        f"`{name}` must be a single JAX PRNG key (jax.random.key(seed) or "
        f"its raw uint32 data of shape (2,)){' or None' if optional else ''}"
    )
    if key is None:
        raise ValueError(f"{want}; it is required here and got None.")
    dtype = getattr(key, "dtype", None)
    if dtype is None or isinstance(key, np.ndarray) and dtype.kind != "u":
        raise TypeError(f"{want}; got {_show(key)} of type {type(key).__name__}.")
    import jax
    import jax.numpy as jnp

    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"{want}; got a batch of keys of shape {key.shape}.")
        return key
    if np.dtype(dtype) != np.uint32 or tuple(key.shape) != (2,):
        raise TypeError(f"{want}; got an array of dtype {dtype} and shape {tuple(key.shape)}.")
    return key


def check_model(model, name="model"):
    """Refuse anything but a pytree with floating array leaves (an equinox Module): None, a
    string or a number would otherwise count 0 parameters and train nothing."""
    import jax

    leaves = jax.tree.leaves(model)
    if not any(hasattr(x, "dtype") and np.issubdtype(x.dtype, np.inexact) for x in leaves):
        raise TypeError(
            f"`{name}` must be a pytree with floating array leaves (an equinox Module); got "
            f"{repr(model)[:60]} of type {type(model).__name__}."
        )
    return model


def check_instance(value, name, cls, what=None):
    """Return ``value`` if it is an instance of ``cls`` (class or tuple); ``what`` describes it."""
    if not isinstance(value, cls):
        names = [cls] if isinstance(cls, type) else cls
        what = what or " or ".join(c.__name__ for c in names)
        raise TypeError(
            f"`{name}` must be {what}; got {_show(value)} of type {type(value).__name__}."
        )
    return value


def check_callable(f: _T, name: str) -> _T:
    """Return ``f`` if it is callable."""
    if not callable(f):
        raise TypeError(f"`{name}` must be callable; got {_show(f)} of type {type(f).__name__}.")
    return f


def call_real(f, x, name) -> np.ndarray:
    """``f(x)`` as a float64 array: a user callable ``name`` that returns no real numbers (text,
    an object, complex, a frozen scipy distribution when ``f`` was the distribution itself)
    raises ``TypeError`` naming it. Exceptions raised inside ``f`` are the caller's and pass
    unchanged."""
    out = f(x)
    if isinstance(out, np.ndarray) and out.dtype == np.float64:
        return out
    return as_array(out, f"{name}(x)", finite=False)


def call_scalar(f, x, name) -> float:
    """``f(x)`` as one float, checked as in :func:`call_real`."""
    out = call_real(f, x, name)
    if out.size != 1:
        raise ValueError(f"`{name}` must return one number; got shape {out.shape}.")
    return float(out.reshape(()))


def check_transform(tx, name):
    """Return ``tx`` if it looks like an optax ``GradientTransformation`` (``init``/``update``)."""
    if not (callable(getattr(tx, "init", None)) and callable(getattr(tx, "update", None))):
        raise TypeError(
            f"`{name}` must be an optax GradientTransformation (e.g. optax.adam(1e-3));"
            f" got {_show(tx)} of type {type(tx).__name__}."
        )
    return tx


def as_path(path, name, *, kind=None):
    """Return ``path`` as a str; ``kind`` "file" or "dir" requires an existing one of that kind,
    "parent" an existing parent directory (a file about to be written)."""
    if not isinstance(path, str | os.PathLike) or not os.fspath(path):
        raise TypeError(
            f"`{name}` must be a non-empty path (str or os.PathLike); got {_show(path)}."
        )
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if kind == "file" and not os.path.isfile(path):
        what = "a directory" if os.path.isdir(path) else "missing"
        raise ValueError(f"`{name}` must be an existing file; got {path!r} ({what}).")
    if kind == "dir" and not os.path.isdir(path):
        raise ValueError(f"`{name}` must be an existing directory; got {path!r}.")
    if kind == "parent":
        parent = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path) or not os.path.isdir(parent):
            raise ValueError(
                f"`{name}` must be a file path in an existing directory; got {path!r}."
            )
    return path


def batch_source(batches, name="batches"):
    """``batches`` as ``get(step)``: a callable ``step -> batch`` as is, an iterable read in order.
    An iterable that runs out raises ``ValueError`` naming ``name`` and the step, never a bare
    ``StopIteration`` from inside a training loop."""
    if callable(batches):
        return batches
    if isinstance(batches, str | bytes):
        raise TypeError(
            f"`{name}` must be a callable step -> batch or an iterable of batches; got "
            f"{_show(batches)}."
        )
    try:
        it = iter(batches)
    except TypeError as err:
        raise TypeError(
            f"`{name}` must be a callable step -> batch or an iterable of batches; got "
            f"{type(batches).__name__}."
        ) from err

    def get(step):
        try:
            return next(it)
        except StopIteration:
            raise ValueError(
                f"`{name}` ran out at step {step}: give at least `steps` batches or a "
                f"callable step -> batch."
            ) from None

    return get


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


def check_memory(n_elements, names, *, itemsize=8, what="the arrays", fraction=0.5):
    """Raise ``ValueError`` before allocating ``n_elements`` items of ``itemsize`` bytes when that
    exceeds ``fraction`` of this machine's physical memory; ``names``: the arguments to reduce."""
    need = float(n_elements) * itemsize
    have = _memory_bytes()
    if need > fraction * have:
        raise ValueError(
            f"{names} too large: {what} would take about {need / 2**30:.3g} GiB, "
            f"more than {fraction:g} of this machine's {have / 2**30:.3g} GiB; "
            f"reduce {names}."
        )
    return need


def check_finite_result(value, what, **diagnostics):
    """Return ``value`` if every entry is finite, else raise :class:`NumericalError` naming
    ``what`` with ``diagnostics`` (the inputs that led there)."""
    arr = np.asarray(value)
    if np.issubdtype(arr.dtype, np.inexact) and not np.isfinite(arr).all():
        extra = ", ".join(f"{k}={_show(v, 30)}" for k, v in diagnostics.items())
        raise NumericalError(
            f"{what} is not finite ({int((~np.isfinite(arr)).sum())} NaN or "
            f"infinite value(s)){'; ' + extra if extra else ''}.",
            **diagnostics,
        )
    return value
