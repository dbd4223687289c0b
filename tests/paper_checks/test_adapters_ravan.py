"""The Ravan claim's client split: label-skewed clients draw from the task's classes in the
Dirichlet proportions, IID clients in the pool's."""

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

    # Dirichlet(0.3) over 4 classes: expected TV distance ~0.5; IID with 256 draws: ~0.04
    assert spread(yc[0]) > 0.25 > 0.1 > spread(yc[1])
