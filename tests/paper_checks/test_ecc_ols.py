"""The finite-sample coverage deficit used by the route-0 claim (paper_checks.ecc_ols)."""

import numpy as np
import pytest
from scipy import stats

from paper_checks.ecc_ols import wald_coverage_deficit


@pytest.mark.parametrize("k", [30, 100, 300, 1000])
def test_deficit_matches_student_t_for_a_chi_square_variance(k):
    # T = N / sqrt(chi2_k / k) is Student's t: the Wald interval's exact coverage is P(|t_k| <= z),
    # and the variance estimate chi2_k / k has relative variance 2 / k. The second-order deficit
    # must match the exact one to O(1/k^2).
    z = stats.norm.isf(0.025)
    exact = 0.95 - (2 * stats.t.cdf(z, k) - 1)
    approx = float(wald_coverage_deficit(2 / k))
    assert abs(approx - exact) <= 3.0 / k**2, (k, approx, exact)
    assert abs(approx - exact) <= 0.05 * exact


def test_deficit_scales_with_the_level():
    # at level 0.9 the factor z (1 + z^2) phi(z) / 4 is computed at z = 1.645
    z = stats.norm.isf(0.05)
    assert float(wald_coverage_deficit(0.1, level=0.9)) == pytest.approx(
        z * (1 + z * z) * stats.norm.pdf(z) * 0.1 / 4
    )
    assert np.all(wald_coverage_deficit(np.array([0.0, 0.1])) >= 0)
