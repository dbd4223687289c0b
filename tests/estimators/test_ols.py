"""estimators.ecc(estimator="ols" / "ols_loo"): exact moments by enumeration, unbiasedness over
covariances and row laws by Monte Carlo, pandas inputs, guidance errors, bad input."""

import itertools

import numpy as np
import pytest
from scipy.stats import norm

from estimators import ecc
from estimators._ols import OLSFit
from paper_checks.ecc_ols import covariance, rows

PSI = 0.5


# ------------------------------------------------------------------ exact moments, no Monte Carlo
def _pmf(rng, size=3):
    """A discrete law of (eps, delta) with mean zero and non-zero odd moments."""
    pts = rng.standard_normal((size, 2)) * [1.0, 0.7]
    w = rng.dirichlet(np.ones(size))
    return pts - w @ pts, w


def _enumerate(X, mu_a, mu_y, laws, center):
    """Exact mean and variance of psi_0 and psi_L over every noise outcome of the n rows."""
    supports = [range(len(w)) for _, w in laws]
    vals, probs = [], []
    for combo in itertools.product(*supports):
        e = np.array([laws[i][0][j] for i, j in enumerate(combo)])
        pr = np.prod([laws[i][1][j] for i, j in enumerate(combo)])
        f = OLSFit(mu_y + e[:, 0], mu_a + e[:, 1], X, center=center)
        vals.append((f.residual(), f.loo()))
        probs.append(pr)
    vals, probs = np.array(vals), np.array(probs)
    mean = probs @ vals
    return mean, probs @ (vals - mean) ** 2


@pytest.mark.parametrize("center", [False, True])
def test_exact_mean_and_variance_by_enumeration(center):
    # n = 6 rows, 3 noise outcomes per row: the 729 outcomes give E and Var exactly, so the
    # derived variance formulas (fourth- and third-moment terms included) are checked to 1e-12.
    rng = np.random.default_rng(3)
    n, p = 6, 2
    X = rng.standard_normal((n, p)) * [1.0, 3.0] + [0.5, 0.0]
    al, be = np.array([0.7, -0.4]), np.array([0.3, 0.9])
    pts, w = _pmf(rng)
    laws = [(pts, w)] * n
    mean, var = _enumerate(X, X @ al, X @ be, laws, center)
    s_e, s_d = w @ pts[:, 0] ** 2, w @ pts[:, 1] ** 2
    psi = w @ (pts[:, 0] * pts[:, 1])
    kappa = w @ (pts[:, 0] ** 2 * pts[:, 1] ** 2) - s_e * s_d - 2 * psi**2
    kappa3 = w @ (pts[:, 1] * pts[:, 0] ** 2)
    f = OLSFit(np.zeros(n), np.zeros(n), X, center=center)
    Xd = np.column_stack([np.ones(n), X]) if center else X
    M = np.eye(n) - Xd @ np.linalg.pinv(Xd)
    c = M @ ((X @ al) / np.diag(M))
    assert mean == pytest.approx([psi, psi], rel=1e-12, abs=1e-14)
    assert var[0] == pytest.approx(f.residual_variance(s_e, s_d, psi, kappa), rel=1e-10)
    assert var[1] == pytest.approx(
        f.loo_variance(s_e, s_d, psi, kappa, kappa3, c @ c, c.sum()), rel=1e-10
    )
    # the leave-one-out pieces against dense n x n algebra
    W = M / np.diag(M)[:, None]
    trWW = f.loo_variance(0, 0, 1.0, 0, 0, 0, 0) * n**2
    assert trWW == pytest.approx(np.trace(W @ W), rel=1e-12)


def test_loo_unbiased_for_average_of_heteroskedastic_psi():
    # Row-dependent noise laws (psi_i varies, leverages vary): psi_L is exactly unbiased for
    # mean(psi_i), the residual form for the leverage-weighted sum_i d_i psi_i / k (which differs).
    rng = np.random.default_rng(5)
    n = 6
    X = rng.standard_normal((n, 2)) * np.array([[1], [1], [1], [1], [4], [0.2]])
    laws = [_pmf(rng, 2) for _ in range(n)]
    psis = np.array([w @ (pts[:, 0] * pts[:, 1]) for pts, w in laws])
    mean, _ = _enumerate(X, X @ [1.0, 1.0], X @ [0.5, -1.0], laws, center=False)
    f = OLSFit(np.zeros(n), np.zeros(n), X, center=False)
    assert mean[1] == pytest.approx(psis.mean(), rel=1e-12)
    assert mean[0] == pytest.approx(f.d @ psis / f.k, rel=1e-12)
    assert abs(mean[0] - psis.mean()) > 1e-3


# ------------------------------------------------------------------ Monte Carlo over designs
@pytest.mark.parametrize("kind", ["ar0.5", "ar0.9", "spiked", "power"])
def test_unbiased_and_calibrated_across_row_laws(kind):
    # Bias within 3.5 MC SE (Bonferroni over 24 cells x 2 forms) and the mean plug-in variance
    # within 4 MC SE of the MC variance, per row law; aligned (uniform positive) coefficients.
    n, p, reps = 50, 20, 100
    rng = np.random.default_rng([11, len(kind)])
    S = covariance(kind, p, rng)
    L = np.linalg.cholesky(S)
    al, be = rng.uniform(size=p), rng.uniform(size=p)
    al, be = al / np.sqrt(al @ S @ al), be / np.sqrt(be @ S @ be)
    Lc = np.linalg.cholesky([[1.0, PSI], [PSI, 1.0]])
    for law in ("gaussian", "rademacher", "t5"):
        est = np.empty((reps, 2))
        var = np.empty((reps, 2))
        for r in range(reps):
            X, _ = rows(law, n, L, rng)
            e = rng.standard_normal((n, 2)) @ Lc.T
            y, a = X @ be + e[:, 0] + 1.0, X @ al + e[:, 1]
            for j, form in enumerate(("ols", "ols_loo")):
                res = ecc(y, a, X, estimator=form)
                est[r, j], var[r, j] = res.estimate, res.se**2
        mcse = est.std(0, ddof=1) / np.sqrt(reps)
        assert np.all(np.abs(est.mean(0) - PSI) <= 3.5 * mcse), (law, est.mean(0), mcse)
        # variance: MC variance has relative SE ~ sqrt(2/(reps - 1)); X is redrawn, so the mean
        # conditional variance is the target.
        mc_var = est.var(0, ddof=1)
        tol = 4 * mc_var * np.sqrt(2 / (reps - 1))
        assert np.all(np.abs(var.mean(0) - mc_var) <= tol), (law, var.mean(0), mc_var)


def test_variance_matches_closed_form_gaussian_noise():
    # Gaussian noise: Var(psi_0 | X) = (s_e s_d + psi^2) / k exactly; the plug-in averages to it.
    rng = np.random.default_rng(2)
    n, p, reps = 80, 40, 400
    X = rng.standard_normal((n, p)) @ np.linalg.cholesky(covariance("ar0.9", p, rng)).T
    Lc = np.linalg.cholesky([[1.0, PSI], [PSI, 1.0]])
    est, var = np.empty(reps), np.empty(reps)
    for r in range(reps):
        e = rng.standard_normal((n, 2)) @ Lc.T
        res = ecc(X[:, 0] + e[:, 0], X[:, 1] + e[:, 1], X, estimator="ols")
        est[r], var[r] = res.estimate, res.se**2
    target = (1 + PSI**2) / (n - p - 1)
    assert est.var(ddof=1) == pytest.approx(target, rel=4 * np.sqrt(2 / (reps - 1)))
    assert var.mean() == pytest.approx(target, rel=0.1)


def test_result_fields_and_summary():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 5))
    y, a = X[:, 0] + rng.standard_normal(50), X[:, 1] + rng.standard_normal(50)
    r = ecc(y, a, X, estimator="ols")
    assert r.split == 1 and r.lam == (0.0, 0.0) and r.lam_prediction is None
    assert r.variance == pytest.approx(50 * r.se**2) and r.moments["dof"] == 50 - 6
    lo, hi = r.ci
    assert hi - lo == pytest.approx(2 * norm.ppf(0.975) * r.se)
    assert "OLS residual" in r.summary() and f"{r.estimate:.4f}" in r.summary()
    assert "leave-one-out" in ecc(y, a, X, estimator="ols_loo").summary()
    # OLS is invariant to X -> X G (any covariance): the estimate does not move.
    G = rng.standard_normal((5, 5))
    assert ecc(y, a, X @ G, estimator="ols").estimate == pytest.approx(r.estimate, rel=1e-10)


# ------------------------------------------------------------------ pandas inputs
def test_pandas_inputs_keep_names_and_refuse_missing():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.standard_normal((40, 3)), columns=["age", "income", "educ"])
    y = pd.Series(X["age"] + rng.standard_normal(40), name="wage")
    a = pd.Series(X["educ"] + rng.standard_normal(40), name="training")
    r = ecc(y, a, X, estimator="ols")
    assert r.estimate == pytest.approx(
        ecc(y.to_numpy(), a.to_numpy(), X.to_numpy(), estimator="ols").estimate, rel=1e-12
    )
    s = r.summary()
    assert "y: wage" in s and "a: training" in s and "age, income, educ" in s
    Xm = X.copy()
    Xm.iloc[[1, 4], 1] = np.nan
    Xm.iloc[7, 2] = np.nan
    with pytest.raises(ValueError, match=r"3 missing .*income: 2, educ: 1"):
        ecc(y, a, Xm, estimator="ols")
    ym = y.copy()
    ym.iloc[0] = np.nan
    with pytest.raises(ValueError, match="`y` must have no missing values; got 1"):
        ecc(ym, a, X, estimator="ols")
    with pytest.raises(TypeError, match=r"non-numeric columns \['city'\]"):
        ecc(y, a, X.assign(city="x"), estimator="ols")
    with pytest.raises(ValueError, match="same index as `X`"):
        ecc(y.set_axis(range(1, 41)), a, X, estimator="ols")


# ------------------------------------------------------------------ guidance and bad input
def _ar_data(n, p, rho=0.5, seed=0):
    rng = np.random.default_rng(seed)
    L = np.linalg.cholesky(covariance(f"ar{rho}", p, rng))
    X = rng.standard_normal((n, p)) @ L.T
    return X[:, 0] + rng.standard_normal(n), X[:, 1] + rng.standard_normal(n), X


def test_ridge_refusal_says_which_route_applies():
    y, a, X = _ar_data(400, 100)
    with pytest.raises(ValueError, match="estimator='ols'"):
        ecc(y, a, X)
    y, a, X = _ar_data(300, 400)
    routes = r"p >= n.*not identified.*`cov=`.*unlabeled.*estimator='hoif'"
    with pytest.raises(ValueError, match=routes):
        ecc(y, a, X, split=2)


def test_ols_bad_input():
    y, a, X = _ar_data(30, 29)
    with pytest.raises(ValueError, match=r"fewer columns than rows .* n=30, p=29"):
        ecc(y, a, X, estimator="ols")
    assert np.isfinite(ecc(y, a, X, estimator="ols", center=False).se)
    y, a, X = _ar_data(50, 4)
    Xd = np.column_stack([X, X[:, 0] - 2 * X[:, 2]])
    with pytest.raises(ValueError, match=r"full column rank.*rank 5 of 6.*\['[024]'\]"):
        ecc(y, a, Xd, estimator="ols")
    with pytest.raises(ValueError, match=r"rank 4 of 5.*\['(\(intercept\)|3)'\]"):
        ecc(y, a, np.column_stack([X[:, :3], np.full(50, 2.0)]), estimator="ols")
    for arg, val in (("split", 2), ("lam", 0.5), ("cov", np.eye(4)), ("constants", "mp")):
        with pytest.raises(ValueError, match=f"`{arg}` does not apply to estimator='ols'"):
            ecc(y, a, X, estimator="ols", **{arg: val})
    with pytest.raises(ValueError, match="`estimator` must be one of"):
        ecc(y, a, X, estimator="OLS")
    with pytest.raises(TypeError, match="`center` must be a bool"):
        ecc(y, a, X, estimator="ols", center=1)
    Xl = X.copy()
    Xl[0] = [1e9, 0, 0, 0]  # a row that alone determines a coefficient
    Xl[1:, 0] = 0.0
    with pytest.raises(ValueError, match="leverage below 1 .* row 0"):
        ecc(y, a, Xl, estimator="ols", center=False)


# ------------------------------------------------------------------ heteroskedastic leave-out SE
def test_loo_variance_decomposition_by_enumeration():
    # The identity behind OLSFit.var_loo_hc, exact for row-dependent noise laws (odd moments
    # included): Var(n psi_L | X) = E sum_j a~_j^2 eps_j^2 - sum_j psi_j^2 + psi^T S psi with
    # a~ = W^T A, W = D^{-1} M, S_ij = W_ij W_ji off the diagonal.
    rng = np.random.default_rng(8)
    n = 6
    X = rng.standard_normal((n, 2)) * np.array([[1], [1], [1], [1], [4], [0.2]])
    mu_a = X @ [1.0, -0.5]
    laws = [_pmf(rng, 3) for _ in range(n)]
    psis = np.array([w @ (pts[:, 0] * pts[:, 1]) for pts, w in laws])
    M = np.eye(n) - X @ np.linalg.pinv(X)
    W = M / np.diag(M)[:, None]
    S = W * W.T
    np.fill_diagonal(S, 0.0)
    m1 = m2 = m_sq = 0.0
    for combo in itertools.product(*[range(3)] * n):
        e = np.array([laws[i][0][j] for i, j in enumerate(combo)])
        pr = np.prod([laws[i][1][j] for i, j in enumerate(combo)])
        t = (mu_a + e[:, 1]) @ W @ e[:, 0]
        m1, m2 = m1 + pr * t, m2 + pr * t**2
        m_sq += pr * float(((W.T @ (mu_a + e[:, 1])) ** 2) @ e[:, 0] ** 2)
    assert m1 == pytest.approx(psis.sum(), rel=1e-12)
    assert m2 - m1**2 == pytest.approx(m_sq - psis @ psis + psis @ S @ psis, rel=1e-10)


def _hetero_fit_draws(law, n, p, reps, seed):
    """Errors, leave-out and homoskedastic variances of psi_L at one X (t rows or Gaussian), with
    noise variance 0.25 + 1.5 t^2/(1 + t^2), t = X alpha, and psi_i = 0.5 s_i^2."""
    rng = np.random.default_rng(seed)
    S = covariance("ar0.5", p, rng)
    L = np.linalg.cholesky(S)
    al = rng.uniform(size=p)
    al /= np.sqrt(al @ S @ al)
    X, _ = rows(law, n, L, rng)
    t = X @ al
    s2 = 0.25 + 1.5 * t**2 / (1 + t**2)
    psi = PSI * s2
    Lc = np.linalg.cholesky([[1.0, PSI], [PSI, 1.0]])
    out = np.empty((reps, 3))
    for r in range(reps):
        e = (rng.standard_normal((n, 2)) @ Lc.T) * np.sqrt(s2)[:, None]
        f = OLSFit(X[:, 0] + e[:, 0], t + e[:, 1], X, center=False)
        est = f.loo()
        out[r] = est - psi.mean(), f.var_loo_hc(), f.var_loo(est)
    return out, float(np.sum((psi - psi.mean()) ** 2) / n**2)


@pytest.mark.parametrize("law", ["gaussian", "t5"])
def test_leave_out_variance_unbiased_under_heteroskedasticity(law):
    # At one X, E var_loo_hc = Var(psi_L | X) + sum (psi_i - mean psi)^2 / n^2 (the documented
    # conservative term) up to second-order terms, which may leave it conservative by at most
    # 10 % in SE (21 % in variance); 4 MC SE allowed.
    out, het = _hetero_fit_draws(law, n=80, p=30, reps=1500, seed=21)
    err, v = out[:, 0], out[:, 1]
    dev2 = (err - err.mean()) ** 2
    target = dev2.mean() + het
    ratio = v.mean() / target
    rse = ratio * np.sqrt(dev2.var() / dev2.size / target**2 + v.var() / v.size / v.mean() ** 2)
    assert 1 - 4 * rse <= ratio <= 1.21 + 4 * rse, (ratio, rse)


@pytest.mark.slow
def test_homoskedastic_variance_fails_where_leave_out_holds():
    # t5 rows with noise that grows with the signal: the homoskedastic plug-in is off by more
    # than 15 %, the leave-out variance is not (the negative control of the test above).
    out, het = _hetero_fit_draws("t5", n=120, p=50, reps=2000, seed=6)
    target = out[:, 0].var() + het
    assert out[:, 2].mean() / target < 0.85
    assert 0.9 < out[:, 1].mean() / target < 1.21


def test_loo_reports_the_larger_of_leave_out_and_homoskedastic_variance():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 30)) * rng.standard_t(5, (60, 1))
    y = X[:, 0] + rng.standard_normal(60)
    a = X[:, 1] + 0.5 * y + rng.standard_normal(60)
    r = ecc(y, a, X, estimator="ols_loo")
    m = r.moments
    assert r.se**2 == pytest.approx(max(m["var_leave_out"], m["var_homoskedastic"]), rel=1e-12)
    f = OLSFit(y - y.mean(), a - a.mean(), X - X.mean(0), center=True)
    assert m["var_leave_out"] == pytest.approx(f.var_loo_hc(), rel=1e-12)
    assert m["var_homoskedastic"] == pytest.approx(f.var_loo(f.loo()), rel=1e-12)


def test_leave_out_variance_matches_dense_algebra():
    # The row-blocked computation of var_loo_hc against the n x n matrices of its formula.
    rng = np.random.default_rng(9)
    n, p = 70, 25
    X = rng.standard_normal((n, p)) * rng.standard_t(5, (n, 1))
    y, a = X[:, 0] + rng.standard_normal(n), X[:, 1] + rng.standard_normal(n)
    f = OLSFit(y, a, X, center=False)
    M = np.eye(n) - X @ np.linalg.pinv(X)
    W = M / np.diag(M)[:, None]
    S, W2 = W * W.T, W * W
    np.fill_diagonal(S, 0.0)
    np.fill_diagonal(W2, 0.0)
    e, eA, at = W @ y, W @ a, W.T @ a
    ps = 0.5 * (a * e + y * eA)
    w = S @ ps
    off = w @ w - np.sum((S * S) @ ps**2)
    total = at**2 @ (e**2 - W2 @ (y * e)) - 2 * off - 3 * ps @ w - n * np.mean(a * e) ** 2
    assert f.var_loo_hc() == pytest.approx(total / n**2, rel=1e-9)
