"""Generated bad input over every public callable of ``dynamics`` (see ``tests/_bad_input.py``)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _bad_input import Case, case_files, make_tests  # loaded once by tests/conftest.py

import nn
from dynamics import distill as D
from dynamics import fp4_training as F
from dynamics import koopman as K
from dynamics import mri as MR
from dynamics import sgd as S
from dynamics import transformer as T
from nn.hybrid import HybridLM, hybrid_from_teacher

_g = np.random.default_rng(0)
KEY = jax.random.key(0)
P3 = np.array([[0.8, 0.2, 0.0], [0.1, 0.8, 0.1], [0.0, 0.3, 0.7]])
CHAIN = K.FiniteChain(P3)
F3 = _g.standard_normal((3, 2))
G3 = _g.standard_normal((3, 2))
FX, GY, FY = _g.standard_normal((3, 40, 2))
M2 = np.eye(2) + 0.1
TRAJ = _g.standard_normal((30, 2))
A = _g.standard_normal((6, 3))
B = A @ np.ones(3)
INST = S.least_squares(A, B)
TASKS = S.random_continual_tasks(3, 4, 2, rng=0)
XS, YS = S.separable_data(8, 3, rng=0)
XT, YT = T.gaussian_task(6, 3, 4, labels="bilinear", rng=0)
SMALL = T.SmallInitTransformer.init(4, 0.3, key=jax.random.key(1))
V4 = np.array([0.5, 0.5, 0.5, 0.5])
W4 = _g.standard_normal((4, 4)) * 0.3
LIN = nn.Linear(4, 1, False, init=jax.nn.initializers.zeros, key=KEY)
XR = jax.random.normal(KEY, (16, 4))
BATCH = (XR, XR @ jnp.ones(4))
SGD = optax.sgd(0.1)
MASK = np.asarray(MR.cartesian_mask((8, 12), 2, 0.2, key=KEY))
IMG = _g.standard_normal((8, 12)) + 1j * _g.standard_normal((8, 12))
KSP = MASK * (_g.standard_normal((8, 12)) + 1j * _g.standard_normal((8, 12)))
COILS = MR.coil_maps(2, (8, 12))
KSP2 = MASK * (_g.standard_normal((2, 8, 12)) + 1j * _g.standard_normal((2, 8, 12)))
PAT = MR.shepp_logan_3d()
ELL = np.asarray(MR.slice_ellipses(PAT, 0.0))
CORPUS = D.Order2Markov.random(0, 5)
TEACHER = HybridLM(5, 8, 2, 1, 4, ("gqa",), mlp_hidden=8, rope_theta=100.0, key=KEY)
STUDENT = hybrid_from_teacher(TEACHER, ("mla",), kv_rank=4, rope_dim=2, key=KEY)
TOKS = np.asarray(CORPUS.sample(2, 6, key=KEY))
LM = dict(steps=2, batch=2, length=6, key=KEY)


def _loss(m, batch, *, key=None):
    X, y = batch
    return 0.5 * jnp.mean((m(X, key=key)[:, 0] - y) ** 2)


def _batches(t):
    return BATCH


CASES = {
    "dynamics.fp4_training.detect_crossing": Case(
        F.detect_crossing, dict(ratios=np.r_[np.full(10, 5.0), np.full(10, 1.0)], window=3)
    ),
    "dynamics.fp4_training.gradient_pair": Case(
        F.gradient_pair, heavy=True, kwargs=dict(model=LIN, loss_fn=_loss, batch=BATCH, key=KEY)
    ),
    "dynamics.fp4_training.train_fp4": Case(
        F.train_fp4,
        heavy=True,
        kwargs=dict(
            model=LIN,
            loss_fn=_loss,
            batches=_batches,
            optimizer=SGD,
            steps=3,
            key=KEY,
            progress=False,
        ),
        allow_inf=True,
    ),
    "dynamics.koopman.FiniteChain": Case(K.FiniteChain, dict(P=P3)),
    "dynamics.koopman.OrnsteinUhlenbeck": Case(K.OrnsteinUhlenbeck, {}),
    "dynamics.koopman.NoisyLogisticMap": Case(K.NoisyLogisticMap, dict(N=4, n_quad=100)),
    "dynamics.koopman.PrinzLangevin": Case(K.PrinzLangevin, dict(dt=1e-3, n_grid=200)),
    "dynamics.koopman.Lorenz63": Case(K.Lorenz63, {}),
    "dynamics.koopman.make_pairs": Case(K.make_pairs, dict(trajectory=TRAJ, lag=2)),
    "dynamics.koopman.nesting_masks": Case(K.nesting_masks, dict(k=3)),
    "dynamics.koopman.lora_from_moments": Case(K.lora_from_moments, dict(Mf=M2, Mg=M2, T=M2)),
    "dynamics.koopman.lora_loss": Case(K.lora_loss, dict(f=FX, g=GY)),
    "dynamics.koopman.lora_population": Case(
        K.lora_population, dict(F=F3, G=G3, kernel=CHAIN.kernel, rho0=CHAIN.rho0)
    ),
    "dynamics.koopman.vamp2_loss": Case(K.vamp2_loss, dict(f=FX, g=GY)),
    "dynamics.koopman.vampe_loss": Case(K.vampe_loss, dict(f=FX, g=GY)),
    "dynamics.koopman.dpnet_loss": Case(K.dpnet_loss, dict(f=FX, g=GY)),
    "dynamics.koopman.vamp2_from_moments": Case(K.vamp2_from_moments, dict(Mf=M2, Mg=M2, T=M2)),
    "dynamics.koopman.dpnet_from_moments": Case(K.dpnet_from_moments, dict(Mf=M2, Mg=M2, T=M2)),
    "dynamics.koopman.cca_readout": Case(K.cca_readout, dict(fx=FX, gy=GY, fy=FY)),
    "dynamics.koopman.edmd_readout": Case(K.edmd_readout, dict(bx=FX, by=FY)),
    "dynamics.koopman.relative_singular_value_errors": Case(
        K.relative_singular_value_errors,
        dict(estimated=np.array([0.9, 0.5]), true=np.array([1.0, 0.4])),
    ),
    "dynamics.koopman.principal_angles": Case(K.principal_angles, dict(features=FX, reference=GY)),
    "dynamics.koopman.directed_hausdorff": Case(
        K.directed_hausdorff, dict(estimated=np.array([0.9, 0.5]), true=np.array([1.0, 0.4]))
    ),
    "dynamics.koopman.forecast_rmse": Case(K.forecast_rmse, dict(predicted=FX, truth=FY)),
    "dynamics.koopman.fit_koopman": Case(
        K.fit_koopman,
        heavy=True,
        kwargs=dict(
            X=TRAJ[:-1],
            Y=TRAJ[1:],
            k=2,
            width=4,
            depth=1,
            batch_size=8,
            steps=3,
            key=KEY,
            progress=False,
        ),
    ),
    "dynamics.koopman.fit_koopman_batch": Case(
        K.fit_koopman_batch,
        heavy=True,
        kwargs=dict(
            Xs=TRAJ[None, :-1],
            Ys=TRAJ[None, 1:],
            k=2,
            keys=jax.random.split(KEY, 1),
            width=4,
            depth=1,
            batch_size=8,
            steps=3,
            progress=False,
        ),
        targets=("Xs", "Ys", "k", "keys"),
    ),
    "dynamics.sgd.expected_excess_risk": Case(
        S.expected_excess_risk, dict(instance=INST, eta=0.05, T=np.array([1, 5]))
    ),
    "dynamics.sgd.expected_quadratic_form": Case(
        S.expected_quadratic_form, dict(instance=INST, eta=0.05, T=np.array([1, 5]))
    ),
    "dynamics.sgd.worst_start_excess_risk": Case(
        S.worst_start_excess_risk, dict(instance=INST, eta=0.05, T=np.array([1, 5]))
    ),
    "dynamics.sgd.simulate_iterates": Case(
        S.simulate_iterates, dict(instance=INST, eta=0.05, T=5, key=KEY, n_paths=4)
    ),
    "dynamics.sgd.simulate_divergence": Case(
        S.simulate_divergence, dict(instance=INST, eta=0.05, T=5, key=KEY, n_paths=4)
    ),
    "dynamics.sgd.continual_learning": Case(
        S.continual_learning, dict(tasks=TASKS, k=np.array([1, 3]), key=KEY, n_paths=8)
    ),
    "dynamics.sgd.pep_worst_case": Case(S.pep_worst_case, dict(T=2, n=2, eta=0.5)),
    "dynamics.sgd.pepit_worst_case": Case(S.pepit_worst_case, dict(T=1, n=2, eta=0.5)),
    "dynamics.sgd.least_squares": Case(S.least_squares, dict(A=A, b=B)),
    "dynamics.sgd.gaussian_design": Case(
        S.gaussian_design, dict(n=8, spectrum=np.array([1.0, 0.5]), rng=0)
    ),
    "dynamics.sgd.kaczmarz": Case(S.kaczmarz, dict(A=A, b=B)),
    "dynamics.sgd.continual_tasks": Case(S.continual_tasks, dict(X=TASKS.X, y=TASKS.y)),
    "dynamics.sgd.random_continual_tasks": Case(
        S.random_continual_tasks, dict(n_tasks=3, dim=4, rank=2, rng=0)
    ),
    "dynamics.sgd.rare_curvature": Case(S.rare_curvature, dict(beta=1.0, p=0.2)),
    "dynamics.sgd.ar1": Case(S.ar1, dict(beta=1.0, s2=0.5)),
    "dynamics.sgd.commuting": Case(
        S.commuting, dict(beta=1.0, p=np.array([0.5, 0.5]), w0=np.array([1.0, 1.0]))
    ),
    # separable data: no minimiser, so the distance to it (dist2) is inf by definition
    "dynamics.sgd.logistic_separable": Case(S.logistic_separable, dict(X=XS, y=YS), allow_inf=True),
    "dynamics.sgd.squared_hinge": Case(S.squared_hinge, dict(X=XS, y=YS), allow_inf=True),
    "dynamics.sgd.separable_data": Case(S.separable_data, dict(n=8, dim=3, rng=0)),
    "dynamics.sgd.padded_dim": Case(S.padded_dim, dict(d=50, dtype=np.float32), targets=("d",)),
    "dynamics.transformer.exp_loss": Case(
        T.exp_loss, heavy=True, kwargs=dict(model=SMALL, X=XT, y=YT)
    ),
    "dynamics.transformer.gaussian_task": Case(T.gaussian_task, dict(n=6, s=3, d=4, rng=0)),
    "dynamics.transformer.anchor_task": Case(T.anchor_task, dict(n=6, s=3, n_keys=4, d=4, rng=0)),
    "dynamics.transformer.gradient_flow": Case(
        T.gradient_flow,
        heavy=True,
        kwargs=dict(model=SMALL, X=XT, y=YT, t1=0.5, n_save=3, rtol=1e-6, atol=1e-8),
    ),
    "dynamics.transformer.gradient_descent": Case(
        T.gradient_descent, heavy=True, kwargs=dict(model=SMALL, X=XT, y=YT, lr=0.01, steps=3)
    ),
    "dynamics.transformer.effective_flow": Case(
        T.effective_flow,
        heavy=True,
        kwargs=dict(W_V=W4, W1=W4, W2=V4, v=V4, stop_norm=10.0, rtol=1e-6, atol=1e-8),
        allow_inf=True,
    ),
    "dynamics.transformer.key_query_flow": Case(
        T.key_query_flow,
        heavy=True,
        kwargs=dict(
            F=W4, W_Q0=W4[:, :2], W_K0=W4[:, :2], ts=np.array([0.0, 0.5]), rtol=1e-6, atol=1e-8
        ),
    ),
    "dynamics.transformer.escape_time": Case(
        T.escape_time, heavy=True, kwargs=dict(X=XT, y=YT, eps=0.05, key=KEY, rtol=1e-6)
    ),
    "dynamics.transformer.rank_collapse": Case(
        T.rank_collapse, heavy=True, kwargs=dict(X=XT, y=YT, eps=0.05, key=KEY, rtol=1e-6)
    ),
    # complex arguments (images, k-space, coil maps) are checked in tests/dynamics/mri/
    "dynamics.mri.fft2c": Case(MR.fft2c, dict(x=IMG), targets=()),
    "dynamics.mri.ifft2c": Case(MR.ifft2c, dict(k=KSP), targets=()),
    "dynamics.mri.coil_maps": Case(MR.coil_maps, dict(n_coils=2, shape=(8, 12))),
    "dynamics.mri.forward": Case(
        MR.forward, dict(x=IMG, mask=MASK, coils=COILS), targets=("mask",)
    ),
    "dynamics.mri.adjoint": Case(
        MR.adjoint, dict(y=KSP2, mask=MASK, coils=COILS), targets=("mask",)
    ),
    "dynamics.mri.normal": Case(MR.normal, dict(x=IMG, mask=MASK), targets=("mask",)),
    "dynamics.mri.kspace_consistency": Case(
        MR.kspace_consistency, dict(k=IMG, y=KSP, mask=MASK, lam=0.5), targets=("mask", "lam")
    ),
    "dynamics.mri.data_consistency": Case(
        MR.data_consistency,
        dict(x=IMG, y=KSP2, mask=MASK, coils=COILS, lam=0.5),
        targets=("mask", "lam"),
    ),
    "dynamics.mri.num_lines": Case(MR.num_lines, dict(n=32, R=4.0, center_fraction=0.08)),
    "dynamics.mri.cartesian_mask": Case(
        MR.cartesian_mask, dict(shape=(8, 12), R=3.0, center_fraction=0.1, key=KEY)
    ),
    "dynamics.mri.ssdu_split": Case(MR.ssdu_split, dict(mask=MASK, rho=0.4, key=KEY)),
    "dynamics.mri.resubsample": Case(
        MR.resubsample, dict(mask=MASK, R=2.0, center_fraction=0.1, key=KEY)
    ),
    "dynamics.mri.normalized_l1_l2": Case(
        MR.normalized_l1_l2, dict(y_pred=IMG, y=KSP, mask=MASK), targets=("mask",)
    ),
    "dynamics.mri.relative_l1": Case(
        MR.relative_l1, dict(y_pred=IMG, y=KSP, mask=MASK), targets=("mask",)
    ),
    "dynamics.mri.shepp_logan_3d": Case(MR.shepp_logan_3d, {}),
    "dynamics.mri.random_patient": Case(MR.random_patient, dict(key=KEY, family="knee")),
    "dynamics.mri.slice_ellipses": Case(MR.slice_ellipses, dict(patient=PAT, z=0.1)),
    "dynamics.mri.rasterize": Case(MR.rasterize, dict(ellipses=ELL, shape=(8, 12))),
    "dynamics.mri.j1": Case(MR.j1, dict(x=np.array([0.0, 1.0, 7.5]))),
    "dynamics.mri.ellipse_kspace": Case(MR.ellipse_kspace, dict(ellipses=ELL, shape=(8, 12))),
    "dynamics.mri.polynomial_field": Case(
        MR.polynomial_field, dict(coeffs=np.array([1.0, 0.1, -0.1, 0.05, 0.0, 0.02]), shape=(8, 12))
    ),
    "dynamics.mri.random_bias": Case(MR.random_bias, dict(key=KEY, strength=0.3, gain=(0.6, 1.6))),
    "dynamics.mri.random_phase": Case(MR.random_phase, dict(key=KEY, max_phase=0.5)),
    "dynamics.mri.apply_contrast": Case(MR.apply_contrast, dict(patient=PAT, contrast="T2")),
    "dynamics.mri.simulate": Case(
        MR.simulate,
        dict(patient=PAT, z=np.array([0.0, 0.2]), shape=(8, 12), n_coils=2, oversample=2),
    ),
    "dynamics.mri.shift_setting": Case(MR.shift_setting, dict(shift="contrast")),
    "dynamics.mri.cohort": Case(
        MR.cohort, dict(shift="scanner", n_patients=1, n_slices=2, shape=(8, 8), key=KEY)
    ),
    "dynamics.distill.Order2Markov": Case(D.Order2Markov, dict(P=CORPUS.P)),
    "dynamics.distill.lm_ce": Case(D.lm_ce, dict(model=TEACHER, tokens=TOKS)),
    "dynamics.distill.logits_by_layer": Case(D.logits_by_layer, dict(model=TEACHER, tokens=TOKS)),
    "dynamics.distill.kl_to_teacher": Case(
        D.kl_to_teacher, dict(teacher=TEACHER, student=STUDENT, tokens=TOKS)
    ),
    "dynamics.distill.train_lm": Case(
        D.train_lm, dict(model=TEACHER, corpus=CORPUS, **LM), heavy=True
    ),
    "dynamics.distill.ild": Case(
        D.ild, dict(teacher=TEACHER, student=STUDENT, corpus=CORPUS, **LM), heavy=True
    ),
    "dynamics.distill.distill": Case(
        D.distill, dict(teacher=TEACHER, student=STUDENT, corpus=CORPUS, **LM), heavy=True
    ),
}

NOT_ENTRY_POINTS = {  # result and record types the library builds
    "dynamics.fp4_training.FP4TrainResult": "result",
    "dynamics.koopman.KoopmanReadout": "result",
    "dynamics.koopman.EDMDReadout": "result",
    "dynamics.koopman.Encoders": "part of a result",
    "dynamics.koopman.KoopmanModel": "result",
    "dynamics.sgd.RiskCurve": "result",
    "dynamics.sgd.ContinualCurve": "result",
    "dynamics.sgd.PEPResult": "result",
    "dynamics.sgd.QuadraticSum": "built by least_squares & co.",
    "dynamics.sgd.FiniteSum": "built by logistic_separable & co.",
    "dynamics.sgd.ContinualTasks": "built by continual_tasks",
    "dynamics.transformer.SmallInitTransformer": "built by .init / .from_arrays",
    "dynamics.transformer.FlowPath": "result",
    "dynamics.transformer.EffectiveFlow": "result",
    "dynamics.mri.Patient": "built by shepp_logan_3d / random_patient",
    "dynamics.mri.Cohort": "built by cohort",
    "dynamics.transformer.EscapeResult": "result",
    "dynamics.transformer.RankCollapseResult": "result",
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
) = make_tests("dynamics", CASES, NOT_ENTRY_POINTS, max_examples=250)


# --- classes of fixes from the hostile fuzz (issue 20) ----------------------------------------


def test_options_seeds_shapes_and_ragged_input_are_named():
    import pytest

    from dynamics import acavp as AC
    from dynamics.aegisguard import baselines as BL
    from nn.acavp import SmallCNN

    cnn = SmallCNN((2, 2), key=KEY)
    with pytest.raises(TypeError, match="`inner` must be an integer"):  # unused by "pad"
        AC.build("pad", cnn, key=KEY, inner="24")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`seed` must be an integer"):
        AC.source_task(jax.random.key(0))  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`shape` must be a pair"):
        MR.cartesian_mask(np.array(8.0), 3.0, 0.1, key=KEY)
    phase = MR.random_phase(key=KEY, max_phase=-0.0)  # a signed zero is zero
    assert np.all(np.asarray(phase) == 0.0)
    with pytest.raises(TypeError, match="`scores` must be array-like"):
        BL.top_k([[0.1], [0.2, 0.3]], 1)
    with pytest.raises(TypeError, match="`estimated` must be array-like"):
        K.directed_hausdorff([[0.9], [0.5, 0.1]], np.array([1.0]))
    with pytest.raises(TypeError, match="`n_paths` must be an integer"):  # unused by "exact"
        S.expected_excess_risk(S.rare_curvature(1.0, 0.1), 1.0, [1, 10], n_paths="many")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`eps` must be a real number"):  # unused by CLARABEL
        S.pep_worst_case(1, 2, 0.5, eps="no")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`name` must be str"):
        S.least_squares(A, B, name=3)  # pyright: ignore[reportArgumentType]


def test_ragged_lists_are_named_by_their_argument():
    import pytest

    from dynamics.aegisguard import attack as AT
    from dynamics.aegisguard import pruning as PR

    with pytest.raises(TypeError, match="`mask` must be array-like"):
        AT.subset_index([[True], [True, False]])
    with pytest.raises(TypeError, match="`scores` must be array-like"):
        PR.sac_quota(5.0, 1, 4, [[0.1], [0.2, 0.3]])
    with pytest.raises(ValueError, match=r"`scores` must have shape \(L,\)"):
        PR.sac_quota(5.0, 1, 4, np.ones((2, 2)))
    with pytest.raises(TypeError, match="`z` must be array-like"):
        MR.simulate(PAT, [[0.0], [0.1, 0.2]], (8, 8))


def test_psnr_of_images_whose_square_underflows_is_finite():
    from dynamics.mri import metrics as ME

    ref = np.abs(_g.standard_normal((8, 8))) + 0.5
    x = ref + 0.01 * _g.standard_normal((8, 8))
    want = 10 * np.log10(ref.max() ** 2 / np.mean((x - ref) ** 2))
    assert np.isclose(ME.psnr(x * 1e-300, ref * 1e-300), want, rtol=1e-12)  # scale-free
    tiny_peak = ME.psnr(x, ref * 1e-300)  # a reference near zero: very negative, not -inf
    assert np.isfinite(tiny_peak) and tiny_peak < -5000
    assert ME.psnr(ref, ref) == np.inf  # identical images


def test_dnd_task_targets_names_theta_and_x_whose_batches_differ():
    import pytest

    from dynamics import dnd as DD

    fam = DD.task_family(2, 2, width=6, key=KEY)
    theta = np.asarray(fam.theta_train)  # (tasks, k)
    X = np.asarray(DD.sample_inputs(fam, theta, 4, key=KEY))  # (tasks, 4, dim)
    assert DD.task_targets(fam, theta, X).shape == X.shape[:-1]
    for th, x in ((np.concatenate([theta, theta[:1]]), X), (theta, np.concatenate([X, X[:1]]))):
        with pytest.raises(ValueError, match="`X` must have shape .* matching `theta`"):
            DD.task_targets(fam, th, x)


def test_mri_random_bias_gain_is_a_real_pair():
    import pytest

    assert MR.random_bias(key=KEY, gain=np.array([1.0, 1.0]))[0] == 1.0
    with pytest.raises(ValueError, match=r"`gain` must have shape \(2,\); got shape \(\)"):
        MR.random_bias(key=KEY, gain=np.array(1.0))
    with pytest.raises(TypeError, match="`gain` must hold real numbers; got an array of object"):
        MR.random_bias(key=KEY, gain=np.array([0.6, 1.6], dtype=object))


def test_mri_cohort_requires_a_key():
    import pytest

    with pytest.raises(ValueError, match="`key` must be a single JAX PRNG key"):
        MR.cohort("source", 1, 1, (8, 8), key=None)  # pyright: ignore[reportArgumentType]


def test_mri_to_complex_refuses_complex_channels():
    import pytest

    from dynamics.mri import tta

    two = _g.standard_normal((2, 4, 4))
    assert np.allclose(tta.to_complex(two), two[0] + 1j * two[1])
    with pytest.raises(TypeError, match="`out` must be real"):
        tta.to_complex(two + 1j)


def test_least_squares_names_a_whose_squares_underflow():
    import pytest

    for tiny in (np.zeros((3, 2)), A * 1e-300):
        with pytest.raises(ValueError, match="`A` must have a row with squared norm > 0"):
            S.least_squares(tiny, B)


def test_mri_film_inr_checks_its_key():
    import pytest

    from dynamics.mri import tta

    for bad in (None, np.random.default_rng(0), jax.random.split(KEY, 3)):
        with pytest.raises((TypeError, ValueError), match="`key` must be a single JAX PRNG"):
            tta.FilmINR(2, 3, width=4, key=bad)


# --- classes of fixes from the hostile fuzz (issue 50) ----------------------------------------


def test_acavp_adapt_refuses_a_backbone_with_fewer_classes_and_zs_trains_at_rate_zero():
    import pytest

    from dynamics import acavp as AC
    from nn.acavp import SmallCNN, warp_affine

    task = AC.target_task("geo", 0)
    few = SmallCNN((2, 2), n_classes=5, key=KEY)
    for method in ("zs", "pad"):
        with pytest.raises(ValueError, match="`backbone` must have at least the task's 10 class"):
            AC.adapt(few, method, task, seeds=2, steps=1, batch=2)
    assert AC.adapt(SmallCNN((2, 2), key=KEY), "zs", task, seeds=2).lr == 0.0
    projective = np.eye(3)
    projective[2, 0] = 0.1
    with pytest.raises(ValueError, match=r"`matrix` must be affine, last row \(0, 0, 1\)"):
        warp_affine(jnp.ones((1, 3, 4, 4)), projective)


def test_order2_markov_with_zero_probabilities_has_an_exact_entropy_rate():
    P = np.zeros((2, 2, 2))
    P[..., 0] = P[..., 1] = 0.5
    P[1, 1] = [1.0, 0.0]  # after (1, 1) always 0: 0 log 0 = 0
    chain = D.Order2Markov(P)
    pi = chain.pair_stationary
    want = np.log(2.0) * (1.0 - pi[1, 1])
    assert np.isfinite(chain.entropy_rate) and np.isclose(chain.entropy_rate, want, rtol=1e-12)
    assert np.asarray(chain.sample(2, 5, key=KEY)).shape == (2, 5)
    cycle = np.zeros((2, 2, 2))  # deterministic: 00 -> 01 -> 11 -> 10 -> 00, entropy 0
    cycle[0, 0, 1] = cycle[0, 1, 1] = cycle[1, 1, 0] = cycle[1, 0, 0] = 1.0
    assert D.Order2Markov(cycle).entropy_rate == 0.0


def test_mri_values_past_complex64_are_refused_before_the_cast():
    import pytest

    big = np.full((8, 12), 1e300 + 0j)
    with jax.enable_x64(False):
        for call, name in (
            (lambda: MR.fft2c(big), "x"),
            (lambda: MR.ifft2c(big), "k"),
            (lambda: MR.kspace_consistency(big, big, MASK, lam=0.5), "k"),
            (lambda: MR.data_consistency(big, big, MASK), "x"),
            (lambda: MR.normal(big, MASK), "x"),
            (lambda: MR.normalized_l1_l2(big, big, MASK), "y_pred"),
            (lambda: MR.forward(IMG * 1e30, MASK, np.asarray(COILS) * 1e20), "x` times `coils"),
        ):
            with pytest.raises(ValueError, match=rf"`{name}` must have entries of magnitude <="):
                call()
        with pytest.raises(ValueError, match="`y` must be nonzero on `mask`"):
            MR.relative_l1(KSP * 1e-40, KSP * 1e-40, MASK)  # subnormal in complex64
        y = KSP * 1e-20  # squares underflow float32: the losses are computed scaled
        assert np.isclose(float(MR.relative_l1(0.5 * y, y, MASK)), 0.5, rtol=1e-5)
        assert np.isclose(float(MR.normalized_l1_l2(0.5 * y, y, MASK)), 1.0, rtol=1e-5)


def test_mri_negative_contrasts_and_bias_fields_are_refused():
    import pytest

    assert MR.apply_contrast(PAT, np.array([1.0, -1.0, 1.0, 1.0])).ellipsoids.shape == (10, 8)
    with pytest.raises(ValueError, match="`contrast` must keep the object's intensity non-neg"):
        MR.apply_contrast(PAT, np.array([-1.0, 1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="`bias` must give a positive multiplicative field"):
        MR.simulate(PAT, [0.0], (8, 8), bias=np.array([1.0, 2.0, 0.0, 0.0, 0.0, 0.0]))


def test_mixprompt_adapt_checks_every_split_and_its_labels():
    import dataclasses

    import pytest

    from dynamics import mixprompt as MP
    from nn import mixprompt as NM

    bb = NM.Backbone((16, 16, 16), 3, (1, 1, 1), 2, key=KEY)
    d = MP.target_data(4, 2, 2, 8, seed=0)
    run = dict(lrs=(1e-3,), steps=1)
    with pytest.raises(ValueError, match=r"`datasets`\[0\] must hold a Split under 'val'"):
        MP.adapt("rgb_frozen", bb, [{"train": d["train"], "test": d["test"]}], **run)
    shifted = dataclasses.replace(d["train"], labels=d["train"].labels + 10)
    with pytest.raises(ValueError, match=r"`datasets`\[0\]\['train'\].labels must be integers"):
        MP.adapt("rgb_frozen", bb, [{**d, "train": shifted}], **run)


def test_aegisguard_scores_read_adapter_factors_given_as_nested_lists():
    from dynamics.aegisguard import baselines as BL
    from dynamics.aegisguard import victim as V

    task = V.planted_task(key=KEY, n_blocks=1, n_train=16, n_test=8)
    m = V.adapted_model(task.backbone, key=KEY)
    As, Bs = V.train_victim(m, task.X_train, task.y_train, steps=2, key=KEY)
    lists = [[np.asarray(a).tolist() for a in t] for t in (As, Bs)]
    want = np.asarray(BL.magnitude_scores(m, As, Bs))
    np.testing.assert_allclose(np.asarray(BL.magnitude_scores(m, *lists)), want, rtol=1e-6)


def test_fp4_and_koopman_training_raise_the_numerical_error_and_check_settings():
    import pytest

    from _core.validation import NumericalError

    nan_lin = jax.tree.map(lambda a: a * np.nan if eqx_array(a) else a, LIN)
    with pytest.raises(NumericalError, match="gradient is not finite"):
        F.gradient_pair(nan_lin, _loss, BATCH, key=KEY)
    with pytest.raises(ValueError, match="`loss_fn` failed on `model` and `batch`"):
        F.gradient_pair(LIN, _loss, "x", key=KEY)
    run = dict(model=LIN, loss_fn=_loss, batches=_batches, optimizer=SGD, key=KEY, progress=False)
    with pytest.raises(TypeError, match="`steps` must be an integer"):
        F.train_fp4(steps=True, **run)
    with pytest.raises(TypeError, match="`switch` must be an integer"):
        F.train_fp4(steps=2, switch=2.5, **run)
    with pytest.raises(NumericalError, match="not finite at step 1"):
        F.train_fp4(**{**run, "optimizer": optax.sgd(1e300)}, steps=2)
    fit = dict(X=TRAJ[:-1], Y=TRAJ[1:], k=2, width=4, depth=1, batch_size=8, steps=3, key=KEY)
    with pytest.raises(TypeError, match="`dtype` must be float32 or float64"):
        K.fit_koopman(**fit, dtype="x", progress=False)
    with pytest.raises(TypeError, match="`shared` must be a bool"):
        K.fit_koopman(**fit, shared=1, progress=False)
    with pytest.raises(ValueError, match=r"`X` must lie in \[-1e\+30, 1e\+30\]"):
        K.fit_koopman(**{**fit, "X": TRAJ[:-1] * 1e150}, progress=False)
    with pytest.raises(NumericalError, match="training diverged"):
        K.fit_koopman(**fit, loss=_nan_loss, progress=False)


def _nan_loss(f, g):
    return jnp.nan * jnp.sum(f * g)


def eqx_array(a):
    return isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.inexact)


def test_transformer_flows_raise_the_numerical_error():
    import pytest

    from _core.validation import ConvergenceError, NumericalError

    assert np.isfinite(T.exp_loss(SMALL, XT, YT))
    huge = T.SmallInitTransformer.init(4, 30.0, key=KEY, activation="linear")
    with pytest.raises(NumericalError, match="exponential loss overflows"):
        T.exp_loss(huge, XT * 1e3, YT)
    with pytest.raises(NumericalError, match="gradient descent diverged"):
        T.gradient_descent(SMALL, XT, YT, lr=1e50, steps=2)
    with pytest.raises(ConvergenceError, match="did not reach t = 1"):
        T.key_query_flow(W4, W4[:, :2], W4[:, :2], np.array([0.0, 1.0]), max_steps=1)
    with pytest.raises(NumericalError, match="not finite at the initial point"):
        T.gradient_flow(SMALL, XT * 1e300, YT, 0.5, n_save=3)  # the solver would crawl
    with pytest.raises(ConvergenceError, match="gradient flow did not reach"):
        T.gradient_flow(SMALL, XT, YT, 0.5, n_save=3, max_steps=1)


def test_dnd_aegisguard_and_distill_examples_are_refused_by_name():
    import pytest

    from dynamics import dnd as DD
    from dynamics.aegisguard import attack as AT
    from nn import adapters as AD

    assert AT.subset_index(np.ones(63, bool)) == 2**63 - 1
    with pytest.raises(ValueError, match="`mask` must have at most 63 layers; got 64"):
        AT.subset_index(np.ones(64, bool))
    with pytest.raises(TypeError, match="`f` must be traceable by jax.jit"):
        DD.timed(np.sin, jnp.ones(3), warmup=0, repeats=1)
    polar = AD.inject(nn.MLP(2, 1, 4, 1, key=KEY), "polar", ["layers.0"], key=KEY, r=2)
    with pytest.raises(TypeError, match="`adapted` must hold LoRA layers .* PoLARLinear"):
        DD.factors_of(polar)
    tpl = DD.lora_template(nn.MLP(2, 1, 4, 1, key=KEY), 2, key=KEY)
    ((a, b),) = DD.factors_of(tpl)
    for bad, err in (((a * np.nan, b), ValueError), ((a + 1j, b), TypeError),
                     ((np.asarray(a).astype(str), b), TypeError)):  # fmt: skip
        with pytest.raises(err, match="`factors` must"):
            DD.with_factors(tpl, [bad])
    other_vocab = HybridLM(7, 8, 2, 1, 4, ("gqa",), mlp_hidden=8, rope_theta=100.0, key=KEY)
    with pytest.raises(ValueError, match="`student` must have the teacher's vocabulary of 5"):
        D.kl_to_teacher(TEACHER, other_vocab, TOKS)
    deeper = HybridLM(5, 8, 2, 1, 4, ("gqa",) * 2, mlp_hidden=8, rope_theta=100.0, key=KEY)
    with pytest.raises(ValueError, match="`student` must have the teacher's 1 layers"):
        D.ild(TEACHER, deeper, CORPUS, **LM)
    with pytest.raises(ValueError, match="`corpus` must draw tokens inside the vocabulary"):
        D.train_lm(TEACHER, D.Order2Markov.random(0, 9), **LM)
