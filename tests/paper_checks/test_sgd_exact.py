"""The closed forms the sgd claims derive (paper_checks.sgd), checked by enumeration."""

import itertools

import numpy as np
import pytest

from paper_checks.sgd import kaczmarz_second_moment, one_of_m_loss


@pytest.mark.parametrize("m", [1, 2, 3, 4])
@pytest.mark.parametrize("replacement", [True, False])
def test_one_of_m_loss_by_enumerating_orderings(m, replacement):
    """Loss 1/m until task 0 is drawn, 0 after: the mean over every ordering."""
    for k in range(1, 7):
        if replacement:
            orders = list(itertools.product(range(m), repeat=k))
        else:  # fresh permutations, concatenated until k tasks are drawn
            epochs = -(-k // m)
            orders = [
                sum(p, ())[:k]
                for p in itertools.product(itertools.permutations(range(m)), repeat=epochs)
            ]
        expected = np.mean([0.0 if 0 in o else 1.0 / m for o in orders])
        assert one_of_m_loss(m, k, replacement=replacement) == pytest.approx(expected, abs=1e-15)


def test_kaczmarz_second_moment_by_enumerating_row_sequences():
    """E F(x_T) over every sequence of T rows (probability prod ||a_i||^2/||A||_F^2): the
    worst start is the top eigenvalue of that quadratic form, x0 = 0 its value at -x*."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((5, 3)) * np.array([1.0, 0.5, 0.2])
    b = A @ rng.standard_normal(3)
    norms2 = np.sum(A**2, axis=1)
    p, U = norms2 / norms2.sum(), A / np.sqrt(norms2)[:, None]
    H = A.T @ A / norms2.sum()
    e0 = -np.linalg.lstsq(A, b, rcond=None)[0]
    T = np.array([1, 2, 4])
    worst, start = kaczmarz_second_moment(A, b, T)
    for t, w, s in zip(T, worst, start, strict=True):
        G = np.zeros((3, 3))
        for seq in itertools.product(range(5), repeat=int(t)):
            M = np.eye(3)
            for i in seq:  # e_t = P_{i_t} ... P_{i_1} e_0
                M = (np.eye(3) - np.outer(U[i], U[i])) @ M
            G += np.prod(p[list(seq)]) * M.T @ (H / 2) @ M
        assert w == pytest.approx(np.linalg.eigvalsh(G)[-1], rel=1e-12)
        assert s == pytest.approx(e0 @ G @ e0 / (e0 @ e0), rel=1e-12)
