"""Rankings: top-k, depth rules, and the exhaustive random/oracle lookups on a hand table."""

import jax
import numpy as np
import pytest

from dynamics.aegisguard import attack as A
from dynamics.aegisguard import baselines as BL
from dynamics.aegisguard import victim as V


def test_top_k_and_depth():
    np.testing.assert_array_equal(BL.top_k(np.array([0.1, 0.9, 0.5, 0.9]), 2),
                                  [False, True, False, True])  # fmt: skip
    np.testing.assert_array_equal(BL.top_k(BL.depth_scores(4, "deep"), 1), [0, 0, 0, 1])
    np.testing.assert_array_equal(BL.top_k(BL.depth_scores(4, "shallow"), 2), [1, 1, 0, 0])


def test_random_and_oracle_over_a_hand_table():
    masks = A.subset_masks(3)
    table = masks.sum(1) * 0.1 + masks[:, 0] * 0.05  # accuracy rises with what is shielded
    # size 1: subsets {0}, {1}, {2} -> 0.15, 0.1, 0.1
    assert BL.random_expected(table, 1) == pytest.approx((0.15 + 0.1 + 0.1) / 3)
    assert BL.oracle(table, 1) == pytest.approx(0.1)
    assert BL.oracle(table, 3) == pytest.approx(0.35)


def test_magnitude_and_probe_scores():
    task = V.planted_task(key=jax.random.key(0), n_blocks=1, n_train=64, n_test=8)
    m = V.adapted_model(task.backbone, key=jax.random.key(1))
    As, Bs = V.train_victim(m, task.X_train, task.y_train, steps=10, key=jax.random.key(2))
    mag = BL.magnitude_scores(m, As, Bs)
    np.testing.assert_allclose(mag[1], np.linalg.norm(np.asarray(Bs[1]) @ np.asarray(As[1])),
                               rtol=1e-5)  # fmt: skip
    p = BL.probe_scores(m, As, Bs, task.X_train, task.y_train, draws=4, key=jax.random.key(3))
    assert p.shape == (3,) and np.all(np.isfinite(p))
