"""estimators.ecc: interface, exact invariances, plug-ins, tuning, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ortho_group

import estimators
from estimators import ecc


def simulate(n, p, *, rho=0.5, rng=0, theta_sign=1.0, shift=0.0):
    rng = np.random.default_rng(rng)
    al = rng.uniform(size=p)
    be = theta_sign * rng.uniform(size=p)
    al /= np.linalg.norm(al)
    be /= np.linalg.norm(be)
    X = rng.standard_normal((n, p)) + shift
    e = rng.standard_normal((n, 2)) @ np.linalg.cholesky([[1, rho], [rho, 1]]).T
    return X @ be + e[:, 0] + shift, X @ al + e[:, 1] - shift, X, al @ be


Y, A, X, THETA = simulate(400, 100)


def test_result_fields_and_interval():
    r = ecc(Y, A, X, estimator="dr", split=2, lam=0.5, rng=1)
    assert r.estimator == "dr" and r.split == 2 and r.lam == (0.5, 0.5)
    assert r.m == 200 and r.gamma == pytest.approx(100 / 199)
    lo, hi = r.ci
    assert lo < r.estimate < hi and hi - lo == pytest.approx(2 * 1.959963984540054 * r.se)
    assert r.variance == pytest.approx(r.m * r.se**2)
    assert r.conf_int(0.9)[1] - r.conf_int(0.9)[0] < hi - lo
    s = r.summary()
    assert "DR" in s and f"{r.estimate:.4f}" in s
    assert np.isfinite(r.pvalue) and 0 <= r.pvalue <= 1


def test_ecc_matches_path():
    for split in (2, 3):
        path = estimators.ecc_path(Y, A, X, [0.3, 1.0], split=split, rng=5)
        for est in ("dr", "nr", "int"):
            r = ecc(Y, A, X, estimator=est, split=split, lam=1.0, rng=5)
            assert r.estimate == pytest.approx(path["debiased"][est][1], rel=1e-10)
            assert r.naive == pytest.approx(path["naive"][est][1], rel=1e-10)
            assert r.se == pytest.approx(path["se"][est][1], rel=1e-10)


def test_ridge_fit_matches_direct_solve():
    # The eigendecomposition path reproduces (X^T X/m + lam I)^{-1} X^T a/m (both p < m, p > m).
    from estimators._ridge import _RidgePath

    rng = np.random.default_rng(2)
    for m, p in [(60, 20), (20, 60)]:
        Xt, t = rng.standard_normal((m, p)), rng.standard_normal(m)
        for vectors in (True, False):
            path = _RidgePath(Xt, {"a": t}, m, vectors=vectors)
            for lam in (0.01, 0.7):
                direct = np.linalg.solve(Xt.T @ Xt / m + lam * np.eye(p), Xt.T @ t / m)
                np.testing.assert_allclose(path.coef("a", lam)[0], direct, rtol=1e-8, atol=1e-12)
                assert path.inner("a", lam, "a", 0.3)[0] == pytest.approx(
                    direct @ path.coef("a", 0.3)[0], rel=1e-10
                )
            ev = np.linalg.eigvalsh(Xt.T @ Xt / m)
            np.testing.assert_allclose(path.eigenvalues, ev, atol=1e-10)


@settings(max_examples=8)
@given(
    seed=st.integers(0, 2**31),
    est=st.sampled_from(["dr", "nr", "int"]),
    split=st.sampled_from([2, 3]),
)
def test_rotation_invariance(seed, est, split):
    y, a, x, _ = simulate(150, 40, rng=seed)
    O = ortho_group.rvs(40, random_state=seed % 1000)
    r1 = ecc(y, a, x, estimator=est, split=split, lam=(0.3, 0.8), rng=seed)
    r2 = ecc(y, a, x @ O, estimator=est, split=split, lam=(0.3, 0.8), rng=seed)
    assert r2.estimate == pytest.approx(r1.estimate, rel=1e-8, abs=1e-10)
    assert r2.se == pytest.approx(r1.se, rel=1e-8)


@settings(max_examples=8)
@given(
    c=st.floats(0.05, 20.0),
    est=st.sampled_from(["dr", "nr", "int"]),
    split=st.sampled_from([2, 3]),
    auto=st.booleans(),
)
def test_scaling_y(c, est, split, auto):
    lam = "auto" if auto else 0.4
    r1 = ecc(Y, A, X, estimator=est, split=split, lam=lam, rng=3)
    r2 = ecc(c * Y, A, X, estimator=est, split=split, lam=lam, rng=3)
    assert r2.estimate == pytest.approx(c * r1.estimate, rel=1e-7, abs=1e-12)
    assert r2.variance == pytest.approx(c * c * r1.variance, rel=1e-7)


def test_whitening_with_known_covariance():
    rng = np.random.default_rng(4)
    B = rng.standard_normal((100, 100)) / 10
    C = B @ B.T + np.eye(100)
    L = np.linalg.cholesky(C)
    Xc = X @ L.T
    r1 = ecc(Y, A, X, lam=0.5, rng=7)
    r2 = ecc(Y, A, Xc, lam=0.5, rng=7, cov=C)
    assert r2.estimate == pytest.approx(r1.estimate, rel=1e-8)
    assert r2.se == pytest.approx(r1.se, rel=1e-8)


def test_centering_handles_intercepts_and_means():
    y, a, x, _ = simulate(400, 100, shift=3.0, rng=1)
    y0, a0, x0, _ = simulate(400, 100, shift=0.0, rng=1)
    r = ecc(y, a, x, lam=0.5, rng=2)
    r0 = ecc(y0, a0, x0, lam=0.5, rng=2)
    assert r.estimate == pytest.approx(r0.estimate, rel=1e-8)


def test_plugin_moments():
    # Method-of-moments plug-ins over 20 data sets at p/n = 0.5: within 3 MC standard errors.
    rows = []
    for s in range(20):
        y, a, x, th = simulate(1000, 500, rng=100 + s)
        mo = estimators.plugin_moments(y, a, x)
        rows.append(
            [
                mo["a2"] - 1,
                mo["b2"] - 1,
                mo["theta"] - th,
                mo["var_eps"] - 1,
                mo["cov_eps_delta"] - 0.5,
            ]
        )
    rows = np.array(rows)
    mean, se = rows.mean(0), rows.std(0, ddof=1) / np.sqrt(len(rows))
    assert np.all(np.abs(mean) < 3 * se + 1e-3), (mean, se)


@pytest.mark.parametrize("est,split", [("dr", 2), ("dr", 3), ("nr", 3)])
def test_auto_lambda_beats_common_grid_and_prediction_optimal(est, split):
    from estimators._ridge import _Prepared

    r = ecc(Y, A, X, estimator=est, split=split, lam="auto", rng=1)
    prep = _Prepared(Y, A, X, split, None, True, 1)
    v_auto = float(prep.variance(est, *r.lam)[()])
    curve = estimators.variance_curve(Y, A, X, estimator=est, split=split, rng=1)
    assert prep.m * v_auto <= curve.variance_opt * (1 + 1e-9)
    assert curve.variance_opt <= curve.variance_at_prediction * (1 + 1e-9)
    assert r.lam_prediction == curve.lam_prediction
    assert "variance-optimal" in curve.summary()


def test_auto_lambda_is_the_argmin():
    from estimators._ridge import _auto_lambda, _Prepared

    prep = _Prepared(Y, A, X, 2, None, True, 1)
    la, ly = _auto_lambda(prep, "dr")
    v0 = prep.variance("dr", la, ly)
    for fa in (0.9, 1.1):
        for fy in (0.9, 1.1):
            assert v0 <= prep.variance("dr", la * fa, ly * fy) + 1e-15


def test_ci_test_reports_both_statistics():
    t = estimators.ecc_test(Y, A, X, lam=0.5, rng=0)
    assert t.statistic == pytest.approx(t.result.zstat)
    assert np.isfinite(t.gcm_statistic) and 0 <= t.gcm_pvalue <= 1
    assert t.reject(0.05) == (t.pvalue < 0.05)
    assert "GCM" in t.summary()


def test_isotropy_null_law():
    # m W - p ~ N(1, 4) for Gaussian rows with identity covariance (Ledoit & Wolf 2002).
    from estimators._ridge import _RidgePath

    rng = np.random.default_rng(8)
    z = []
    for m, p in [(100, 50)] * 150 + [(60, 120)] * 150:
        x = rng.standard_normal((m, p))
        ev = _RidgePath(x, {}, m, vectors=False).eigenvalues
        t1, t2, g = ev.mean(), np.mean(ev**2), p / m
        z.append(m * (t2 - 2 * t1 + 1 - g * t1**2 + g) - p)
    z = np.array(z)
    assert abs(z.mean() - 1) < 3 * 2 / np.sqrt(len(z))
    assert abs(z.std() - 2) < 3 * 2 / np.sqrt(2 * len(z))


def test_non_identity_covariance_raises():
    with pytest.raises(ValueError, match="`cov` must be the covariance"):
        ecc(Y, A, 2.0 * X, lam=0.5)
    rng = np.random.default_rng(1)
    B = rng.standard_normal((100, 100)) / 10
    C = B @ B.T + np.eye(100)
    with pytest.raises(ValueError, match="`cov` must be the covariance"):
        ecc(Y, A, X @ np.linalg.cholesky(C).T, lam=0.5)
    with pytest.raises(ValueError, match="after whitening"):
        ecc(Y, A, X, lam=0.5, cov=C)


def test_bad_input():
    with pytest.raises(ValueError, match="`y`"):
        ecc(Y[:-1], A, X)
    with pytest.raises(ValueError, match="`a`"):
        ecc(Y, A[:10], X)
    Xn = X.copy()
    Xn[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"`X` must have no missing values; got 1 .*\(4: 1\)"):
        ecc(Y, A, Xn)
    An = A.copy()
    An[0] = np.inf
    with pytest.raises(ValueError, match="`a` must be finite"):
        ecc(Y, An, X)
    with pytest.raises(ValueError, match="rows for split=3"):
        ecc(Y[:25], A[:25], X[:25], split=3)
    for bad in (0.0, -1.0, (0.5, 0.0)):
        with pytest.raises(ValueError, match="`lam`"):
            ecc(Y, A, X, lam=bad)
    with pytest.raises(ValueError, match="`lam`"):
        ecc(Y, A, X, lam="best")
    C = np.eye(100)
    C[0, 1] = 0.5
    with pytest.raises(ValueError, match="`cov` must be symmetric"):
        ecc(Y, A, X, cov=C)
    C = np.eye(100)
    C[0, 0] = -1.0
    with pytest.raises(ValueError, match="`cov` must be positive definite"):
        ecc(Y, A, X, cov=C)
    with pytest.raises(ValueError, match="`cov`"):
        ecc(Y, A, X, cov=np.eye(99))
    with pytest.raises(ValueError, match="estimator"):
        ecc(Y, A, X, estimator="aipw")
    with pytest.raises(ValueError, match="split"):
        ecc(Y, A, X, split=5)
    with pytest.raises(ValueError, match="level"):
        ecc(Y, A, X, level=1.5)
