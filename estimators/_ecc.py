r"""Debiased ridge estimators of the Expected Conditional Covariance ``E Cov(Y, A | X)``.

McGrath, D. Mukherjee, R. Mukherjee & Wang, "Optimal Nuisance Function Tuning for Estimating a
Doubly Robust Functional under Proportional Asymptotics", NeurIPS 2025 (arXiv 2509.25536). The
theory (spectral constants, naive limits, debiasing, asymptotic variance) is in :mod:`theory.ecc`
and :mod:`theory.marchenko_pastur`; this module handles data: whitening, splitting, one
eigendecomposition per training fold for every ridge penalty, plug-in variance, tuning, tests.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special

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

from . import _whitened as _wh
from ._data import as_numeric, check_unlabeled_columns, data_names
from ._data import check_data as _check_data
from ._generic import GenericFit as _GenericFit
from ._hoif import hoif
from ._ols import ols_fit
from ._results import CITestResult, ECCResult, VarianceCurve, wald
from ._ridge import (
    _auto_lambda,
    _center,
    _check_lam,
    _lam_prediction,
    _Prepared,
    _RidgePath,
    _whitener,
    plugin_moments,
)

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


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


_OLS = ("ols", "ols_loo")
#: p-value below which assume='generic' warns that its over-identification check failed
_ALIGNMENT_ALPHA = 0.01


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
    assume=None,
) -> ECCResult:
    r"""Estimate of the Expected Conditional Covariance ``E Cov(Y, A | X)``.

    ``estimator="ols"`` (or ``"ols_loo"``), for ``p < n`` and any covariance and row law of X:
    the exactly unbiased residual estimator ``A^T (I - H) Y / (n - p)`` on all rows (or its
    leave-one-out form, unbiased for the average of a row-dependent ``Cov(eps_i, delta_i)``),
    with the exact conditional variance (fourth-moment term estimated; for the leave-one-out
    form the larger of a leave-out variance that stays valid when the noise moments vary with
    the row, :meth:`estimators._ols.OLSFit.var_loo_hc`, and the homoskedastic one, both in
    ``moments``); see
    :mod:`estimators._ols` (derived here, ``docs/papers/ecc_unknown_covariance.md#route-0``).

    ``estimator="hoif"`` with ``X_unlabeled`` (independent covariate rows without ``y, a``):
    the second-order influence-function U-statistic with the inverse covariance of the
    unlabeled rows, exactly unbiased for Gaussian rows and any covariance, also when ``p > n``
    (:mod:`estimators._hoif`; ``docs/papers/ecc_unknown_covariance.md#route-c1``).

    ``estimator`` in ``{"dr", "nr", "int"}`` with ``X_unlabeled`` (route c2): the ridge
    estimators below on X whitened by the covariance of the unlabeled rows, with constants
    recomputed for the population spectrum that whitening leaves (inverse Marchenko–Pastur with
    ratio ``p/N``), so no known ``cov`` is needed; SE: the plug-in below plus a delete-a-group
    jackknife over the unlabeled rows (:mod:`estimators._whitened`;
    ``docs/papers/ecc_unknown_covariance.md#route-c2``).

    ``assume="generic"`` (route b, explicit opt-in, ``estimator="dr"``): in-sample ridge fits on
    all rows with constants from their own spectrum, valid for any covariance and row law when
    the coefficients are generic relative to the covariance's eigenvectors (random effects);
    biased when they are aligned with them (e.g. all-positive coefficients with AR(1)
    covariance). An over-identification check across penalties (``result.alignment``) warns
    when the estimates at ``lam/4, lam, 4 lam`` disagree (:mod:`estimators._generic`;
    ``docs/papers/ecc_unknown_covariance.md#route-b``).

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
        Independent rows of the covariates with the law of ``X`` (a DataFrame must have the
        columns of ``X``, in order). Required by ``estimator="hoif"`` (``N >= p + 3``); with a
        ridge estimator it replaces ``cov`` (route c2, ``N >= p + 4``; ``N >= 2p`` recommended,
        Gaussian rows assumed for the spectrum). Not with the OLS forms.
    assume : {None, "generic"}
        ``"generic"`` opts into route b (above); only with ``estimator="dr"`` and no ``split``,
        ``cov``, ``constants`` or ``X_unlabeled``. ``lam``: a number, a pair or ``"auto"`` (both
        ``tr(X^T X/m)/p``, a function of X alone, which keeps the estimate unbiased).

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
    center = check_bool(center, "center")
    as_generator(rng)  # checked on every route, also those that do not draw (OLS, generic)
    names = data_names(y, a, X)
    check_unlabeled_columns(X, X_unlabeled)
    if assume is not None:
        assume = check_choice(assume, "assume", ("generic",))
        if estimator != "dr":
            raise ValueError(
                f"`estimator` must be 'dr' with assume='generic' (the in-sample DR residual "
                f"product with alpha_hat^T beta_hat, route b of "
                f"docs/papers/ecc_unknown_covariance.md); got {estimator!r}."
            )
        for arg, val in (
            ("split", split),
            ("cov", cov),
            ("constants", constants),
            ("X_unlabeled", X_unlabeled),
        ):
            if val is not None:
                raise ValueError(
                    f"`{arg}` does not apply with assume='generic' (in-sample fits on all "
                    f"rows, constants from their spectrum); got {arg}={val!r}."
                )
        lam = _check_lam("auto" if lam is None else lam)
        return _generic_result(y, a, X, lam, level, bool(center), names)
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
    if X_unlabeled is not None and estimator in _OLS:
        raise ValueError(
            f"`X_unlabeled` does not apply to estimator={estimator!r} (exact for any "
            f"covariance without it); use estimator='hoif' or a ridge estimator "
            f"('dr', 'nr', 'int') with it."
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
    if X_unlabeled is not None:
        for arg, val in (("cov", cov), ("constants", constants)):
            if val is not None:
                raise ValueError(
                    f"`{arg}` does not apply with `X_unlabeled` (covariance and constants "
                    f"from the unlabeled rows); got {arg}={val!r}."
                )
        return _whitened_result(
            y, a, X, X_unlabeled, estimator, split, lam, level, rng, bool(center), names
        )
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
    fit = ols_fit(y, a, X, center=center, column_names=(names or {}).get("X"), estimator=estimator)
    moments = {"var_eps": fit.s_e, "var_delta": fit.s_d, "dof": fit.k}
    if estimator == "ols":
        est = fit.residual()
        var = fit.var_residual(est)
    else:
        # the larger of the leave-out (heteroskedasticity-robust) and the homoskedastic variance:
        # the leave-out one is noisy, or even negative, when n - p is small (Angrist & Pischke
        # 2009, Mostly Harmless Econometrics §8.1, recommend max(robust, conventional) SEs)
        est = fit.loo()
        moments["var_leave_out"], moments["var_homoskedastic"] = fit.var_loo_hc(), fit.var_loo(est)
        var = max(moments["var_leave_out"], moments["var_homoskedastic"])
    if not (np.isfinite(var) and var > 0):
        raise NumericalError(
            f"the variance of the {estimator} estimate is {var:.3g}, not finite and positive "
            "(it underflows or overflows float64 for data on this scale); rescale `y` or `a`.",
            variance=var,
            estimate=est,
        )
    se = float(np.sqrt(var))
    n, p = X.shape
    return ECCResult(
        estimate=est,
        se=se,
        ci=wald(est, se, level),
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
        moments=moments,
        names=names,
    )


def _check_unlabeled_constants(X, XU, center):
    """Refuse a column of ``X_unlabeled`` that is constant where ``X``'s varies (the unlabeled
    rows cannot then share the law of ``X``'s rows) or, when centring, constant at all (its
    centred covariance is singular)."""
    if XU.ndim != 2 or XU.shape[1] != X.shape[1] or np.linalg.matrix_rank(XU) < XU.shape[1]:
        return  # the shape and a rank deficiency are reported by the route's own checks
    flat = np.ptp(XU, axis=0) == 0
    bad = np.flatnonzero(flat & (np.ptp(X, axis=0) > 0 if not center else True))
    if bad.size:
        raise ValueError(
            f"`X_unlabeled` must not have a constant column "
            f"{'(centred, its covariance would be singular)' if center else 'where `X` varies'}; "
            f"column(s) {bad.tolist()} are constant."
        )


def _hoif_result(y, a, X, XU, level, center, names):
    y, a, X = _check_data(y, a, X)
    n, p = X.shape
    XU = as_numeric(XU, "X_unlabeled", 2)
    _check_unlabeled_constants(X, XU, center)
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
    return ECCResult(
        estimate=est,
        se=se,
        ci=wald(est, se, level),
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


def _generic_result(y, a, X, lam, level, center, names):
    """Route (b): in-sample ridge fits, sample-trace constants, generic alignment assumed."""
    y, a, X = _check_data(y, a, X)
    if not np.any(np.ptp(X, axis=0) > 0):
        raise ValueError("`X` must have a non-constant column; got every column constant.")
    n, p = X.shape
    m = n - 1 if center else n
    if m < 3:
        raise ValueError(f"assume='generic' needs at least {4 if center else 3} rows; got {n}.")
    if center:
        y, a, X = _center(y, a, X)
    fit = _GenericFit(y, a, X, m)
    la, ly = fit.auto_lambda() if lam == "auto" else lam
    psi, theta, df_only = fit.solve("a", "y", la, ly)
    var, mom = fit.variance(la, ly, psi)
    _check_variance(var, (la, ly))
    check = fit.alignment_check(la, ly, mom)
    if check["pvalue"] < _ALIGNMENT_ALPHA:
        warnings.warn(
            f"assume='generic' looks violated: the estimates at penalties x(1/4, 1, 4) "
            f"disagree ({', '.join(f'{v:.4g}' for v in check['estimates'])}; chi-square "
            f"{check['statistic']:.3g} on 2 df, p = {check['pvalue']:.2g}). The coefficients "
            f"seem aligned with the covariance's eigenvectors, where route b is biased; use "
            f"estimator='ols' (p < n), `X_unlabeled`, or the known `cov`.",
            UserWarning,
            stacklevel=3,
        )
    se = float(np.sqrt(var))
    s_e, s_d, a2, b2, th = mom
    return ECCResult(
        estimate=float(psi),
        se=se,
        ci=wald(psi, se, level),
        variance=n * var,
        lam=(float(la), float(ly)),
        estimator="dr",
        split=1,
        level=level,
        naive=float(df_only),
        theta=float(theta),
        n=n,
        p=p,
        m=n,
        gamma=p / m,
        lam_prediction=None,
        constants="generic",
        moments={"var_eps": s_e, "var_delta": s_d, "a2": a2, "b2": b2, "theta_I": th},
        names=names,
        alignment=check,
    )


def _whitened_result(y, a, X, XU, estimator, split, lam, level, rng, center, names, groups=10):
    """Route (c2): ridge estimators whitened by the unlabeled covariance (``_whitened``)."""
    y, a, X = _check_data(y, a, X)
    if not np.any(np.ptp(X, axis=0) > 0):
        raise ValueError("`X` must have a non-constant column; got every column constant.")
    XU = as_numeric(XU, "X_unlabeled", 2)
    _check_unlabeled_constants(X, XU, center)
    S, dof = _wh.unlabeled_covariance(XU, X.shape[1], center, extra=4)
    seed = int(as_generator(rng).integers(2**63))  # the same folds for the jackknife refits

    def prepare(cov):
        return _Prepared(
            y, a, X, split, cov, center, np.random.default_rng(seed), False, check_isotropy=False
        )

    prep = prepare(S)
    if lam == "auto":
        lam = _auto_lambda(prep, estimator)
    la, ly = lam
    t = _wh.population_spectrum(prep.p, dof)
    naive, psi, theta, var_phi, c = _wh.fit(prep, estimator, la, ly, t)
    var_lab = float(prep.variance(estimator, la, ly, (var_phi, c))[0])
    # delete-a-group jackknife over the unlabeled rows (every group leaves N >= p + 3 rows)
    N, p = XU.shape
    G = min(N, max(groups, -(-N // (N - p - 3))))
    vals = []
    for idx in np.array_split(np.arange(N), G):
        keep = np.ones(N, bool)
        keep[idx] = False
        Sg, dg = _wh.unlabeled_covariance(XU[keep], p, center)
        vals.append(_wh.fit(prepare(Sg), estimator, la, ly, _wh.population_spectrum(p, dg))[1][0])
    vals = np.array(vals)
    var_unl = (G - 1) / G * float(np.sum((vals - vals.mean()) ** 2))
    moments = {**prep.moments, "N": N, "var_labeled": var_lab, "var_unlabeled": var_unl}
    return _pack(prep, estimator, (la, ly), level, (naive, psi, theta), var_lab + var_unl,
                 "unlabeled", moments, names)  # fmt: skip


def _result(prep, estimator, lam, level, constants, names=None):
    la, ly = lam
    naive, psi, theta, var_phi, c = prep.fit(estimator, la, ly, constants)
    var = float(prep.variance(estimator, la, ly, (var_phi, c))[0])
    return _pack(prep, estimator, lam, level, (naive, psi, theta), var, constants,
                 dict(prep.moments), names)  # fmt: skip


def _check_variance(var, lam):
    """Refuse a plug-in variance that is not finite and positive (the formula broke down)."""
    if not (np.isfinite(var) and var > 0):
        raise NumericalError(
            f"the plug-in variance of the estimate is {var:.3g} at lam=({lam[0]:.3g}, "
            f"{lam[1]:.3g}), not finite and positive: the plug-in formula breaks down at this "
            f"penalty for these data; choose another `lam` (or lam='auto').",
            lam=tuple(lam),
            variance=var,
        )


def _pack(prep, estimator, lam, level, fitted, var, constants, moments, names):
    """The :class:`ECCResult` of a ridge-route fit: ``fitted`` = (naive, psi, theta) arrays whose
    first entry is reported, ``var`` the variance of the estimate."""
    naive, psi, theta = fitted
    _check_variance(var, lam)
    se = float(np.sqrt(var))
    est = float(psi[0])
    return ECCResult(
        estimate=est,
        se=se,
        ci=wald(est, se, level),
        variance=prep.m * var,
        lam=(float(lam[0]), float(lam[1])),
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
        moments=moments,
        names=names,
    )


def ecc_path(
    y, a, X, lams, *, split=2, cov=None, rng=None, constants="empirical", center=True
) -> dict:
    """Naive and debiased estimates of all three estimators over a common-penalty grid, one fit.

    Returns ``{"lams", "naive": {est: array}, "debiased": {est: array}, "se": {est: array}}``;
    ``NumericalError`` (naming the penalties) where a plug-in variance is not finite and positive.
    One eigendecomposition per training fold serves the whole grid (used by the paper checks).
    The estimators and their debiasing are those of :func:`ecc` (McGrath et al. 2025, §3;
    ``docs/papers/ecc_ridge.md#bias-and-debiasing``), at ``lam_a = lam_y``.

    >>> rng = np.random.default_rng(0)
    >>> n, p = 1000, 100
    >>> X = rng.standard_normal((n, p)); al = np.full(p, p**-0.5)
    >>> e = rng.multivariate_normal([0, 0], [[1, .5], [.5, 1]], n)  # psi = 0.5
    >>> r = ecc_path(X @ al + e[:, 0], X @ al + e[:, 1], X, [0.5, 1.0, 2.0], rng=1)
    >>> bool(np.all(abs(r["debiased"]["dr"] - 0.5) < 4 * r["se"]["dr"]))
    True
    """
    split = check_choice(split, "split", _th.SPLITS)
    lams = as_array(lams, "lams", ndim=1, min_size=1, lower=LAM_MIN, upper=1e50)
    constants = check_choice(constants, "constants", ("empirical", "mp"))
    prep = _Prepared(y, a, X, split, cov, check_bool(center, "center"), rng)
    out = {"lams": lams, "naive": {}, "debiased": {}, "se": {}}
    for est in _th.ESTIMATORS:
        naive, psi, _, var_phi, c = prep.fit(est, lams, lams, constants)
        out["naive"][est] = naive
        out["debiased"][est] = psi
        var = prep.variance(est, lams, lams, (var_phi, c))
        bad = ~(np.isfinite(var) & (var > 0))
        if bad.any():
            raise NumericalError(
                f"the plug-in variance of the {est} estimator is not finite and positive at "
                f"lam = {', '.join(f'{v:.3g}' for v in lams[bad])}: the plug-in formula breaks "
                f"down at these penalties for these data; leave them out of `lams`.",
                estimator=est,
                lams=lams[bad],
                variance=var[bad],
            )
        out["se"][est] = np.sqrt(var)
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
    lam_a = check_scalar(lam_a, "lam_a", lower=LAM_MIN, upper=1e50)
    lam_y = check_scalar(lam_y, "lam_y", lower=LAM_MIN, upper=1e50)
    gamma = check_scalar(gamma, "gamma", lower=0.0, closed="neither")
    a2, b2, theta, ve, vd, ced = _th.check_model(a2, b2, theta, var_eps, var_delta, cov_eps_delta)
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

    >>> rng = np.random.default_rng(0)
    >>> n, p = 1000, 100
    >>> X = rng.standard_normal((n, p)); al = np.full(p, p**-0.5)
    >>> e = rng.multivariate_normal([0, 0], [[1, .5], [.5, 1]], n)
    >>> v = variance_curve(X @ al + e[:, 0], X @ al + e[:, 1], X, rng=1)
    >>> bool(v.variance_opt > 1 + 0.5**2)  # above the efficiency bound var_eps var_delta + psi^2
    True
    """
    estimator = check_choice(estimator, "estimator", _th.ESTIMATORS)
    split = check_choice(split, "split", _th.SPLITS)
    if lams is None:
        lams = paper_lambda_grid()
    lams = as_array(lams, "lams", ndim=1, min_size=1, lower=LAM_MIN, upper=1e50)
    prep = _Prepared(y, a, X, split, cov, check_bool(center, "center"), rng)
    V = _curve(prep, estimator, lams)
    ok = np.isfinite(V) & (V > 0)
    if not ok.any():
        raise NumericalError(
            f"the plug-in variance is not finite and positive at any of the {lams.size} "
            f"penalties in `lams` (from {lams.min():.3g} to {lams.max():.3g}); the plug-in "
            f"formula breaks down there for these data.",
            lams=lams,
            variance=V,
        )
    if not ok.all():
        warnings.warn(
            f"variance_curve: the plug-in variance is not finite and positive at "
            f"{int((~ok).sum())} of the {lams.size} penalties in `lams` (first "
            f"{lams[~ok][0]:.3g}); they are left out of the curve and listed in "
            f"`undefined_lams`.",
            RuntimeWarning,
            stacklevel=2,
        )
    i = int(np.argmin(np.where(ok, V, np.inf)))
    lp = _lam_prediction(prep)
    vp = None
    if lp is not None:
        vp = float(_curve(prep, estimator, np.array([lp[0]]), np.array([lp[1]]))[0])
        vp = vp if np.isfinite(vp) and vp > 0 else None
    return VarianceCurve(
        lams=lams[ok],
        variance=V[ok],
        lam_opt=float(lams[i]),
        variance_opt=float(V[i]),
        lam_prediction=lp,
        variance_at_prediction=vp,
        undefined_lams=lams[~ok],
        estimator=estimator,
        split=split,
        gamma=prep.gamma,
    )


def _curve(prep, estimator, lam_a, lam_y=None):
    """``m Var`` at each penalty (pair); NaN where the theory layer refuses a penalty's
    constants (float64 cannot hold them), so one penalty out of range spares the others."""
    lam_y = lam_a if lam_y is None else lam_y
    with np.errstate(all="ignore"):
        try:
            return prep.m * np.asarray(prep.variance(estimator, lam_a, lam_y), dtype=float)
        except NumericalError:
            if lam_a.size == 1:
                return np.full(1, np.nan)
            pairs = zip(lam_a, lam_y, strict=True)
            return np.concatenate([_curve(prep, estimator, la[None], ly[None]) for la, ly in pairs])


def paper_lambda_grid() -> np.ndarray:
    """The authors' 100-point grid ``c(seq(0.05, 2, length=50)[-50], seq(2, 10, length=51))``.

    McGrath et al. 2025, the penalty grid of their simulations (``run_all.R``;
    ``docs/papers/ecc_ridge.md#the-estimator``).

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
