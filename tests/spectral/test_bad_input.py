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
