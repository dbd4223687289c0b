"""Generated bad input over every public callable of ``estimators`` (``tests/_bad_input.py``)."""

import numpy as np
import pytest
from _bad_input import Case, bad_values, check_outcome, make_tests  # loaded by tests/conftest.py

import estimators as E

_g = np.random.default_rng(0)
N, P = 60, 6
X = _g.standard_normal((N, P))
A = X @ np.full(P, 0.3) + _g.standard_normal(N)
Y = X @ np.full(P, 0.2) + 0.5 * A + _g.standard_normal(N)
DATA = dict(y=Y, a=A, X=X)
MODEL = dict(a2=1.0, b2=1.0, theta=0.5, var_eps=1.0, var_delta=1.0, cov_eps_delta=0.2)

CASES = {
    "estimators.asymptotic_variance": Case(
        E.asymptotic_variance,
        dict(estimator="dr", split=2, lam_a=0.5, lam_y=0.5, gamma=0.5, **MODEL),
    ),
    "estimators.ecc": Case(E.ecc, dict(**DATA, lam=0.5, rng=0)),
    "estimators.ecc_path": Case(E.ecc_path, dict(**DATA, lams=np.array([0.3, 1.0]), rng=0)),
    "estimators.ecc_test": Case(E.ecc_test, dict(**DATA, lam=0.5, rng=0)),
    "estimators.paper_lambda_grid": Case(E.paper_lambda_grid, {}),
    "estimators.plugin_moments": Case(E.plugin_moments, dict(DATA)),
    "estimators.unchecked_ridge_estimate": Case(
        E.unchecked_ridge_estimate, dict(**DATA, lam=0.5, rng=0)
    ),
    "estimators.variance_curve": Case(
        E.variance_curve, dict(**DATA, lams=np.array([0.3, 1.0]), rng=0)
    ),
}

NOT_ENTRY_POINTS = {
    "estimators.CITestResult": "result",
    "estimators.ECCResult": "result",
    "estimators.VarianceCurve": "result",
}

(
    test_every_public_callable_has_a_valid_call,
    test_valid_call_is_finite,
    test_bad_input,
    test_bad_input_exhaustive,
) = make_tests("estimators", CASES, NOT_ENTRY_POINTS, max_examples=250)

# ecc's routes for unknown covariance (docs/papers/ecc_unknown_covariance.md): each new argument in
# a valid call of its own route, every bad value of every argument (the shared harness keys cases
# by import path, so these variants of one callable are run here)
XU = _g.standard_normal((2 * P + 4, P))
ROUTES = {
    "generic": Case(E.ecc, dict(**DATA, assume="generic", lam=0.5)),
    "unlabeled_ridge": Case(E.ecc, dict(**DATA, X_unlabeled=XU, lam=0.5, rng=0)),
    "ols_loo": Case(E.ecc, dict(**DATA, estimator="ols_loo")),
}


@pytest.mark.parametrize(
    ("label", "arg"), [(k, a) for k, c in ROUTES.items() for a in c.target_names()]
)
def test_bad_input_routes(label, arg):
    case = ROUTES[label]
    for value in bad_values(arg, case.value(arg)):
        check_outcome(case, arg, value, f"estimators.ecc[{label}]")


# --- classes of fixes from the hostile fuzz (issue 20) ----------------------------------------


def test_flags_and_rng_are_checked_on_every_entry_point_and_route():
    calls = (
        lambda c: E.plugin_moments(Y, A, X, center=c),
        lambda c: E.ecc_path(Y, A, X, [0.5], center=c),
        lambda c: E.variance_curve(Y, A, X, lams=[0.5], center=c),
        lambda c: E.ecc(Y, A, X, estimator="ols", center=c),
    )
    for call in calls:
        with pytest.raises(TypeError, match=r"`center` must be a bool"):
            call("no")
    # routes that never draw still refuse an rng no other route would take
    for call in (
        lambda r: E.ecc(Y, A, X, estimator="ols_loo", rng=r),
        lambda r: E.ecc(Y, A, X, assume="generic", lam=0.5, rng=r),
    ):
        with pytest.raises(TypeError, match=r"`rng` must be None, a non-negative int"):
            call("seed")


_g1 = np.random.default_rng(1)
XW = _g1.standard_normal((40, 38))  # gamma ~ 2: the plug-in cancels at large penalties
AW = XW @ np.full(38, 0.3) + _g1.standard_normal(40)
YW = XW @ np.full(38, 0.2) + 0.5 * AW + _g1.standard_normal(40)


def test_variance_curve_leaves_out_penalties_where_the_plug_in_breaks_down():
    from _core.validation import NumericalError

    lams = np.array([0.3, 1.0, 1e5, 1e12])
    with pytest.warns(RuntimeWarning, match="2 of the 4 penalties"):
        curve = E.variance_curve(YW, AW, XW, lams=lams, rng=0)
    np.testing.assert_array_equal(curve.lams, lams[:2])
    np.testing.assert_array_equal(curve.undefined_lams, lams[2:])
    assert np.all(np.isfinite(curve.variance)) and np.all(curve.variance > 0)
    assert curve.lam_opt in curve.lams and curve.variance_opt == curve.variance.min()
    assert "undefined at 2 penalties" in curve.summary()
    with pytest.raises(NumericalError, match="not finite and positive at any of the 1"):
        E.variance_curve(YW, AW, XW, lams=[1e12], rng=0)


@pytest.mark.parametrize("lam,split", [(1e5, 2), (1e12, 3)])
def test_a_penalty_where_the_plug_in_breaks_down_is_a_numerical_error(lam, split):
    from _core.validation import NumericalError

    with pytest.raises(NumericalError, match=r"lam") as info:
        E.ecc(YW, AW, XW, lam=lam, split=split, rng=0)
    assert info.value.diagnostics  # the penalty and what broke, for the caller


def test_ecc_path_names_the_penalties_where_the_plug_in_breaks_down():
    from _core.validation import NumericalError

    r = E.ecc_path(YW, AW, XW, [0.3, 1.0], rng=0)
    assert all(np.all(np.isfinite(v)) and np.all(v > 0) for v in r["se"].values())
    with pytest.raises(NumericalError, match="lam = 1e\\+05") as info:
        E.ecc_path(YW, AW, XW, [0.3, 1e5], rng=0)
    np.testing.assert_array_equal(info.value.diagnostics["lams"], [1e5])


def test_data_at_the_float_limits_is_a_numerical_error_not_a_crash():
    from _core.validation import NumericalError

    with pytest.raises(NumericalError, match="spectrum of `X`"):
        E.ecc(Y, A, X * 1e-300, assume="generic", lam=0.5)
    with pytest.raises(NumericalError, match="plug-in variance"):
        E.ecc_test(Y * 1e-300, A, X, lam=0.5, rng=0)  # pyright: ignore[reportArgumentType]


# --- classes of fixes from the hostile fuzz (issue 50) ----------------------------------------


def test_a_constant_column_of_x_unlabeled_is_refused():
    XUc = XU.copy()
    XUc[:, 2] = 0.1
    for kw in (dict(estimator="hoif"), dict(estimator="dr", lam=0.5, rng=0)):
        with pytest.raises(ValueError, match=r"`X_unlabeled` must not have a constant column"):
            E.ecc(Y, A, X, X_unlabeled=XUc, **kw)
        with pytest.raises(ValueError, match=r"where `X` varies; column\(s\) \[2\]"):
            E.ecc(Y, A, X, X_unlabeled=XUc, center=False, **kw)


def test_a_constant_column_of_x_contradicts_the_stated_covariance():
    with pytest.raises(ValueError, match=r"`X` must not have a constant column with center=True"):
        E.ecc(Y, A, np.c_[X[:, :-1], np.ones(N)], lam=0.5, rng=0)


def test_ols_errors_name_the_estimator_asked_for_and_variances_that_underflow_are_refused():
    from _core.validation import NumericalError

    with pytest.raises(ValueError, match="full column rank for estimator='ols_loo'"):
        E.ecc(Y, A, np.c_[X, X[:, :1]], estimator="ols_loo")
    with pytest.raises(ValueError, match="fewer columns than rows .* got n=5"):
        E.ecc(Y[:5], A[:5], X[:5], estimator="ols_loo")
    for est in ("ols", "ols_loo"):
        with pytest.raises(NumericalError, match=f"variance of the {est} estimate is 0"):
            E.ecc(Y, A * 1e-200, X, estimator=est)
