"""Helpers of the MoORE claims: matched-fit interpolation, LoRA rank matching, task draws."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nn
import nn.adapters as ad
from paper_checks.adapters import moore
from paper_checks.adapters._base import D_IN, D_OUT, stack_trees


def test_matched_forgetting_interpolates_at_first_crossing():
    new = np.array([[1.0, 1.0], [0.8, 0.8], [0.6, 0.6], [0.7, 0.3]])  # means 1, .8, .6, .5
    orig = np.array([1.0, 2.0, 3.0, 9.0])
    assert moore.matched_forgetting(new, orig, 0.7) == pytest.approx(2.5, abs=1e-12)
    assert moore.matched_forgetting(new, orig, 0.8) == pytest.approx(2.0, abs=1e-12)
    assert moore.matched_forgetting(new, orig, 0.5) == pytest.approx(9.0, abs=1e-12)


def test_forgetting_at_matched_fit_uses_the_level_both_reach():
    steps = np.array([1.0, 0.5, 0.2])[:, None]
    r = {
        "lora": {"new": np.array([steps * [1, 1]]), "orig": np.array([[1.0, 3.0, 5.0]])},
        "moore": {
            "new": np.array([np.array([1.0, 0.5, 0.4])[:, None] * [1, 1]]),
            "orig": np.array([[1.0, 2.0, 4.0]]),
        },
    }
    # level = max(0.2, 0.4) = 0.4: MoORE at its end, LoRA two thirds of the way from 0.5 to 0.2
    np.testing.assert_allclose(moore.forgetting_at_matched_fit(r), [[3 + 2 / 3, 4.0]], atol=1e-12)


def _count(tree):
    return sum(a.size for a in jax.tree.leaves(tree))


def test_baseline_ranks_match_the_moore_count():
    student = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
    for tasks in (4, 5):
        m = _count(moore._adapter("moore", student, 0, tasks)[0])
        shapes = [(32, D_IN), (32, 32)]
        assert m == ad.num_params("moore", shapes, num_tasks=tasks, **moore.MOORE_CONFIG)
        for method, r in (
            ("lora", moore.lora_rank(student, tasks)),
            ("lora_task", moore.task_lora_rank(student, tasks)),
        ):
            n = _count(moore._adapter(method, student, 0, tasks)[0])
            per_rank = n / r
            assert abs(n - m) <= per_rank / 2, (method, n, m)


def test_task_lora_is_lora_at_init_and_conditions_on_the_task():
    student = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
    t, base = moore._adapter("lora_task", student, 0, 3)
    x = jax.random.normal(jax.random.key(2), (8, D_IN))
    np.testing.assert_array_equal(t(base, x, 1), student(x))  # B = 0: the base exactly
    t = jax.tree.map(lambda a: a + 0.1, t)
    g = [gi.at[2].set(0.0) for gi in t.G]  # task 2 untouched by its own scaling
    t2 = moore.TaskLoRA(t.A, t.B, g, t.scale)
    assert not np.allclose(t2(base, x, 1), t2(base, x, 2))


def test_original_task_gets_a_null_embedding():
    student = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
    tr, fr = moore._adapter("moore", student, 0, 3)
    for q in nn.combine(tr, fr).layers().values():
        np.testing.assert_array_equal(q.task_embed[0], 0.0)
        assert np.all(np.abs(q.task_embed[1:]).sum(1) > 0)


def test_tasks_shapes_and_domains():
    teacher = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(1))
    d = moore._tasks(teacher, 3, seed=0, n=64, n_test=4096)
    assert d["train"][0].shape == (3, 64, D_IN) and d["train"][1].shape == (3, 64, D_OUT)
    assert d["test"][0].shape == (3, 4096, D_IN) and d["orig"][0].shape == (4096, D_IN)
    np.testing.assert_allclose(d["orig"][1], teacher(d["orig"][0]), atol=1e-12)
    # input means: ||mu_k|| = 2 (sample-mean norm within 5 SE, SE = sqrt(D_IN / 4096))
    norms = np.linalg.norm(np.asarray(d["test"][0]).mean(axis=1), axis=1)
    np.testing.assert_allclose(norms, 2.0, atol=5 * np.sqrt(D_IN / 4096))


def test_column_space_residual_is_round_off_unless_u_moves():
    student = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
    teacher = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(1))
    joint = stack_trees([moore._tasks(teacher, 2, seed=s, n=8, n_test=32) for s in range(2)])
    joint["ids"] = jnp.tile(jnp.arange(1, 3), (2, 1))
    halves = [moore._adapter("moore", student, s, 3) for s in range(2)]
    fr = halves[0][1]
    # a trained router and rotation (random, not zero) keep col(W0): U is frozen
    tr = stack_trees([jax.tree.map(lambda a: a + 0.3, h[0]) for h in halves])
    res = moore.column_space_residual(tr, fr, student, joint, per_task=4)
    assert res.shape == (2,) and np.all(res < 1e-12)
    # U moved (the bug the claim must catch): the weight leaves col(W0)
    model = nn.combine(*halves[0])
    mask = eqx.tree_at(moore._moore_u, nn.trainable_mask(model), replace=[True] * 2)
    tr_u, fr_u = nn.split(model, mask)
    tr_u = jax.tree.map(lambda a: a + 0.3, tr_u)
    tr_u = stack_trees([tr_u, tr_u])
    res_u = moore.column_space_residual(tr_u, fr_u, student, joint, per_task=4)
    assert np.all(res_u > 0.01)
