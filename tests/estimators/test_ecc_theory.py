"""Theory of the ECC estimators: constants vs quadrature, limits, symmetries, Lemma F.2."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize

import estimators
from theory import ecc as th
from theory import marchenko_pastur as mp
from theory.roots import find_root

KW = dict(a2=1.0, b2=1.0, theta=0.75, var_eps=1.0, var_delta=1.0, cov_eps_delta=0.5)


@pytest.mark.parametrize(
    "gamma,la,ly", [(0.5, 0.5, 0.5), (0.5, 0.1, 2.0), (2.0, 0.3, 1.1), (1.0, 0.05, 0.05)]
)
def test_bias_constants_against_quadrature(gamma, la, ly):
    c = th.bias_constants(th.SpectralIntegrator(gamma, la, ly))
    q = lambda f: mp.integrate(f, gamma)  # noqa: E731
    assert c["s_a"] == pytest.approx(q(lambda x: x / (x + la)), rel=1e-9)
    assert c["s_y"] == pytest.approx(q(lambda x: x / (x + ly)), rel=1e-9)
    assert c["Gamma"] == pytest.approx(q(lambda x: x * x / (x + la) / (x + ly)), rel=1e-9)
    assert c["zeta"] == pytest.approx(gamma * q(lambda x: x / (x + la) / (x + ly)), rel=1e-9)
    assert c["kappa"] == pytest.approx(la * ly * q(lambda x: 1 / (x + la) / (x + ly)), rel=1e-9)


def test_empirical_integrator_is_the_spectral_average():
    ev = np.array([0.0, 0.0, 0.3, 1.2, 2.5])
    integ = th.SpectralIntegrator(2.0, 0.4, 1.5, eigenvalues=ev)
    c = th.bias_constants(integ)
    assert c["Gamma"] == pytest.approx(np.mean(ev**2 / (ev + 0.4) / (ev + 1.5)))
    assert c["zeta"] == pytest.approx(2.0 * np.mean(ev / (ev + 0.4) / (ev + 1.5)))


@pytest.mark.parametrize("split", [2, 3])
def test_classical_limit_dr_efficiency_bound(split):
    # gamma, lam -> 0: V_DR -> Var(eps delta) = var_eps var_delta + psi^2 (Gaussian noise).
    for ve, vd, c in [(1.0, 1.0, 0.5), (2.0, 0.5, -0.3)]:
        kw = dict(KW, var_eps=ve, var_delta=vd, cov_eps_delta=c)
        bound = ve * vd + c * c
        vals = [
            estimators.asymptotic_variance("dr", split, t, t, t, **kw) for t in (1e-2, 1e-3, 1e-4)
        ]
        errs = np.abs(np.array(vals) - bound)
        assert errs[-1] < 2e-3 * bound and errs[0] > errs[1] > errs[2]


def test_classical_limit_nr_pays_for_non_orthogonality():
    # NR is not Neyman-orthogonal: even with OLS-rate nuisances the limit is
    # Var(A eps) + var_eps a^2 = (a^2 + var_delta) var_eps + psi^2 + var_eps a^2 (derived here).
    v = estimators.asymptotic_variance("nr", 3, 1e-4, 1e-4, 1e-4, **KW)
    assert v == pytest.approx((1 + 1) * 1 + 0.25 + 1, rel=2e-3)


@given(
    la=st.floats(0.02, 20),
    ly=st.floats(0.02, 20),
    gamma=st.floats(0.1, 4),
    a2=st.floats(0.1, 3),
    b2=st.floats(0.1, 3),
    r=st.floats(-0.95, 0.95),
    ve=st.floats(0.2, 3),
    vd=st.floats(0.2, 3),
    rho=st.floats(-0.9, 0.9),
)
def test_three_split_swap_symmetry(la, ly, gamma, a2, b2, r, ve, vd, rho):
    theta, ced = r * np.sqrt(a2 * b2), rho * np.sqrt(ve * vd)
    for est in ("int", "dr"):
        v1 = estimators.asymptotic_variance(
            est,
            3,
            la,
            ly,
            gamma,
            a2=a2,
            b2=b2,
            theta=theta,
            var_eps=ve,
            var_delta=vd,
            cov_eps_delta=ced,
        )
        v2 = estimators.asymptotic_variance(
            est,
            3,
            ly,
            la,
            gamma,
            a2=b2,
            b2=a2,
            theta=theta,
            var_eps=vd,
            var_delta=ve,
            cov_eps_delta=ced,
        )
        assert v1 == pytest.approx(v2, rel=1e-9)


@given(
    c=st.floats(0.1, 10),
    est=st.sampled_from(th.ESTIMATORS),
    split=st.sampled_from([2, 3]),
    lam=st.floats(0.05, 5),
)
def test_variance_scales_with_y(c, est, split, lam):
    v1 = estimators.asymptotic_variance(est, split, lam, lam, 0.7, **KW)
    v2 = estimators.asymptotic_variance(
        est,
        split,
        lam,
        lam,
        0.7,
        a2=1.0,
        b2=c * c,
        theta=0.75 * c,
        var_eps=c * c,
        var_delta=1.0,
        cov_eps_delta=0.5 * c,
    )
    assert v2 == pytest.approx(c * c * v1, rel=1e-9)


@pytest.mark.parametrize("gamma,a2,s2", [(0.5, 1.0, 1.0), (2.0, 1.0, 1.0), (1.3, 0.4, 2.0)])
def test_prediction_optimal_lambda_lemma_f2(gamma, a2, s2):
    def risk(t):
        return float(
            th.prediction_risk(
                th.SpectralIntegrator(gamma, np.exp(t), 1.0),
                "a",
                a2,
                s2,
            )
        )

    res = optimize.minimize_scalar(risk, bounds=(-8, 6), method="bounded", options={"xatol": 1e-9})
    assert np.exp(res.x) == pytest.approx(gamma * s2 / a2, rel=1e-4)
    assert th.prediction_optimal_lambda(gamma, a2, s2) == pytest.approx(gamma * s2 / a2)


def test_ridge_risk_lemma_f1_finite_sample():
    rng = np.random.default_rng(3)
    m, p, lam = 500, 250, 0.5
    alpha = rng.uniform(size=p)
    alpha /= np.linalg.norm(alpha)
    risks = []
    for _ in range(20):
        X = rng.standard_normal((m, p))
        a = X @ alpha + rng.standard_normal(m)
        ah = np.linalg.solve(X.T @ X / m + lam * np.eye(p), X.T @ a / m)
        risks.append(np.sum((ah - alpha) ** 2))
    theory = float(th.prediction_risk(th.SpectralIntegrator(p / m, lam, lam), "a", 1.0, 1.0))
    assert np.mean(risks) == pytest.approx(theory, rel=0.03)


@pytest.mark.parametrize("gamma", [0.75, 1.0, 1.5, 2.0, 3.0])
def test_two_split_int_singular_at_gamma_minus_half(gamma):
    # Derived here (docs/papers/ecc_ridge.md#open-readings-as-options): Gamma - zeta changes sign at
    # lam = gamma - 1/2.
    def f(t):
        return float(
            np.subtract(
                *[
                    th.bias_constants(th.SpectralIntegrator(gamma, t, t))[k]
                    for k in ("Gamma", "zeta")
                ]
            )
        )

    r = find_root(f, 1e-3, 20.0)
    assert r.found and r.root == pytest.approx(gamma - 0.5, abs=1e-6)


def test_naive_limits_three_split_dr_example():
    c = th.bias_constants(th.SpectralIntegrator(0.5, 0.5, 0.5))
    bias = th.naive_limit("dr", 3, c, 0.717, 0.5) - 0.5
    assert bias == pytest.approx(0.717 * (1 - 0.5858) ** 2, abs=2e-4)


def test_debias_inverts_naive_limit():
    for split in (2, 3):
        for est in th.ESTIMATORS:
            c = th.bias_constants(th.SpectralIntegrator(1.3, 0.2, 1.7))
            theta, psi = 0.6, -0.2
            naive = th.naive_limit(est, split, c, theta, psi)
            theta_hat = (
                c["s_a"] * c["s_y"] * theta if split == 3 else c["Gamma"] * theta + c["zeta"] * psi
            )
            got_psi, got_theta = th.debias(est, split, naive, theta_hat, c)
            assert got_psi == pytest.approx(psi, abs=1e-12)
            assert got_theta == pytest.approx(theta, abs=1e-12)


def test_asymptotic_variance_bad_input():
    with pytest.raises(ValueError, match="lam_a"):
        estimators.asymptotic_variance("dr", 2, 0.0, 0.5, 0.5, **KW)
    with pytest.raises(ValueError, match="gamma"):
        estimators.asymptotic_variance("dr", 2, 0.5, 0.5, -1.0, **KW)
    with pytest.raises(ValueError, match="theta"):
        estimators.asymptotic_variance("dr", 2, 0.5, 0.5, 0.5, **dict(KW, theta=2.0))
    with pytest.raises(ValueError, match="estimator"):
        estimators.asymptotic_variance("ols", 2, 0.5, 0.5, 0.5, **KW)
    with pytest.raises(ValueError, match="split"):
        estimators.asymptotic_variance("dr", 4, 0.5, 0.5, 0.5, **KW)
