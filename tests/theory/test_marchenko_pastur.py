"""Marchenko–Pastur closed forms against quadrature, known values and finite-sample traces."""

import numpy as np
import pytest

from paper_checks import PROPERTIES, verify
from theory import marchenko_pastur as mp

GAMMAS = [0.1, 0.5, 1.0, 2.0, 5.0]


@pytest.mark.parametrize("gamma", GAMMAS)
def test_total_mass_and_moments(gamma):
    assert mp.integrate(lambda x: 1.0, gamma) == pytest.approx(1.0, abs=1e-10)
    assert mp.integrate(lambda x: x, gamma) == pytest.approx(mp.moment(1, gamma), abs=1e-10)
    assert mp.moment(2, gamma) == pytest.approx(1 + gamma)
    assert mp.integrate(lambda x: x**3, gamma) == pytest.approx(mp.moment(3, gamma), rel=1e-10)
    assert mp.atom(gamma) == pytest.approx(max(0.0, 1 - 1 / gamma))


def test_known_stieltjes_values():
    assert mp.stieltjes(0.05, 1.0) == pytest.approx(4.0, abs=1e-12)
    assert mp.stieltjes(0.3, 2.0) == pytest.approx(2.0, abs=1e-12)
    assert mp.stieltjes(0.5, 0.5) == pytest.approx(2 * np.sqrt(2) - 2, abs=1e-12)
    assert mp.stieltjes(0.5, 1.0) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("lam", [1e-3, 0.05, 0.5, 3.0, 50.0])
def test_stieltjes_and_derivatives_quadrature(gamma, lam):
    for k in range(4):
        q = mp.integrate(lambda x, k=k: (x + lam) ** -(k + 1), gamma)
        sign_fact = (-1) ** k * np.prod(np.arange(1, k + 1))
        assert mp.stieltjes(lam, gamma, derivative=k) == pytest.approx(sign_fact * q, rel=1e-8)


@pytest.mark.parametrize("gamma", GAMMAS)
@pytest.mark.parametrize("la,ly", [(0.1, 0.1), (0.1, 2.0), (0.7, 0.7 + 1e-7), (5.0, 0.02)])
def test_resolvent_moment_quadrature(gamma, la, ly):
    for a in range(3):
        for b in range(3):
            for j in range(a + b + 1):
                lams = [la] * a + [ly] * b
                q = mp.integrate(
                    lambda x, j=j, a=a, b=b: x**j / (x + la) ** a / (x + ly) ** b, gamma
                )
                cf = mp.resolvent_moment(gamma, lams, j)
                assert cf == pytest.approx(q, rel=1e-8, abs=1e-13), (a, b, j)


@pytest.mark.parametrize("gamma", [1.5, 5.0, 10.0])
@pytest.mark.parametrize("la,ly", [(1e-8, 1e-8), (1e-5, 3e-5), (1e-10, 0.05)])
def test_small_lambda_with_an_atom_no_cancellation(gamma, la, ly):
    """gamma > 1, tiny penalties: the atom's 1/lam^k terms are kept out of the x-power recursion
    (they cancelled catastrophically: at lam = 1e-8 the table's (1, 2, 2) entry was -2e15)."""
    T = mp.resolvent_table(gamma, np.array(la), np.array(ly))
    for a in range(3):
        for b in range(3):
            for j in range(a + b + 1):
                q = mp.integrate(
                    lambda x, j=j, a=a, b=b: x**j / (x + la) ** a / (x + ly) ** b, gamma
                )
                cf = mp.resolvent_moment(gamma, [la] * a + [ly] * b, j)
                assert cf == pytest.approx(q, rel=1e-8, abs=1e-13), (a, b, j)
                if a + b:
                    assert float(T[(j, a, b)]) == pytest.approx(q, rel=1e-8, abs=1e-13), (j, a, b)


def test_table_matches_resolvent_moment():
    la, ly = np.array([0.05, 1.0, 7.0]), np.array([0.3, 1.0, 0.01])
    T = mp.resolvent_table(1.7, la, ly)
    for (j, a, b), v in T.items():
        want = (
            mp.resolvent_moment(1.7, [la] * a + [ly] * b, j)
            if a + b
            else np.full(3, mp.moment(j, 1.7))
        )
        np.testing.assert_allclose(v, want, rtol=1e-12, atol=1e-15)


def test_no_cancellation_near_confluent_nodes():
    # ∫ Q1 Q2 is continuous as lam_2 -> lam_1 and reaches the confluent value ∫ Q^2.
    conf = mp.resolvent_moment(0.5, [0.4, 0.4])
    near = mp.resolvent_moment(0.5, [0.4, 0.4 + 1e-10])
    assert near == pytest.approx(conf, rel=1e-9)
    assert conf == pytest.approx(-mp.stieltjes(0.4, 0.5, derivative=1), rel=1e-13)


def test_ridge_df_and_kappa_identity():
    """0 < s < min(1, 1/gamma), s decreasing, kappa = 1 - 2 s + Gamma: the registry property
    ``ecc.ridge_df_kappa_identity`` (its one copy, searched by ``theorylab verify``)."""
    row = verify(PROPERTIES["ecc.ridge_df_kappa_identity"], examples=30)
    assert row["status"] == "holds" and row["min_slack"] >= 0, row


@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_ridge_df_small_lambda_limit(gamma):
    assert mp.ridge_df(1e-7, gamma) == pytest.approx(min(1.0, 1 / gamma), abs=1e-5)


@pytest.mark.parametrize("m,p", [(500, 250), (500, 1000)])
def test_finite_sample_trace(m, p):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((m, p))
    ev = (
        np.linalg.eigvalsh(X.T @ X / m)
        if p <= m
        else np.concatenate([np.linalg.eigvalsh(X @ X.T / m), np.zeros(p - m)])
    )
    for lam in (0.1, 0.5, 2.0):
        emp = np.mean(1 / (ev + lam))
        assert emp == pytest.approx(mp.stieltjes(lam, p / m), rel=0.01)
        emp2 = np.mean(ev**2 / (ev + lam) ** 2)
        assert emp2 == pytest.approx(mp.resolvent_moment(p / m, [lam, lam], 2), rel=0.01)
        emp_e = np.mean(mp.empirical_resolvent_moment(ev, [np.array(lam)] * 2, 1))
        assert emp_e == pytest.approx(mp.resolvent_moment(p / m, [lam, lam], 1), rel=0.01)


def test_density_integrates_to_continuous_mass():
    from scipy import integrate

    for gamma in (0.5, 3.0):
        a, b = mp.edges(gamma)
        val, _ = integrate.quad(lambda x, g=gamma: float(mp.density(x, g)), a, b, limit=200)
        assert val == pytest.approx(1 - mp.atom(gamma), abs=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="gamma"):
        mp.stieltjes(0.5, 0.0)
    with pytest.raises(ValueError, match="lam"):
        mp.stieltjes(-1.0, 0.5)
    with pytest.raises(ValueError, match="lams"):
        mp.resolvent_moment(0.5, [0.1, 0.0])
    with pytest.raises(ValueError, match="lam"):
        mp.stieltjes(np.nan, 0.5)
