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


def test_irregular_regime_overlap_jumps_at_threshold():
    s = sigmas.tanh(2.0, 0.5)
    r = spectral.threshold(s)
    assert not r.regular
    just_above = spectral.outlier_limits(s, r.beta_star * (1 + 1e-9))
    assert just_above.eigenvalue - r.edge < 1e-6  # eigenvalue continuous
    assert just_above.overlap > 0.1  # overlap discontinuous (first order)
