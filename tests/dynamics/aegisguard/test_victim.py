"""The victim: its direct forward pass equals the nn.adapters model; the planted task."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics.aegisguard import victim as V

TASK = V.planted_task(key=jax.random.key(0), n_blocks=2, n_train=64, n_test=32)
MODEL = V.adapted_model(TASK.backbone, key=jax.random.key(1))


def test_direct_forward_equals_the_adapted_model():
    rng = np.random.default_rng(0)
    As, Bs = V.adapter_arrays(MODEL)
    Bs = tuple(jnp.asarray(rng.standard_normal(b.shape), b.dtype) for b in Bs)
    want = V.with_adapters(MODEL, As, Bs)(TASK.X_test)
    np.testing.assert_allclose(V.logits(MODEL, As, Bs, TASK.X_test), want, rtol=1e-6, atol=1e-6)


def test_b_zero_at_init_gives_the_backbone():
    As, Bs = V.adapter_arrays(MODEL)
    assert all(not np.any(np.asarray(b)) for b in Bs)
    np.testing.assert_array_equal(V.logits(MODEL, As, Bs, TASK.X_test), TASK.backbone(TASK.X_test))


def test_planted_task_shapes_and_set():
    assert TASK.planted.shape == (4,) and int(TASK.planted.sum()) == 3
    assert TASK.X_train.shape == (64, 16) and TASK.y_test.shape == (32,)
    assert len(V.adapter_arrays(MODEL)[0]) == 4


def test_planted_task_without_blocks():
    # n_blocks = 0 is allowed (input and head layers only); it crashed inside eqx.tree_at
    task = V.planted_task(key=jax.random.key(0), n_blocks=0, grades=(1.5, 1.0), n_train=8,
                          n_test=8)  # fmt: skip
    assert task.backbone.blocks == () and task.planted.tolist() == [True, True]
    assert np.isfinite(np.asarray(task.backbone(task.X_test))).all()


def test_training_fits_and_leaves_the_backbone():
    As, Bs = V.train_victim(MODEL, TASK.X_train, TASK.y_train, steps=60, key=jax.random.key(2))
    before = float(V.accuracy(MODEL, *V.adapter_arrays(MODEL), TASK.X_train, TASK.y_train))
    after = float(V.accuracy(MODEL, As, Bs, TASK.X_train, TASK.y_train))
    assert after > before
    trained = V.with_adapters(MODEL, As, Bs)
    np.testing.assert_array_equal(trained.model.inp.base.weight, MODEL.model.inp.base.weight)


def test_everything_trained_keeps_the_task_dtype_under_x64():
    # init_A divided float32 draws by a numpy float64, so under x64 every adapter, and the
    # attack tables built on them, ran in float64 (twice the time of a replicate)
    with jax.enable_x64(True):
        task = V.planted_task(key=jax.random.key(0), n_blocks=1, n_train=32, n_test=8)
        model = V.adapted_model(task.backbone, key=jax.random.key(1))
        As, Bs = V.train_victim(model, task.X_train, task.y_train, steps=2, key=jax.random.key(2))
    leaves = [task.X_train, *jax.tree.leaves(eqx.filter(task.backbone, eqx.is_array)), *As, *Bs]
    assert {str(a.dtype) for a in leaves} == {"float32"}


@pytest.mark.parametrize(
    "kwargs, name", [(dict(n_blocks=-1), "n_blocks"), (dict(grades=()), "grades"),
                     (dict(n_train=2.0), "n_train"), (dict(dtype=jnp.int32), "dtype"),
                     (dict(dtype="no such type"), "dtype")],
)  # fmt: skip
def test_bad_input_names_the_argument(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        V.planted_task(key=jax.random.key(0), **kwargs)
