r"""Debiased ridge estimators of the Expected Conditional Covariance ``E Cov(Y, A | X)``.

McGrath, D. Mukherjee, R. Mukherjee & Wang, "Optimal Nuisance Function Tuning for Estimating a
Doubly Robust Functional under Proportional Asymptotics", NeurIPS 2025 (arXiv 2509.25536). The
theory (spectral constants, naive limits, debiasing, asymptotic variance) is in :mod:`theory.ecc`
and :mod:`theory.marchenko_pastur`; this module handles data: whitening, splitting, one
eigendecomposition per training fold for every ridge penalty, plug-in variance, tuning, tests.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, special

from theory import ecc as _th
from theory._validation import as_array, as_generator, check_choice, check_scalar

from ._data import as_numeric, data_names
from ._data import check_data as _check_data
from ._hoif import hoif
from ._ols import ols_fit

__all__ = [
    "ECCResult",
    "VarianceCurve",
    "CITestResult",
    "ecc",
    "ecc_path",
    "asymptotic_variance",
    "variance_curve",
    "ecc_test",
    "plugin_moments",
    "paper_lambda_grid",
]

_LAM_RANGE = (1e-3, 1e3)
_MIN_FOLD = 10


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ECCResult:
    """ECC estimate with its plug-in standard error (debiased ridge, or exact OLS residual).

    Attributes
    ----------
    estimate : float
        Estimate of ``psi = E Cov(Y, A | X)`` (debiased ridge ``psi_tilde``, or the exactly
        unbiased OLS residual / leave-one-out form for ``estimator="ols"`` / ``"ols_loo"``).
    se : float
        Plug-in standard error (from the derived asymptotic variance, :func:`asymptotic_variance`).
    ci : (float, float)
        Wald interval at ``level``.
    variance : float
        Estimated ``m Var(estimate)`` with ``m`` the evaluation-fold size (``= m se^2``; all ``n``
        rows for the OLS forms).
    lam : (float, float)
        Ridge penalties ``(lam_a, lam_y)`` used for the A- and the Y-regression (0 for OLS).
    estimator, split : str, int
        ``split`` is 1 for the OLS forms (no splitting).
    naive : float
        The naive (uncorrected) plug-in estimate on the same folds (the estimate for OLS).
    theta : float
        Debiased estimate of ``alpha^T Sigma beta`` (OLS: of ``alpha^T (X^T X/n) beta``).
    m, gamma : int, float
        Evaluation-fold size and ``p / m_train`` (the Marchenko–Pastur ratio of the training fold;
        ``p / n`` for OLS).
    lam_prediction : (float, float) or None
        Prediction-optimal penalties ``gamma sigma^2 / ||alpha||^2`` (Lemma F.2), plug-in; None
        for OLS and when a plug-in signal ``||alpha||^2`` or ``||beta||^2`` is not positive
        (the optimal penalty is then infinite).
    names : dict or None
        Names of ``y``, ``a`` and the columns of ``X`` when they were pandas objects.
    """

    estimate: float
    se: float
    ci: tuple[float, float]
    variance: float
    lam: tuple[float, float]
    estimator: str
    split: int
    level: float
    naive: float
    theta: float
    n: int
    p: int
    m: int
    gamma: float
    lam_prediction: tuple[float, float] | None
    constants: str = "empirical"
    moments: dict = field(default_factory=dict, repr=False)
    names: dict | None = field(default=None, repr=False)

    @property
    def zstat(self) -> float:
        """Wald statistic for H0: psi = 0."""
        return self.estimate / self.se

    @property
    def pvalue(self) -> float:
        """Two-sided p-value of H0: psi = 0."""
        return float(2 * special.ndtr(-abs(self.zstat)))

    def conf_int(self, level: float = 0.95) -> tuple[float, float]:
        """Wald interval ``estimate ± z_{(1+level)/2} se``."""
        level = check_scalar(level, "level", lower=0.0, upper=1.0, closed="neither")
        z = special.ndtri(0.5 + level / 2)
        return (float(self.estimate - z * self.se), float(self.estimate + z * self.se))

    def summary(self) -> str:
        lo, hi = self.ci
        if self.estimator == "hoif":
            head = (
                f"ECC (U-statistic, covariance from {self.moments['N']} unlabeled rows)   "
                f"n={self.n}  p={self.p}  p/n={self.gamma:.3g}"
            )
            tail = (
                f"theta (alpha^T Sigma beta) {self.theta:.4f}   n*Var={self.variance:.4g} "
                f"(labeled {self.n * self.moments['var_labeled']:.4g}, unlabeled "
                f"{self.n * self.moments['var_unlabeled']:.4g})"
            )
        elif self.estimator.startswith("ols"):
            kind = "OLS residual" if self.estimator == "ols" else "OLS leave-one-out"
            head = (
                f"ECC ({kind}, exact for any covariance)   n={self.n}  p={self.p}  "
                f"p/n={self.gamma:.3g}"
            )
            tail = f"theta (alpha^T X^T X beta / n) {self.theta:.4f}   n*Var={self.variance:.4g}"
        else:
            head = (
                f"ECC ({self.estimator.upper()}, {self.split} splits, debiased ridge)   "
                f"n={self.n}  p={self.p}  m={self.m}  gamma={self.gamma:.3g}"
            )
            lp = self.lam_prediction
            pred = "undefined" if lp is None else f"({lp[0]:.4g}, {lp[1]:.4g})"
            tail = (
                f"naive {self.naive:.4f}   lam_a={self.lam[0]:.4g}  lam_y={self.lam[1]:.4g}"
                f"   prediction-optimal {pred}   m*Var={self.variance:.4g}"
            )
        lines = [head]
        if self.names:
            cols_x = self.names.get("X")
            desc = [f"{k}: {self.names[k]}" for k in ("y", "a") if k in self.names]
            if cols_x:
                shown = ", ".join(cols_x[:8]) + (", ..." if len(cols_x) > 8 else "")
                desc.append(f"X: {len(cols_x)} columns ({shown})")
            lines.append("   ".join(desc))
        cols = (
            f"{'':>10}{'coef':>11}{'std err':>11}{'z':>9}{'P>|z|':>9}"
            f"{f'[{(1 - self.level) / 2:.3f}':>11}{f'{(1 + self.level) / 2:.3f}]':>11}"
        )
        row = (
            f"{'psi':>10}{self.estimate:>11.4f}{self.se:>11.4f}{self.zstat:>9.3f}"
            f"{self.pvalue:>9.3f}{lo:>11.4f}{hi:>11.4f}"
        )
        rule = "=" * max(len(head), len(cols))
        return "\n".join([*lines, rule, cols, "-" * len(rule), row, rule, tail])

    def __repr__(self):
        return (
            f"ECCResult(estimate={self.estimate:.4g}, se={self.se:.3g}, "
            f"estimator={self.estimator!r}, split={self.split}, lam=({self.lam[0]:.3g}, "
            f"{self.lam[1]:.3g}))"
        )


@dataclass(frozen=True)
class VarianceCurve:
    """Plug-in ``lim m Var`` of one debiased estimator over a common-lambda grid.

    ``lam_opt`` minimises the curve; ``lam_prediction`` is the prediction-optimal pair of
    Lemma F.2 (``gamma sigma^2 / ||alpha||^2`` for each nuisance) and ``variance_at_prediction``
    the variance at that pair; both are None when a plug-in signal is not positive (the optimal
    penalty is then infinite).
    """

    lams: np.ndarray
    variance: np.ndarray
    lam_opt: float
    variance_opt: float
    lam_prediction: tuple[float, float] | None
    variance_at_prediction: float | None
    estimator: str
    split: int
    gamma: float

    def summary(self) -> str:
        head = (
            f"{self.estimator.upper()} {self.split}-split, gamma={self.gamma:.3g}: "
            f"variance-optimal lam={self.lam_opt:.4g} (m*Var={self.variance_opt:.4g}); "
        )
        if self.lam_prediction is None:
            return head + "prediction-optimal lam undefined (no plug-in signal)"
        return head + (
            f"prediction-optimal lam=({self.lam_prediction[0]:.4g}, "
            f"{self.lam_prediction[1]:.4g}) (m*Var={self.variance_at_prediction:.4g})"
        )


@dataclass(frozen=True)
class CITestResult:
    """Conditional-independence test of H0: E Cov(Y, A | X) = 0.

    ``statistic``/``pvalue`` come from the debiased DR estimator (size-correct when p ~ n);
    ``gcm_statistic``/``gcm_pvalue`` from the naive GCM statistic of Shah & Peters (2020) with
    in-sample ridge residuals at the same penalties, for comparison.
    """

    statistic: float
    pvalue: float
    gcm_statistic: float
    gcm_pvalue: float
    result: ECCResult

    def reject(self, alpha: float = 0.05) -> bool:
        alpha = check_scalar(alpha, "alpha", lower=0.0, upper=1.0, closed="neither")
        return bool(self.pvalue < alpha)

    def summary(self) -> str:
        return (
            f"CI test H0: ECC = 0   debiased DR z={self.statistic:.3f} p={self.pvalue:.4f}   "
            f"naive GCM T={self.gcm_statistic:.3f} p={self.gcm_pvalue:.4f}"
        )


# --------------------------------------------------------------------------------------------
# Ridge path: one eigendecomposition per training fold serves every penalty
# --------------------------------------------------------------------------------------------


class _RidgePath:
    """Ridge fits ``(X^T X / m + lam)^{-1} X^T t / m`` of several targets, for any ``lam``.

    ``p <= m``: the ``p x p`` Gram ``X^T X``; ``p > m``: the ``m x m`` kernel ``X X^T`` (the
    smaller one). ``eigenvalues`` are the ``p`` eigenvalues of ``X^T X / m`` (zeros included). With
    ``vectors=True`` one eigendecomposition serves every penalty of a grid; with ``vectors=False``
    only the eigenvalues are computed (all the tuning and the corrections need) and each requested
    penalty costs one Cholesky solve, which is cheaper for a handful of penalties.
    """

    def __init__(self, X, targets, m_eff, vectors=True):
        mrows, p = X.shape
        self.m, self.p, self.vectors = m_eff, p, vectors
        self.primal = p <= mrows
        K = X.T @ X if self.primal else X @ X.T
        if vectors:
            w, V = np.linalg.eigh(K)
            w = np.clip(w, 0.0, None)
            if self.primal:
                self.basis = V  # coef = V diag(1/(w + m lam)) V^T X^T t
                self.proj = {k: V.T @ (X.T @ t) for k, t in targets.items()}
                self.h = np.ones_like(w)
            else:
                self.basis = X.T @ V  # coef = X^T U diag(1/(w + m lam)) U^T t
                self.proj = {k: V.T @ t for k, t in targets.items()}
                self.h = w
            self.w = w
        else:
            w = np.clip(np.linalg.eigvalsh(K), 0.0, None)
            self.K, self.X = K, X
            self.rhs = {k: (X.T @ t if self.primal else t) for k, t in targets.items()}
            self._coefs = {}
        ev = w if self.primal else np.concatenate([w, np.zeros(p - mrows)])
        self.eigenvalues = np.sort(ev) / m_eff

    def _shrink(self, lam):
        lam = np.atleast_1d(np.asarray(lam, float))
        return 1.0 / (self.w[None, :] + self.m * lam[:, None])  # (G, r)

    def coef(self, key, lam):
        """Coefficients, shape ``(G, p)`` for ``G`` penalties."""
        if self.vectors:
            return (self._shrink(lam) * self.proj[key][None, :]) @ self.basis.T
        lam = np.atleast_1d(np.asarray(lam, float))
        rows = []
        for t in lam:
            ck = (key, float(t))
            if ck not in self._coefs:
                Kl = self.K.copy()
                Kl.flat[:: Kl.shape[0] + 1] += self.m * t
                sol = linalg.cho_solve(
                    linalg.cho_factor(Kl, lower=True, check_finite=False),
                    self.rhs[key],
                    check_finite=False,
                )
                self._coefs[ck] = sol if self.primal else self.X.T @ sol
            rows.append(self._coefs[ck])
        return np.array(rows)

    def inner(self, k1, lam1, k2, lam2):
        """``coef(k1, lam1) . coef(k2, lam2)`` for coefficients of this one fold, shape ``(G,)``."""
        if not self.vectors:
            return (self.coef(k1, lam1) * self.coef(k2, lam2)).sum(-1)
        return (
            self._shrink(lam1) * self._shrink(lam2) * self.h * self.proj[k1] * self.proj[k2]
        ).sum(-1)


# --------------------------------------------------------------------------------------------
# Validation and preparation
# --------------------------------------------------------------------------------------------


def _whitener(cov, p):
    """``cov^{-1/2}`` (symmetric) after checking that ``cov`` is symmetric positive definite."""
    C = as_array(cov, "cov", shape=(p, p))
    scale = max(1.0, float(np.abs(C).max()))
    asym = float(np.abs(C - C.T).max())
    if asym > 1e-10 * scale:
        raise ValueError(f"`cov` must be symmetric; got max |cov - cov^T| = {asym:.3g}.")
    w, V = np.linalg.eigh(0.5 * (C + C.T))
    if w.min() <= 1e-12 * max(w.max(), 1e-300):
        raise ValueError(f"`cov` must be positive definite; got smallest eigenvalue {w.min():.3g}.")
    return (V / np.sqrt(w)) @ V.T


def _check_lam(lam):
    if isinstance(lam, str):
        if lam != "auto":
            raise ValueError(
                f"`lam` must be a positive number, a pair (lam_a, lam_y) or 'auto'; got {lam!r}."
            )
        return "auto"
    if isinstance(lam, numbers.Real) and not isinstance(lam, bool):
        vals = (lam, lam)
    else:
        try:
            vals = tuple(lam)
        except TypeError as err:
            raise TypeError(
                f"`lam` must be a positive number, a pair (lam_a, lam_y) or 'auto'; got {lam!r}."
            ) from err
        if len(vals) != 2:
            raise ValueError(f"`lam` must be a pair (lam_a, lam_y); got {len(vals)} values.")
    return tuple(check_scalar(v, "lam", lower=0.0, upper=1e50, closed="right") for v in vals)


def _folds(n, split, rng):
    m = n // split
    if m < _MIN_FOLD:
        raise ValueError(
            f"`X` must have at least {_MIN_FOLD * split} rows for split={split} "
            f"(folds of at least {_MIN_FOLD}); got {n} rows."
        )
    perm = rng.permutation(n)
    if split == 2:
        return perm[:m], perm[m:]
    return perm[:m], perm[m : 2 * m], perm[2 * m :]


_ISOTROPY_Z = 8.0


def _check_isotropic(ev, m, whitened, n, p_fit):
    """Raise unless the training-fold spectrum is compatible with ``Cov(X) = I``.

    Ledoit & Wolf (2002, Ann. Statist. 30(4)) sphericity statistic ``W = (1/p) tr (S - I)^2 -
    (p/m) ((1/p) tr S)^2 + p/m`` with ``m W - p -> N(1, 4)`` under ``S ~ Wishart(I)/m``
    (null law checked by simulation in ``tests/estimators/test_ecc.py::test_isotropy_null_law``).
    The corrections need the Marchenko–Pastur law of a whitened design, so a covariance that is
    not the identity (and was not given as ``cov``) would make them silently wrong.
    """
    p = ev.size
    g = p / m
    t1, t2 = ev.mean(), np.mean(ev**2)
    z = (m * (t2 - 2 * t1 + 1 - g * t1**2 + g) - p - 1) / 2
    if abs(z) > _ISOTROPY_Z:
        what = "after whitening by `cov`" if whitened else "with `cov`=None (identity)"
        head = (
            f"`cov` must be the covariance of the rows of X: {what} the rows must have "
            f"covariance I for the Marchenko–Pastur corrections, but the Ledoit–Wolf "
            f"sphericity statistic is z = {z:.1f} standard deviations from its null "
            f"(|z| <= {_ISOTROPY_Z:g} required; (1/p) tr S = {t1:.3g})."
        )
        raise ValueError(head + " " + _guidance(n, p_fit))


def _guidance(n, p_fit):
    """Which route applies to data whose covariance is unknown (research note §0)."""
    if p_fit < n:
        return (
            f"With p < n (here {p_fit} fitted columns, {n} rows) use estimator='ols': the "
            f"residual estimator is exactly unbiased for any covariance and row law, and "
            f"more efficient than every ridge/split combination. Or pass the known "
            f"covariance of X as `cov=`."
        )
    return (
        f"With p >= n (here {p_fit} fitted columns, {n} rows) and an unknown covariance the "
        f"ECC is not identified from (y, a, X) alone. It is identified with extra "
        f"information: the known population covariance of the rows (`cov=`); independent "
        f"unlabeled rows of X (N >= p + 3, N >= 2p recommended) to estimate it "
        f"(estimator='hoif', X_unlabeled=...); or the assumption that the regression "
        f"coefficients are generic relative to the covariance's eigenvectors (route b of "
        f"the package's research note; not implemented)."
    )


def _center(*arrs):
    return [x - x.mean(axis=0) for x in arrs]


def plugin_moments(y, a, X, *, center=True) -> dict:
    r"""Method-of-moments estimates of ``a2, b2, theta, var_eps, var_delta, cov_eps_delta``.

    With ``Sigma = I`` (already whitened) and Gaussian design, ``E||X^T A/n||^2 = (1 + (p+1)/n) a^2
    + (p/n) sigma_delta^2`` and ``E (X^T A)^T (X^T Y)/n^2 = (1 + (p+1)/n) theta + (p/n) psi``, so
    ``a^2 = (||X^T A/n||^2 - (p/n) ||A||^2/n)/(1 + 1/n)`` and likewise for ``b^2`` and ``theta``
    (Dicker 2014, Biometrika 101, eq. (6), generalised here to the cross moment); the noise
    moments follow from ``Var A = a^2 + sigma_delta^2`` etc. Penalty-free and root-n consistent.
    Values are clipped to their feasible ranges. With ``center=True`` the data are centred and
    ``n - 1`` is used (exact for Gaussian rows). Checked in
    ``tests/estimators/test_ecc.py::test_plugin_moments``.

    >>> rng = np.random.default_rng(0)
    >>> n, p = 2000, 250
    >>> X = rng.standard_normal((n, p)); al = np.full(p, p**-0.5)  # |alpha| = 1
    >>> e = rng.multivariate_normal([0, 0], [[1, .5], [.5, 1]], n)
    >>> m = plugin_moments(X @ al + e[:, 0], X @ al + e[:, 1], X)
    >>> all(abs(m[k] - 1) < 0.15 for k in ("a2", "b2", "theta"))  # all three are 1 here
    True
    """
    y, a, X = _check_data(y, a, X)
    if center:
        y, a, X = _center(y, a, X)
        n = X.shape[0] - 1
    else:
        n = X.shape[0]
    return _moments(y, a, X, n)


def _moments(y, a, X, n):
    p = X.shape[1]
    va, vy, cay = a @ a / n, y @ y / n, a @ y / n
    xa, xy = X.T @ a / n, X.T @ y / n
    f = 1.0 + 1.0 / n
    a2 = float(np.clip((xa @ xa - p / n * va) / f, 0.0, va))
    b2 = float(np.clip((xy @ xy - p / n * vy) / f, 0.0, vy))
    bound = np.sqrt(a2 * b2)
    theta = float(np.clip((xa @ xy - p / n * cay) / f, -bound, bound))
    vd, ve = va - a2, vy - b2
    cb = np.sqrt(ve * vd)
    ced = float(np.clip(cay - theta, -cb, cb))
    return {
        "a2": a2,
        "b2": b2,
        "theta": theta,
        "var_eps": float(ve),
        "var_delta": float(vd),
        "cov_eps_delta": ced,
    }


class _Prepared:
    """Whitened, split, centred data with the ridge eigendecompositions of the training folds."""

    def __init__(self, y, a, X, split, cov, center, rng, vectors=True, check_isotropy=True):
        y, a, X = _check_data(y, a, X)
        self.n, self.p = X.shape
        if cov is not None:
            X = X @ _whitener(cov, self.p)
        self.split = split
        folds = _folds(self.n, split, as_generator(rng))
        self.center = center
        dof = 1 if center else 0
        yc, ac, Xc = _center(y, a, X) if center else (y, a, X)
        self.moments = _moments(yc, ac, Xc, self.n - dof)

        def part(idx):
            parts = (y[idx], a[idx], X[idx])
            return _center(*parts) if center else list(parts)

        *train, ev = folds
        ye, ae, Xe = part(ev)
        self.eval = (ye, ae, Xe)
        self.m = len(ev)
        if split == 2:
            yt, at, Xt = part(train[0])
            self.m_train = len(train[0]) - dof
            self.paths = {"a": _RidgePath(Xt, {"a": at, "y": yt}, self.m_train, vectors)}
            self.paths["y"] = self.paths["a"]
        else:
            ya_, aa, Xa = part(train[0])
            yy, ay_, Xy = part(train[1])
            self.m_train = len(train[0]) - dof
            self.paths = {
                "a": _RidgePath(Xa, {"a": aa}, self.m_train, vectors),
                "y": _RidgePath(Xy, {"y": yy}, len(train[1]) - dof, vectors),
            }
        self.gamma = self.p / self.m_train
        for path in {id(v): v for v in self.paths.values()}.values() if check_isotropy else ():
            _check_isotropic(
                path.eigenvalues, path.m, cov is not None, self.n, self.p + int(center)
            )

    # ---- estimates for arrays of penalties -------------------------------------------------

    def constants(self, lam_a, lam_y, kind):
        if kind == "mp":
            return _th.bias_constants(_th.SpectralIntegrator(self.gamma, lam_a, lam_y))
        if self.split == 2:
            integ = _th.SpectralIntegrator(self.gamma, lam_a, lam_y, self.paths["a"].eigenvalues)
            return _th.bias_constants(integ)
        ca = _th.bias_constants(
            _th.SpectralIntegrator(
                self.p / self.paths["a"].m, lam_a, lam_y, self.paths["a"].eigenvalues
            )
        )
        cy = _th.bias_constants(
            _th.SpectralIntegrator(
                self.p / self.paths["y"].m, lam_a, lam_y, self.paths["y"].eigenvalues
            )
        )
        return {**ca, "s_y": cy["s_y"]}  # three splits use s_a (fold a) and s_y (fold y) only

    def scores(self, estimator, lam_a, lam_y):
        """Naive estimates, scores ``phi`` (m x G) and ``theta_hat`` for arrays of penalties."""
        ye, ae, Xe = self.eval
        pa, py = self.paths["a"], self.paths["y"]
        ca, cy = pa.coef("a", lam_a), py.coef("y", lam_y)  # (G, p)
        if self.split == 2:
            theta_hat = pa.inner("a", lam_a, "y", lam_y)
        else:
            theta_hat = (ca * cy).sum(-1)
        d = 1 if self.center else 0
        if estimator == "int":
            u = np.broadcast_to(ye[:, None], (self.m, ca.shape[0]))
            v = np.broadcast_to(ae[:, None], u.shape)
        else:
            u = ye[:, None] - Xe @ cy.T
            v = (
                ae[:, None] - Xe @ ca.T
                if estimator == "dr"
                else np.broadcast_to(ae[:, None], u.shape)
            )
        if self.center:
            u = u - u.mean(0)
            v = v - v.mean(0)
        phi = u * v
        raw = phi.sum(0) / (self.m - d)
        naive = raw - theta_hat if estimator == "int" else raw
        return naive, phi, theta_hat

    def fit(self, estimator, lam_a, lam_y, kind="empirical"):
        lam_a, lam_y = np.atleast_1d(lam_a).astype(float), np.atleast_1d(lam_y).astype(float)
        naive, phi, theta_hat = self.scores(estimator, lam_a, lam_y)
        c = self.constants(lam_a, lam_y, kind)
        psi, theta = _th.debias(estimator, self.split, naive, theta_hat, c)
        var_phi = phi.var(0, ddof=1)
        return naive, psi, theta, var_phi, c

    def variance(self, estimator, lam_a, lam_y, score=None):
        """Plug-in ``Var(psi_tilde)`` (fold sizes respected) and its ``lim m Var`` form.

        ``score=(var_phi, c)`` from :meth:`fit` puts the model-free conditional variance of the
        evaluated score in place of the evaluation-fold term.
        """
        integ = _th.SpectralIntegrator(self.gamma, lam_a, lam_y)
        comp = _th.variance_components(estimator, self.split, integ, **self.moments)
        ev = comp["eval"]
        if score is not None:
            var_phi, c = score
            mult = c["Gamma"] ** 2 if estimator == "int" and self.split == 2 else 1.0
            ev = mult * var_phi
        if self.split == 2:
            var = (ev / self.m + comp["train"] / self.m_train) / comp["M"] ** 2
        else:
            var = ev / self.m + comp["fold_y"] / self.paths["y"].m + comp["fold_a"] / self.m_train
        return var


def _auto_lambda(prep, estimator):
    """Minimise the plug-in asymptotic variance over ``(lam_a, lam_y)`` in ``[1e-3, 1e3]^2``.

    A 41 x 41 log grid, then two zooms (21 x 21) around the best point, all vectorised: the
    variance needs only the Marchenko–Pastur constants, no refit, so tuning costs no extra fit.
    """
    lo, hi = np.log(_LAM_RANGE)
    ca, cy, half = 0.5 * (lo + hi), 0.5 * (lo + hi), 0.5 * (hi - lo)
    for k in (41, 21, 21):
        ta = np.clip(np.linspace(ca - half, ca + half, k), lo, hi)
        ty = np.clip(np.linspace(cy - half, cy + half, k), lo, hi)
        la, ly = np.meshgrid(np.exp(ta), np.exp(ty), indexing="ij")
        with np.errstate(all="ignore"):
            V = prep.variance(estimator, la.ravel(), ly.ravel())
        V = np.where(np.isfinite(V) & (V > 0), V, np.inf)
        i = int(np.argmin(V))
        if not np.isfinite(V[i]):
            raise ValueError(
                "`lam`='auto' found no penalty with a finite plug-in variance; "
                "pass `lam` explicitly."
            )
        ca, cy = np.log(la.ravel()[i]), np.log(ly.ravel()[i])
        half = 2.0 * half / (k - 1)
    return float(np.exp(ca)), float(np.exp(cy))


def _lam_prediction(prep):
    """Lemma F.2's plug-in pair, or None when a plug-in signal is not positive (lam* = inf)."""
    mo, gm = prep.moments, prep.gamma
    if not (mo["a2"] > 0 and mo["b2"] > 0):
        return None
    return float(gm * mo["var_delta"] / mo["a2"]), float(gm * mo["var_eps"] / mo["b2"])


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


_OLS = ("ols", "ols_loo")


def ecc(
    y,
    a,
    X,
    *,
    estimator="dr",
    split=None,
    lam=None,
    cov=None,
    level=0.95,
    rng=None,
    constants=None,
    center=True,
    X_unlabeled=None,
) -> ECCResult:
    r"""Estimate of the Expected Conditional Covariance ``E Cov(Y, A | X)``.

    ``estimator="ols"`` (or ``"ols_loo"``), for ``p < n`` and any covariance and row law of X:
    the exactly unbiased residual estimator ``A^T (I - H) Y / (n - p)`` on all rows (or its
    leave-one-out form, unbiased for the average of a row-dependent ``Cov(eps_i, delta_i)``),
    with the exact conditional variance (fourth-moment term estimated); see
    :mod:`estimators._ols` (derived in the package's research note on unknown covariance, §2).

    ``estimator="hoif"`` with ``X_unlabeled`` (independent covariate rows without ``y, a``):
    the second-order influence-function U-statistic with the inverse covariance of the
    unlabeled rows, exactly unbiased for Gaussian rows and any covariance, also when ``p > n``
    (:mod:`estimators._hoif`; research note §5, route c1).

    ``estimator`` in ``{"dr", "nr", "int"}``: fits ridge
    regressions of ``a`` and ``y`` on ``X`` on training folds, evaluates the INT, NR or
    DR plug-in on a held-out fold, and removes its O(1) proportional-regime bias by solving the
    moment equations of McGrath, Mukherjee, Mukherjee & Wang (2025, arXiv 2509.25536; debiasing as
    in the authors' code, see :func:`theory.ecc.debias`). Valid when ``p / n`` is of order one.

    Parameters
    ----------
    y, a : array_like, shape (n,)
        Outcome and exposure: numpy arrays or pandas Series (names kept in ``summary()``);
        no missing values.
    X : array_like or pandas.DataFrame, shape (n, p)
        Covariates. OLS forms: any covariance and row law, full column rank, ``p < n``. Ridge
        forms: rows i.i.d. with a **known** covariance (``cov``; identity when None); the
        corrections use the Marchenko–Pastur law of a whitened design, and the call raises
        ``ValueError`` when the whitened training folds are not compatible with identity
        covariance (Ledoit–Wolf sphericity statistic beyond 8 SD), saying which route applies
        (``estimator="ols"`` when ``p < n``).
    estimator : {"dr", "nr", "int", "ols", "ols_loo", "hoif"}
        Doubly robust ``mean((Y - Xb)(A - Xa))``, Newey–Robins ``mean(A (Y - Xb))``,
        integral-based ``mean(A Y) - a^T b`` (ridge nuisances, split folds), the OLS
        residual / leave-one-out forms (no split, no penalty), or the unlabeled-rows
        U-statistic.
    split : {2, 3}, optional
        Ridge forms only (default 2). 2: both nuisances fitted on one half, evaluated on the
        other; 3: each nuisance on its own third, evaluated on the last (folds ``n//3, n//3``
        and the rest).
    lam : float, (float, float) or "auto", optional
        Ridge forms only (default ``"auto"``). Ridge penalties
        ``(lam_a, lam_y)`` in ``(X^T X/m + lam I)^{-1} X^T t / m``. ``"auto"``
        minimises the plug-in asymptotic variance of the chosen estimator over
        ``[1e-3, 1e3]^2`` (the paper's point: this is not the prediction-optimal penalty).
    cov : array_like (p, p), optional
        Ridge forms only: known population covariance of the rows of X; ``X`` is whitened by
        ``cov^{-1/2}``.
    level : float
        Confidence level of ``ci``.
    rng : None, int or numpy.random.Generator
        Seeds the random assignment of rows to folds (unused by the OLS forms).
    constants : {"empirical", "mp"}, optional
        Ridge forms only (default ``"empirical"``). Spectral constants of the
        correction. ``"mp"``: the Marchenko–Pastur limits (as in the
        paper). ``"empirical"`` (default): the same functionals of the training-fold spectrum,
        e.g. ``(1/p) tr S(Sigma_hat)``; by rotation invariance ``E[alpha^T f(Sigma_hat) beta |
        spectrum] = theta (1/p) tr f``, so for Gaussian rows the corrected moment equations hold
        exactly in finite samples (derived here; the MP version carries an O(1/m) bias, see
        ``tests/estimators/test_ecc_monte_carlo.py``).
    center : bool
        Centre every fold (an unpenalised intercept; ``m - 1`` degrees of freedom, exact for
        Gaussian rows; for OLS an intercept column; for ``"hoif"`` the labeled means of ``y``,
        ``a`` and the pooled mean of ``X`` are removed, exact to O(1/n)). ``False`` assumes
        mean-zero ``X``, ``a`` and ``y``.
    X_unlabeled : array_like or pandas.DataFrame, shape (N, p), optional
        ``estimator="hoif"`` only (and required there): independent rows of the covariates
        with the law of ``X``, ``N >= p + 3`` (``N >= 2p`` recommended).

    Returns
    -------
    ECCResult

    Notes
    -----
    The standard error combines the sample variance of the evaluated score on the held-out fold
    (model-free) with the training-fold variance of the derived asymptotic formula
    (:func:`theory.ecc.variance_components`, derived here and checked by Monte Carlo) at
    method-of-moments plug-ins (:func:`plugin_moments`). The linear-Gaussian model of the paper is
    assumed for the training-fold piece.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> n, p = 2000, 250
    >>> X = rng.standard_normal((n, p)); al = np.full(p, p**-0.5)
    >>> e = rng.multivariate_normal([0, 0], [[1, .5], [.5, 1]], n)
    >>> r = ecc(X @ al + e[:, 0], X @ al + e[:, 1], X, rng=1)
    >>> abs(r.estimate - 0.5) < 4 * r.se
    True
    """
    estimator = check_choice(estimator, "estimator", _th.ESTIMATORS + _OLS + ("hoif",))
    level = check_scalar(level, "level", lower=0.0, upper=1.0, closed="neither")
    if not isinstance(center, bool | np.bool_):
        raise TypeError(f"`center` must be a bool; got {center!r}.")
    names = data_names(y, a, X)
    if estimator == "hoif":
        for arg, val in (("split", split), ("lam", lam), ("cov", cov), ("constants", constants)):
            if val is not None:
                raise ValueError(
                    f"`{arg}` does not apply to estimator='hoif' (no split, no "
                    f"penalty, covariance from `X_unlabeled`); got {arg}={val!r}."
                )
        if X_unlabeled is None:
            raise ValueError(
                "estimator='hoif' needs `X_unlabeled`, independent covariate rows "
                "without outcomes (N >= p + 3)."
            )
        return _hoif_result(y, a, X, X_unlabeled, level, bool(center), names)
    if X_unlabeled is not None:
        raise ValueError(
            f"`X_unlabeled` is used by estimator='hoif' only; got estimator="
            f"{estimator!r}. (Whitening the ridge estimators by the unlabeled "
            f"covariance needs constants for an inverse Marchenko–Pastur population "
            f"spectrum, not implemented.)"
        )
    if estimator in _OLS:
        for arg, val in (("split", split), ("lam", lam), ("cov", cov), ("constants", constants)):
            if val is not None:
                raise ValueError(
                    f"`{arg}` does not apply to estimator={estimator!r} (no split, "
                    f"no penalty, exact for any covariance); got {arg}={val!r}. "
                    f"Leave it unset."
                )
        return _ols_result(y, a, X, estimator, level, bool(center), names)
    split = check_choice(2 if split is None else split, "split", _th.SPLITS)
    lam = _check_lam("auto" if lam is None else lam)
    constants = check_choice(
        "empirical" if constants is None else constants, "constants", ("empirical", "mp")
    )
    prep = _Prepared(y, a, X, split, cov, bool(center), rng, vectors=False)
    if lam == "auto":
        lam = _auto_lambda(prep, estimator)
    return _result(prep, estimator, lam, level, constants, names)


def _ols_result(y, a, X, estimator, level, center, names):
    y, a, X = _check_data(y, a, X)
    if center:
        y, a, X = _center(y, a, X)
    fit = ols_fit(y, a, X, center=center, column_names=(names or {}).get("X"))
    if estimator == "ols":
        est = fit.residual()
        var = fit.var_residual(est)
    else:
        est = fit.loo()
        var = fit.var_loo(est)
    se = float(np.sqrt(var))
    z = float(special.ndtri(0.5 + level / 2))
    n, p = X.shape
    return ECCResult(
        estimate=est,
        se=se,
        ci=(est - z * se, est + z * se),
        variance=n * var,
        lam=(0.0, 0.0),
        estimator=estimator,
        split=1,
        level=level,
        naive=est,
        theta=fit.theta(est),
        n=n,
        p=p,
        m=n,
        gamma=p / n,
        lam_prediction=None,
        constants="exact",
        moments={"var_eps": fit.s_e, "var_delta": fit.s_d, "dof": fit.k},
        names=names,
    )


def _hoif_result(y, a, X, XU, level, center, names):
    y, a, X = _check_data(y, a, X)
    n, p = X.shape
    XU = as_numeric(XU, "X_unlabeled", 2)
    N = XU.shape[0]
    if XU.shape[1] != p:
        raise ValueError(f"`X_unlabeled` must have the {p} columns of X; got {XU.shape[1]}.")
    if N < p + 3:
        raise ValueError(
            f"`X_unlabeled` must have at least p + 3 = {p + 3} rows (N >= 2p recommended); got {N}."
        )
    if n < 3:
        raise ValueError(f"estimator='hoif' needs at least 3 labeled rows; got {n}.")
    if center:
        mx = (X.sum(0) + XU.sum(0)) / (n + N)
        y, a, X, XU = y - y.mean(), a - a.mean(), X - mx, XU - mx
    est, var, var_lab, var_unl, theta = hoif(y, a, X, XU)
    se = float(np.sqrt(var))
    z = float(special.ndtri(0.5 + level / 2))
    return ECCResult(
        estimate=est,
        se=se,
        ci=(est - z * se, est + z * se),
        variance=n * var,
        lam=(0.0, 0.0),
        estimator="hoif",
        split=1,
        level=level,
        naive=est,
        theta=theta,
        n=n,
        p=p,
        m=n,
        gamma=p / n,
        lam_prediction=None,
        constants="unlabeled",
        moments={"N": N, "var_labeled": var_lab, "var_unlabeled": var_unl},
        names=names,
    )


def _result(prep, estimator, lam, level, constants, names=None):
    la, ly = lam
    naive, psi, theta, var_phi, c = prep.fit(estimator, la, ly, constants)
    var = float(prep.variance(estimator, la, ly, (var_phi, c))[0])
    se = float(np.sqrt(var))
    est = float(psi[0])
    z = float(special.ndtri(0.5 + level / 2))
    return ECCResult(
        estimate=est,
        se=se,
        ci=(est - z * se, est + z * se),
        variance=prep.m * var,
        lam=(float(la), float(ly)),
        estimator=estimator,
        split=prep.split,
        level=level,
        naive=float(naive[0]),
        theta=float(theta[0]),
        n=prep.n,
        p=prep.p,
        m=prep.m,
        gamma=prep.gamma,
        lam_prediction=_lam_prediction(prep),
        constants=constants,
        moments=dict(prep.moments),
        names=names,
    )


def ecc_path(
    y, a, X, lams, *, split=2, cov=None, rng=None, constants="empirical", center=True
) -> dict:
    """Naive and debiased estimates of all three estimators over a common-penalty grid, one fit.

    Returns ``{"lams", "naive": {est: array}, "debiased": {est: array}, "se": {est: array}}``.
    One eigendecomposition per training fold serves the whole grid (used by the paper checks).
    The estimators and their debiasing are those of :func:`ecc` (McGrath et al. 2025, §3; note
    ``ecc_ridge.md`` §3.4), at ``lam_a = lam_y``.
    """
    split = check_choice(split, "split", _th.SPLITS)
    lams = as_array(lams, "lams", ndim=1, min_size=1, lower=0.0, upper=1e50, closed="right")
    constants = check_choice(constants, "constants", ("empirical", "mp"))
    prep = _Prepared(y, a, X, split, cov, bool(center), rng)
    out = {"lams": lams, "naive": {}, "debiased": {}, "se": {}}
    for est in _th.ESTIMATORS:
        naive, psi, _, var_phi, c = prep.fit(est, lams, lams, constants)
        out["naive"][est] = naive
        out["debiased"][est] = psi
        with np.errstate(all="ignore"):
            out["se"][est] = np.sqrt(prep.variance(est, lams, lams, (var_phi, c)))
    return out


def asymptotic_variance(
    estimator, split, lam_a, lam_y, gamma, *, a2, b2, theta, var_eps, var_delta, cov_eps_delta
) -> float:
    r"""``lim m Var(psi_tilde)`` of a debiased ridge ECC estimator (fold size m, gamma = p/m).

    Linear-Gaussian model ``A = X^T alpha + delta``, ``Y = X^T beta + eps``, ``X ~ N(0, I)``;
    ``a2 = ||alpha||^2``, ``b2 = ||beta||^2``, ``theta = alpha^T beta``, noise (co)variances
    ``var_eps, var_delta, cov_eps_delta`` (``psi = cov_eps_delta``). Derived here (see
    :func:`theory.ecc.variance_components`; not the paper's printed theorem), checked by Monte
    Carlo and in the classical limit ``gamma, lam -> 0`` where the DR variance tends to the
    efficiency bound ``var_eps var_delta + cov_eps_delta^2``.

    Examples
    --------
    >>> round(asymptotic_variance("dr", 2, 0.5, 0.5, 0.5, a2=1, b2=1, theta=0.717, var_eps=1,
    ...                           var_delta=1, cov_eps_delta=0.5), 2)
    2.89
    """
    estimator = check_choice(estimator, "estimator", _th.ESTIMATORS)
    split = check_choice(split, "split", _th.SPLITS)
    lam_a = check_scalar(lam_a, "lam_a", lower=0.0, closed="neither")
    lam_y = check_scalar(lam_y, "lam_y", lower=0.0, closed="neither")
    gamma = check_scalar(gamma, "gamma", lower=0.0, closed="neither")
    a2, b2, theta, ve, vd, ced = _th._check_model(a2, b2, theta, var_eps, var_delta, cov_eps_delta)
    v = _th.asymptotic_variance(
        estimator,
        split,
        lam_a,
        lam_y,
        gamma,
        a2=a2,
        b2=b2,
        theta=theta,
        var_eps=ve,
        var_delta=vd,
        cov_eps_delta=ced,
    )
    return float(v)


def variance_curve(
    y, a, X, *, estimator="dr", split=2, lams=None, cov=None, rng=None, center=True
) -> VarianceCurve:
    """Plug-in asymptotic variance of a debiased estimator over a common penalty ``lam_a = lam_y``.

    ``lams`` defaults to the paper's 100-point grid (``seq(0.05, 2, 50)[-50] ∪ seq(2, 10, 51)``).
    The prediction-optimal pair uses the method-of-moments plug-ins (Lemma F.2).
    """
    estimator = check_choice(estimator, "estimator", _th.ESTIMATORS)
    split = check_choice(split, "split", _th.SPLITS)
    if lams is None:
        lams = paper_lambda_grid()
    lams = as_array(lams, "lams", ndim=1, min_size=1, lower=0.0, upper=1e50, closed="right")
    prep = _Prepared(y, a, X, split, cov, bool(center), rng)
    with np.errstate(all="ignore"):
        V = prep.m * prep.variance(estimator, lams, lams)
    Vf = np.where(np.isfinite(V), V, np.inf)
    i = int(np.argmin(Vf))
    lp = _lam_prediction(prep)
    vp = None
    if lp is not None:
        with np.errstate(all="ignore"):
            vp = float(prep.m * prep.variance(estimator, lp[0], lp[1])[()])
    return VarianceCurve(
        lams=lams,
        variance=V,
        lam_opt=float(lams[i]),
        variance_opt=float(V[i]),
        lam_prediction=lp,
        variance_at_prediction=vp,
        estimator=estimator,
        split=split,
        gamma=prep.gamma,
    )


def paper_lambda_grid() -> np.ndarray:
    """The authors' 100-point grid ``c(seq(0.05, 2, length=50)[-50], seq(2, 10, length=51))``.

    McGrath et al. 2025, the penalty grid of their simulations (``run_all.R``; note §5).

    >>> g = paper_lambda_grid()
    >>> len(g), float(g[0]), float(g[-1])
    (100, 0.05, 10.0)
    """
    return np.concatenate([np.linspace(0.05, 2, 50)[:-1], np.linspace(2, 10, 51)])


def ecc_test(y, a, X, *, split=2, lam="auto", cov=None, rng=None, center=True) -> CITestResult:
    r"""Test of conditional independence in the ECC sense, H0: ``E Cov(Y, A | X) = 0``.

    Statistic ``z = psi_tilde / se`` of the debiased DR estimator (:func:`ecc`), two-sided normal
    p-value. For comparison, the naive GCM statistic (Shah & Peters 2020, Ann. Statist. 48(3),
    eq. (4)) ``T = sqrt(n) mean(R) / sd(R)``, ``R_i = (A_i - p_hat(X_i))(Y_i - b_hat(X_i))`` with
    in-sample ridge residuals at the same penalties; its null mean is
    ``lam_a lam_y alpha^T Sigma_hat (Sigma_hat + lam)^{-2} beta != 0`` when p ~ n, so it
    over-rejects.

    >>> rng = np.random.default_rng(0)
    >>> n, p = 2000, 250
    >>> X = rng.standard_normal((n, p)); al = np.full(p, p**-0.5)
    >>> e = rng.multivariate_normal([0, 0], [[1, .5], [.5, 1]], n)  # psi = 0.5: H0 false
    >>> ecc_test(X @ al + e[:, 0], X @ al + e[:, 1], X, rng=1).pvalue < 1e-6
    True
    """
    res = ecc(y, a, X, estimator="dr", split=split, lam=lam, cov=cov, rng=rng, center=center)
    y, a, X = _check_data(y, a, X)
    if cov is not None:
        X = X @ _whitener(cov, X.shape[1])
    if center:
        y, a, X = _center(y, a, X)
    n = X.shape[0]
    path = _RidgePath(X, {"a": a, "y": y}, n - (1 if center else 0), vectors=False)
    ra = a - X @ path.coef("a", res.lam[0])[0]
    ry = y - X @ path.coef("y", res.lam[1])[0]
    R = ra * ry
    T = float(np.sqrt(n) * R.mean() / R.std())
    return CITestResult(
        statistic=res.zstat,
        pvalue=res.pvalue,
        gcm_statistic=T,
        gcm_pvalue=float(2 * special.ndtr(-abs(T))),
        result=res,
    )
