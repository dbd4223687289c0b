"""Tests of dynamics.sgd: exact recursion vs Monte Carlo, closed forms, Fejér, bounds, bad input."""

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dynamics.sgd as S
import theory.sgd as ts
from paper_checks import PROPERTIES, verify

KEY = jax.random.key(20250715)


def _z(mc, exact):
    return np.abs(mc.mean - exact) / mc.se


# ------------------------------------------------------------------------------------------------
# exact recursion == Monte Carlo
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("be", [0.5, 1.0, 1.9])
def test_exact_matches_monte_carlo(be):
    # inconsistent finite data set (sigma_star > 0 through fixed residuals) plus fresh noise:
    # exercises every term of the recursion, the cross term included
    A = np.random.default_rng(1).standard_normal((12, 4)) * np.array([1.0, 0.7, 0.4, 0.2])
    b = A @ np.ones(4) + 0.3 * np.random.default_rng(2).standard_normal(12)
    inst = S.least_squares(A, b, noise_var=0.05, w0=np.full(4, -1.0))
    assert inst.sigma2_star > 0
    T = [1, 3, 10, 30, 100]
    eta = be / inst.beta
    ex = S.expected_excess_risk(inst, eta, T)
    mc = S.expected_excess_risk(inst, eta, T, method="monte_carlo", key=KEY, n_paths=8000)
    assert np.all(mc.se > 0)
    assert np.all(_z(mc, ex.mean) < 3.0), (mc.mean, ex.mean, mc.se)


def test_exact_matches_monte_carlo_blocks_and_distance():
    tasks = S.random_continual_tasks(6, 5, 2, rng=3)
    inst = tasks.instance
    T = np.array([1, 4, 16])
    ex = S.expected_quadratic_form(inst, 1.0, T)  # E||w_T - w*||^2
    W = S.simulate_iterates(inst, 1.0, 16, key=KEY, n_paths=6000)[:, T]
    d2 = np.sum((W - inst.w_star) ** 2, axis=-1)
    se = d2.std(0, ddof=1) / np.sqrt(d2.shape[0])
    assert np.all(np.abs(d2.mean(0) - ex) < 3 * se)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_blocked_simulator_matches_exact(precision):
    # the fused quadratic kernel (dynamics.sgd._kernel) against the exact recursion: uniform rows
    # (multiply-shift indices), non-uniform rows (Kaczmarz norm sampling, cdf bisection) and
    # Box-Muller label noise, at several horizons of one run
    gen = np.random.default_rng(7)
    A = gen.standard_normal((9, 5)) * np.array([1.0, 0.8, 0.5, 0.3, 0.1])
    cases = [
        S.least_squares(A, A @ np.ones(5) + 0.2 * gen.standard_normal(9), noise_var=0.1),
        S.kaczmarz(A * gen.uniform(0.3, 3.0, (9, 1)), A @ np.ones(5)),
    ]
    T = [1, 37, 64, 65, 200]
    for inst in cases:
        assert np.ptp(inst.probs) > 0 or inst.noise_var > 0
        eta = 1.2 / inst.beta
        ex = S.expected_excess_risk(inst, eta, T).mean
        mc = S.expected_excess_risk(
            inst, eta, T, method="monte_carlo", key=KEY, n_paths=6000, precision=precision
        )
        assert np.all(_z(mc, ex) < 3.0), (inst.name, mc.mean, ex, mc.se)


@pytest.mark.parametrize("noise_var", [0.0, 0.1])
@pytest.mark.parametrize("sampling", ["uniform", "norm"])
def test_fused_rank_one_kernel_follows_the_two_pass_kernel(noise_var, sampling):
    # the fused k = 1 kernel draws each row a step ahead: its paths must be the two-pass kernel's,
    # draw for draw (same rows, same label noise), up to the dot's summation order
    from dynamics.sgd import _kernel as K

    gen = np.random.default_rng(3)
    A = gen.standard_normal((11, 13)) * gen.uniform(0.3, 3.0, (11, 1))
    b = A @ gen.standard_normal(13)
    inst = S.kaczmarz(A, b, sampling=sampling)
    assert (np.ptp(inst.probs) > 0) == (sampling == "norm")
    B = np.zeros((11, 1, 16))
    B[..., :13] = inst.B
    w0 = np.zeros(16)
    w0[:13] = inst.w0
    ends = np.array([1, 2, 50, 300])
    args = (w0, B, inst.c, 0.7 / inst.beta, np.cumsum(inst.probs), sampling == "uniform",
            np.sqrt(noise_var), ends, np.uint64(99), np.int64(5))  # fmt: skip
    two, fused = (f(*args, np.empty((19, 4, 16))) for f in (K._run, K._run_rank1))
    assert np.all(np.isfinite(fused)) and np.ptp(fused[:, -1, 0]) > 0  # paths differ
    np.testing.assert_allclose(fused, two, rtol=1e-10, atol=1e-12 * np.abs(two).max())


def test_paths_do_not_depend_on_chunks_or_horizons():
    inst = S.gaussian_design(30, [1.0, 0.4, 0.1], noise_var=0.05, rng=1)
    eta = 1.0 / inst.beta
    one = S.expected_excess_risk(inst, eta, [100], method="monte_carlo", key=KEY, n_paths=700)
    many = S.expected_excess_risk(
        inst, eta, [3, 64, 100], method="monte_carlo", key=KEY, n_paths=700, chunk=300
    )
    assert one.mean[0] == many.mean[-1] and one.se[0] == many.se[-1]
    W = S.simulate_iterates(inst, eta, 70, key=KEY, n_paths=5)  # float64, same stream
    sub = S.simulate_iterates(inst, eta, 70, key=KEY, n_paths=3)
    np.testing.assert_array_equal(W[:3], sub)


def test_kernel_seed_takes_every_word_of_the_key():
    from dynamics.sgd._kernel import seed_of

    seeds = {int(seed_of(key=k)) for k in (jax.random.key(0), jax.random.key(1), KEY)}
    raw = jax.random.key_data(jax.random.key(1))  # raw uint32 data: the typed key's seed
    assert len(seeds) == 3 and int(seed_of(key=raw)) == int(seed_of(key=jax.random.key(1)))
    inst = S.gaussian_design(30, [1.0, 0.4, 0.1], rng=1)
    a, b = (
        S.simulate_iterates(inst, 1.0 / inst.beta, 20, key=k, n_paths=4)
        for k in (jax.random.key(0), jax.random.key(1))
    )
    assert not np.any(a[:, -1] == b[:, -1])


def test_float32_floor_and_auto_precision():
    # a realizable instance run to convergence: float64 reaches ~1e-30, float32 stalls at its
    # rounding floor, below the floor estimate of expected_excess_risk but within 1e3 of it; the
    # "auto" precision sees the floor and returns the float64 run
    from dynamics.sgd._simulate import _f32_floor

    A = np.random.default_rng(0).standard_normal((8, 3))
    inst = S.least_squares(A, w_star=np.array([1.0, -2.0, 0.5]), w0=np.array([3.0, 0.0, -1.0]))
    eta, T = 1.0 / inst.beta, [10, 3000]
    run = {
        p: S.expected_excess_risk(
            inst, eta, T, method="monte_carlo", key=KEY, n_paths=512, precision=p
        )
        for p in ("float32", "float64", "auto")
    }
    floor = _f32_floor(inst, eta)
    assert run["float64"].mean[1] < 1e-25
    assert floor / 1e3 < run["float32"].mean[1] < floor
    np.testing.assert_array_equal(run["auto"].mean, run["float64"].mean)
    np.testing.assert_allclose(run["float32"].mean[0], run["float64"].mean[0], rtol=1e-5)
    with pytest.raises(ValueError, match="precision"):
        S.expected_excess_risk(inst, eta, T, method="monte_carlo", key=KEY, precision="half")


def test_exact_is_one_decomposition_for_all_T():
    inst = S.gaussian_design(20, [1.0, 0.5, 0.1], rng=0)
    eta = 1.0 / inst.beta
    full = S.expected_excess_risk(inst, eta, [5, 50, 500]).mean
    assert len(inst._cache) == 1
    single = [S.expected_excess_risk(inst, eta, t).mean[0] for t in (5, 50, 500)]
    np.testing.assert_allclose(full, single, rtol=1e-12)
    # brute-force recursion check at small T (independent of the spectral formula)
    A = inst.B[:, 0, :]
    M = np.outer(inst.w0 - inst.w_star, inst.w0 - inst.w_star)
    for _ in range(5):
        M = sum(
            p * (np.eye(3) - eta * np.outer(a, a)) @ M @ (np.eye(3) - eta * np.outer(a, a))
            for p, a in zip(inst.probs, A, strict=True)
        )
    assert full[0] == pytest.approx(0.5 * np.trace(inst.H @ M), rel=1e-10)


def test_worst_start_is_attained():
    # the quadratic form e0 -> E[F(w_T)] - F* is built by polarisation from the forward recursion
    # (start points w* + e_i + e_j), independently of the backward formula under test
    gen = np.random.default_rng(4)
    A = gen.standard_normal((7, 3)) * np.array([1.0, 0.5, 0.1])
    ws = gen.standard_normal(3)
    T = [1, 10, 100]
    be = 1.3
    base = S.least_squares(A, w_star=ws)
    eta = be / base.beta
    worst = S.worst_start_excess_risk(base, eta, T)

    def risk(e):
        return S.expected_excess_risk(S.least_squares(A, w_star=ws, w0=ws + e), eta, T).mean

    E = np.eye(3)
    Q = np.zeros((len(T), 3, 3))
    for i in range(3):
        for j in range(3):
            Q[:, i, j] = 0.5 * (risk(E[i] + E[j]) - risk(E[i]) - risk(E[j]))
    np.testing.assert_allclose(worst, np.linalg.eigvalsh(Q)[:, -1], rtol=1e-9)
    for _ in range(20):  # and no start point does worse
        e = gen.standard_normal(3)
        assert np.all(risk(e) / (e @ e) <= worst * (1 + 1e-9))
    with pytest.raises(ValueError, match="realizable"):
        S.worst_start_excess_risk(S.least_squares(A, A @ ws + gen.standard_normal(7)), eta, T)


# ------------------------------------------------------------------------------------------------
# exactly solvable families
# ------------------------------------------------------------------------------------------------
def test_scalar_families_closed_forms():
    T = np.array([1, 2, 10, 100, 1000])
    inst = S.rare_curvature(2.0, 0.05, 1.5)
    np.testing.assert_allclose(
        S.expected_excess_risk(inst, 0.7, T).mean,
        ts.rare_curvature_risk(T, 0.7, 2.0, 0.05, 1.5),
        rtol=1e-10,
    )
    inst = S.ar1(1.5, 0.4, 2.0)
    assert inst.sigma2_star == pytest.approx(1.5**2 * 0.4)
    np.testing.assert_allclose(
        S.expected_excess_risk(inst, 1.1, T).mean, ts.ar1_risk(T, 1.1, 1.5, 0.4, 2.0), rtol=1e-10
    )
    p, w0 = np.array([0.5, 0.3, 0.15, 0.05]), np.array([1.0, -2.0, 0.5, 3.0])
    inst = S.commuting(3.0, p, w0)
    np.testing.assert_allclose(
        S.expected_excess_risk(inst, 0.4, T).mean, ts.commuting_risk(T, 0.4, 3.0, p, w0), rtol=1e-10
    )
    mc = S.expected_excess_risk(
        S.ar1(1.5, 0.4, 2.0), 1.1, [1, 10, 100], method="monte_carlo", key=KEY, n_paths=20000
    )
    assert np.all(_z(mc, ts.ar1_risk(np.array([1, 10, 100]), 1.1, 1.5, 0.4, 2.0)) < 3)
    mc = S.expected_excess_risk(
        S.rare_curvature(2.0, 0.05, 1.5),
        0.7,
        [10, 100],
        method="monte_carlo",
        key=KEY,
        n_paths=20000,
    )
    assert np.all(_z(mc, ts.rare_curvature_risk(np.array([10, 100]), 0.7, 2.0, 0.05, 1.5)) < 3)


# ------------------------------------------------------------------------------------------------
# Thm 1 properties over instances
# ------------------------------------------------------------------------------------------------
@settings(max_examples=6)
@given(seed=st.integers(0, 10**6), be=st.floats(0.02, 1.98))
def test_fejer_monotone(seed, be):
    gen = np.random.default_rng(seed)
    A = gen.standard_normal((6, 8)) * gen.uniform(0.2, 2.0, 8)  # underdetermined: many minima
    inst = S.least_squares(A, w_star=gen.standard_normal(8), w0=gen.standard_normal(8))
    other = inst.w_star + np.linalg.svd(A)[2][-1] * 3.0  # another minimiser
    assert np.allclose(A @ other, A @ inst.w_star)
    X, y = S.separable_data(10, 8, margin=0.2, rng=seed)
    hinge = S.squared_hinge(X, y, w0=gen.standard_normal(8))
    for case, minimisers in (
        (inst, (inst.w_star, other)),
        (hinge, (hinge.w_star, 2.0 * hinge.w_star)),
    ):
        eta = be / case.beta
        W = S.simulate_iterates(case, eta, 40, key=jax.random.fold_in(KEY, seed), n_paths=8)
        for ws in minimisers:
            d2 = np.sum((W - ws) ** 2, axis=-1)
            assert np.all(np.diff(d2, axis=1) <= 1e-12 * (1 + d2[:, :-1]))
        # the quantitative Fejér decrease of theory.sgd.fejer_decrease, step by step
        g = (
            np.array(
                [
                    [np.linalg.norm(W[p, t] - W[p, t + 1]) / eta for t in range(40)]
                    for p in range(W.shape[0])
                ]
            )
            ** 2
        )
        d2 = np.sum((W - minimisers[0]) ** 2, axis=-1)
        tol = 1e-10 * (1 + d2[:, :-1])
        assert np.all(d2[:, 1:] <= d2[:, :-1] - ts.fejer_decrease(eta, case.beta, g) + tol)


def test_continual_loss_below_13_over_sqrt_k_without_replacement():
    k = np.array([1, 2, 5, 10, 20])
    for seed in range(3):
        tasks = S.random_continual_tasks(10, 6, 2, rng=seed)
        c = S.continual_learning(tasks, k, replacement=False, key=KEY, n_paths=300)
        assert np.all(c.loss + 3 * c.loss_se <= ts.continual_loss_bound(k))


def test_realizable_instances_below_thm1_bias_term():
    """Exact risk never above Thm 1's D^2 / (eta (2 - beta eta) T^{1 - beta eta / 2}) for T up to
    1e6, over least-squares and rare-curvature instances: the registry property ``sgd.thm1_bias``
    (its one copy, searched by ``theorylab verify``)."""
    row = verify(PROPERTIES["sgd.thm1_bias"], examples=30)
    assert row["status"] == "holds" and row["min_slack"] >= 0, row


def test_averaged_iterate_bound_holds():
    inst = S.gaussian_design(15, [1.0, 0.3, 0.05, 0.01], rng=4)
    inst = S.least_squares(inst.B[:, 0], w_star=np.ones(4))
    for be in (0.5, 1.0, 1.8):
        eta = be / inst.beta
        T = np.arange(1, 201)
        r = S.expected_excess_risk(inst, eta, T).mean
        avg = (inst.excess_risk(inst.w0) + np.cumsum(r)[:-1]) / T[1:]  # t = 0..T-1
        assert np.all(avg <= ts.averaged_iterate_bound(T[1:], eta, inst.beta, inst.dist2))


def test_noisy_instances_reach_floor_scaling():
    # the AR(1) stationary floor eta sigma^2 / (2 (2 - beta eta)) is below Thm 1's noise term
    for be in (0.3, 1.0, 1.7):
        inst = S.ar1(1.0, 0.5)
        r = S.expected_excess_risk(inst, be, [10**4]).mean[0]
        assert r == pytest.approx(ts.ar1_floor(be, 1.0, inst.sigma2_star), rel=1e-9)
        assert r <= ts.noise_term(10**4, be, 1.0, inst.sigma2_star)


# ------------------------------------------------------------------------------------------------
# non-quadratic instances, continual learning, Kaczmarz
# ------------------------------------------------------------------------------------------------
def test_nonquadratic_instances():
    X, y = S.separable_data(20, 4, margin=0.2, rng=0)
    hinge = S.squared_hinge(X, y)
    assert hinge.realizable and hinge.beta == pytest.approx(1.0)
    assert hinge.risk(hinge.w_star) == pytest.approx(0.0, abs=1e-15)
    assert np.all(y * (X @ hinge.w_star) >= 1 - 1e-12)
    mc = S.expected_excess_risk(
        hinge, 1.0, [1, 10, 100], method="monte_carlo", key=KEY, n_paths=400
    )
    assert np.all(np.diff(mc.mean) < 0)
    assert np.all(mc.mean <= ts.bias_term(mc.T, 1.0, 1.0, hinge.dist2))
    logi = S.logistic_separable(X, y)
    assert logi.w_star is None and logi.beta == pytest.approx(0.25)
    mc = S.expected_excess_risk(logi, 4.0, [1, 30, 300], method="monte_carlo", key=KEY, n_paths=200)
    assert np.all(np.diff(mc.mean) < 0) and mc.mean[0] < np.log(2)
    with pytest.raises(ValueError, match="method"):
        S.expected_excess_risk(logi, 1.0, 10)
    with pytest.raises(ValueError, match="separable"):
        S.squared_hinge(np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([1.0, -1.0]))


def test_kaczmarz_reduction():
    A = np.random.default_rng(5).standard_normal((30, 6))
    x = np.arange(6.0)
    inst = S.kaczmarz(A, A @ x)
    assert inst.beta == pytest.approx(1.0) and inst.realizable
    w = np.random.default_rng(6).standard_normal(6)
    assert inst.risk(w) == pytest.approx(np.sum((A @ w - A @ x) ** 2) / (2 * np.sum(A**2)))
    # one step with eta = 1 is the projection onto the sampled row's hyperplane
    W = S.simulate_iterates(inst, 1.0, 5, key=KEY, n_paths=3)
    res = W[:, 1:] @ A.T - A @ x  # some row residual is zero at each step
    assert np.all(np.min(np.abs(res), axis=-1) < 1e-10)


def test_continual_forgetting_and_loss():
    tasks = S.random_continual_tasks(8, 10, 3, rng=7)
    k = np.array([1, 4, 8])
    c = S.continual_learning(tasks, k, replacement=False, key=KEY, n_paths=300)
    # single pass: task k was just learnt, so the forgetting at k is over tasks seen; at k = T it
    # equals the average loss over all tasks (Tsipory et al. 2025, Remark 2.4)
    assert c.forgetting[-1] == pytest.approx(c.loss[-1], rel=1e-12)
    assert c.forgetting[0] == pytest.approx(0.0, abs=1e-20)
    ex = S.continual_learning(tasks, k, method="exact")
    mc = S.continual_learning(tasks, k, replacement=True, key=KEY, n_paths=2000)
    assert np.all(np.abs(mc.loss - ex.loss) < 3 * mc.loss_se)
    assert "forgetting" in mc.summary()


# ------------------------------------------------------------------------------------------------
# stepsize boundary and bad input
# ------------------------------------------------------------------------------------------------
def test_stepsize_rejected_and_divergence_shown():
    inst = S.rare_curvature(1.0, 1.0, 1.0)  # deterministic curvature beta = 1
    for eta in (2.0, 2.5):
        with pytest.raises(ValueError, match="eta"):
            S.expected_excess_risk(inst, eta, 10)
    T = np.array([1, 5, 20])
    at = S.simulate_divergence(inst, 2.0, T, key=KEY, n_paths=4)
    np.testing.assert_allclose(at.mean, inst.excess_risk(inst.w0), rtol=1e-12)  # reflection
    beyond = S.simulate_divergence(inst, 2.1, T, key=KEY, n_paths=4)
    np.testing.assert_allclose(
        beyond.mean / inst.excess_risk(inst.w0), ts.quadratic_gd_loss_ratio(T, 2.1, 1.0), rtol=1e-10
    )
    assert np.all(np.diff(beyond.mean) > 0)


def test_bad_input():
    inst = S.gaussian_design(10, [1.0, 0.5], rng=0)
    with pytest.raises(ValueError, match="T"):
        S.expected_excess_risk(inst, 0.1, 0)
    with pytest.raises(ValueError, match="T"):
        S.expected_excess_risk(inst, 0.1, [1, 2.5])
    with pytest.raises(ValueError, match="method"):
        S.expected_excess_risk(inst, 0.1, 5, method="mc")
    with pytest.raises(ValueError, match="key"):
        S.expected_excess_risk(inst, 0.1, 5, method="monte_carlo")
    with pytest.raises(ValueError, match="noise_var"):
        S.least_squares(np.eye(2), w_star=np.zeros(2), noise_var=-1.0)
    with pytest.raises(ValueError, match="A"):
        S.least_squares(np.array([[1.0, np.nan]]), w_star=np.zeros(2))
    with pytest.raises(ValueError, match="b"):
        S.least_squares(np.eye(3), np.zeros(2))
    with pytest.raises(ValueError, match="probs"):
        S.least_squares(np.eye(2), w_star=np.zeros(2), probs=[0.2, 0.2])
    with pytest.raises(ValueError, match="realizable"):
        S.continual_tasks([np.eye(2), np.eye(2)], [np.zeros(2), np.ones(2)])
    with pytest.raises(TypeError, match="instance"):
        S.expected_excess_risk("not an instance", 0.1, 5)
    with pytest.raises(ValueError, match="s2"):
        S.ar1(1.0, -0.5)
