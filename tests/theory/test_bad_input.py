"""Generated bad input over every public callable of ``theory`` (see ``tests/_bad_input.py``)."""

import numpy as np
from _bad_input import Case, case_files, make_tests  # loaded once by tests/conftest.py

import spectral.sigmas as sig
import theory as T
from theory import ecc, fp4, sgd
from theory import free_convolution as fc
from theory import kv_cache as kv
from theory import marchenko_pastur as mp
from theory import nonlinear_laplacian as nl
from theory import rank_collapse as rc
from theory import transformer as tr

_g = np.random.default_rng(0)
X3 = _g.standard_normal((4, 3, 2))
Y4 = np.array([1.0, -1.0, 1.0, -1.0])
M2 = _g.standard_normal((2, 2))
V2 = np.array([0.6, 0.8])
F3 = np.diag([2.0, 1.0, 0.5])
Q32 = _g.standard_normal((3, 2)) * 0.1
INTEG = ecc.SpectralIntegrator(0.5, 1.0, 1.0)
CONST = ecc.bias_constants(INTEG)
ETA = nl.EtaLaw.point(1.0)
SIGMA = sig.tanh(1.0, 1.0)
LAW = nl.null_law(SIGMA)
LLAMA = kv.LlamaConfig(4, 8, 2, 16, 128)
HYB = kv.HybridConfig(LLAMA, num_mla=2, kv_rank=16, rope_dim=8, d_state=16)
VC = dict(a2=1.0, b2=1.0, theta=0.5, var_eps=1.0, var_delta=1.0, cov_eps_delta=0.2)

CASES = {
    "theory.bbp_top_eigenvalue": Case(T.bbp_top_eigenvalue, dict(beta=2.0)),
    "theory.bbp_overlap": Case(T.bbp_overlap, dict(beta=2.0)),
    "theory.bbp.tw_edge_shift": Case(T.bbp.tw_edge_shift, dict(n=100)),
    "theory.gaussian_expectation": Case(T.gaussian_expectation, dict(f=np.tanh, s=1.0)),
    "theory.gauss_hermite_expectation": Case(T.gauss_hermite_expectation, dict(f=np.cos, s=0.5)),
    "theory.gaussian.gaussian_nodes": Case(T.gaussian.gaussian_nodes, dict(s=1.0)),
    "theory.gaussian.piece_rule": Case(T.gaussian.piece_rule, dict(cuts=np.arange(-3.0, 3.5, 1.0))),
    "theory.find_root": Case(T.find_root, dict(f=np.sin, lo=2.0, hi=4.0)),
    "theory.semicircle_pdf": Case(T.semicircle_pdf, dict(x=np.array([0.3, -1.0, 3.0]))),
    "theory.semicircle_cdf": Case(T.semicircle_cdf, dict(x=np.array([0.3, -1.0, 3.0]))),
    "theory.semicircle_stieltjes": Case(T.semicircle_stieltjes, dict(z=3.0)),
    "theory.semicircle_edge": Case(T.semicircle_edge, dict(scale=2.0)),
    "theory.ecc.SpectralIntegrator": Case(
        ecc.SpectralIntegrator, dict(gamma=0.5, lam_a=1.0, lam_y=1.0)
    ),
    "theory.ecc.bias_constants": Case(ecc.bias_constants, dict(integ=INTEG)),
    "theory.ecc.naive_limit": Case(
        ecc.naive_limit, dict(estimator="dr", split=2, c=CONST, theta=1.0, psi=1.0)
    ),
    "theory.ecc.debias": Case(
        ecc.debias, dict(estimator="dr", split=2, naive=1.0, theta_hat=1.0, c=CONST)
    ),
    "theory.ecc.debias_factors": Case(ecc.debias_factors, dict(estimator="nr", split=3, c=CONST)),
    "theory.ecc.variance_components": Case(
        ecc.variance_components, dict(estimator="dr", split=2, integ=INTEG, **VC)
    ),
    "theory.ecc.asymptotic_variance": Case(
        ecc.asymptotic_variance,
        dict(estimator="dr", split=2, lam_a=1.0, lam_y=1.0, gamma=0.5, **VC),
    ),
    "theory.ecc.prediction_risk": Case(
        ecc.prediction_risk, dict(integ=INTEG, which="a", signal2=1.0, noise_var=1.0)
    ),
    "theory.ecc.prediction_optimal_lambda": Case(
        ecc.prediction_optimal_lambda, dict(gamma=0.5, signal2=1.0, noise_var=1.0)
    ),
    "theory.ecc.check_model": Case(ecc.check_model, dict(VC)),
    "theory.fp4.gradient_noise_ratio": Case(
        fp4.gradient_noise_ratio, dict(grad_norm=1.0, noise_norm=0.5)
    ),
    "theory.fp4.critical_sigma": Case(fp4.critical_sigma, dict(grad_norm=1.0, d=100)),
    "theory.fp4.optimal_step": Case(fp4.optimal_step, dict(G=1.0, sigma=0.1, d=100, lam=1.0)),
    "theory.fp4.expected_loss_change": Case(
        fp4.expected_loss_change, dict(G=1.0, sigma=0.1, d=100, lam=1.0, eta=0.01)
    ),
    "theory.fp4.optimal_efficiency": Case(fp4.optimal_efficiency, dict(rho=0.5)),
    "theory.fp4.fixed_step_efficiency": Case(fp4.fixed_step_efficiency, dict(rho=0.5)),
    "theory.fp4.two_point_variance": Case(fp4.two_point_variance, dict(y=0.3, lo=0.0, hi=1.0)),
    "theory.fp4.update_gemm_noise": Case(
        fp4.update_gemm_noise, dict(delta=M2, a=M2, v_delta=M2**2, v_a=M2**2)
    ),
    "theory.fp4.threshold_derivation": Case(fp4.threshold_derivation, {}, heavy=True),  # sympy
    "theory.fp4.nvfp4_sr_variance": Case(
        fp4.nvfp4_sr_variance, dict(x=_g.standard_normal(32), block=16)
    ),
    "theory.fp4.noisy_gd_sq_error": Case(
        fp4.noisy_gd_sq_error, dict(e0_sq=1.0, noise_sq=np.full(5, 0.1), eta=0.1)
    ),
    "theory.free_convolution.edge_point": Case(fc.edge_point, dict(law=LAW)),
    "theory.free_convolution.right_edge": Case(fc.right_edge, dict(law=LAW)),
    "theory.free_convolution.left_edge": Case(fc.left_edge, dict(law=LAW)),
    "theory.free_convolution.free_convolution_density": Case(
        fc.free_convolution_density, dict(law=LAW, points=51)
    ),
    "theory.marchenko_pastur.edges": Case(mp.edges, dict(gamma=0.5)),
    "theory.marchenko_pastur.atom": Case(mp.atom, dict(gamma=2.0)),
    "theory.marchenko_pastur.density": Case(
        mp.density, dict(x=np.array([0.5, 1.0, 9.0]), gamma=0.5)
    ),
    "theory.marchenko_pastur.moment": Case(mp.moment, dict(k=3, gamma=0.5)),
    "theory.marchenko_pastur.stieltjes": Case(mp.stieltjes, dict(lam=1.0, gamma=0.5)),
    "theory.marchenko_pastur.resolvent_moment": Case(
        mp.resolvent_moment, dict(gamma=0.5, lams=[1.0, 2.0], power=1)
    ),
    "theory.marchenko_pastur.resolvent_table": Case(
        mp.resolvent_table, dict(gamma=0.5, lam_a=1.0, lam_y=2.0)
    ),
    "theory.marchenko_pastur.ridge_df": Case(mp.ridge_df, dict(lam=1.0, gamma=0.5)),
    "theory.marchenko_pastur.integrate": Case(mp.integrate, dict(f=np.sqrt, gamma=0.5)),
    "theory.marchenko_pastur.empirical_resolvent_moment": Case(
        mp.empirical_resolvent_moment,
        dict(eigenvalues=np.array([0.5, 1.0, 2.0]), lams=[1.0, 2.0], power=1),
    ),
    "theory.nonlinear_laplacian.EtaLaw": Case(
        nl.EtaLaw, dict(nodes=np.array([1.0, 2.0]), probs=np.array([0.5, 0.5]))
    ),
    "theory.nonlinear_laplacian.null_law": Case(nl.null_law, dict(sigma=SIGMA)),
    "theory.nonlinear_laplacian.signal_expectations": Case(
        nl.signal_expectations, dict(sigma=SIGMA, beta=2.0, eta=ETA)
    ),
    "theory.nonlinear_laplacian.theta": Case(nl.theta, dict(sigma=SIGMA, beta=2.0, eta=ETA)),
    "theory.nonlinear_laplacian.critical_threshold": Case(
        nl.critical_threshold, dict(sigma=SIGMA, eta=ETA)
    ),
    "theory.nonlinear_laplacian.critical_threshold_nested": Case(
        nl.critical_threshold_nested, dict(sigma=SIGMA, eta=ETA)
    ),
    "theory.nonlinear_laplacian.outlier": Case(nl.outlier, dict(sigma=SIGMA, beta=2.0, eta=ETA)),
    "theory.nonlinear_laplacian.bulk_edge": Case(nl.bulk_edge, dict(sigma=SIGMA)),
    "theory.nonlinear_laplacian.small_sigma_slope": Case(
        nl.small_sigma_slope, dict(s=SIGMA, eta=ETA)
    ),
    "theory.sgd.check_stepsize": Case(sgd.check_stepsize, dict(eta=0.5, beta=1.0)),
    "theory.sgd.bias_term": Case(sgd.bias_term, dict(T=10, eta=0.5, beta=1.0, dist2=1.0)),
    "theory.sgd.noise_term": Case(sgd.noise_term, dict(T=10, eta=0.5, beta=1.0, sigma2_star=0.1)),
    "theory.sgd.last_iterate_bound": Case(
        sgd.last_iterate_bound, dict(T=10, eta=0.5, beta=1.0, dist2=1.0, sigma2_star=0.1)
    ),
    "theory.sgd.last_iterate_rate_exponent": Case(
        sgd.last_iterate_rate_exponent, dict(eta=0.5, beta=1.0)
    ),
    "theory.sgd.noiseless_bound": Case(sgd.noiseless_bound, dict(T=10, beta=1.0, dist2=1.0)),
    "theory.sgd.tuned_stepsize": Case(
        sgd.tuned_stepsize, dict(T=10, beta=1.0, dist2=1.0, sigma2_star=0.1)
    ),
    "theory.sgd.tuned_rate": Case(sgd.tuned_rate, dict(T=10, beta=1.0, dist2=1.0, sigma2_star=0.1)),
    "theory.sgd.optimal_stepsize": Case(
        sgd.optimal_stepsize, dict(T=10, beta=1.0, dist2=1.0, sigma2_star=0.1)
    ),
    "theory.sgd.continual_loss_bound": Case(sgd.continual_loss_bound, dict(k=5)),
    "theory.sgd.evron2025_rate": Case(sgd.evron2025_rate, dict(k=5)),
    "theory.sgd.varre2021_rate": Case(sgd.varre2021_rate, dict(T=10, eta=0.5, beta=1.0, dist2=1.0)),
    "theory.sgd.averaged_iterate_bound": Case(
        sgd.averaged_iterate_bound, dict(T=10, eta=0.5, beta=1.0, dist2=1.0)
    ),
    "theory.sgd.fejer_decrease": Case(sgd.fejer_decrease, dict(eta=0.5, beta=1.0, grad_norm2=1.0)),
    "theory.sgd.quadratic_gd_loss_ratio": Case(
        sgd.quadratic_gd_loss_ratio, dict(T=10, eta=0.5, beta=1.0)
    ),
    "theory.sgd.rare_curvature_risk": Case(
        sgd.rare_curvature_risk, dict(T=10, eta=0.5, beta=1.0, p=0.1, w0=1.0)
    ),
    "theory.sgd.rare_curvature_worst_p": Case(
        sgd.rare_curvature_worst_p, dict(T=10, eta=0.5, beta=1.0)
    ),
    "theory.sgd.ar1_risk": Case(sgd.ar1_risk, dict(T=10, eta=0.5, beta=1.0, s2=0.1, w0=1.0)),
    "theory.sgd.ar1_floor": Case(sgd.ar1_floor, dict(eta=0.5, beta=1.0, sigma2_star=0.1)),
    "theory.sgd.commuting_risk": Case(
        sgd.commuting_risk,
        dict(T=10, eta=0.5, beta=1.0, p=np.array([0.5, 0.5]), w0=np.array([1.0, 1.0])),
    ),
    "theory.transformer.condensation_direction": Case(tr.condensation_direction, dict(X=X3, y=Y4)),
    "theory.transformer.time_rescaling": Case(tr.time_rescaling, dict(X=X3, y=Y4, eps=0.1)),
    "theory.transformer.effective_vector_field": Case(
        tr.effective_vector_field, dict(W_V=M2, W1=M2, W2=V2, v=V2)
    ),
    "theory.transformer.cubic_energy": Case(tr.cubic_energy, dict(u=V2, W1=M2, W2=V2)),
    "theory.transformer.energy_rate": Case(tr.energy_rate, dict(u=V2, W1=M2, W2=V2)),
    "theory.transformer.energy_rate_lower_bound": Case(tr.energy_rate_lower_bound, dict(E=0.5)),
    "theory.transformer.conserved_quantities": Case(
        tr.conserved_quantities, dict(u=V2, W1=M2, W2=V2)
    ),
    "theory.transformer.nondegeneracy": Case(tr.nondegeneracy, dict(u=V2, W1=M2, W2=V2)),
    "theory.transformer.blowup_time_bound": Case(tr.blowup_time_bound, dict(E0=0.5)),
    "theory.transformer.energy_lower_envelope": Case(
        tr.energy_lower_envelope, dict(E0=0.5, t=0.1), allow_inf=True
    ),
    "theory.transformer.column_alignment": Case(tr.column_alignment, dict(W=M2, v=V2)),
    "theory.transformer.condition_fractions": Case(
        tr.condition_fractions, dict(u=V2, W1=M2, W2=V2)
    ),
    "theory.transformer.key_query_matrix": Case(
        tr.key_query_matrix, dict(X=X3, y=Y4, W_V=M2, W1=M2, W2=V2)
    ),
    "theory.transformer.key_query_closed_form": Case(
        tr.key_query_closed_form, dict(F=F3, W_Q0=Q32, W_K0=Q32, t=0.5)
    ),
    "theory.transformer.key_query_limit": Case(tr.key_query_limit, dict(F=F3, W_Q0=Q32, W_K0=Q32)),
    "theory.transformer.check_key_query": Case(tr.check_key_query, dict(F=F3, W_Q0=Q32, W_K0=Q32)),
    "theory.transformer.top_multiplicity": Case(tr.top_multiplicity, dict(F=F3)),
    "theory.transformer.stable_rank": Case(tr.stable_rank, dict(W=M2)),
    "theory.transformer.effective_rank": Case(tr.effective_rank, dict(W=M2)),
    "theory.transformer.normalised_singular_values": Case(
        tr.normalised_singular_values, dict(W=M2)
    ),
    "theory.kv_cache.LlamaConfig": Case(
        kv.LlamaConfig,
        dict(num_layers=4, num_heads=8, num_kv_heads=2, head_dim=16, hidden_size=128),
    ),
    "theory.kv_cache.HybridConfig": Case(
        kv.HybridConfig, dict(base=LLAMA, num_mla=2, kv_rank=16, rope_dim=8, d_state=16)
    ),
    "theory.kv_cache.gqa_cache_per_token": Case(kv.gqa_cache_per_token, dict(cfg=LLAMA)),
    "theory.kv_cache.mla_cache_per_token": Case(kv.mla_cache_per_token, dict(cfg=HYB)),
    "theory.kv_cache.mamba2_state": Case(kv.mamba2_state, dict(cfg=HYB)),
    "theory.kv_cache.kv_fraction": Case(kv.kv_fraction, dict(cfg=HYB)),
    "theory.kv_cache.state_fraction": Case(kv.state_fraction, dict(cfg=HYB, context=4096)),
    "theory.kv_cache.break_even_context": Case(
        kv.break_even_context,
        dict(cfg=HYB),
        allow_inf=True,  # inf: no MLA layer
    ),
    "theory.rank_collapse.relative_residual": Case(rc.relative_residual, dict(X=M2)),
    "theory.rank_collapse.composite_residual": Case(rc.composite_residual, dict(X=M2)),
    "theory.rank_collapse.dong_bound_log10": Case(
        rc.dong_bound_log10, dict(res0=0.5, depth=3, c=2.0)
    ),
    "theory.rank_collapse.hopfield_bound_log10": Case(
        rc.hopfield_bound_log10, dict(res0=0.5, depth=3, alpha_prime=0.5, c1=1.0, c2=1.0)
    ),
    "theory.rank_collapse.collapse_recursion_log10": Case(
        rc.collapse_recursion_log10, dict(l1=0.5, l2=0.2, depth=3, alpha_prime=0.5)
    ),
}

NOT_ENTRY_POINTS = {  # result types the library builds; users read them, never construct them
    "theory.RootResult": "result",
    "theory.fp4.ThresholdDerivation": "result",
    "theory.free_convolution.AtomicLaw": "built by null_law",
    "theory.nonlinear_laplacian.ThresholdResult": "result",
    "theory.nonlinear_laplacian.OutlierResult": "result",
    "theory.free_convolution.FreeConvolutionDensity": "result",
}


# each paper's valid calls may live beside this module, in _cases_<paper>.py
_PAPER_CASES, _PAPER_NOT_ENTRY = case_files(__file__)
CASES |= _PAPER_CASES
NOT_ENTRY_POINTS |= _PAPER_NOT_ENTRY

(
    test_every_public_callable_has_a_valid_call,
    test_valid_call_is_finite,
    test_bad_input,
    test_bad_input_exhaustive,
) = make_tests("theory", CASES, NOT_ENTRY_POINTS, max_examples=250)


# --- classes of fixes from the hostile fuzz (issue 20) ----------------------------------------


def test_a_callable_that_returns_no_numbers_is_named_and_its_own_errors_pass_through():
    import pytest
    import scipy.stats

    from theory.roots import find_root

    bad = (lambda x: "x", lambda x: None, scipy.stats.norm)  # norm(x) is a frozen distribution
    for f in bad:
        for call in (
            lambda g: T.gaussian_expectation(g, 0.5),
            lambda g: T.gauss_hermite_expectation(g, 0.5),
            lambda g: find_root(g, 2.0, 4.0),
            lambda g: mp.integrate(g, 0.5),
        ):
            with pytest.raises(TypeError, match=r"`f\(x\)` must"):
                call(f)
    with pytest.raises(TypeError, match=r"`fn\(x\)` must"):
        sig.custom(lambda t: "x", upper=1.0, lower=-1.0)

    def boom(x):
        raise ZeroDivisionError("inside f")

    with pytest.raises(ZeroDivisionError, match="inside f"):  # the caller's error, unchanged
        T.gaussian_expectation(boom, 0.5)


def test_overflow_at_the_edge_of_a_range_is_a_numerical_error_not_inf():
    import pytest

    from _core.validation import NumericalError
    from theory import aegisguard as ag

    tiny = 5e-324
    with pytest.raises(NumericalError, match="bound"):
        sgd.last_iterate_bound(10, tiny, 1.0, 1.0, 1.0)
    with pytest.raises(NumericalError, match="latency"):
        ag.serial_latency(
            ag.adapter_cost(16, 32, 4),
            gpu_seconds=1.0,
            transition_seconds=1e-3,
            bandwidth=tiny,
            tee_flops=1e9,
        )
    with pytest.raises(NumericalError, match="overflows"):
        T.semicircle_stieltjes(3.0, scale=tiny)
    # the log of a product that underflows is the sum of finite logs
    b = rc.hopfield_bound_log10(0.5, 3, 0.5, tiny, tiny)
    want = max(
        (3**m - 1) / 2 * (np.log10(tiny) + np.log10(0.5))
        + 3**m * (3 - m) * (np.log10(tiny) + np.log10(0.5))
        + 3**m * np.log10(0.5)
        for m in range(4)
    )
    assert b == pytest.approx(want, rel=1e-12)


def test_aspect_ratio_below_float64_accuracy_is_refused_and_above_it_is_continuous():
    import pytest

    with pytest.raises(ValueError, match=r"`gamma` must lie in \[1e-10"):
        mp.resolvent_table(1e-15, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"`gamma` must lie in \[1e-10"):
        ecc.asymptotic_variance("dr", 2, 1.0, 1.0, 1e-15, **VC)
    # at gamma = 1e-15 the closed form had drifted by 10%; at the floor it matches gamma = 1e-8
    v_floor = ecc.asymptotic_variance("dr", 2, 1.0, 1.0, mp.GAMMA_MIN, **VC)
    v_small = ecc.asymptotic_variance("dr", 2, 1.0, 1.0, 1e-8, **VC)
    assert abs(v_floor - v_small) <= 1e-6 * v_small


def test_scalars_keys_names_and_ragged_input():
    import jax
    import pytest

    from _core.validation import check_int, check_scalar, to_array

    z = check_scalar(-0.0, "x", lower=0.0)
    assert z == 0.0 and np.copysign(1.0, z) == 1.0  # a signed zero would flip uniform(-z, z)
    for check in (check_int, check_scalar):  # a JAX key where a seed is due names the argument
        with pytest.raises(TypeError, match="`seed` must be"):
            check(jax.random.key(0), "seed")
    with pytest.raises(TypeError, match="`v` must be array-like"):
        to_array([[1.0], [1.0, 2.0]], "v")
    with pytest.raises(ValueError, match=r"`eta` must satisfy 0 < eta <= 1/beta .*`beta`"):
        sgd.varre2021_rate(10, 0.5, 1e30, 1.0)
    with pytest.raises(TypeError, match="`name` must be str"):
        nl.EtaLaw(np.array([1.0]), np.array([1.0]), name=3)  # pyright: ignore[reportArgumentType]


def test_fp4_two_point_variance_names_y_and_the_value():
    import pytest

    from theory import fp4

    with pytest.raises(
        ValueError, match=r"`y` must satisfy lo <= y <= hi; got y = -1 with \[0, 1\]"
    ):
        fp4.two_point_variance(np.array([0.5, -1.0]), 0.0, 1.0)


def test_sgd_horizons_and_weights_name_the_value():
    import pytest

    with pytest.raises(ValueError, match=r"`T` must lie in \[0, inf\]; got -1"):
        sgd.ar1_risk(-1, 0.5, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"`T` must lie in \[0, inf\]; got -2 among"):
        sgd.rare_curvature_risk(np.array([1.0, -2.0]), 0.5, 1.0, 0.5, 1.0)
    with pytest.raises(ValueError, match="`p` must be a probability.*got min 0.5 and sum 1.1"):
        sgd.commuting_risk(1, 0.5, 1.0, [0.5, 0.6], [1.0, 1.0])
