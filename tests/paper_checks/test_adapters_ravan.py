"""The Ravan claim's client split: label-skewed clients draw from the task's classes in
Dirichlet proportions centred on the task's class frequencies, IID clients in the pool's."""

import jax
import numpy as np

import nn
from paper_checks.adapters import ravan
from paper_checks.adapters._base import D_IN, D_OUT


def test_heterogeneous_split_is_label_skewed_and_iid_is_not():
    teacher = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
    (xc, yc), (xv, yv), (xt, yt) = ravan._split_data(teacher, np.random.default_rng(0), 256, 512)
    assert xc.shape == (2, ravan.CLIENTS, 256, D_IN) and yc.shape == (2, ravan.CLIENTS, 256)
    assert xv.shape == xt.shape == (512, D_IN)

    def spread(y):  # mean total-variation distance of the clients' label histograms to the pool's
        h = np.stack([np.bincount(c, minlength=D_OUT) / len(c) for c in y])
        return np.abs(h - h.mean(0)).sum(1).mean() / 2

    # Dirichlet(1.2 p) over 4 classes: TV distance 0.25-0.5 as p is spread or uneven (0.25
    # here); IID with 256 draws: ~0.04
    assert spread(yc[0]) > 0.2 > 0.1 > spread(yc[1])


def test_heterogeneous_clients_together_hold_the_task_distribution():
    # proportions Dirichlet(0.3 * 4 * p): E[q] = p, the task's class frequencies, so the mean
    # over clients of their label histograms differs from the IID clients' only by noise
    teacher = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
    rng = np.random.default_rng(1)
    diffs = []
    for _ in range(40):
        (_, yc), _, _ = ravan._split_data(teacher, rng, 64, 8)
        h = [np.bincount(y.ravel(), minlength=D_OUT) / y.size for y in yc]
        diffs.append(h[0] - h[1])
    diffs = np.asarray(diffs)
    se = diffs.std(0, ddof=1) / np.sqrt(len(diffs))
    np.testing.assert_array_less(np.abs(diffs.mean(0)), 4 * se + 1e-12)
