"""Validation at the public boundary, shared by every package of theorylab.

Each helper raises ``TypeError`` for a value of the wrong kind and ``ValueError`` for a value out of
range, and its message names the argument, the requirement and the value received, e.g.
"`eta` must satisfy 0 < eta < 2/beta = 2; got 2.5." Internals trust their inputs.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np

__all__ = ["as_array", "check_scalar", "check_int", "check_choice", "as_generator"]


def as_array(x, name, *, ndim=None, shape=None, finite=True, dtype=np.float64):
    """Return ``x`` as a float64 array, strictly: no silent reshaping.

    ``shape`` may hold ``None`` for a free axis. Raises ``ValueError`` naming ``name``.
    """
    try:
        arr = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{name}` must be array-like of numbers; got {type(x).__name__}.") from err
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-D; got shape {arr.shape}.")
    if shape is not None:
        if arr.ndim != len(shape) or any(
            s is not None and s != t for s, t in zip(shape, arr.shape, strict=True)
        ):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"`{name}` must have shape {want}; got shape {arr.shape}.")
    if finite and np.issubdtype(arr.dtype, np.inexact):
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ValueError(
                f"`{name}` must be finite; got {int(bad.sum())} NaN or infinite value(s)."
            )
    return arr


def check_scalar(value, name, *, lower=None, upper=None, closed="both", finite=True):
    """Return ``value`` as a float, checking ``lower <= value <= upper``.

    ``closed`` in {"both", "left", "right", "neither"} says which ends are allowed.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        else:
            raise TypeError(f"`{name}` must be a real number; got {value!r} of type "
                            f"{type(value).__name__}.")
    value = float(value)
    if np.isnan(value) or (finite and np.isinf(value)):
        raise ValueError(f"`{name}` must be finite; got {value}.")
    lo_ok = lower is None or (value >= lower if closed in ("both", "left") else value > lower)
    hi_ok = upper is None or (value <= upper if closed in ("both", "right") else value < upper)
    if not (lo_ok and hi_ok):
        left = "[" if closed in ("both", "left") else "("
        right = "]" if closed in ("both", "right") else ")"
        lo = "-inf" if lower is None else f"{lower:g}"
        hi = "inf" if upper is None else f"{upper:g}"
        raise ValueError(f"`{name}` must lie in {left}{lo}, {hi}{right}; got {value:g}.")
    return value


def check_int(value, name, *, lower=None, upper=None):
    """Return ``value`` as an int, checking ``lower <= value <= upper``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer; got {value!r} of type "
                        f"{type(value).__name__}.")
    value = int(value)
    if (lower is not None and value < lower) or (upper is not None and value > upper):
        lo = "-inf" if lower is None else lower
        hi = "inf" if upper is None else upper
        raise ValueError(f"`{name}` must be an integer in [{lo}, {hi}]; got {value}.")
    return value


def check_choice(value, name, options: Iterable):
    """Return ``value`` if it is one of ``options``; else a ``ValueError`` listing them."""
    options = tuple(options)
    if value not in options:
        raise ValueError(f"`{name}` must be one of {', '.join(map(repr, options))}; got {value!r}.")
    return value


def as_generator(rng) -> np.random.Generator:
    """Normalise ``rng`` (None, int or Generator) with ``np.random.default_rng``."""
    return np.random.default_rng(rng)
