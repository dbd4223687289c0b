"""Ground truths of the systems: reference values recomputed independently
(docs/papers/koopman_lora.md#ground-truths)."""

import math

import numpy as np
import pytest
from scipy import stats

from dynamics.koopman import (
    FiniteChain,
    Lorenz63,
    NoisyLogisticMap,
    OrnsteinUhlenbeck,
    PrinzLangevin,
    make_pairs,
)


@pytest.fixture(scope="module")
def logistic():
    return NoisyLogisticMap(N=20)


def test_chain_svd_is_orthonormal_and_trivial_top_pair():
    c = FiniteChain.random(6, rng=3)
    s = c.singular_values()
    assert s[0] == pytest.approx(1.0, abs=1e-12)
    phi = c.left_singular_functions(np.arange(6), 6)
    psi = c.right_singular_functions(np.arange(6), 6)
    np.testing.assert_allclose(phi.T @ (c.rho0[:, None] * phi), np.eye(6), atol=1e-10)
    np.testing.assert_allclose(psi.T @ (c.rho1[:, None] * psi), np.eye(6), atol=1e-10)
    np.testing.assert_allclose(np.abs(phi[:, 0]), 1.0, atol=1e-10)
    # kernel k(x, y) = P(x, y) / rho1(y) = sum_i s_i phi_i(x) psi_i(y)
    np.testing.assert_allclose((phi * s) @ psi.T, c.kernel / c.rho1[None, :], atol=1e-10)
    # chi^2 identity ||K||_HS^2 - 1 = chi^2(J || rho0 x rho1)
    J, prod = c.joint, np.outer(c.rho0, c.rho1)
    assert c.hs_norm2() - 1 == pytest.approx(np.sum((J - prod) ** 2 / prod), rel=1e-10)


def test_chain_pairs_follow_the_joint_law():
    c = FiniteChain.random(3, rng=0)
    x, y = c.pairs(200_000, rng=1)
    counts = np.zeros((3, 3))
    np.add.at(counts, (x, y), 1)
    se = np.sqrt(c.joint * (1 - c.joint) / 200_000)
    assert np.all(np.abs(counts / 200_000 - c.joint) < 4 * se + 1e-12)


def test_ou_hermite_functions_and_ar1():
    ou = OrnsteinUhlenbeck(theta=1.0, sigma=math.sqrt(2.0), tau=0.5)
    np.testing.assert_allclose(ou.singular_values(4), [1, 0.606531, 0.367879, 0.223130], atol=1e-6)
    # orthonormality of He_n / sqrt(n!) under N(0, v) by Gauss-Hermite quadrature
    z, w = np.polynomial.hermite_e.hermegauss(40)
    phi = ou.left_singular_functions(z * math.sqrt(ou.var), 6)
    np.testing.assert_allclose(phi.T @ (w[:, None] * phi) / w.sum(), np.eye(6), atol=1e-10)
    x, y = ou.pairs(100_000, rng=0)
    # E[He_1(X) He_1(Y)] = r, sampled: tolerance 4 standard errors
    prod = ou.left_singular_functions(x, 2)[:, 1] * ou.right_singular_functions(y, 2)[:, 1]
    assert abs(prod.mean() - ou.r) < 4 * prod.std() / math.sqrt(x.size)


def test_logistic_reference_values(logistic):
    L = logistic
    lam = L.eigenvalues(5)
    np.testing.assert_allclose(
        lam, [1, -0.193338 + 0.190943j, -0.193338 - 0.190943j, -0.026655, 0.022119], atol=2e-6
    )
    np.testing.assert_allclose(
        L.singular_values(5), [1, 0.923240, 0.892266, 0.696421, 0.657337], atol=2e-6
    )
    assert L.hs_norm2() == pytest.approx(4.01047, abs=1e-5)
    xs = np.linspace(0, 1, 20001)
    assert np.trapezoid(L.invariant_density(xs), xs) == pytest.approx(1.0, abs=1e-8)
    a = L._truth["a"]
    np.testing.assert_allclose(L.transfer_matrix.T @ a, a, atol=1e-8)  # eig of non-normal P


def test_logistic_singular_functions_orthonormal_and_reproduce_kernel(logistic):
    L = logistic
    from scipy.special import roots_legendre

    t, w = roots_legendre(3000)
    x, w = (t + 1) / 2, w / 2
    pi = L.invariant_density(x)
    phi, psi = L.left_singular_functions(x, 8), L.right_singular_functions(x, 8)
    np.testing.assert_allclose(phi.T @ ((w * pi)[:, None] * phi), np.eye(8), atol=1e-8)
    np.testing.assert_allclose(psi.T @ ((w * pi)[:, None] * psi), np.eye(8), atol=1e-8)
    # <phi_i, K psi_j>_pi = s_i delta_ij, with K psi_j(x) = int p(y|x) psi_j(y) dy by quadrature
    Kpsi = L.transition_density(x[None, :], x[:, None]) @ (w[:, None] * psi)
    np.testing.assert_allclose(
        phi.T @ ((w * pi)[:, None] * Kpsi), np.diag(L.singular_values(8)), atol=1e-8
    )


def test_logistic_noise_law_and_forecast_by_monte_carlo(logistic):
    L = logistic
    xi = L.noise(50_000, rng=0)
    # exact CDF of the density C cos^N(pi xi) on [-1/2, 1/2], by quadrature
    grid = np.linspace(-0.5, 0.5, 4001)
    cdf = np.concatenate([[0], np.cumsum((L.C * np.cos(np.pi * grid) ** L.N)[:-1] * np.diff(grid))])
    res = stats.kstest(xi, lambda q: np.interp(q, grid, cdf))
    assert res.pvalue > 1e-3
    # E[cos(2 pi X_2) | X_0 = 0.3] exact vs Monte Carlo (4 standard errors)
    rng = np.random.default_rng(1)
    x = np.full(200_000, 0.3)
    for _ in range(2):
        x = (L.F(x) + L.noise(x.size, rng=rng)) % 1.0
    h = np.cos(2 * np.pi * x)
    exact = L.conditional_expectation(lambda q: np.cos(2 * np.pi * q), np.array([0.3]), 2)[0]
    assert abs(h.mean() - exact) < 4 * h.std() / math.sqrt(h.size)


def test_prinz_generator_eigenvalues_and_grid_convergence():
    coarse, fine = PrinzLangevin(n_grid=3000), PrinzLangevin(n_grid=6000)
    ref = np.array([-1.199, -7.889, -15.361])  # paper's poster: -1.20, -7.89, -15.36
    np.testing.assert_allclose(fine.generator_eigenvalues(4)[1:], ref, rtol=1e-3)
    assert abs(fine.generator_eigenvalues(1)[0]) < 1e-6
    d = np.abs(coarse.generator_eigenvalues(4)[1:] - fine.generator_eigenvalues(4)[1:])
    assert np.all(d / np.abs(ref) < 1e-3)
    np.testing.assert_allclose(
        PrinzLangevin(tau=0.1).singular_values(4), [1, 0.88701, 0.45434, 0.21522], atol=5e-5
    )


def test_prinz_pairs_match_the_first_eigenfunction_correlation():
    p = PrinzLangevin(tau=0.1, dt=2e-4)
    x, y = p.pairs(20_000, rng=0)
    prod = p.left_singular_functions(x, 2)[:, 1] * p.right_singular_functions(y, 2)[:, 1]
    s1 = p.singular_values(2)[1]
    # Euler-Maruyama bias O(dt |mu|) ~ 1e-3 is far below the 4-SE Monte Carlo tolerance here
    assert abs(prod.mean() - s1) < 4 * prod.std() / math.sqrt(x.size)


def test_lorenz_has_no_spectrum_and_integrates():
    lz = Lorenz63()
    tr = lz.trajectory(200, rng=0)
    assert tr.shape == (201, 3) and np.isfinite(tr).all()
    with pytest.raises(NotImplementedError):
        lz.singular_values(3)


def test_bad_input():
    with pytest.raises(ValueError, match="lag"):
        make_pairs(np.arange(10.0), lag=0)
    with pytest.raises(ValueError, match="trajectory"):
        make_pairs(np.arange(3.0), lag=3)
    with pytest.raises(ValueError, match="trajectory"):
        make_pairs(np.array([0.0, np.nan, 1.0]), lag=1)
    with pytest.raises(ValueError, match="lag"):
        FiniteChain(np.eye(2), lag=0)
    with pytest.raises(ValueError, match="k"):
        FiniteChain.random(4, rng=0).singular_values(5)
    with pytest.raises(ValueError, match="P.*row sums off by up to 0.1"):
        FiniteChain(np.array([[0.5, 0.6], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="tau"):
        OrnsteinUhlenbeck(tau=0.0)
    with pytest.raises(ValueError, match="N"):
        NoisyLogisticMap(N=3)
