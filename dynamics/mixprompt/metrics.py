"""Segmentation metric: mIoU from a dataset-level confusion matrix (official code's
``runningScore`` in ``metrics.py``: IoU_c = TP / (TP + FP + FN) per class, classes absent from
both prediction and ground truth (union 0) excluded by ``nanmean``, an ignore label removed)."""

from __future__ import annotations

import numpy as np

from _core.validation import as_array, check_int

__all__ = ["confusion_matrix", "miou"]


def _labels(x, name, k):
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"`{name}` must be an integer label array; got dtype {a.dtype}.")
    as_array(a, name, dtype=np.int64)  # pyright: ignore[reportArgumentType]  # _core as_array's dtype is unannotated
    return a


def confusion_matrix(pred, target, num_classes, *, ignore_index=None) -> np.ndarray:
    """``M[t, p]`` = number of pixels of true class ``t`` predicted ``p`` (int64), pixels whose
    target is ``ignore_index`` left out; labels must lie in ``[0, num_classes)``."""
    k = check_int(num_classes, "num_classes", lower=1, upper=4096)
    p, t = _labels(pred, "pred", k), _labels(target, "target", k)
    if p.shape != t.shape:
        raise ValueError(f"`pred` has shape {p.shape} but `target` has {t.shape}.")
    if ignore_index is not None:
        ig = check_int(ignore_index, "ignore_index", lower=0, upper=65535)
        keep = t != ig
        p, t = p[keep], t[keep]
    for name, a in (("pred", p), ("target", t)):
        if a.size and (a.min() < 0 or a.max() >= k):
            raise ValueError(f"`{name}` must lie in [0, {k}); got [{a.min()}, {a.max()}].")
    return np.bincount(t.ravel() * k + p.ravel(), minlength=k * k).reshape(k, k).astype(np.int64)


def miou(pred, target, num_classes, *, ignore_index=None) -> float:
    """Mean intersection over union over the classes present in prediction or target (the
    class ``ignore_index``, when it is one, excluded).

    Examples
    --------
    >>> pred, target = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
    >>> round(miou(pred, target, 2), 6)  # IoU 1/2 for class 0, 2/3 for class 1
    0.583333
    """
    m = confusion_matrix(pred, target, num_classes, ignore_index=ignore_index)
    tp = np.diag(m).astype(np.float64)
    union = m.sum(0) + m.sum(1) - tp
    if ignore_index is not None and ignore_index < m.shape[0]:
        union[ignore_index] = 0
    if not np.any(union > 0):
        raise ValueError("`target` has no pixel left to score (all ignored or empty).")
    return float(np.mean(tp[union > 0] / union[union > 0]))
