"""Regressions found while building the claims."""

import pytest

import spectral
from spectral import sigmas


def test_pca_outlier_at_simulated_beta():
    # σ = 0 with β = k/sqrt(n) from a simulation: the θ bracket end must not be a root by rounding
    beta = 32 / 1000**0.5
    lam, ov = spectral.outlier(sigmas.zero(), beta)
    assert lam == pytest.approx(beta + 1 / beta, abs=1e-12)
    assert ov == pytest.approx(1 - 1 / beta**2, abs=1e-12)
