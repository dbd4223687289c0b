"""The shape-sharing devices of the Uni-LoRA claim train exactly as the models they stand for:
rank-r LoRA as masked rank-4 LoRA (``lora_rank``) and Uni-LoRA with a zero-padded vector
(``pad_theta``), both derived in ``paper_checks/adapters/unilora.py``; and the pure helpers of
its parity sweep (the parity-d picker, the gate, the d grid, the rank-k shift)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
import nn.adapters as ad
from paper_checks.adapters._base import fit, xent
from paper_checks.adapters.unilora import (
    _rank_k_direction,
    lora_beats_head,
    lora_rank,
    pad_theta,
    parity_d,
    uni_dims,
)

X = jax.random.normal(jax.random.key(1), (64, 6))
Y = jax.random.randint(jax.random.key(2), (64,), 0, 4)
BASE = nn.MLP(6, 4, 8, 2, activation=jax.nn.relu, key=jax.random.key(0))


TOL = 1e-9  # float64 round-off (sums in another order) grown over 60 steps; a leak would be O(1)


def _train(model):
    return fit(model, lambda m: jnp.mean(xent(m(X), Y)), optax.adamw(3e-2, weight_decay=0.1), 60)[0]


def test_masked_lora_trains_as_rank_r_lora():
    big = lora_rank(ad.inject(BASE, "lora", key=jax.random.key(3), r=4, alpha=8.0), 2)
    small = ad.inject(BASE, "lora", key=jax.random.key(3), r=2, alpha=4.0)
    small = eqx.tree_at(
        lambda m: [la.A for la in m.layers().values()],
        small,
        [la.A[:2] for la in big.layers().values()],
    )
    big, small = _train(big), _train(small)
    np.testing.assert_allclose(big(X), small(X), rtol=TOL, atol=TOL)
    for la in big.layers().values():
        assert not np.any(np.asarray(la.A[2:])) and not np.any(np.asarray(la.B[:, 2:]))
    # the head alone: r = 0 leaves every update exactly 0
    inert = _train(lora_rank(ad.inject(BASE, "lora", key=jax.random.key(3), r=4, alpha=8.0), 0))
    np.testing.assert_array_equal(inert(X), BASE(X))


def test_padded_uni_lora_trains_as_uni_lora():
    small = ad.inject(BASE, "unilora", key=jax.random.key(4), r=2, d=5, seed=1)
    big = pad_theta(small, 9)
    assert big.shared["theta"].shape == (9,)
    big, small = _train(big), _train(small)
    np.testing.assert_allclose(big(X), small(X), rtol=TOL, atol=TOL)
    np.testing.assert_array_equal(big.shared["theta"][5:], 0.0)
    np.testing.assert_allclose(big.shared["theta"][:5], small.shared["theta"], rtol=TOL, atol=TOL)


def test_parity_d_picks_the_smallest_d_within_the_margin():
    lora = np.array([0.80, 0.82, 0.81])
    uni = np.array(
        [
            [0.70, 0.72, 0.71],  # -10 points
            [0.79, 0.815, 0.80],  # -0.83 points on average, SE 0.17 points
            [0.801, 0.819, 0.81],  # 0 points, SE 0.06 points
            [0.70, 0.70, 0.70],  # worse again: the first d within the margin counts
        ]
    )
    dims = (28, 56, 112, 224)
    assert parity_d(dims, uni, lora, margin=0.01) == 56
    assert parity_d(dims, uni, lora, margin=0.005) == 112
    assert parity_d(dims, uni, lora, margin=0.01, n_se=2.0) == 112  # the SE pushes 56 out
    assert parity_d(dims[:1], uni[:1], lora, margin=0.01) == -1  # none on the grid
    # pairing matters: the same values in another seed order have a larger SE
    assert parity_d((56,), uni[1:2], lora, margin=0.012, n_se=2.0) == 56
    assert parity_d((56,), uni[1:2, ::-1], lora, margin=0.012, n_se=2.0) == -1


def test_gate_needs_a_gain_beyond_two_paired_se():
    head = np.array([0.70, 0.75, 0.80, 0.72])
    assert lora_beats_head(head + [0.02, 0.03, 0.02, 0.03], head)
    assert not lora_beats_head(head + [0.05, -0.04, 0.06, -0.05], head)  # mean > 0, noisy
    assert not lora_beats_head(head, head + 0.01)


def test_uni_dims_double_from_28_and_end_at_D():
    assert uni_dims(64) == (28, 56, 112, 224, 448, 896, 1792, 1920)  # D = 4 (7 x 64 + 32)
    assert uni_dims(32) == (28, 56, 112, 224, 448, 896, 1024)


def test_rank_k_direction_has_rank_k_and_unit_scale_and_k1_is_the_rank1_draw():
    shape = (64, 32)
    d1 = _rank_k_direction(np.random.default_rng([0, 1000, 2]), shape, 1)
    rng = np.random.default_rng([0, 1000, 2])
    u, v = rng.standard_normal(64), rng.standard_normal(32)
    np.testing.assert_array_equal(d1, np.outer(u / np.linalg.norm(u), v / np.linalg.norm(v)))
    for k in (2, 4):
        dk = _rank_k_direction(np.random.default_rng([0, 1000, 2]), shape, k)
        assert np.linalg.matrix_rank(dk) == k
        assert 0.8 < np.linalg.norm(dk) < 1.2  # near-orthogonal unit terms / sqrt(k)
