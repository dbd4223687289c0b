"""Generated bad input over every public callable of ``estimators`` (``tests/_bad_input.py``)."""

import numpy as np
from _bad_input import Case, make_tests  # loaded once by tests/conftest.py

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
