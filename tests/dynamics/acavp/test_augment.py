"""TrivialAugment's 14 standard-space operations against Pillow itself (the authors' code runs
each op on the PIL image), and the sampler's ranges."""

import jax
import numpy as np
import pytest

from dynamics.acavp import augment as TA
from paper_checks.properties.acavp import _pil_op as pil_op  # the one Pillow reference

RNG = np.random.default_rng(0)
IMGS = RNG.integers(0, 256, (4, 3, 16, 16)).astype(np.float64) / 255.0
IMGS[1] = np.clip(IMGS[1] * 0.4 + 0.1, 0, 1)  # low contrast: auto_contrast / equalize act
IMGS[2] = np.round(IMGS[2] * 8) / 8  # few grey levels: equalize's histogram is coarse
EXACT = {"identity", "rotate", "solarize", "posterize", "shear_x", "shear_y", "translate_x",
         "translate_y", "equalize", "brightness"}  # fmt: skip


@pytest.mark.parametrize("op", range(len(TA.OPS)), ids=TA.OPS)
@pytest.mark.parametrize("level", [0, 7, 19, 30])
def test_op_matches_pillow(op, level):
    n = IMGS.shape[0]
    signs = np.array([1.0, -1.0, 1.0, -1.0])
    got = np.asarray(TA.apply_ops(IMGS, np.full(n, op), np.full(n, level), signs))
    want = np.stack([pil_op(IMGS[i], op, level, signs[i]) for i in range(n)])
    diff = np.abs(got - want) * 255
    if TA.OPS[op] in EXACT:
        # Pillow's NEAREST affine runs in 16.16 fixed point: a source coordinate within 2^-16
        # of a pixel edge can land on the neighbour (rotation: up to 2 % of the pixels)
        tol = 0.02 if TA.OPS[op] == "rotate" else 1e-3
        assert np.mean(diff > 0.5) <= tol, (TA.OPS[op], level, diff.max())
    else:  # PIL's blends truncate float32 products: one grey level
        assert diff.max() <= 1.0 + 1e-9, (TA.OPS[op], level, diff.max())


def test_sampler_draws_every_op_and_stays_in_range():
    x = np.tile(IMGS[:1], (300, 1, 1, 1))
    out = np.asarray(TA.trivial_augment(x, key=jax.random.key(1)))
    assert out.shape == x.shape and out.min() >= 0.0 and out.max() <= 1.0
    assert np.allclose(out * 255, np.round(out * 255), atol=1e-6)  # on PIL's uint8 grid
    changed = np.mean(np.any(np.abs(out - x) > 1e-3, axis=(1, 2, 3)))
    assert 0.5 < changed < 1.0  # identity and level-0 draws leave some images unchanged


def test_wide_space_is_not_used():
    """Standard space: shear 0.3 and 10 px at the top level (wide: 0.99 and 32 px)."""
    x = np.zeros((1, 3, 32, 32))
    x[0, :, 10, 10] = 1.0
    out = np.asarray(TA.apply_ops(x, [TA.OPS.index("translate_x")], [30], [1.0]))
    assert out[0, 0, 10, 0] == 1.0 and out.sum() == 3.0  # moved by exactly 10 px
