"""The sqrt(3) threshold (sympy + numerics) and the SR noise model of theory.fp4."""

import math

import numpy as np
import pytest
import sympy as sp

import theory.fp4 as T


def test_sympy_derivation_matches_closed_forms():
    r = T.threshold_derivation()
    G, d, lam, sig = sp.symbols("G d lam sigma", positive=True)
    assert sp.simplify(r.sigma_crit - sp.sqrt(G / (3 * d))) == 0
    assert sp.simplify(r.rho_crit - sp.sqrt(3)) == 0
    assert r.efficiency_at_crit == sp.Rational(3, 4)
    assert r.fixed_efficiency_at_crit == sp.Rational(2, 3)
    assert sp.simplify(r.descent - G**2 / (2 * lam * (G + d * sig**2))) == 0
    assert "sigma_crit" in r.summary()


def test_efficiencies():
    rho = np.array([0.5, 1.0, math.sqrt(3), 10.0])
    np.testing.assert_allclose(T.optimal_efficiency(rho), rho**2 / (1 + rho**2))
    np.testing.assert_allclose(T.fixed_step_efficiency(rho), [-3, 0, 2 / 3, 0.99])
    G, d, lam = 2.0, 1000, 1.7
    for r in rho:
        s = math.sqrt(G) / (r * math.sqrt(d))
        rel = T.expected_loss_change(G, s, d, lam) / T.expected_loss_change(G, 0.0, d, lam)
        assert abs(rel - r**2 / (1 + r**2)) < 1e-12
        relf = T.expected_loss_change(G, s, d, lam, eta=1 / lam) / T.expected_loss_change(
            G, 0.0, d, lam, eta=1 / lam
        )
        assert abs(relf - (1 - 1 / r**2)) < 1e-12


@pytest.mark.parametrize("k", [0.5, 1.0, 2.0])
def test_quadratic_monte_carlo_fixed_step(k):
    """sigma = k sigma_crit, eta = 1/lam: E dL = -(G / 2 lam)(1 - k^2 / 3) within 4 s.e. (paper
    Fig. 4)."""
    rng = np.random.default_rng(0)
    d, lam, R = 500, 2.0, 4000
    x = rng.standard_normal(d)
    g = lam * x
    G = g @ g
    s = k * T.critical_sigma(math.sqrt(G), d)
    eps = s * rng.standard_normal((R, d))
    x1 = x - (g + eps) / lam
    dL = 0.5 * lam * np.sum(x1**2, 1) - 0.5 * lam * x @ x
    want = -(G / (2 * lam)) * (1 - k**2 / 3)
    assert abs(dL.mean() - want) <= 4 * dL.std(ddof=1) / math.sqrt(R)
    assert abs(T.expected_loss_change(G, s, d, lam, eta=1 / lam) - want) < 1e-9 * abs(G)


def test_update_gemm_noise_monte_carlo():
    """E|Q(delta)^T Q(a) - delta^T a|^2 equals the closed form, unbiased, for SR onto the
    integers."""
    rng = np.random.default_rng(1)
    n, p, q, R = 12, 3, 4, 20000
    delta, a = rng.uniform(-3, 3, (n, p)), rng.uniform(-3, 3, (n, q))

    def sr(x, u):
        lo = np.floor(x)
        return lo + (u < x - lo)

    vd = T.two_point_variance(delta, np.floor(delta), np.floor(delta) + 1)
    va = T.two_point_variance(a, np.floor(a), np.floor(a) + 1)
    want = T.update_gemm_noise(delta, a, vd, va)
    ud, ua = rng.random((R, n, p)), rng.random((R, n, q))
    err = np.einsum("rnj,rnk->rjk", sr(delta, ud), sr(a, ua)) - delta.T @ a
    e2 = np.sum(err**2, axis=(1, 2))
    assert abs(e2.mean() - want) <= 4 * e2.std(ddof=1) / math.sqrt(R)
    z = err.mean(0) / (err.std(0, ddof=1) / math.sqrt(R))
    assert np.all(np.abs(z) < 4.5)


def test_bad_input():
    with pytest.raises(ValueError, match="d"):
        T.critical_sigma(1.0, 0)
    with pytest.raises(ValueError, match="noise_norm"):
        T.gradient_noise_ratio(1.0, 0.0)
    with pytest.raises(ValueError, match="lam"):
        T.optimal_step(1.0, 0.1, 3, -1.0)
    with pytest.raises(ValueError, match="rho"):
        T.fixed_step_efficiency([0.0])
    with pytest.raises(ValueError, match="a"):
        T.update_gemm_noise(np.ones((3, 2)), np.ones((4, 2)), np.ones((3, 2)), np.ones((4, 2)))


def test_nvfp4_sr_variance_matches_the_package_quantiser_by_monte_carlo():
    """The independent NumPy NVFP4 SR variance equals the variance of nn.quant's SR draws (blocks
    of 16 along axis 0, log-normal magnitudes across blocks), within 4.5 SE per element sum."""
    import jax
    import jax.numpy as jnp

    from nn.quant import NVFP4, quantize

    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 6)) * np.exp(rng.standard_normal((32, 6)))
    v = T.nvfp4_sr_variance(x, axis=0)
    R = 4000
    keys = jax.random.split(jax.random.key(0), R)
    q = np.asarray(
        jax.vmap(lambda k: quantize(jnp.asarray(x), NVFP4, "stochastic", key=k, axis=0))(keys),
        np.float64,
    )
    e2 = np.sum((q - x) ** 2, axis=(1, 2))  # unbiased SR: E e2 = sum of variances
    assert abs(e2.mean() - v.sum()) <= 4.5 * e2.std(ddof=1) / math.sqrt(R)
    assert np.all(v >= 0) and v.sum() > 0
    with pytest.raises(ValueError, match="block"):
        T.nvfp4_sr_variance(np.ones(10))


def test_noisy_gd_sq_error_recursion_by_monte_carlo():
    """E|e_t|^2 of GD with zero-mean noise (H = lam I) against simulation, 4 SE per step; the
    stationary ratio is eta lam / (2 - eta lam)."""
    rng = np.random.default_rng(4)
    d, R, eta, lam, steps = 20, 4000, 0.3, 1.5, 15
    noise = np.linspace(0.5, 0.1, steps)
    e = np.tile(rng.standard_normal(d), (R, 1))
    e0 = float(e[0] @ e[0])
    sims = [np.sum(e**2, 1)]
    for t in range(steps):
        e = e - eta * (lam * e + math.sqrt(noise[t] / d) * rng.standard_normal((R, d)))
        sims.append(np.sum(e**2, 1))
    sims = np.array(sims)
    want = T.noisy_gd_sq_error(e0, noise, eta, lam)
    se = sims.std(1, ddof=1) / math.sqrt(R)
    assert np.all(np.abs(sims.mean(1) - want) <= 4 * se + 1e-12)
    flat = T.noisy_gd_sq_error(0.0, np.full(400, 2.0), eta, lam)
    assert abs(lam**2 * flat[-1] / 2.0 - eta * lam / (2 - eta * lam)) < 1e-9
