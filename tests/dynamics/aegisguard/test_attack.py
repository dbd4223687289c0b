"""The attacker never reads a shielded array; the feature-leakage caveat is exact."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics.aegisguard import attack as A
from dynamics.aegisguard import victim as V

TASK = V.planted_task(key=jax.random.key(0), n_blocks=1, n_train=64, n_test=64)
MODEL = V.adapted_model(TASK.backbone, key=jax.random.key(1))
AS, BS = V.train_victim(MODEL, TASK.X_train, TASK.y_train, steps=5, key=jax.random.key(2))
SHIELD = np.array([True, False, True])


def _attack(As, Bs):
    view = A.expose(MODEL, As, Bs, SHIELD)
    y = A.query_labels(MODEL, AS, BS, TASK.X_train[:16])
    return view, A.attack(view, TASK.X_train[:16], y, epochs=2, batch=8, key=jax.random.key(3))


def test_view_holds_no_shielded_value():
    view, _ = _attack(AS, BS)
    for i, on in enumerate(SHIELD):
        for got, real in ((view.As[i], AS[i]), (view.Bs[i], BS[i])):
            if on:
                assert not np.any(np.asarray(got)), "a shielded factor reached the view"
            else:
                np.testing.assert_array_equal(got, real)
    # the view's own model carries no adapter values either (backbone only)
    vA, vB = V.adapter_arrays(view.model)
    assert not any(np.any(np.asarray(x)) for x in (*vA, *vB))


def test_surrogate_is_blind_to_shielded_arrays():
    """Replacing every shielded factor (by -7 or by 1e30) leaves the surrogate
    bit-identical: the attacker's computation never reads them."""
    _, (sA, sB) = _attack(AS, BS)
    for fill in (-7.0, 1e30):
        As = tuple(jnp.full_like(a, fill) if on else a for a, on in zip(AS, SHIELD, strict=True))
        Bs = tuple(jnp.full_like(b, fill) if on else b for b, on in zip(BS, SHIELD, strict=True))
        _, (tA, tB) = _attack(As, Bs)
        for x, y in zip((*sA, *sB), (*tA, *tB), strict=True):
            np.testing.assert_array_equal(x, y)


def test_attack_takes_the_view_only():
    params = set(inspect.signature(A.attack).parameters)
    assert params == {"view", "X_query", "y_query", "epochs", "batch", "lr_shielded",
                      "lr_exposed", "key"}  # fmt: skip
    with pytest.raises(TypeError, match="view"):
        A.attack(MODEL, TASK.X_train[:8], TASK.y_train[:8], key=jax.random.key(0))


def test_white_box_view_is_the_victim():
    view = A.expose(MODEL, AS, BS, np.zeros(3, bool))
    for x, y in zip((*view.As, *view.Bs), (*AS, *BS), strict=True):
        np.testing.assert_array_equal(x, y)


def test_subset_masks_and_index_are_inverse():
    masks = A.subset_masks(4)
    assert masks.shape == (16, 4) and not masks[0].any() and masks[-1].all()
    assert [A.subset_index(m) for m in masks] == list(range(16))


def test_leakage_ends():
    np.testing.assert_allclose(A.leakage([0.4, 0.8, 0.6], 0.4, 0.8), [0.0, 1.0, 0.5])
    with pytest.raises(ValueError, match="acc_white_box"):
        A.leakage(0.5, 0.6, 0.6)


def test_least_squares_recovers_a_visible_adapter_exactly():
    """G1: with (x, dW x) visible at the boundary, d_in generic queries identify dW."""
    rng = np.random.default_rng(0)
    dW = rng.standard_normal((32, 4)) @ rng.standard_normal((4, 16))
    X = rng.standard_normal((16, 16))
    rec = A.recover_adapter(X, X @ dW.T)
    assert np.linalg.norm(rec - dW) / np.linalg.norm(dW) < 1e-12
    short = A.recover_adapter(X[:15], X[:15] @ dW.T)
    assert np.linalg.norm(short - dW) / np.linalg.norm(dW) > 1e-3


def test_recover_bad_input_names_argument():
    with pytest.raises(ValueError, match="Y"):
        A.recover_adapter(np.ones((4, 3)), np.ones((5, 2)))
    with pytest.raises(ValueError, match="X"):
        A.recover_adapter(np.full((4, 3), np.nan), np.ones((4, 2)))
