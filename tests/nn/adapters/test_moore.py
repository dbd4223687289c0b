"""MoORE: identity with the base layer at init, orthogonal rank-one experts, column space of W0."""

import equinox as eqx
import jax
import numpy as np
import pytest

import nn
import nn.adapters as ad


def _mlp(seed=0):
    return nn.MLP(12, 6, 16, 1, activation=jax.nn.relu, key=jax.random.key(seed))


def _moore(seed=0, tasks=3):
    return ad.inject(
        _mlp(),
        "moore",
        targets="layers.0",
        key=jax.random.key(seed),
        r=4,
        num_experts=8,
        task_dim=5,
        num_tasks=tasks,
    )


def test_moore_equals_base_at_init_and_count():
    a = _moore()
    x = jax.random.normal(jax.random.key(3), (7, 12))
    base = _mlp()
    np.testing.assert_allclose(a(x, task=1), base(x), atol=1e-12)
    layer = a.layers()["layers.0"]
    np.testing.assert_allclose(ad.householder_matrix(layer.householder), np.eye(12), atol=1e-13)
    assert nn.count_params(a) == ad.num_params("moore", a.spec.shapes, **a.spec.config_dict)
    assert nn.count_params(a) == 4 * 12 + 8 * 12 + 12 * (8 + 5) + 3 * 5


@pytest.mark.parametrize("seed", [0, 1])
def test_moore_column_space_orthogonal_experts_and_singular_values(seed, randomise):
    a = randomise(_moore(seed), seed + 5)
    layer = a.layers()["layers.0"]
    x = jax.random.normal(jax.random.key(seed), (12,))
    for t in range(3):
        w = layer.effective_weight(x, t)
        u = layer.U
        np.testing.assert_allclose((np.eye(16) - u @ u.T) @ w, 0, atol=1e-12)  # col(W0) kept
        g = np.sort(np.asarray(layer.gates(x, t)))[::-1]
        np.testing.assert_allclose(np.linalg.svd(np.asarray(w), compute_uv=False), g, atol=1e-12)
        y = a.bind(task=t)(x[None])
        np.testing.assert_allclose(
            y[0],
            nn.MLP.__call__(eqx.tree_at(lambda m: m.layers[0], _mlp(), _dense(w, layer)), x),
            atol=1e-12,
        )
    r = ad.householder_matrix(layer.householder)
    np.testing.assert_allclose(r.T @ r, np.eye(12), atol=1e-13)
    v = layer.V
    experts = [np.outer(u[:, j], r.T @ v[:, j]) for j in range(v.shape[1])]
    gram = np.array([[np.sum(e1 * e2) for e2 in experts] for e1 in experts])
    np.testing.assert_allclose(gram, np.eye(len(experts)), atol=1e-12)


def _dense(w, layer):
    """The adapted base Linear with its weight replaced by ``w``."""
    assert layer.shape == w.shape
    return eqx.tree_at(lambda m: m.weight, _mlp().layers[0], w)


def test_moore_is_not_mergeable():
    with pytest.raises(ValueError, match="not mergeable"):
        ad.merge(_moore())
    with pytest.raises(ValueError, match="even"):
        ad.inject(_mlp(), "moore", key=jax.random.key(0), r=3)


@pytest.mark.parametrize("rows", [1, 11, 12, 40])
def test_moore_forward_matrix_and_reflection_paths_agree(rows, randomise):
    """A batch of at least ``n`` rows applies ``R`` as one matrix, a smaller one reflection by
    reflection: both give ``W_eff(x, t) x + b`` row by row."""
    a = randomise(_moore(2), 9)
    layer = a.layers()["layers.0"]
    x = jax.random.normal(jax.random.key(rows), (rows, 12))
    y = layer.forward(x, {"task": 2})
    want = np.stack([layer.effective_weight(xi, 2) @ xi for xi in x]) + layer.bias
    np.testing.assert_allclose(y, want, atol=1e-12)
    np.testing.assert_allclose(
        ad.householder_apply(layer.householder, x),
        x @ ad.householder_matrix(layer.householder).T,
        atol=1e-12,
    )
