"""The coefficient prior of the route-b claim (paper_checks.ecc_routes)."""

import numpy as np

from paper_checks.ecc_ols import covariance
from paper_checks.ecc_routes import generic_coefficients


def test_generic_prior_has_unit_signal_and_correlation_08():
    # E alpha^T S alpha = tr(S)/tr(S) = 1 and E alpha^T S beta = 0.8 under the prior; and it is
    # rotation invariant: E alpha alpha^T is a multiple of I (off-diagonal mean 0).
    rng = np.random.default_rng(0)
    S = covariance("spiked", 40, rng)  # tr S = 60 != p: a scale by p would fail
    draws = [generic_coefficients(S, rng) for _ in range(4000)]
    sig = np.array([al @ S @ al for al, _ in draws])
    cross = np.array([al @ S @ be for al, be in draws])
    outer = np.mean([np.outer(al, al) for al, _ in draws], axis=0) * np.trace(S)
    assert abs(sig.mean() - 1) < 4 * sig.std() / np.sqrt(sig.size)
    assert abs(cross.mean() - 0.8) < 4 * cross.std() / np.sqrt(cross.size)
    off = outer[~np.eye(40, dtype=bool)]
    assert np.abs(np.diag(outer) - 1).max() < 0.15 and np.abs(off).max() < 0.15
