"""estimators.ecc(estimator="hoif", X_unlabeled=...): the U-statistic against its definition,
the jackknife's leave-one-out values against refits, unbiasedness for p > n, bad input."""

import numpy as np
import pytest

from estimators import ecc
from estimators._hoif import _estimate, hoif
from paper_checks.ecc_ols import aligned_coefficients, covariance, rows

PSI = 0.5


def _data(n, p, N, seed, kind="ar0.9"):
    rng = np.random.default_rng(seed)
    S = covariance(kind, p, rng)
    L = np.linalg.cholesky(S)
    al, be = aligned_coefficients(S, rng)
    X, _ = rows("gaussian", n, L, rng)
    XU, _ = rows("gaussian", N, L, rng)
    e = rng.standard_normal((n, 2)) @ np.linalg.cholesky([[1.0, PSI], [PSI, 1.0]]).T
    return X @ be + e[:, 0], X @ al + e[:, 1], X, XU, al @ S @ be


def test_u_statistic_and_jackknife_match_their_definitions():
    y, a, X, XU, _ = _data(12, 5, 20, 0)
    N, p = XU.shape
    Om = (N - p - 1) / N * np.linalg.inv(XU.T @ XU / N)
    n = y.size
    cross = sum(a[i] * X[i] @ Om @ X[j] * y[j] for i in range(n) for j in range(n) if i != j)
    direct = np.mean(a * y) - cross / (n * (n - 1))
    est, var, var_lab, var_unl, theta = hoif(y, a, X, XU)
    assert est == pytest.approx(direct, rel=1e-12)
    assert theta == pytest.approx(cross / (n * (n - 1)), rel=1e-12)
    L = np.linalg.cholesky(XU.T @ XU / N)
    Z = np.linalg.solve(L, X.T).T * np.sqrt((N - p - 1) / N)
    _, loo, _ = _estimate(y, a, Z)
    for i in (0, 5, 11):
        keep = np.arange(n) != i
        assert loo[i] == pytest.approx(_estimate(y[keep], a[keep], Z[keep])[0], rel=1e-12)
    assert var == pytest.approx(var_lab + var_unl) and var_lab > 0 and var_unl > 0


def test_unbiased_when_p_exceeds_n():
    # p = 2n, N = 4p, AR(1) 0.9 rows, aligned coefficients: bias within 3.5 MC SE. The plug-in
    # SE is conservative (docs/papers/ecc_unknown_covariance.md#route-c1: SE/SD 1.2-1.4); it must
    # not be below the MC SD by 3 SE.
    n, p, N, reps = 20, 40, 160, 200
    est, se = np.empty(reps), np.empty(reps)
    for r in range(reps):
        y, a, X, XU, _ = _data(n, p, N, [1, r])
        res = ecc(y, a, X, estimator="hoif", X_unlabeled=XU, center=False)
        est[r], se[r] = res.estimate, res.se
    sd = est.std(ddof=1)
    assert abs(est.mean() - PSI) <= 3.5 * sd / np.sqrt(reps)
    assert se.mean() >= sd * (1 - 3 / np.sqrt(2 * (reps - 1)))


def test_summary_and_bad_input():
    y, a, X, XU, _ = _data(30, 10, 40, 2)
    r = ecc(y, a, X, estimator="hoif", X_unlabeled=XU)
    assert r.moments["N"] == 40 and "40 unlabeled rows" in r.summary()
    assert r.variance == pytest.approx(30 * r.se**2)
    with pytest.raises(ValueError, match="needs `X_unlabeled`"):
        ecc(y, a, X, estimator="hoif")
    with pytest.raises(ValueError, match="`X_unlabeled` must have the 10 columns"):
        ecc(y, a, X, estimator="hoif", X_unlabeled=XU[:, :9])
    with pytest.raises(ValueError, match=r"at least p \+ 3 = 13 rows"):
        ecc(y, a, X, estimator="hoif", X_unlabeled=XU[:12])
    with pytest.raises(ValueError, match="`X_unlabeled` does not apply to estimator='ols'"):
        ecc(y, a, X, estimator="ols", X_unlabeled=XU)
    with pytest.raises(ValueError, match="`split` does not apply to estimator='hoif'"):
        ecc(y, a, X, estimator="hoif", X_unlabeled=XU, split=2)
    XUn = XU.copy()
    XUn[3, 2] = np.nan
    with pytest.raises(ValueError, match="`X_unlabeled` must have no missing values; got 1"):
        ecc(y, a, X, estimator="hoif", X_unlabeled=XUn)
    with pytest.raises(ValueError, match="full column rank"):
        ecc(y, a, X, estimator="hoif", X_unlabeled=np.tile(XU[:1], (40, 1)), center=False)
