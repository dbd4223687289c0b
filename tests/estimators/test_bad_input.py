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

# ecc's routes for unknown covariance (note ecc_unknown_covariance.md): each new argument in a
# valid call of its own route, every bad value of every argument (the shared harness keys cases
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
