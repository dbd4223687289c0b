"""estimators.ecc(assume="generic"): route b against dense hat matrices, exactness of its noise
part, its variance formula, unbiasedness under random effects, the alignment check, bad input."""

import warnings

import numpy as np
import pytest

from estimators import ecc
from estimators._generic import GenericFit
from paper_checks.ecc_ols import aligned_coefficients, covariance, rows

PSI = 0.5


def _noise(n, rng):
    return rng.standard_normal((n, 2)) @ np.linalg.cholesky([[1.0, PSI], [PSI, 1.0]]).T


def _dense(y, a, X, la, ly):
    """Route b's system (docs/papers/ecc_unknown_covariance.md#route-b) from n x n hat matrices and
    eigvalsh (an independent route)."""
    m, p = X.shape
    S = X.T @ X / m
    Qa, Qy = np.linalg.inv(S + la * np.eye(p)), np.linalg.inv(S + ly * np.eye(p))
    Ha, Hy = X @ Qa @ X.T / m, X @ Qy @ X.T / m
    I = np.eye(m)
    t1 = ((I - Ha) @ a) @ ((I - Hy) @ y) / m
    t2 = (Qa @ X.T @ a / m) @ (Qy @ X.T @ y / m)
    d = np.linalg.eigvalsh(S)
    c11 = np.trace((I - Ha) @ (I - Hy)) / m
    c12 = np.mean(la * ly * d / ((d + la) * (d + ly)))
    c21 = np.sum(d / ((d + la) * (d + ly))) / m
    c22 = np.mean(d**2 / ((d + la) * (d + ly)))
    return np.linalg.solve([[c11, c12], [c21, c22]], [t1, t2])


@pytest.mark.parametrize("p", [8, 30])
def test_estimate_matches_the_dense_system(p):
    rng = np.random.default_rng(p)
    X = rng.standard_normal((20, p)) @ np.linalg.cholesky(covariance("ar0.5", p, rng)).T
    y, a = rng.standard_normal(20), rng.standard_normal(20)
    fit = GenericFit(y, a, X, 20)
    psi, theta, _ = fit.solve("a", "y", 0.7, 1.9)
    assert [psi, theta] == pytest.approx(list(_dense(y, a, X, 0.7, 1.9)), rel=1e-9)
    # W: trace 1 (noise coefficient) and tr(X^T W X) = 0 (no generic signal)
    w0, w = fit.weights(0.7, 1.9)
    assert fit.m_perp * w0 + w.sum() == pytest.approx(1.0, rel=1e-10)
    assert abs(np.sum(w * fit.m * fit.d)) < 1e-10


def test_noise_part_is_exact_for_any_design():
    # alpha = beta = 0: E[psi_hat | X] = psi exactly for a fixed correlated t5 design with p > n;
    # the conditional variance must match the formula (Gaussian noise, no signal terms).
    rng = np.random.default_rng(1)
    n, p, reps = 60, 90, 3000
    X, _ = rows("t5", n, np.linalg.cholesky(covariance("ar0.9", p, rng)), rng)
    X = X - X.mean(0)
    est = np.empty(reps)
    fit = None
    for r in range(reps):
        e = _noise(n, rng)
        y, a = e[:, 0] - e[:, 0].mean(), e[:, 1] - e[:, 1].mean()
        fit = GenericFit(y, a, X, n - 1)
        est[r] = fit.solve("a", "y", 1.0, 1.0)[0]
    assert fit is not None
    v = fit.covariance([(1.0, 1.0)], PSI, (1.0, 1.0, 0.0, 0.0, 0.0))[0, 0]
    assert abs(est.mean() - PSI) <= 3.5 * np.sqrt(v / reps)
    assert est.var(ddof=1) == pytest.approx(v, rel=3.5 * np.sqrt(2 / reps))


def test_variance_formula_under_random_effects():
    # fixed X, coefficients redrawn from the Gaussian prior with |alpha|^2 = a2 etc.: the MC
    # variance must match the formula at the true moments (relative MC SE sqrt(2/reps)).
    rng = np.random.default_rng(2)
    n, p, reps = 80, 120, 3000
    X, _ = rows("gaussian", n, np.linalg.cholesky(covariance("ar0.5", p, rng)), rng)
    a2, b2, th = 1.0, 1.5, 0.9
    C = np.linalg.cholesky([[a2, th], [th, b2]])
    est = np.empty(reps)
    for r in range(reps):
        g = rng.standard_normal((p, 2)) @ C.T / np.sqrt(p)
        e = _noise(n, rng)
        fit = GenericFit(X @ g[:, 1] + e[:, 0], X @ g[:, 0] + e[:, 1], X, n)
        est[r] = fit.solve("a", "y", 0.5, 2.0)[0]
    fit = GenericFit(np.ones(n), np.ones(n), X, n)
    v = fit.covariance([(0.5, 2.0)], PSI, (1.0, 1.0, a2, b2, th))[0, 0]
    assert abs(est.mean() - PSI) <= 3.5 * np.sqrt(v / reps)
    assert est.var(ddof=1) == pytest.approx(v, rel=3.5 * np.sqrt(2 / reps))


def test_unbiased_under_random_effects_and_checked_alignment():
    # AR(1) 0.5, p = 2n, coefficients redrawn from a rotation-invariant prior (corr 0.8):
    # unbiased within 3.5 MC SE while the df-only estimate is not; the alignment check then
    # flags rarely, and it flags most draws with the paper's aligned coefficients.
    rng = np.random.default_rng(3)
    n, p, reps = 120, 240, 120
    S = covariance("ar0.5", p, rng)
    L = np.linalg.cholesky(S)
    scale = np.sqrt(np.trace(S))
    est, naive, flags = np.empty(reps), np.empty(reps), np.empty(reps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for r in range(reps):
            g = rng.standard_normal((p, 2))
            al, be = g[:, 0] / scale, (0.8 * g[:, 0] + 0.6 * g[:, 1]) / scale
            X, _ = rows("gaussian", n, L, rng)
            e = _noise(n, rng)
            res = ecc(X @ be + e[:, 0], X @ al + e[:, 1], X, assume="generic", lam=1.0)
            assert res.alignment is not None
            est[r], naive[r], flags[r] = res.estimate, res.naive, res.alignment["pvalue"] < 0.01
        mcse = est.std(ddof=1) / np.sqrt(reps)
        assert abs(est.mean() - PSI) <= 3.5 * mcse
        assert naive.mean() - PSI > 5 * mcse
        assert flags.mean() <= 0.06
        al, be = aligned_coefficients(S, rng)
        pv = []
        for _ in range(20):
            X, _ = rows("gaussian", 4 * n, L, rng)
            e = _noise(4 * n, rng)
            res = ecc(X @ be + e[:, 0], X @ al + e[:, 1], X, assume="generic", lam=1.0)
            assert res.alignment is not None
            pv.append(res.alignment["pvalue"])
    assert np.mean(np.array(pv) < 0.01) >= 0.5


def test_warning_summary_and_bad_input():
    rng = np.random.default_rng(5)
    n, p = 600, 1200
    S = covariance("ar0.5", p, rng)
    al, be = aligned_coefficients(S, rng)
    X, _ = rows("gaussian", n, np.linalg.cholesky(S), rng)
    e = _noise(n, rng)
    y, a = X @ be + e[:, 0], X @ al + e[:, 1]
    with pytest.warns(UserWarning, match="assume='generic' looks violated"):
        r = ecc(y, a, X, assume="generic", lam=1.0)
    assert r.alignment is not None and r.alignment["pvalue"] < 0.01
    assert r.split == 1 and r.constants == "generic"
    assert "generic alignment assumed" in r.summary() and "chi2(2)" in r.summary()
    y, a, X = y[:50], a[:50], X[:50, :20]
    with pytest.raises(ValueError, match="`assume` must be"):
        ecc(y, a, X, assume="aligned")
    with pytest.raises(ValueError, match="`estimator` must be 'dr' with assume='generic'"):
        ecc(y, a, X, assume="generic", estimator="nr")
    bad: dict = {"split": 2, "cov": np.eye(20), "constants": "mp", "X_unlabeled": X}
    for arg, val in bad.items():
        with pytest.raises(ValueError, match=f"`{arg}` does not apply with assume='generic'"):
            ecc(y, a, X, assume="generic", **{arg: val})
    with pytest.raises(ValueError, match="`lam`"):
        ecc(y, a, X, assume="generic", lam=-1.0)
    r = ecc(y, a, X, assume="generic")  # "auto"
    assert r.lam[0] == r.lam[1] > 0 and np.isfinite(r.se)
