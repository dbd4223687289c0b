"""Helpers of the MoORE claims: matched-fit interpolation, LoRA rank matching, task draws."""

import jax
import numpy as np
import pytest

import nn
import nn.adapters as ad
from paper_checks.adapters import moore
from paper_checks.adapters._base import D_IN, D_OUT


def test_matched_forgetting_interpolates_at_first_crossing():
    new = np.array([[1.0, 1.0], [0.8, 0.8], [0.6, 0.6], [0.7, 0.3]])  # means 1, .8, .6, .5
    orig = np.array([1.0, 2.0, 3.0, 9.0])
    assert moore.matched_forgetting(new, orig, 0.7) == pytest.approx(2.5, abs=1e-12)
    assert moore.matched_forgetting(new, orig, 0.8) == pytest.approx(2.0, abs=1e-12)
    assert moore.matched_forgetting(new, orig, 0.5) == pytest.approx(9.0, abs=1e-12)


def test_forgetting_at_matched_fit_uses_the_level_both_reach():
    steps = np.array([1.0, 0.5, 0.2])[:, None]
    r = {"lora": {"new": np.array([steps * [1, 1]]), "orig": np.array([[1.0, 3.0, 5.0]])},
         "moore": {"new": np.array([np.array([1.0, 0.5, 0.4])[:, None] * [1, 1]]),
                   "orig": np.array([[1.0, 2.0, 4.0]])}}
    # level = max(0.2, 0.4) = 0.4: MoORE at its end, LoRA two thirds of the way from 0.5 to 0.2
    np.testing.assert_allclose(moore.forgetting_at_matched_fit(r), [[3 + 2 / 3, 4.0]],
                               atol=1e-12)


def test_lora_rank_matches_the_moore_count():
    student = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(0))
    for tasks in (4, 5):
        r = moore.lora_rank(student, tasks)
        m = moore._adapter("moore", student, 0, tasks)
        lo = moore._adapter("lora", student, 0, tasks)
        per_rank = nn.count_params(lo) / r
        assert abs(nn.count_params(lo) - nn.count_params(m)) <= per_rank / 2
        assert lo.spec.config_dict["alpha"] == 2 * r
        assert nn.count_params(m) == ad.num_params("moore", m.spec.shapes, **m.spec.config_dict)


def test_tasks_shapes_and_domains():
    teacher = nn.MLP(D_IN, D_OUT, 32, 2, activation=jax.nn.relu, key=jax.random.key(1))
    d = moore._tasks(teacher, 3, seed=0, n=64, n_test=4096)
    assert d["train"][0].shape == (3, 64, D_IN) and d["train"][1].shape == (3, 64, D_OUT)
    assert d["test"][0].shape == (3, 4096, D_IN) and d["orig"][0].shape == (4096, D_IN)
    np.testing.assert_allclose(d["orig"][1], teacher(d["orig"][0]), atol=1e-12)
    # input means: ||mu_k|| = 2 (sample-mean norm within 5 SE, SE = sqrt(D_IN / 4096))
    norms = np.linalg.norm(np.asarray(d["test"][0]).mean(axis=1), axis=1)
    np.testing.assert_allclose(norms, 2.0, atol=5 * np.sqrt(D_IN / 4096))
