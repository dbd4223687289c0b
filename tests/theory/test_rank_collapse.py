"""theory.rank_collapse: residual norms by hand, Dong et al.'s bound, and the collapse laws derived
in the module docstring checked against an independent NumPy simulation of a pure-attention
stack."""

import math

import numpy as np
import pytest

from theory.rank_collapse import (
    collapse_recursion_log10,
    composite_residual,
    dong_bound_log10,
    hopfield_bound_log10,
    relative_residual,
)


def test_relative_residual_by_hand():
    X = np.array([[1.0, 1.0], [3.0, 1.0]])  # mean row (2, 1); residual rows (-1, 0), (1, 0)
    assert relative_residual(X) == pytest.approx(math.sqrt(2 / 12), rel=1e-15)
    assert relative_residual(np.outer(np.ones(5), [1.0, -2.0, 3.0])) == 0.0
    batch = np.stack([X, 2 * X])
    np.testing.assert_allclose(relative_residual(batch), [math.sqrt(2 / 12)] * 2, rtol=1e-15)


def test_composite_residual_by_hand():
    X = np.array([[0.0, 2.0], [2.0, 0.0], [1.0, 1.0]])  # mean (1, 1): |Res| rows (1,1),(1,1),(0,0)
    # largest column sum 2, largest row sum 2 -> sqrt(2 * 2)
    assert composite_residual(X) == pytest.approx(2.0, rel=1e-15)


def test_dong_bound_closed_form():
    # c^{(3^L-1)/2} r^{3^L} at L = 2: c^4 r^9
    assert dong_bound_log10(0.5, 2, 3.0) == pytest.approx(4 * math.log10(3) + 9 * math.log10(0.5))
    assert dong_bound_log10(0.5, 0, 3.0) == pytest.approx(math.log10(0.5))


def test_hopfield_bound_dominates_its_geometric_term():
    for L in range(6):
        b = hopfield_bound_log10(0.3, L, 0.5, 2.0, 1.5)
        assert b >= L * math.log10(1.5 * 0.5) + math.log10(0.3) - 1e-12
    assert hopfield_bound_log10(0.3, 0, 0.5, 2.0, 1.5) == pytest.approx(math.log10(0.3))


def test_collapse_recursion_laws():
    v = collapse_recursion_log10(-0.1, -1.0, 6, 0.0)
    dec = -np.diff(v)
    np.testing.assert_allclose(dec[1:] / dec[:-1], 3.0, rtol=1e-12)
    m = collapse_recursion_log10(-0.1, -0.7, 8, 0.5)
    np.testing.assert_allclose(np.diff(m, 2), math.log10(0.5), rtol=1e-12)
    late = collapse_recursion_log10(-2.0, -3.0, 9, 0.8, start=3)
    assert len(late) == 7 and late[1] - late[0] == -1.0
    np.testing.assert_allclose(np.diff(late, 2), math.log10(0.8), rtol=1e-12)


def _stack(rng, T=16, d=32, H=4, depth=8, alpha_prime=0.5):
    """Independent NumPy pure-attention stack (no skip/MLP/norm) with h_1 = S_1."""
    X = rng.standard_normal((T, d))
    out, h = [X], None
    for _ in range(depth):
        Wq, Wk, Wv, Wo = rng.standard_normal((4, d, d)) / math.sqrt(d)
        q, k, v = ((X @ W).reshape(T, H, -1).transpose(1, 0, 2) for W in (Wq, Wk, Wv))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d // H)
        h = s if h is None else alpha_prime * h + (1 - alpha_prime) * s
        p = np.exp(h - h.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        X = (p @ v).transpose(1, 0, 2).reshape(T, d) @ Wo
        out.append(X)
    return np.log10(relative_residual(np.stack(out)))


@pytest.mark.parametrize("alpha_prime,depth", [(0.5, 8), (0.8, 11)])
def test_derived_law_matches_simulation(alpha_prime, depth):
    """Mean growth of the log10 decrement from depth 3 on equals -log10 alpha' (derived here)."""
    rng = np.random.default_rng(7)
    l = np.array([_stack(rng, depth=depth, alpha_prime=alpha_prime) for _ in range(24)])
    s = ((l[:, depth - 1] - l[:, depth]) - (l[:, 2] - l[:, 3])) / (depth - 3)
    se = s.std(ddof=1) / math.sqrt(len(s))
    assert abs(s.mean() - abs(math.log10(alpha_prime))) <= 3 * se + 0.02, (s.mean(), se)


def test_vanilla_decrement_ratio_near_three():
    rng = np.random.default_rng(3)
    l = np.array([_stack(rng, depth=3, alpha_prime=0.0) for _ in range(24)])
    d2, d3 = (l[:, 1] - l[:, 2]).mean(), (l[:, 2] - l[:, 3]).mean()
    assert d3 / d2 > 2.5  # Dong et al.'s cube law: ratio 3 asymptotically (observed ~3.3)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: dong_bound_log10(0.5, -1, 2.0), "depth"),
        (lambda: hopfield_bound_log10(0.5, 2, 1.5, 1.0, 1.0), "alpha_prime"),
        (lambda: collapse_recursion_log10(-0.1, -1.0, 5, -0.1), "alpha_prime"),
        (lambda: relative_residual(np.ones(3)), "X"),
        (lambda: relative_residual(np.zeros((2, 2))), "X"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cubic_collapse_has_decrement_ratio_three():
    """Derivation used by mha.rank_collapse: log10 res_{l+1} = 3 log10 res_l + log10 c makes the
    decrements l_l - l_{l+1} grow by exactly 3 per layer, whatever the constant c."""
    import sympy as sp

    l0, c = sp.symbols("l0 c", real=True)
    l = [l0]
    for _ in range(3):
        l.append(3 * l[-1] + c)
    d = [l[i] - l[i + 1] for i in range(3)]
    assert sp.simplify(d[1] / d[0] - 3) == 0
    assert sp.simplify(d[2] / d[1] - 3) == 0
