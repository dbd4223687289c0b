"""Tests of the SGD performance-estimation SDP (dynamics.sgd.pep_worst_case)."""

import numpy as np
import pytest

import dynamics.sgd as S
import theory.sgd as ts


@pytest.mark.parametrize("T", [1, 2, 3])
@pytest.mark.parametrize("h", [0.5, 1.0, 1.5])
def test_pep_single_function_is_tight_gd_rate(T, h):
    # n = 1 is gradient descent: worst case beta D^2 max(1/(4Th+2), (1-h)^{2T}/2)
    # (Drori & Teboulle 2014; Taylor, Hendrickx & Glineur 2017, tight for 0 < h < 2)
    r = S.pep_worst_case(T, 1, h / 2.0, beta=2.0, dist2=3.0)
    expect = 2.0 * 3.0 * max(1 / (4 * T * h + 2), (1 - h) ** (2 * T) / 2)
    assert r.value == pytest.approx(expect, rel=2e-4)


def test_pep_upper_bounds_concrete_instances():
    T, n, be = 3, 2, 1.0
    worst = S.pep_worst_case(T, n, be).value
    gen = np.random.default_rng(0)
    seen = 0.0
    for _ in range(200):
        A = gen.standard_normal((n, 3))
        A /= np.sqrt(np.max(np.sum(A**2, axis=1)))  # beta = 1
        w0 = gen.standard_normal(3)
        w0 /= np.linalg.norm(w0)
        inst = S.least_squares(A, w_star=np.zeros(3), w0=w0)  # ||w0 - w*|| <= 1 (closest w*)
        seen = max(seen, S.expected_excess_risk(inst, be, T).mean[0] / inst.dist2)
    assert seen <= worst * (1 + 1e-6)
    assert seen > 0.1 * worst  # and it is not vacuous
    # the worst case sits below Thm 1's shape with c_bias = 1 here
    assert worst <= ts.bias_term(T, be, 1.0, 1.0)


@pytest.mark.parametrize("be", [0.5, 1.5])
def test_pep_solvers_agree(be):
    # the same conic data through Clarabel (upper-triangle packing) and SCS (lower-triangle)
    clarabel = S.pep_worst_case(2, 2, be)
    scs = S.pep_worst_case(2, 2, be, solver="SCS", eps=1e-9)
    assert scs.value == pytest.approx(clarabel.value, rel=1e-5)


@pytest.mark.parametrize("be", [0.5, 1.5])
def test_pep_symmetry_reduction_is_exact(be, monkeypatch):
    # n = 2: the reduced SDP (two Gram blocks, f_1 tied to f_0) equals the unreduced one
    import dynamics.sgd._pep as pep

    reduced = S.pep_worst_case(3, 2, be).value
    N = 1 + 2 * 15
    monkeypatch.setattr(
        pep,
        "_symmetry_blocks",
        lambda nodes, index, n: ((N,), np.arange(N), np.ones(N), np.full(N, -1), np.zeros(N)),
    )
    full = S.pep_worst_case(3, 2, be)
    assert full.gram_size == N and full.n_constraints == 2 * 16 * 15
    assert reduced == pytest.approx(full.value, rel=1e-6)


def test_pep_bad_input():
    with pytest.raises(ValueError, match="eta"):
        S.pep_worst_case(2, 2, 2.0)
    with pytest.raises(ValueError, match="nodes"):
        S.pep_worst_case(9, 3, 1.0)
    with pytest.raises(ValueError, match="solver"):
        S.pep_worst_case(1, 1, 1.0, solver="MOSEK")


@pytest.mark.parametrize("T,n,be", [(2, 2, 1.0), (2, 2, 1.5), (3, 2, 0.5)])
def test_pep_matches_pepit(T, n, be):
    pytest.importorskip("PEPit", reason="PEPit is an optional test-only dependency (issue 5)")
    ours = S.pep_worst_case(T, n, be).value
    theirs = S.pepit_worst_case(T, n, be)
    assert ours == pytest.approx(theirs, rel=1e-3)
