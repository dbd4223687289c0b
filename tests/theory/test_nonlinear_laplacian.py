"""Asymptotic theory of the nonlinear Laplacian (theory/nonlinear_laplacian.py)."""

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import halfnorm, norm

from spectral import sigmas
from theory.nonlinear_laplacian import (
    EtaLaw,
    critical_threshold,
    critical_threshold_nested,
    null_law,
    outlier,
    small_sigma_slope,
    theta,
)

PS, NN = EtaLaw.point(1.0), EtaLaw.half_normal()
SIGMAS = [
    sigmas.tanh(1.70974534, 0.58384117),
    sigmas.zshape(7.41704791, 4.40851134, -5.20518863),
    sigmas.step([-1.0, 0.5, 2.0], [0.0, 0.3, 1.1, 2.0]),
    sigmas.tanh(1.5, 0.25),
]


@pytest.mark.parametrize("sigma", SIGMAS, ids=str)
@pytest.mark.parametrize("eta", [PS, NN], ids=["ps", "nnpca"])
def test_single_root_equals_nested(sigma, eta):
    single = critical_threshold(sigma, eta).beta_star
    nested = critical_threshold_nested(sigma, eta, 0.3, 2.0)
    assert nested.found
    assert single == pytest.approx(nested.root, abs=1e-10)


def test_nested_reports_no_sign_change():
    res = critical_threshold_nested(sigmas.zero(), PS, 0.3, 0.9)
    assert not res.found and res.root is None


def _single_step_closed_form(b, c):
    """Planted submatrix, σ = b·1{t >= c}: ν = (1-p)δ0 + pδb (closed forms, independent code)."""
    p = norm.sf(c)
    z = brentq(lambda z: 1 - (1 - p) / z**2 - p / (z - b) ** 2, b + 1e-12, b + 10)

    def theta_minus_z(beta):
        q = norm.sf(c - beta)
        disc = (b + beta) ** 2 - 4 * beta * b * (1 - q)
        return 0.5 * ((b + beta) + np.sqrt(disc)) - z

    return brentq(theta_minus_z, 0.05, 3.0, xtol=1e-15)


@pytest.mark.parametrize("b,c", [(1, 0), (2, 1), (2, 0), (3, 1.5), (4, 2)])
def test_single_step_matches_closed_form(b, c):
    got = critical_threshold(sigmas.step([c], [0, b]), PS).beta_star
    assert got == pytest.approx(_single_step_closed_form(b, c), abs=1e-9)


def test_step_theta_quadratic_root():
    # (b, c, beta) = (2, 1, 1): theta^2 - 3 theta + 1 = 0
    got = theta(sigmas.step([1.0], [0, 2.0]), 1.0, PS)
    assert got == pytest.approx((3 + 5**0.5) / 2, abs=1e-12)


@pytest.mark.parametrize("a,b", [(1.7, 0.58), (0.5, 0.3), (2.0, 1.0)])
def test_tanh_moments_at_the_top_closed_form(a, b):
    law = null_law(sigmas.tanh(a, b))
    d, w = law.upper_gaps, law.weights
    assert np.sum(w / d) == pytest.approx((1 + np.exp(2 * b * b)) / (2 * a), rel=1e-10)
    exact2 = (1 + 2 * np.exp(2 * b * b) + np.exp(8 * b * b)) / (4 * a * a)
    assert np.sum(w / d**2) == pytest.approx(exact2, rel=1e-8)


@pytest.mark.parametrize("eta,expected", [(PS, 0.55040), (NN, 0.62564)], ids=["ps", "nnpca"])
def test_small_epsilon_slope(eta, expected):
    s = sigmas.tanh(1.0, 1.0)
    slope = small_sigma_slope(s, eta)
    assert -slope == pytest.approx(expected, abs=1e-5)

    # Richardson-extrapolated one-sided difference quotient of beta*(eps s) at 0
    def dq(eps):
        return (critical_threshold(sigmas.tanh(eps, 1.0), eta).beta_star - 1.0) / eps

    eps = 1e-3
    assert 2 * dq(eps / 2) - dq(eps) == pytest.approx(slope, abs=1e-5)


def test_eta_scale_invariance_and_general_eta():
    s = SIGMAS[0]
    base = critical_threshold(s, PS).beta_star
    assert critical_threshold(s, EtaLaw.point(3.7)).beta_star == pytest.approx(base, abs=1e-12)
    assert critical_threshold(s, EtaLaw.discrete([1.0], [1.0])).beta_star == pytest.approx(base)
    nn = critical_threshold(s, NN).beta_star
    got = critical_threshold(s, EtaLaw.from_scipy(halfnorm())).beta_star
    assert got == pytest.approx(nn, abs=1e-9)


def test_outlier_below_threshold_sits_at_edge():
    s = SIGMAS[0]
    r = outlier(s, 0.5, PS)
    assert not r.exists and r.overlap == 0.0 and r.eigenvalue == r.edge


def test_eta_bad_input():
    with pytest.raises(ValueError, match="values"):
        EtaLaw.discrete([-1.0, 1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="probs"):
        EtaLaw.discrete([1.0, 2.0], [0.5, 0.6])
    with pytest.raises(ValueError, match="eta"):
        EtaLaw.from_scipy(norm())
