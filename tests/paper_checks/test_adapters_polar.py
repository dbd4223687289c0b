"""Helpers of the PoLAR claims: the matched-fit interpolation and the iterations-to-level count."""

import numpy as np
import pytest

from paper_checks.adapters import polar


def test_at_level_interpolates_at_the_first_crossing():
    fit = np.array([2.0, 1.5, 1.0, 0.8, 0.9])
    value = np.array([1.0, 2.0, 3.0, 5.0, 7.0])
    assert polar.at_level(fit, value, 1.25) == pytest.approx(2.5, abs=1e-12)
    assert polar.at_level(fit, value, 0.9) == pytest.approx(4.0, abs=1e-12)  # first crossing
    assert polar.at_level(fit, value, 3.0) == 1.0  # reached at the start
    assert polar.at_level(fit, value, 0.1) == 7.0  # never reached: the last value


def test_iters_to_counts_one_based_and_censors_at_the_budget():
    curves = np.array([[1.0, 1e-3, 1e-11, 1e-12], [1.0, 0.5, 0.2, 0.1]])
    np.testing.assert_array_equal(polar._iters_to(curves, 1e-10), [3, 4])


def test_rate_targets_have_the_stated_rank_and_spectrum():
    m, _ = polar._rate_problem(seed=3, instances=2)
    for target in m:
        s = np.linalg.svd(target, compute_uv=False)
        np.testing.assert_allclose(s[:4], [1.0, 0.8, 0.6, 0.5], atol=1e-12)
        assert s[4] < 1e-12
