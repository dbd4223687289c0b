"""SAC: the schedule, exact group counts, and the cost model's bytes after pruning."""

import jax
import jax.numpy as jnp
import numpy as np

from dynamics.aegisguard import pruning as P
from dynamics.aegisguard import victim as V
from theory import aegisguard as C

# float64, so the Taylor importance is checked against autodiff to 1e-12
TASK = V.planted_task(key=jax.random.key(0), n_blocks=2, n_train=128, n_test=8, dtype=jnp.float64)
MODEL = V.adapted_model(TASK.backbone, key=jax.random.key(1))
AS, BS = V.train_victim(MODEL, TASK.X_train, TASK.y_train, steps=30, key=jax.random.key(2))


def test_quota_formula_by_hand():
    # (R_total - R_t) / ((T - t + delta) sigma(s)) (1 - alpha + alpha t / T) at R left 6, t 1,
    # T 4, delta 1, s 0 (sigma 1/2), alpha 0.5: 6 / (4 * 0.5) * (0.5 + 0.125) = 1.875
    q = P.sac_quota(6.0, 1, 4, np.array([0.0, np.log(3.0)]), alpha=0.5, delta=1.0)
    np.testing.assert_allclose(q, [1.875, 6 / (4 * 0.75) * 0.625], rtol=1e-12)


def test_sac_prunes_exactly_the_target_and_zeroes_those_rows():
    shield = np.array([True, False, True, True])
    s = np.array([0.3, 0.0, -0.2, 0.1])
    As, Bs, keep = P.sac_prune(MODEL, AS, BS, TASK.X_train, TASK.y_train, shield, s, ratio=0.3,
                               group=4, steps=40, period=10, key=jax.random.key(3))  # fmt: skip
    groups = [b.shape[0] // 4 for b in BS]  # 8, 8, 8, 2
    # round(0.3 * 18) = round(5.4) = 5
    target = round(0.3 * sum(g for g, on in zip(groups, shield, strict=True) if on))
    pruned = [g - int(np.sum(k)) for g, k in zip(groups, keep, strict=True)]
    assert sum(pruned) == target and pruned[1] == 0
    assert all(int(np.sum(k)) >= 1 for k in keep)
    for b, k in zip(Bs, keep, strict=True):
        rows = np.repeat(np.asarray(k), 4)
        assert not np.any(np.asarray(b)[~rows])
    # the bookkept bytes change exactly as the cost model's formula says
    shapes = [tuple(b.shape[:1]) + (a.shape[1],) for a, b in zip(AS, BS, strict=True)]
    kept = [4 * int(np.sum(k)) for k in keep]
    full = C.shielded_cost(shapes, list(shield), 4)
    cut = C.shielded_cost(shapes, list(shield), 4, kept_out=kept)
    assert full.param_bytes - cut.param_bytes == 4 * 4 * 4 * target  # r * group * bytes * groups
    assert full.tee_to_host_bytes - cut.tee_to_host_bytes == 4 * 4 * target


def test_importance_is_taylor_on_b_rows():
    imp = P.group_importance(MODEL, AS, BS, TASK.X_train, TASK.y_train, group=4)
    g = jax.grad(lambda bs: V._ce(MODEL, AS, bs, TASK.X_train, TASK.y_train))(BS)
    want = np.abs(np.asarray(BS[0]) * np.asarray(g[0])).reshape(8, 4, -1).sum((1, 2))
    np.testing.assert_allclose(imp[0], want, rtol=1e-12)
