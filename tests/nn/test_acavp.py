"""ACAVP's prompts: identity at identity parameters, warp conventions, the empty-region mask,
gradients to every prompt parameter, label maps, and argument checks naming the argument."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nn import acavp as A

KEY = jax.random.key(0)
X = jax.random.uniform(KEY, (3, 3, 16, 16), jnp.float32)
IDENT = (0.0, jnp.ones(2), jnp.zeros(2), jnp.zeros(2))


@pytest.mark.parametrize("center", A.CENTERS)
def test_transform_at_identity_parameters_returns_the_input_exactly(center):
    out = A.acavp_transform(X, *IDENT, 1.0, jnp.zeros((3, 16, 16)), center=center)
    assert np.array_equal(np.asarray(out), np.asarray(X))


def test_warp_identity_and_integer_translation_are_exact():
    assert np.array_equal(np.asarray(A.warp_affine(X, jnp.eye(3))), np.asarray(X))
    m = A.affine_matrix(*IDENT[:3], jnp.array([2.0, -3.0]))
    want = np.zeros_like(np.asarray(X))  # (x, y) += (2, -3): columns right, rows up
    want[..., :13, 2:] = np.asarray(X)[..., 3:, :14]
    assert np.array_equal(np.asarray(A.warp_affine(X, m)), want)


def test_quarter_turn_about_the_centre_is_a_pixel_permutation():
    m = A.affine_matrix(np.pi / 2, jnp.ones(2), jnp.zeros(2), jnp.zeros(2), center=(7.5, 7.5))
    out = np.asarray(A.warp_affine(X, m))
    ref = np.rot90(np.asarray(X), k=-1, axes=(-2, -1))  # +90 deg with y down: clockwise on screen
    assert np.allclose(out, ref, atol=1e-5)


def test_centre_convention_fixes_its_point():
    s = jnp.array([0.5, 0.5])
    for center in [(0.0, 0.0), (7.5, 7.5)]:
        m = np.asarray(A.affine_matrix(0.1, s, jnp.array([0.05, -0.05]), jnp.zeros(2),
                                       center=center))  # fmt: skip
        assert np.allclose(m @ np.array([*center, 1.0]), [*center, 1.0], atol=1e-6)


def test_additive_prompt_acts_only_on_the_empty_region():
    p = A.ACAVPPrompt((3, 16, 16), scale_init=0.5)
    p = eqx.tree_at(lambda q: q.p, p, jnp.full((3, 16, 16), 7.0, jnp.float32))
    out = np.asarray(p(X))
    ones = np.asarray(A.warp_affine(jnp.ones((1, 16, 16)), A.affine_matrix(
        0.0, jnp.full(2, 0.5), jnp.zeros(2), jnp.zeros(2), center=(7.5, 7.5))))[0]  # fmt: skip
    empty = ones < 1e-6
    assert np.all(out[..., empty] == 7.0)
    assert np.all(out[..., ~empty] <= 1.0 + 1e-5)  # image (gain 1) where the warp covers
    assert 0.5 < empty.mean() < 0.8  # s = 0.5 about the centre leaves ~3/4 of the canvas


def test_corner_centre_shrinks_toward_the_top_left():
    p = A.ACAVPPrompt((3, 16, 16), scale_init=0.5, center="corner")
    ones = np.asarray(p(jnp.ones((1, 3, 16, 16))))[0, 0]
    assert ones[:7, :7].min() > 0.99 and ones[9:, :].max() == 0.0 and ones[:, 9:].max() == 0.0


def _prompted(prompt):
    return A.Prompted(prompt, A.SmallCNN(key=KEY), A.first_k_label_map(10, 10))


@pytest.mark.parametrize(
    "prompt",
    [
        A.ACAVPPrompt((3, 16, 16)),
        A.PaddingPrompt((3, 16, 16), 2, key=KEY),
        A.EVPPrompt((3, 16, 16), 12),
    ],  # fmt: skip
    ids=["acavp", "pad", "evp"],
)
def test_gradients_reach_every_prompt_parameter_and_nothing_else(prompt):
    model = _prompted(prompt)
    mask = model.trainable_mask()
    tr, fr = eqx.partition(model, mask)
    y = jnp.arange(3) % 10

    def loss(t):
        logits = eqx.combine(t, fr)(X)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(3), y])

    g = eqx.filter_jit(jax.grad(loss))(tr)  # one program, not one per primitive
    leaves = jax.tree.leaves(g)
    assert leaves and all(np.abs(v).max() > 0 for v in leaves)
    n_backbone = sum(jax.tree.leaves(jax.tree.map(lambda b: b, mask.backbone)))
    assert n_backbone == 0  # not one backbone leaf is trainable


def test_acavp_gradient_names_every_raw_parameter():
    p = A.ACAVPPrompt((3, 16, 16))
    cnn = A.SmallCNN(key=KEY)
    g = eqx.filter_jit(jax.grad(lambda q: jnp.sum(cnn(q(X)) ** 2)))(p)
    for name in ("a_theta", "a_scale", "a_shear", "a_translate", "m", "p"):
        assert np.abs(getattr(g, name)).max() > 0, name


def test_linear_probe_trains_the_head_only():
    lp = A.LinearProbe(A.SmallCNN(key=KEY), 4, key=KEY)
    mask = lp.trainable_mask()
    assert all(jax.tree.leaves(mask.head)) and not any(jax.tree.leaves(mask.backbone))
    assert lp(X).shape == (3, 4)


def test_small_cnn_parameter_count():
    cnn = A.SmallCNN(key=KEY)
    n = sum(v.size for v in jax.tree.leaves(eqx.filter(cnn, eqx.is_array)))
    # 3x3 convs 3-8-16-32-32 with biases, head 32 -> 10
    assert n == (27 * 8 + 8) + (72 * 16 + 16) + (144 * 32 + 32) + (288 * 32 + 32) + 330


def test_frequency_label_map_recovers_a_permutation():
    rng = np.random.default_rng(0)
    perm = rng.permutation(10)
    tgt = rng.integers(0, 10, 500)
    pred = perm[tgt]
    pred[:40] = rng.integers(0, 10, 40)  # a little noise
    assert np.array_equal(A.frequency_label_map(pred, tgt, 10, 10), perm)
    assert np.array_equal(A.first_k_label_map(4, 10), np.arange(4))


def test_padding_prompt_parameter_count_and_frame():
    p = A.PaddingPrompt((3, 32, 32), 4, key=KEY)
    assert int(p.mask.sum()) == 3 * (32 * 32 - 24 * 24)
    e = A.EVPPrompt((3, 32, 32), 24)
    out = np.asarray(e(jnp.ones((1, 3, 32, 32))))
    assert np.all(out[..., :4, :] == 0.0) and np.allclose(out[..., 4:28, 4:28], 1.0)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: A.acavp_transform(X[0, 0], *IDENT, 1.0, 0.0), "x"),
        (
            lambda: A.acavp_transform(X, 0.0, jnp.ones(3), jnp.zeros(2), jnp.zeros(2), 1.0, 0.0),
            "scale",
        ),
        (
            lambda: A.acavp_transform(X, 0.0, -jnp.ones(2), jnp.zeros(2), jnp.zeros(2), 1.0, 0.0),
            "scale",
        ),
        (lambda: A.acavp_transform(X, *IDENT, jnp.ones((3, 8, 8)), 0.0), "gain"),
        (lambda: A.acavp_transform(X, *IDENT, 1.0, 0.0, center="middle"), "center"),
        (lambda: A.ACAVPPrompt((3, 16, 16), scale_init=1.5), "scale_init"),
        (lambda: A.ACAVPPrompt((3, 16, 16), gain_max=0.5), "gain_max"),
        (lambda: A.ACAVPPrompt((3, 16, 16))(X[:, :, :8]), "x"),
        (lambda: A.PaddingPrompt((3, 16, 16), 8, key=KEY), "width"),
        (lambda: A.EVPPrompt((3, 16, 16), 11), "inner"),
        (lambda: A.first_k_label_map(12, 10), "n_target"),
        (lambda: A.frequency_label_map(np.array([0, 11]), np.array([0, 1]), 2, 10), "source_pred"),
        (
            lambda: A.Prompted(A.ACAVPPrompt((3, 16, 16)), A.SmallCNN(key=KEY), np.array([0, 10])),
            "label_map",
        ),
        (lambda: A.SmallCNN(n_classes=1, key=KEY), "n_classes"),
        (lambda: A.warp_affine(X, jnp.zeros((3, 3))), "matrix"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()
