"""The data side of the ECC estimators: whitening, folds, isotropy checks, plug-in moments, and
the ridge path (one eigendecomposition per training fold serves every penalty)."""

from __future__ import annotations

import contextlib
import numbers

import numpy as np
from scipy import linalg

from _core.validation import (
    NumericalError,
    as_array,
    as_generator,
    check_bool,
    check_choice,
    check_scalar,
)
from theory import ecc as _th
from theory.marchenko_pastur import LAM_MIN

from ._data import check_data as _check_data

_LAM_RANGE = (1e-3, 1e3)
_MIN_FOLD = 10


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
    return tuple(check_scalar(v, "lam", lower=LAM_MIN, upper=1e50) for v in vals)


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
    """Which route applies to data whose covariance is unknown
    (``docs/papers/ecc_unknown_covariance.md#what-is-claimed``)."""
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
        f"coefficients are generic relative to the covariance's eigenvectors (route b, "
        f"assume='generic'; docs/papers/ecc_unknown_covariance.md#route-b)."
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
    if check_bool(center, "center"):
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


@contextlib.contextmanager
def _penalty_guard(lam_a, lam_y):
    """The theory layer's refusal of bias constants that float64 cannot hold (``s_a s_y`` or
    ``Gamma`` rounded to 0 at a penalty far above the spectrum) as the :class:`NumericalError`
    of a valid call, naming the penalty to reduce; the inputs were validated before."""
    try:
        yield
    except ValueError as err:
        raise NumericalError(
            f"the debiasing constants at lam_a={np.max(lam_a):.3g}, lam_y={np.max(lam_y):.3g} "
            f"are not representable in float64 ({err}); use a smaller `lam`/`lams`.",
            lam_a=lam_a,
            lam_y=lam_y,
        ) from err


class _Prepared:
    """Whitened, split, centred data with the ridge eigendecompositions of the training folds."""

    def __init__(self, y, a, X, split, cov, center, rng, vectors=True, check_isotropy=True):
        y, a, X = _check_data(y, a, X)
        self.n, self.p = X.shape
        flat = np.flatnonzero(np.ptp(X, axis=0) == 0) if center and check_isotropy else ()
        if len(flat):
            raise ValueError(
                f"`X` must not have a constant column with center=True: centred it is zero, "
                f"so the rows cannot have the positive-definite covariance `cov` states "
                f"(the identity when None); column(s) {list(flat)}. Drop them."
            )
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
        with _penalty_guard(lam_a, lam_y):
            c = self.constants(lam_a, lam_y, kind)
            psi, theta = _th.debias(estimator, self.split, naive, theta_hat, c)
        var_phi = phi.var(0, ddof=1)
        return naive, psi, theta, var_phi, c

    def variance(self, estimator, lam_a, lam_y, score=None):
        """Plug-in ``Var(psi_tilde)`` (fold sizes respected) and its ``lim m Var`` form.

        ``score=(var_phi, c)`` from :meth:`fit` puts the model-free conditional variance of the
        evaluated score in place of the evaluation-fold term.
        """
        with _penalty_guard(lam_a, lam_y):
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


def unchecked_ridge_estimate(
    y, a, X, *, estimator="dr", split=2, lam=1.0, cov=None, center=True, rng=None
) -> float:
    """The debiased ridge estimate that :func:`ecc` returns for ``estimator`` in
    ``{"dr", "nr", "int"}`` at fixed penalties ``lam`` (a number or ``(lam_a, lam_y)``), computed
    without the check that the whitened training folds look isotropic: what a user who forced the
    Marchenko–Pastur constants onto data that break their assumption would get (McGrath,
    Mukherjee, Mukherjee & Wang 2025, Sec. 3, the estimators :func:`ecc` implements). The refusal
    claims measure its bias where :func:`ecc` refuses.

    ``rng`` (int, Generator or None) draws the folds exactly as :func:`ecc` does, so on data that
    pass the check the two agree:

    >>> from estimators import ecc
    >>> g = np.random.default_rng(0)
    >>> X = g.standard_normal((400, 40))
    >>> a, y = X[:, 0] + g.standard_normal(400), X[:, 1] + g.standard_normal(400)
    >>> u = unchecked_ridge_estimate(y, a, X, lam=1.0, rng=1)
    >>> bool(np.isclose(u, ecc(y, a, X, split=2, lam=1.0, rng=1).estimate, rtol=1e-12))
    True
    """
    estimator = check_choice(estimator, "estimator", _th.ESTIMATORS)
    split = check_choice(split, "split", _th.SPLITS)
    lam = _check_lam(lam)
    if isinstance(lam, str):
        raise ValueError("`lam` must be a positive number or a pair (lam_a, lam_y); got 'auto'.")
    lam_a, lam_y = lam
    prep = _Prepared(
        y, a, X, split, cov, check_bool(center, "center"), rng, vectors=False, check_isotropy=False
    )
    return float(prep.fit(estimator, lam_a, lam_y)[1][0])


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
