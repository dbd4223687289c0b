"""Summary statistics shared by the claims: means and standard errors over seeds."""

from __future__ import annotations

import math

import numpy as np


def mean_se(v) -> tuple[float, float]:
    """Mean and standard error ``std(ddof=1) / sqrt(n)`` of ``v`` (SE 0 for a single value)."""
    v = np.asarray(v, np.float64)
    se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
    return float(v.mean()), se


def paired(a, b) -> tuple[float, float]:
    """Mean and standard error of the paired differences ``a_i - b_i`` over seeds."""
    return mean_se(np.asarray(a, np.float64) - np.asarray(b, np.float64))


def ratio_se(a, b) -> tuple[float, float]:
    """``sum(a) / sum(b)`` over paired replicates ``(a_i, b_i)`` and its delta-method standard
    error ``std(a_i - R b_i, ddof=1) / (sqrt(n) mean(b))`` (derived here: the linearisation of
    ``mean(a) / mean(b)`` at ``R``; ``tests/paper_checks/test_ratio_se.py`` checks it against
    the spread of the ratio over simulated samples)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    R = float(a.sum() / b.sum())
    return R, float(np.std(a - R * b, ddof=1) / (math.sqrt(a.size) * b.mean()))
