"""Generated bad input over every public callable of ``spectral`` (see ``tests/_bad_input.py``)."""

import jax
import numpy as np
from _bad_input import Case, make_tests  # loaded once by tests/conftest.py

import spectral as S
from spectral import sigmas

SIG = sigmas.tanh(1.0, 1.0)
INST = S.planted_submatrix(12, 2.0, rng=0)
Y = INST.Y
DATA = S.make_dataset(8, 8, 2.5, rng=0)

CASES = {
    "spectral.sigmas.tanh": Case(sigmas.tanh, dict(a=1.0, b=1.0)),
    "spectral.sigmas.zshape": Case(sigmas.zshape, dict(a=1.0, b=0.5, c=0.0)),
    "spectral.sigmas.step": Case(
        sigmas.step, dict(breaks=np.array([0.0, 1.0]), levels=np.array([-1.0, 0.0, 1.0]))
    ),
    "spectral.sigmas.constant": Case(sigmas.constant, dict(c=0.5)),
    "spectral.sigmas.zero": Case(sigmas.zero, {}),
    "spectral.sigmas.monotone_mlp": Case(
        sigmas.monotone_mlp,
        dict(v=np.array([1.0, 0.5]), w=np.array([1.0, 2.0]), b=np.array([0.0, 0.1])),
    ),
    "spectral.sigmas.custom": Case(sigmas.custom, dict(fn=np.tanh, upper=1.0, lower=-1.0)),
    "spectral.sigmas.extremal": Case(
        sigmas.extremal, dict(c=0.5, t0=3.0, width=5.0, prior="sparse_nnpca")
    ),
    "spectral.nonlinear_laplacian": Case(S.nonlinear_laplacian, dict(Y=Y, sigma=SIG)),
    "spectral.critical_threshold": Case(S.critical_threshold, dict(sigma=SIG)),
    "spectral.outlier": Case(S.outlier, dict(sigma=SIG, beta=2.0)),
    "spectral.bulk_edge": Case(S.bulk_edge, dict(sigma=SIG)),
    "spectral.threshold": Case(S.threshold, dict(sigma=SIG, prior="sparse_nnpca")),
    "spectral.outlier_limits": Case(S.outlier_limits, dict(sigma=SIG, beta=2.0)),
    "spectral.bulk_density": Case(S.bulk_density, dict(sigma=SIG, points=51)),
    "spectral.as_prior": Case(S.as_prior, dict(prior="planted_submatrix")),
    "spectral.goe": Case(S.goe, dict(n=10, rng=0)),
    "spectral.spiked_wigner": Case(S.spiked_wigner, dict(n=12, beta=2.0, rho=0.5, rng=0)),
    "spectral.planted_submatrix": Case(S.planted_submatrix, dict(n=12, beta=2.0, rng=0)),
    "spectral.planted_clique": Case(S.planted_clique, dict(n=12, beta=2.0, rng=0)),
    "spectral.detect": Case(S.detect, dict(Y=Y, sigma=SIG, rng=0)),
    "spectral.top_eigenpair": Case(S.top_eigenpair, dict(M=Y, rng=0)),
    "spectral.finite_sample_limits": Case(S.finite_sample_limits, dict(instance=INST, sigma=SIG)),
    "spectral.family": Case(S.family, dict(name="tanh")),
    "spectral.threshold_and_gradient": Case(
        S.threshold_and_gradient, dict(fam="tanh", params=np.array([1.0, 1.0]))
    ),
    "spectral.threshold_grid": Case(
        S.threshold_grid,
        dict(fam="tanh", axes={"a": np.array([0.5, 1.0]), "b": np.array([1.0, 2.0])}, fixed={}),
    ),
    "spectral.optimize_threshold": Case(
        S.optimize_threshold,
        heavy=True,
        kwargs=dict(fam="tanh", x0=np.array([1.0, 1.0]), maxiter=3),
    ),
    "spectral.learn_sigma": Case(
        S.learn_sigma,
        heavy=True,
        kwargs=dict(train=DATA, test=DATA, units=2, epochs=2, batch=4, key=jax.random.key(0)),
    ),
    "spectral.make_dataset": Case(S.make_dataset, dict(count=4, n=8, beta=2.5, rng=0)),
}

NOT_ENTRY_POINTS = {  # result and record types the library builds
    "spectral.sigmas.Sigma": "base class",
    "spectral.Instance": "result",
    "spectral.Detection": "result",
    "spectral.Family": "record of FAMILIES",
    "spectral.GridResult": "result",
    "spectral.OptimizationResult": "result",
    "spectral.LearnedSigma": "result",
}

(
    test_every_public_callable_has_a_valid_call,
    test_valid_call_is_finite,
    test_bad_input,
    test_bad_input_exhaustive,
) = make_tests("spectral", CASES, NOT_ENTRY_POINTS, max_examples=250)


# --- classes of fixes from the hostile fuzz (issue 50) ----------------------------------------


def test_a_sigma_whose_bounds_span_overflows_is_refused_where_it_is_built():
    import pytest

    for make, arg in (
        (lambda: sigmas.constant(1e308) + 1e308, "c"),
        (lambda: sigmas.tanh(1e308, 1.0), "a"),
        (lambda: sigmas.step(np.array([0.0]), np.array([-1e308, 1e308])), "levels"),
        (lambda: sigmas.monotone_mlp(np.array([1e308]), np.array([1e-300]), np.zeros(1)), "v"),
    ):
        with pytest.raises(ValueError, match=rf"`{arg}` must give a σ with finite bounds"):
            make()

    class Unbounded(sigmas.Sigma):  # a user subclass: checked at every entry point
        upper, lower = 1e308, -1e308

        def gap_upper(self, t):
            return np.zeros_like(np.asarray(t, dtype=float))

    for call in (
        lambda s: S.bulk_density(s, points=51),
        lambda s: S.nonlinear_laplacian(Y, s),
        lambda s: S.finite_sample_limits(INST, s),
    ):
        with pytest.raises(ValueError, match="`sigma` must give a σ with finite bounds"):
            call(Unbounded())


def test_nonlinear_laplacian_refuses_a_sigma_with_non_finite_values():
    import pytest

    class Bad(sigmas.Sigma):
        upper, lower = 1.0, 0.0

        def gap_upper(self, t):
            return np.full(np.shape(t), np.nan)

    with pytest.raises(ValueError, match="`sigma` must map the 12 row sums"):
        S.nonlinear_laplacian(Y, Bad())


def test_finite_sample_limits_checks_the_instance_it_is_given():
    import pytest

    bad = (
        (S.Instance(Y * np.nan, INST.x, INST.beta, "x"), "`instance.Y` must be finite"),
        (S.Instance(Y, INST.x[:-1], INST.beta, "x"), "`instance.x` must have shape"),
        (S.Instance(Y, 2 * INST.x, INST.beta, "x"), "`instance.x` must be a unit vector"),
        (S.Instance(Y, INST.x, np.inf, "x"), "`instance.beta` must be finite"),
    )
    for inst, msg in bad:
        with pytest.raises(ValueError, match=msg):
            S.finite_sample_limits(inst, SIG)


def test_family_names_and_grid_arguments_are_checked():
    import pytest

    assert S.family("step16").size == 32
    for name in ("step02", "step999999"):
        with pytest.raises(ValueError, match=r"`name` must be a family name.*K in 1\.\.256"):
            S.family(name)
    axes = {"a": np.array([0.5, 1.0]), "b": np.array([1.0, 2.0])}
    with pytest.raises(ValueError, match="`fixed` must not repeat a name of `axes`"):
        S.threshold_grid("tanh", axes, {"a": 1.0})
    with pytest.raises(ValueError, match="`axes` must hold at least 1 element"):
        S.threshold_grid("tanh", {"a": np.array([1.0]), "b": np.array([])}, {})
    with pytest.raises(ValueError, match="`axes` gives an invalid σ: `a` must lie in"):
        S.threshold_grid("tanh", {"a": np.array([-1.0, 1.0]), "b": np.array([1.0])}, {})
    with pytest.raises(TypeError, match="`fixed` must be a real number"):
        S.threshold_grid("zshape", axes, {"c": "0"})


def test_optimize_threshold_refuses_a_start_outside_the_family():
    import pytest

    with pytest.raises(ValueError, match=r"`x0`\[1\] must lie in the family's domain"):
        S.optimize_threshold("tanh", [1.0, -0.5], maxiter=2)
    with pytest.raises(ValueError, match="`initial_simplex` applies to method='nelder-mead'"):
        S.optimize_threshold("tanh", [1.0, 0.5], maxiter=2, initial_simplex=np.eye(3, 2))
