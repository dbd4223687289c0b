"""Simulators of Chen & Luo 2025 (dynamics.transformer): effective dynamics through blow-up,
stage-2 key-query flow, the full model's gradient flow / descent, and its link to the theory."""

import jax
import numpy as np
import pytest

import dynamics.transformer as dt
from paper_checks import PROPERTIES, verify
from theory import transformer as th

D = 5


def _init(seed, d=D):
    g = np.random.default_rng(seed)
    WV, W1 = g.standard_normal((2, d, d))
    W2 = g.standard_normal(d)
    v = g.standard_normal(d)
    return WV, W1, W2, v / np.linalg.norm(v)


def test_effective_flow_invariants_energy_and_blowup():
    """Finite-time blow-up before E(0)^{-1/3} (Thm 1), Prop. 2's invariants along the solved flow,
    E nondecreasing with dE/dt >= 3 E^{4/3}, a non-degenerate start: the registry property
    ``transformer.flow_blowup_invariants`` (its one copy, searched by ``theorylab verify`` over
    width, scale and seed)."""
    row = verify(PROPERTIES["transformer.flow_blowup_invariants"], examples=8)
    assert row["status"] == "holds" and row["min_slack"] >= 0, row


def test_condensation_of_grown_columns():
    WV, W1, W2, v = _init(11)
    r = dt.effective_flow(WV, W1, W2, v, stop_norm=1e6)
    grown = np.linalg.norm(r.W_V[-1], axis=0) >= 1e3 * np.linalg.norm(WV, axis=0)
    assert grown.sum() >= 1
    cos = th.column_alignment(r.W_V[-1], v)
    assert np.all(np.abs(cos[grown]) >= 1 - 1e-6)
    a1, a2 = th.condition_fractions(r.u[-1], r.W1[-1], r.W2[-1])
    assert (a1, a2) == (1.0, 1.0)
    # flip the labels (v -> -v) and the sign of W2: the W_V path is unchanged, so every
    # alignment sign flips (E and the field are invariant under (v, W2) -> (-v, -W2))
    r2 = dt.effective_flow(WV, W1, -W2, -v, stop_norm=1e6)
    np.testing.assert_allclose(r2.W_V[-1], r.W_V[-1], rtol=1e-8)
    np.testing.assert_allclose(th.column_alignment(r2.W_V[-1], -v), -cos, atol=1e-12)


def test_key_query_solver_matches_closed_form_and_collapses():
    g = np.random.default_rng(2)
    U, _ = np.linalg.qr(g.standard_normal((D, D)))
    V, _ = np.linalg.qr(g.standard_normal((D, D)))
    Q0, K0 = g.standard_normal((2, D, D)) * 1e-2
    ts = np.linspace(0.0, 12.0, 13)
    for sig, k in (([1.5, 1.0, 0.6, 0.3, 0.1], 1), ([1.5, 1.5, 0.6, 0.3, 0.1], 2)):
        F = U @ np.diag(sig) @ V.T
        Q, K = dt.key_query_flow(F, Q0, K0, ts)
        Qc, Kc = th.key_query_closed_form(F, Q0, K0, ts)
        rel = np.linalg.norm(Q - Qc, axis=(1, 2)) / np.linalg.norm(Qc, axis=(1, 2))
        relk = np.linalg.norm(K - Kc, axis=(1, 2)) / np.linalg.norm(Kc, axis=(1, 2))
        assert rel.max() <= 1e-10 and relk.max() <= 1e-10
        ns = th.normalised_singular_values(Q)
        if k == 1:
            sr = th.stable_rank(Q)
            assert sr[-1] == pytest.approx(1.0, abs=1e-3)
            assert np.all(np.diff(sr[3:]) < 0)  # decreasing towards 1
            # sigma_2/sigma_1 decays like exp(-(s1 - s2) t)
            slope = np.polyfit(ts[6:], np.log(ns[6:, 1]), 1)[0]
            assert slope == pytest.approx(-(sig[0] - sig[1]), rel=0.02)
        else:
            assert ns[-1, 1] > 0.05 and ns[-1, 2] < 1e-3  # limit of rank 2
            assert th.stable_rank(Q)[-1] > 1.05


@pytest.fixture(scope="module")
def small_task():
    X, y = dt.gaussian_task(12, 3, 4, labels="bilinear", rng=0)
    return X, y


def test_gradient_descent_converges_to_gradient_flow(small_task):
    X, y = small_task
    m = dt.SmallInitTransformer.init(4, 0.3, key=jax.random.key(1))
    T = 20.0
    ref = dt.gradient_flow(m, X, y, T, ts=np.linspace(0.0, T, 201), rtol=1e-12, atol=1e-14)
    errs = []
    for lr in (0.1, 0.05):
        gd = dt.gradient_descent(m, X, y, lr, int(round(T / lr)), save_every=int(round(T / lr)))
        assert gd.t[-1] == pytest.approx(T)
        errs.append(np.linalg.norm(gd.weights["W_V"][-1] - ref.weights["W_V"][-1]))
    assert errs[1] < errs[0]
    assert errs[0] / errs[1] == pytest.approx(2.0, rel=0.1)  # first order in lr
    assert ref.loss[-1] < ref.loss[0]


def test_escape_time_scales_and_attention_is_quasi_static(small_task):
    X, y = small_task
    key = jax.random.key(0)
    res = [dt.escape_time(X, y, eps, key=key) for eps in (4e-3, 1e-3)]
    for r in res:
        assert r.ratio == pytest.approx(1.0, abs=1e-3)  # effective dynamics predicts t_esc
        assert r.wq_rel_change < 1e-2 * r.wv_rel_change  # W_Q quasi-static in stage 1
    slope = np.log(res[1].t_escape / res[0].t_escape) / np.log(1e-3 / 4e-3)
    assert slope == pytest.approx(-1.0, abs=0.01)
    assert res[1].wq_rel_change < res[0].wq_rel_change / 8  # O(eps^2): factor 16 expected


def test_label_flip_in_the_full_model(small_task):
    X, y = small_task
    m = dt.SmallInitTransformer.init(4, 0.05, key=jax.random.key(3))
    w = m.numpy()
    flipped = dt.SmallInitTransformer.from_arrays(w["W_Q"], w["W_K"], w["W_V"], w["W1"], -w["W2"])
    ts = np.linspace(0.0, 300.0, 201)
    a = dt.gradient_flow(m, X, y, 300.0, ts=ts)
    b = dt.gradient_flow(flipped, X, -y, 300.0, ts=ts)
    np.testing.assert_allclose(b.weights["W_V"], a.weights["W_V"], rtol=1e-7, atol=1e-12)
    v = th.condensation_direction(X, y)
    np.testing.assert_allclose(th.condensation_direction(X, -y), -v)
    ca = th.column_alignment(a.weights["W_V"][-1], v)
    cb = th.column_alignment(b.weights["W_V"][-1], th.condensation_direction(X, -y))
    np.testing.assert_allclose(cb, -ca, atol=1e-7)


def test_tasks():
    X, y = dt.anchor_task(50, s=6, n_keys=10, d=8, rng=1)
    assert X.shape == (50, 6, 8) and set(np.unique(y)) <= {-1.0, 1.0}
    X2, y2 = dt.anchor_task(50, s=6, n_keys=10, d=8, rng=1)
    np.testing.assert_array_equal(X, X2)
    X, y = dt.gaussian_task(10, 3, 2, rng=0)
    assert X.shape == (10, 3, 2) and np.all(np.abs(y) == 1)


def test_bad_input(small_task):
    X, y = small_task
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="eps"):
        dt.SmallInitTransformer.init(4, 0.0, key=key)
    with pytest.raises(ValueError, match="eps"):
        dt.escape_time(X, y, -1e-3, key=key)
    m = dt.SmallInitTransformer.init(4, 1e-2, key=key)
    with pytest.raises(ValueError, match="y"):
        dt.gradient_flow(m, X, np.where(y > 0, 1.0, 0.0), 1.0)
    with pytest.raises(ValueError, match="y"):
        dt.gradient_descent(m, X, y[:-1], 0.1, 10)
    with pytest.raises(ValueError, match="X"):
        dt.gradient_flow(m, X[:, :, :3], y, 1.0)
    with pytest.raises(ValueError, match="v"):
        dt.effective_flow(np.eye(3), np.eye(3), np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="W2"):
        dt.effective_flow(np.eye(3), np.eye(3), np.ones(2), np.array([1.0, 0, 0]))
    with pytest.raises(ValueError, match="W_K0"):
        dt.key_query_flow(np.eye(2), np.eye(2), np.eye(3), [0.0, 1.0])
    with pytest.raises(ValueError, match="lr"):
        dt.gradient_descent(m, X, y, 0.0, 10)
