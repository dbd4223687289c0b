"""Random-matrix claims: the BBP transition of the rank-one spiked Wigner model.

Y = W/sqrt(n) + beta·x xᵀ with W a GOE matrix (off-diagonal variance 1) and ||x|| = 1; the limits
are in :mod:`theory.bbp` (Baik, Ben Arous & Péché 2005; Féral & Péché 2007, Thm 1.1;
Benaych-Georges & Nadakuditi 2011, Thm 2.1).

Verdicts (issue 44): ``rmt.bbp`` compares Monte Carlo means with the papers' limits, so each rule
carries the limit as the paper's effect (``paper=``, with the Monte Carlo SE and trial count); at
these sizes its power is about 1, so a failure reads "not reproduced".
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import eigsh

import theory.bbp as theory_bbp
from paper_checks import (
    Measurement,
    Replicates,
    claim,
    measure,
    memo,
    run_replicates,
    scaled,
    sizes,
    within,
    wrap,
)
from spectral import goe
from theory.bbp import tw_edge_shift

PAPER = "Baik, Ben Arous & Péché 2005; Benaych-Georges & Nadakuditi 2011"
BETAS = (0.25, 0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0)
SIZES = sizes(
    smoke=dict(n=300, trials=2), quick=dict(n=2000, trials=10), full=dict(n=4000, trials=40)
)


def bbp_trial(n: int, seed: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Trial ``t``: top eigenvalue and squared overlap at every beta of ``BETAS`` for one GOE
    matrix and one spike direction drawn from ``[seed, t]`` (common random numbers across beta).
    The top eigenpair is found by Lanczos."""
    rng = np.random.default_rng([seed, t])
    w = goe(n, rng) / np.sqrt(n)
    x = rng.standard_normal(n)
    x /= np.linalg.norm(x)
    v0 = rng.standard_normal(n)
    lam, ov = np.empty(len(BETAS)), np.empty(len(BETAS))
    for j, beta in enumerate(BETAS):
        vals, vecs = eigsh(w + beta * np.outer(x, x), k=1, which="LA", v0=v0, tol=1e-10)
        lam[j], ov[j] = vals[0], (vecs[:, 0] @ x) ** 2
    return lam, ov


def bbp_replicates(n: int, trials: int, seed: int) -> Replicates:
    """The ``trials`` independent trials of :func:`simulate_bbp`."""
    return Replicates(bbp_trial, (n, seed), trials, label=f"BBP n={n}")


@memo
def simulate_bbp(n: int, trials: int, seed: int = 0) -> dict:
    """Top eigenvalue and squared overlap of the spiked Wigner model on the grid ``BETAS`` over
    ``trials`` independent trials (:func:`bbp_trial`). Returns per-beta means and standard errors
    of the mean, with ``n`` and ``trials``.
    """
    res = np.array(run_replicates(bbp_replicates(n, trials, seed)))  # (trials, 2, beta)
    lam, ov = res[:, 0], res[:, 1]
    se = lambda a: a.std(0, ddof=1) / np.sqrt(trials)  # noqa: E731
    return dict(
        n=n,
        trials=trials,
        beta=np.array(BETAS),
        lam=lam.mean(0),
        lam_se=se(lam),
        overlap=ov.mean(0),
        overlap_se=se(ov),
    )


def finite_n_allowance(beta: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Known finite-n deviations from the limits, added to the 3-SE tolerance.

    - top eigenvalue, beta < 1: the mean Tracy–Widom shift |E TW₁| n^{-2/3} below the edge 2;
    - overlap, beta < 1: the edge eigenvector carries ~1/n of x, amplified by the resolvent
      factor (1 - beta·m)^{-2} with m = 1 the semicircle Stieltjes transform at the edge, i.e.
      1/(n (1 - beta)²) (derived here; checked by ``tests/paper_checks/test_rmt.py``);
    - beta > 1: Gaussian fluctuations of order n^{-1/2} (in the SE) and a bias O(1/n), allowed 1/n.
    """
    sub = beta < 1
    lam_tol = np.where(sub, abs(tw_edge_shift(n)), 1.0 / n)
    ov_tol = np.where(sub, 1.0 / (n * (1.0 - np.minimum(beta, 1 - 1e-12)) ** 2), 1.0 / n)
    return lam_tol, ov_tol


@claim(
    "rmt.bbp",
    paper=PAPER,
    statement="For Y = W/sqrt(n) + beta x x^T the top eigenvalue tends to beta + 1/beta for "
    "beta > 1 and to 2 below, and the squared overlap to 1 - 1/beta^2 (0 below).",
    where="Benaych-Georges & Nadakuditi 2011, Thm 2.1 and Ex. 3.1",
    sizes=SIZES,
    mutants=[
        wrap(
            "theory.bbp.bbp_top_eigenvalue",
            scaled(1.03),
            "outlier location beta + 1/beta 3 % high",
            name="outlier_3pct",
        ),
        wrap(
            "theory.bbp.bbp_overlap",
            lambda f: lambda b: np.maximum(1 - 1 / b, 0.0),
            "overlap 1 - 1/beta instead of 1 - 1/beta^2",
            name="overlap_power",
        ),
        wrap(
            "spectral.goe",
            scaled(1.05),
            "noise matrix 5 % too large (a normalisation bug)",
            name="goe_scale",
        ),
    ],
    replicates=lambda size, seed: [bbp_replicates(size.n, size.trials, seed)],
)
def _bbp(size, seed) -> Measurement:
    sim = simulate_bbp(size.n, size.trials, seed)
    n = sim["n"]
    # Points within ~3 n^{-1/3} of the transition sit in its critical window: left out.
    keep = np.abs(sim["beta"] - 1) * n ** (1 / 3) > 3
    beta = sim["beta"][keep]
    lam_allow, ov_allow = finite_n_allowance(beta, n)
    lam_tol = 3 * sim["lam_se"][keep] + lam_allow
    ov_tol = 3 * sim["overlap_se"][keep] + ov_allow
    return measure(
        within(
            sim["lam"][keep].round(5),
            np.round(theory_bbp.bbp_top_eigenvalue(beta), 5),
            lam_tol.round(5),
            name="top_eigenvalue",
            paper=np.round(theory_bbp.bbp_top_eigenvalue(beta), 5),
            se=sim["lam_se"][keep],
            replicates=sim["trials"],
        ),
        within(
            sim["overlap"][keep].round(5),
            np.round(theory_bbp.bbp_overlap(beta), 5),
            ov_tol.round(5),
            name="overlap",
            paper=np.round(theory_bbp.bbp_overlap(beta), 5),
            se=sim["overlap_se"][keep],
            replicates=sim["trials"],
        ),
        extra={"beta": beta.tolist()},
        detail=f"n={n}, {sim['trials']} trials per beta (seed {seed}); tolerance 3 SE plus the "
        "finite-n allowance",
    )
