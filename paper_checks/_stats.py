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
