"""The finite-n allowances of the BBP claim, checked against simulation at a smaller n."""

import numpy as np
from scipy.sparse.linalg import eigsh

from paper_checks.rmt import finite_n_allowance
from spectral import goe


def test_subcritical_overlap_is_one_over_n_one_minus_beta_squared():
    # E<v_max, x>^2 ≈ 1/(n (1 - beta)^2) for beta < 1 (derived in paper_checks/rmt.py).
    n, trials, beta = 400, 200, 0.6
    rng = np.random.default_rng(1)
    ov = []
    for _ in range(trials):
        w = goe(n, rng) / np.sqrt(n)
        x = rng.standard_normal(n)
        x /= np.linalg.norm(x)
        _, v = eigsh(w + beta * np.outer(x, x), k=1, which="LA", v0=np.ones(n), tol=1e-10)
        ov.append((v[:, 0] @ x) ** 2)
    ov = np.array(ov)
    predicted = finite_n_allowance(np.array([beta]), n)[1][0]
    se = ov.std(ddof=1) / np.sqrt(trials)
    # the heuristic is a leading-order size: it must match within 4 SE plus 25 %
    assert abs(ov.mean() - predicted) <= 4 * se + 0.25 * predicted, (ov.mean(), predicted, se)
    # and a wrong scaling (1/n without amplification) is rejected
    assert abs(ov.mean() - 1 / n) > 4 * se
