"""Metrics against ground truth: singular values, subspaces, eigenvalues and forecasts.

Conventions of Jeong et al. 2025 (Sec. 5; directed Hausdorff distance for eigenvalues, as in
kooplearn.metrics); principal angles between spans in a weighted L2 (derived here, standard).
"""

from __future__ import annotations

import numpy as np

from _core.validation import as_array, to_array

__all__ = [
    "relative_singular_value_errors",
    "principal_angles",
    "directed_hausdorff",
    "forecast_rmse",
]


_BIG = 1e100  # function values beyond this overflow the squares and Gram matrices below


def _complex(x, name):
    """``x`` as a non-empty, finite 1-D complex array (real, integer or complex input)."""
    arr = None if isinstance(x, str | bytes) or x is None else to_array(x, name)
    if arr is None or arr.dtype.kind not in "biufc":
        raise TypeError(f"`{name}` must be an array of real or complex numbers; got {x!r:.60}.")
    arr = arr.astype(complex).reshape(-1)
    if arr.size == 0 or not np.isfinite(arr).all() or np.abs(arr).max() > _BIG:
        raise ValueError(f"`{name}` must be non-empty and finite (|entries| <= 1e100).")
    return arr


def relative_singular_value_errors(estimated, true):
    """``|s^_i - s_i| / s_i`` for the common leading entries (both sorted decreasing)."""
    est = np.sort(as_array(estimated, "estimated", ndim=1))[::-1]
    tru = np.sort(as_array(true, "true", ndim=1))[::-1]
    m = min(est.size, tru.size)
    if m == 0:
        raise ValueError("`estimated` and `true` must be non-empty.")
    if (tru[:m] <= 0).any():
        raise ValueError("`true` singular values must be positive to form relative errors.")
    return np.abs(est[:m] - tru[:m]) / tru[:m]


def _orth(A, w):
    """Columns of A orthonormalised in the inner product ``sum_n w_n a(x_n) b(x_n)``."""
    G = A.T @ (w[:, None] * A)
    ev, V = np.linalg.eigh((G + G.T) / 2)
    keep = ev > 1e-12 * ev.max()
    return A @ (V[:, keep] / np.sqrt(ev[keep]))


def principal_angles(features, reference, weights=None):
    """Principal angles (radians, increasing) between span(features) and span(reference).

    ``features`` (n, k) and ``reference`` (n, m) are function values at the same n points; the
    inner product is the empirical mean, or ``sum_n weights_n a b`` (e.g. a stationary law on a
    finite chain, or quadrature weights). ``cos theta = svd(Q_f^T W Q_ref)`` after orthonormalising
    both, and ``sin theta`` from the residual (Bjorck & Golub 1973; accurate for small angles);
    returns min(k, m) angles.

    Examples
    --------
    >>> x = np.linspace(-1, 1, 5)
    >>> [round(float(t), 6) for t in principal_angles(x[:, None], (x**2)[:, None])]  # odd vs even
    [1.570796]
    >>> [round(float(t), 6) for t in principal_angles(np.c_[x, x**2], np.c_[x + x**2, x])]
    [0.0, 0.0]
    """
    F = as_array(features, "features", ndim=2, lower=-_BIG, upper=_BIG)
    R = as_array(reference, "reference", ndim=2, lower=-_BIG, upper=_BIG)
    if R.shape[0] != F.shape[0]:
        raise ValueError(
            f"`reference` must have {F.shape[0]} rows like `features`; got {R.shape[0]}."
        )
    n = F.shape[0]
    w = np.full(n, 1.0 / n) if weights is None else as_array(weights, "weights", shape=(n,))
    if (w < 0).any():
        raise ValueError("`weights` must be non-negative.")
    Qf, Qr = _orth(F, w), _orth(R, w)
    small, large = (Qf, Qr) if Qf.shape[1] <= Qr.shape[1] else (Qr, Qf)
    cos = np.linalg.svd(large.T @ (w[:, None] * small), compute_uv=False)
    # sines from the residual of the smaller span off the larger (accurate for tiny angles)
    res = small - large @ (large.T @ (w[:, None] * small))
    sin = np.sort(np.linalg.svd(np.sqrt(w)[:, None] * res, compute_uv=False))
    cos, sin = np.clip(cos, 0.0, 1.0), np.clip(sin, 0.0, 1.0)
    return np.where(cos > np.sqrt(0.5), np.arcsin(sin), np.arccos(cos))


def directed_hausdorff(estimated, true):
    """``max_i min_j |lam^_i - lam_j|`` (estimated -> true), complex eigenvalues allowed."""
    est, tru = _complex(estimated, "estimated"), _complex(true, "true")
    return float(np.max(np.min(np.abs(est[:, None] - tru[None, :]), axis=1)))


def forecast_rmse(predicted, truth):
    """Root-mean-square error per horizon: ``predicted``/``truth`` (H, n[, d]) -> (H,).

    Examples
    --------
    >>> truth = np.zeros((2, 4))
    >>> forecast_rmse(truth + np.array([[0.0], [3.0]]), truth).tolist()  # per horizon
    [0.0, 3.0]
    """
    p = as_array(predicted, "predicted", lower=-_BIG, upper=_BIG)
    t = as_array(truth, "truth", lower=-_BIG, upper=_BIG)
    if p.shape != t.shape or p.ndim < 2:
        raise ValueError(
            f"`predicted` and `truth` must have equal shapes (H, n[, d]); got {p.shape}"
            f" and {t.shape}."
        )
    return np.sqrt(np.mean((p - t).reshape(p.shape[0], -1) ** 2, axis=1))
