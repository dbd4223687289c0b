"""Data at the public boundary of the ECC estimators: arrays or pandas objects, names kept.

pandas is never imported: a Series or DataFrame is recognised by its ``to_numpy`` and ``index``
attributes, so the package runs without pandas installed.
"""

from __future__ import annotations

import numpy as np

from _core.validation import as_array

__all__ = ["as_numeric", "check_data", "check_unlabeled_columns", "data_names"]


def _is_frame(x) -> bool:
    return hasattr(x, "to_numpy") and hasattr(x, "index") and hasattr(x, "columns")


def _is_series(x) -> bool:
    return hasattr(x, "to_numpy") and hasattr(x, "index") and not hasattr(x, "columns")


def _numeric(x, name):
    """A pandas object as a float64 array; non-numeric columns raise naming them."""
    if _is_frame(x):
        bad = [
            str(c)
            for c, kind in zip(x.columns, x.dtypes, strict=True)
            if getattr(kind, "kind", "O") not in "biuf"
        ]
        if bad:
            raise TypeError(
                f"`{name}` must have numeric columns; got non-numeric columns "
                f"{bad} (encode categories first, e.g. with pandas.get_dummies)."
            )
    elif getattr(x.dtype, "kind", "O") not in "biuf":
        raise TypeError(f"`{name}` must be numeric; got dtype {x.dtype}.")
    return x.to_numpy(dtype=np.float64, na_value=np.nan)


def _check_missing(arr, name, columns=None):
    bad = np.isnan(arr)
    if not bad.any():
        return
    if arr.ndim == 1:
        raise ValueError(
            f"`{name}` must have no missing values; got {int(bad.sum())} missing "
            f"(NaN) of {arr.size}."
        )
    per = bad.sum(0)
    cols = columns if columns is not None else [str(j) for j in range(arr.shape[1])]
    where = ", ".join(f"{cols[j]!s}: {int(per[j])}" for j in np.flatnonzero(per))
    raise ValueError(
        f"`{name}` must have no missing values; got {int(bad.sum())} missing (NaN) "
        f"in {int((per > 0).sum())} column(s) ({where}). Drop or impute those rows "
        f"first."
    )


def as_numeric(v, name, ndim):
    """One input (array, Series or DataFrame) as a finite float64 array with ``ndim`` axes;
    missing values refused with their count and columns."""
    columns = [str(c) for c in v.columns] if _is_frame(v) and ndim == 2 else None
    if _is_frame(v) or _is_series(v):
        if ndim == 1 and _is_frame(v):
            if v.shape[1] != 1:
                raise ValueError(
                    f"`{name}` must be one column; got a DataFrame with {v.shape[1]} columns."
                )
            v = v.iloc[:, 0]
        v = _numeric(v, name)
    else:
        v = as_array(v, name, ndim=ndim, finite=False)
    if v.ndim != ndim:
        raise ValueError(f"`{name}` must be {ndim}-dimensional; got shape {v.shape}.")
    _check_missing(v, name, columns)
    if not np.all(np.isfinite(v)):
        raise ValueError(
            f"`{name}` must be finite; got {int((~np.isfinite(v)).sum())} infinite value(s)."
        )
    if v.size and np.abs(v).max() > 1e100:  # its squares and cross-products would overflow
        raise ValueError(
            f"`{name}` must have entries of magnitude <= 1e100; got "
            f"{np.abs(v).max():.3g}. Rescale it."
        )
    return v


def check_data(y, a, X):
    """``(y, a, X)`` as float64 arrays of matching length; pandas input allowed.

    Missing values are refused with their count and columns; pandas objects must share one index.
    """
    index = getattr(X, "index", None) if _is_frame(X) else None
    arrays = []
    for v, name, ndim in ((y, "y", 1), (a, "a", 1), (X, "X", 2)):
        if (_is_frame(v) or _is_series(v)) and index is not None and not v.index.equals(index):
            raise ValueError(
                f"`{name}` must have the same index as `X` (rows are matched by "
                f"position); got a different index. Align them first, e.g. "
                f"`{name}.loc[X.index]`."
            )
        arrays.append(as_numeric(v, name, ndim))
    y, a, X = arrays
    n, p = X.shape
    for v, name in ((y, "y"), (a, "a")):
        if v.shape[0] != n:
            raise ValueError(
                f"`{name}` must have one entry per row of X (length {n}); got length {v.shape[0]}."
            )
    if p < 1:
        raise ValueError(f"`X` must have at least one column; got shape {X.shape}.")
    for v, name in ((y, "y"), (a, "a")):
        if n and np.ptp(v) == 0:  # no variance: every moment ratio below divides by zero
            raise ValueError(f"`{name}` must not be constant; got every entry {v[0]:g}.")
    return y, a, X


def data_names(y, a, X) -> dict | None:
    """Names of ``y``, ``a`` and the columns of ``X`` when pandas objects carry them, else None."""
    names = {}
    for v, key in ((y, "y"), (a, "a")):
        if _is_series(v) and v.name is not None:
            names[key] = str(v.name)
        elif _is_frame(v) and v.shape[1] == 1:
            names[key] = str(v.columns[0])
    if _is_frame(X):
        names["X"] = [str(c) for c in X.columns]
    return names or None


def check_unlabeled_columns(X, XU) -> None:
    """Unlabeled rows given as a DataFrame beside a DataFrame ``X`` must carry its columns, in
    order (rows of both are used by position of column)."""
    if XU is None or not (_is_frame(X) and _is_frame(XU)):
        return
    cx, cu = [str(c) for c in X.columns], [str(c) for c in XU.columns]
    if cx != cu:
        missing = [c for c in cx if c not in cu]
        extra = [c for c in cu if c not in cx]
        what = (
            f"missing {missing}, extra {extra}"
            if missing or extra
            else "the same columns in another order"
        )
        raise ValueError(
            f"`X_unlabeled` must have the columns of `X` in the same order; got {what}. "
            f"Select them first, e.g. `X_unlabeled[X.columns]`."
        )
