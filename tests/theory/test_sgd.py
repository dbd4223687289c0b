"""Tests of theory.sgd: the bounds of Attia et al. 2025 as functions, prior bounds, closed forms."""

import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

import theory.sgd as ts

etas = st.floats(0.01, 1.99)


def test_bound_known_values():
    # eta = 1/beta: bias = D^2 beta / sqrt(T); noise = eta T^{1/2} sigma^2
    assert ts.last_iterate_bound(100, 1.0, 1.0, 1.0, 0.0) == pytest.approx(0.1, rel=1e-14)
    assert ts.last_iterate_bound(100, 0.5, 2.0, 3.0, 0.2) == pytest.approx(
        3.0 / (0.5 * 1.0 * 10.0) + 0.5 * 10.0 * 0.2, rel=1e-14
    )
    assert ts.noiseless_bound(400, 2.0, 1.5) == pytest.approx(2.0 * 1.5 / 20.0, rel=1e-14)


def test_bound_formula_symbolic():
    T, eta, beta, D2, s2 = sp.symbols("T eta beta D2 s2", positive=True)
    expr = (
        D2 / (eta * (2 - beta * eta) * T ** (1 - beta * eta / 2))
        + eta / (2 - beta * eta) ** 2 * T ** (beta * eta / 2) * s2
    )
    vals = {T: 37, eta: sp.Rational(3, 10), beta: 4, D2: sp.Rational(7, 5), s2: sp.Rational(1, 9)}
    assert ts.last_iterate_bound(37, 0.3, 4.0, 1.4, 1 / 9) == pytest.approx(
        float(expr.subs(vals)), rel=1e-13
    )


@given(eta=etas, T=st.floats(1, 1e6), D2=st.floats(1e-3, 1e3), s2=st.floats(0, 10))
def test_terms_monotone_in_T(eta, T, D2, s2):
    b1, b2 = ts.bias_term([T, 2 * T], eta, 1.0, D2)
    n1, n2 = ts.noise_term([T, 2 * T], eta, 1.0, s2)
    assert b2 < b1
    assert n2 >= n1
    assert ts.last_iterate_bound(T, eta, 1.0, D2, s2) == pytest.approx(
        ts.bias_term(T, eta, 1.0, D2) + ts.noise_term(T, eta, 1.0, s2), rel=1e-14
    )


@given(eta=etas)
def test_rate_exponent(eta):
    T = np.array([1e3, 1e5])
    b = ts.bias_term(T, eta, 1.0, 1.0)
    slope = np.diff(np.log(b)) / np.diff(np.log(T))
    assert slope[0] == pytest.approx(-ts.last_iterate_rate_exponent(eta, 1.0), abs=1e-12)


@pytest.mark.parametrize("eta", [2.0, 2.5, 0.0, -1.0])
def test_stepsize_rejected(eta):
    with pytest.raises(ValueError, match="eta"):
        ts.last_iterate_bound(10, eta, 1.0, 1.0, 0.0)


def test_bad_input():
    with pytest.raises(ValueError, match="T"):
        ts.last_iterate_bound(0, 0.5, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="sigma2_star"):
        ts.last_iterate_bound(10, 0.5, 1.0, 1.0, -0.1)
    with pytest.raises(ValueError, match="dist2"):
        ts.last_iterate_bound(10, 0.5, 1.0, np.nan, 0.0)
    with pytest.raises(ValueError, match="beta"):
        ts.last_iterate_bound(10, 0.5, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="T"):
        ts.bias_term([10, np.inf], 0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="dist2"):
        ts.optimal_stepsize(10, 1.0, 0.0, 1.0)


def test_divergence_function():
    T = np.arange(1, 6)
    assert np.all(ts.quadratic_gd_loss_ratio(T, 2.0, 1.0) == 1.0)  # reflection
    r = ts.quadratic_gd_loss_ratio(T, 2.0 * 1.01, 1.0)
    assert np.all(np.diff(r) > 0) and r[-1] == pytest.approx(1.02**10, rel=1e-12)
    assert ts.quadratic_gd_loss_ratio(10, 0.5, 1.0) == pytest.approx(0.5**20)


@given(
    T=st.integers(2, 10**6), D2=st.floats(0.01, 100), s2=st.floats(0, 10), beta=st.floats(0.1, 10)
)
def test_optimal_stepsize_minimises(T, D2, s2, beta):
    eta = ts.optimal_stepsize(T, beta, D2, s2)
    assert 0 < eta * beta < 2
    best = ts.last_iterate_bound(T, eta, beta, D2, s2)
    grid = np.linspace(1e-3, 1.999, 400) / beta
    vals = [ts.last_iterate_bound(T, e, beta, D2, s2) for e in grid]
    assert best <= min(vals) * (1 + 1e-9)


def test_optimal_stepsize_noiseless_stationarity():
    # d/dx [-log x - log(2-x) + x log(T)/2] = 0 at x = beta*eta
    T = 1000.0
    x = ts.optimal_stepsize(T, 1.0, 1.0, 0.0)
    assert -1 / x + 1 / (2 - x) + np.log(T) / 2 == pytest.approx(0.0, abs=1e-7)


@given(
    T=st.integers(3, 10**7),
    D2=st.floats(0.01, 100),
    s2=st.floats(1e-6, 10),
    beta=st.floats(0.1, 10),
)
def test_tuned_rate_matches_bound_at_tuned_stepsize(T, D2, s2, beta):
    # at the tuned stepsize, Thm 1's shape is within a constant (e^{1/2}-type) of the tuned rate
    eta = ts.tuned_stepsize(T, beta, D2, s2)
    ratio = ts.last_iterate_bound(T, eta, beta, D2, s2) / ts.tuned_rate(T, beta, D2, s2)
    assert 0.1 < ratio < 2.0 * np.exp(0.5)


def test_continual_and_prior_bounds():
    assert ts.continual_loss_bound(169) == pytest.approx(1.0)
    k = np.array([10.0, 1e4])
    assert np.allclose(ts.evron2025_rate(k), k**-0.25)
    assert ts.evron2025_rate(1e4, dim=100, mean_rank=99) == pytest.approx(1e-4)
    assert ts.evron2025_rate(1e4, replacement=False, dim=100, mean_rank=90) == pytest.approx(1e-3)
    assert ts.varre2021_rate(100, 0.5, 1.0, 2.0) == pytest.approx(2.0 / 50)
    with pytest.raises(ValueError, match="eta"):
        ts.varre2021_rate(100, 1.5, 1.0, 2.0)
    # Attia et al. improves on Evron et al.'s T^{-1/4}: the noiseless bound decays faster
    assert ts.noiseless_bound(1e8, 1.0, 1.0) < ts.evron2025_rate(1e8)


def test_closed_forms_basic():
    # rare curvature at its worst p ~ 1/(2e eta (2 - beta eta) T)
    for T in (10, 100, 1000):
        p = ts.rare_curvature_worst_p(T, 1.0, 1.0)
        r = ts.rare_curvature_risk(T, 1.0, 1.0, p, 1.0)
        assert r == pytest.approx(1 / (2 * np.e * T), rel=2.0 / T)
    # ar1 tends to its floor; commuting with one coordinate equals rare curvature
    assert ts.ar1_risk(10**5, 0.5, 1.0, 2.0, 3.0) == pytest.approx(
        ts.ar1_floor(0.5, 1.0, 2.0), rel=1e-12
    )
    assert ts.commuting_risk(7, 0.8, 2.0, [0.3, 0.7], [1.0, 0.0]) == pytest.approx(
        ts.rare_curvature_risk(7, 0.8, 2.0, 0.3, 1.0), rel=1e-14
    )
    with pytest.raises(ValueError, match="p"):
        ts.commuting_risk(7, 0.8, 2.0, [0.3, 0.6], [1.0, 0.0])


def test_averaged_and_fejer_formulas():
    assert ts.averaged_iterate_bound(10, 0.5, 1.0, 2.0) == pytest.approx(2.0 / (2 * 0.5 * 10))
    assert ts.averaged_iterate_bound(10, 1.5, 1.0, 2.0) == pytest.approx(2.0 / (2 * 1.5 * 0.5 * 10))
    assert ts.fejer_decrease(0.5, 1.0, 4.0) == pytest.approx(0.5 * 1.5 * 4.0)
