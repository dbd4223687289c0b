"""estimators.ecc(estimator=..., X_unlabeled=...): route c2, ridge estimators whitened by the
unlabeled covariance with constants for the inverse Marchenko–Pastur population spectrum."""

import numpy as np
import pytest

from estimators import ecc
from estimators._ridge import _Prepared
from estimators._whitened import linear_moments, population_spectrum, solve_moments, solve_mu
from paper_checks.ecc_ols import aligned_coefficients, covariance, rows
from theory import ecc as th
from theory import marchenko_pastur as mp

PSI = 0.5


@pytest.mark.parametrize("gamma", [0.5, 2.0])
@pytest.mark.parametrize("lams", [(1.0, 1.0), (0.5, 2.0), (3.0, 0.2)])
@pytest.mark.parametrize("estimator", ["dr", "nr", "int"])
@pytest.mark.parametrize("split", [2, 3])
def test_identity_spectrum_gives_the_marchenko_pastur_constants(gamma, lams, estimator, split):
    # N -> inf (t = 1): the deterministic equivalents (first- and second-order, two penalties)
    # must reproduce the package's closed-form MP naive limits (theory.ecc.naive_limit), which
    # are computed by an independent route (divided differences of the Stieltjes transform).
    p = 1000
    m = int(round(p / gamma))
    la, ly = lams
    c = th.bias_constants(th.SpectralIntegrator(p / m, la, ly))
    cp, ct, dp, dt = linear_moments(estimator, split, la, ly, np.ones(p), m, m, c["zeta"])
    assert float(ct[0]) == pytest.approx(float(th.naive_limit(estimator, split, c, 1, 0)), 1e-8)
    assert float(cp[0]) == pytest.approx(float(th.naive_limit(estimator, split, c, 0, 1)), 1e-8)
    theta_coef = c["s_a"] * c["s_y"] if split == 3 else c["Gamma"]
    assert float(dt[0]) == pytest.approx(float(theta_coef), rel=1e-8)


def test_solve_mu_and_population_spectrum():
    s = 1.0 / population_spectrum(200, 400)
    lam = np.array([0.01, 0.5, 5.0])
    for m in (100, 400):  # p > m and p < m
        mu, dmu = solve_mu(lam, s, m)
        resid = mu * (1 - (s[None, :] / (s[None, :] + mu[:, None])).sum(1) / m) - lam
        assert np.max(np.abs(resid)) < 1e-10
        eps = 1e-6
        assert dmu == pytest.approx((solve_mu(lam + eps, s, m)[0] - mu) / eps, rel=1e-4)
    # MP(1/2) quantiles: mean 1 and mean of the inverse 1/(1 - 1/2) = 2, to O(1/p^2)-ish
    t = population_spectrum(400, 800)
    assert t.mean() == pytest.approx(1.0, abs=2e-3)
    assert (1 / t).mean() == pytest.approx(2.0, abs=1e-2)
    assert t.min() >= mp.edges(0.5)[0] and t.max() <= mp.edges(0.5)[1]


def test_solve_moments_inverts_the_linear_system():
    coef = (np.array([1.2]), np.array([0.3]), np.array([0.1]), np.array([0.7]))
    psi, theta = 0.4, -0.8
    naive = coef[0] * psi + coef[1] * theta
    th_hat = coef[2] * psi + coef[3] * theta
    out = solve_moments(naive, th_hat, coef)
    assert out[0][0] == pytest.approx(psi) and out[1][0] == pytest.approx(theta)


def _draw(n, p, N, rng, L, al, be):
    X, _ = rows("gaussian", n, L, rng)
    XU, _ = rows("gaussian", N, L, rng)
    e = rng.standard_normal((n, 2)) @ np.linalg.cholesky([[1.0, PSI], [PSI, 1.0]]).T
    return X @ be + e[:, 0], X @ al + e[:, 1], X, XU


def test_whitened_dr_is_unbiased_where_identity_constants_are_not():
    # AR(1) 0.5, aligned coefficients, n = 300 (folds of 150), p = 60, N = 120 (p/N = 1/2).
    # Route c2 must be unbiased within 3.5 MC SE; the identity constants on the same whitened
    # folds (the negative control) are biased by O(p/N), here more than 5 MC SE.
    n, p, N, reps = 300, 60, 120, 80
    rng = np.random.default_rng(11)
    S = covariance("ar0.5", p, rng)
    L = np.linalg.cholesky(S)
    al, be = aligned_coefficients(S, rng)
    est, ident = np.empty(reps), np.empty(reps)
    for r in range(reps):
        y, a, X, XU = _draw(n, p, N, rng, L, al, be)
        est[r] = ecc(y, a, X, lam=1.0, X_unlabeled=XU, rng=r).estimate
        XUc = XU - XU.mean(0)
        prep = _Prepared(
            y, a, X, 2, XUc.T @ XUc / (N - 1), True, np.random.default_rng(r), False, False
        )
        ident[r] = prep.fit("dr", 1.0, 1.0)[1][0]
    mcse = est.std(ddof=1) / np.sqrt(reps)
    assert abs(est.mean() - PSI) <= 3.5 * mcse
    mcse_i = ident.std(ddof=1) / np.sqrt(reps)
    assert abs(ident.mean() - PSI) > 5 * mcse_i


def test_result_fields_summary_and_bad_input():
    rng = np.random.default_rng(3)
    p = 12
    L = np.linalg.cholesky(covariance("ar0.5", p, rng))
    al, be = aligned_coefficients(L @ L.T, rng)
    y, a, X, XU = _draw(80, p, 30, rng, L, al, be)
    r = ecc(y, a, X, estimator="nr", split=3, lam=(0.5, 2.0), X_unlabeled=XU, rng=0)
    assert r.constants == "unlabeled" and r.moments["N"] == 30
    assert r.se**2 == pytest.approx(r.moments["var_labeled"] + r.moments["var_unlabeled"])
    assert r.moments["var_unlabeled"] > 0
    assert "whitened by 30 unlabeled rows" in r.summary()
    with pytest.raises(ValueError, match="`cov` does not apply with `X_unlabeled`"):
        ecc(y, a, X, X_unlabeled=XU, cov=np.eye(p))
    with pytest.raises(ValueError, match="`constants` does not apply with `X_unlabeled`"):
        ecc(y, a, X, X_unlabeled=XU, constants="mp")
    with pytest.raises(ValueError, match=r"at least p \+ 4 = 16 rows"):
        ecc(y, a, X, X_unlabeled=XU[:15])
    with pytest.raises(ValueError, match="`X_unlabeled` must have the 12 columns"):
        ecc(y, a, X, X_unlabeled=XU[:, :11])
    with pytest.raises(ValueError, match="full column rank"):
        ecc(y, a, X, X_unlabeled=np.tile(XU[:2], (15, 1)))
    XUn = XU.copy()
    XUn[[1, 4], 3] = np.nan
    with pytest.raises(ValueError, match="`X_unlabeled` must have no missing values; got 2"):
        ecc(y, a, X, X_unlabeled=XUn)


def test_unlabeled_dataframe_must_carry_the_columns_of_X():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(4)
    p = 5
    L = np.eye(p)
    y, a, X, XU = _draw(60, p, 20, rng, L, np.full(p, 0.3), np.full(p, 0.2))
    cols = [f"x{j}" for j in range(p)]
    Xd, XUd = pd.DataFrame(X, columns=cols), pd.DataFrame(XU, columns=cols)
    r = ecc(pd.Series(y, name="out"), pd.Series(a, name="exp"), Xd, X_unlabeled=XUd, lam=1.0)
    assert "y: out" in r.summary() and "x4" in r.summary()
    with pytest.raises(ValueError, match=r"missing \['x4'\], extra \['z'\]"):
        ecc(y, a, Xd, X_unlabeled=XUd.rename(columns={"x4": "z"}), lam=1.0)
    with pytest.raises(ValueError, match="same columns in another order"):
        ecc(y, a, Xd, X_unlabeled=XUd[cols[::-1]], lam=1.0)
