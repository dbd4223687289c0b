"""RSM's reward, score update and sampler against hand values (docs/papers/aegisguard.md, G3)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics.aegisguard import bandit as RL
from dynamics.aegisguard import victim as V

DL = np.array([0.30, 0.05, -0.02, 0.10])
SEL = np.ones(4, bool)


def test_literal_reward_matches_the_note_example():
    # G3 of docs/papers/aegisguard.md: r = (+0.228, -0.070, +0.141, -0.016); the noise-helped layer
    # is rewarded
    e = np.exp(DL)
    want = np.sign(DL) * (e - e.mean())
    np.testing.assert_allclose(RL.reward(DL, SEL, "literal"), want, rtol=1e-12)
    np.testing.assert_allclose(want, [0.228, -0.070, 0.141, -0.016], atol=1e-3)


def test_intent_reward_is_centred_on_the_probed_set():
    sel = np.array([True, True, False, True])
    r = np.asarray(RL.reward(DL, sel, "intent"))
    e = np.exp(DL[sel])
    np.testing.assert_allclose(r[sel], e - e.mean(), rtol=1e-12)
    assert r[2] == 0.0 and abs(r.sum()) < 1e-6


def test_score_update_is_a_sigmoid_gradient_step_on_selected_layers():
    s = np.array([0.0, 1.0, -2.0, 0.5])
    r = np.array([0.2, -0.1, 0.3, 1.0])
    sel = np.array([True, True, False, True])
    g = 1 / (1 + np.exp(-s))
    want = np.where(sel, s + 0.5 * r * g * (1 - g), s)
    np.testing.assert_allclose(RL.score_update(s, r, sel, 0.5), want, rtol=1e-12)


@pytest.mark.parametrize("sampler", RL.SAMPLERS)
def test_sampler_picks_n_layers_and_favours_high_scores(sampler):
    s = jnp.array([3.0, -3.0, 3.0, -3.0, 3.0, -3.0])
    picks = np.stack([np.asarray(RL.sample_layers(s, 2, key=jax.random.key(i), sampler=sampler))
                      for i in range(300)])  # fmt: skip
    assert (picks.sum(1) == 2).all()
    assert picks[:, ::2].mean() > picks[:, 1::2].mean()


def test_probe_is_zero_while_b_is_zero():
    task = V.planted_task(key=jax.random.key(0), n_blocks=1, n_train=32, n_test=8)
    m = V.adapted_model(task.backbone, key=jax.random.key(1))
    As, Bs = V.adapter_arrays(m)
    dL = RL.probe(m, As, Bs, task.X_train, task.y_train, key=jax.random.key(2))
    np.testing.assert_array_equal(dL, np.zeros(3))


def test_rsm_training_counts_rounds_and_moves_only_selected_layers():
    task = V.planted_task(key=jax.random.key(0), n_blocks=2, n_train=64, n_test=8)
    m = V.adapted_model(task.backbone, key=jax.random.key(1))
    As, Bs, s, count = RL.rsm_train(m, task.X_train, task.y_train, steps=20, period=20,
                                    n_select=2, key=jax.random.key(3))  # fmt: skip
    count = np.asarray(count)
    assert count.sum() == 2 and s.shape == (4,)
    for i, b in enumerate(Bs):
        assert bool(np.any(np.asarray(b))) == bool(count[i])


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="variant"):
        RL.reward(DL, SEL, "greedy")
    with pytest.raises(ValueError, match="n_select"):
        RL.sample_layers(np.zeros(3), 4, key=jax.random.key(0))
