"""Scenes and the depth sensor (:mod:`dynamics.mixprompt`)."""

import numpy as np
import pytest

from dynamics.mixprompt import (
    DEPTH_MEAN,
    DEPTH_STD,
    depth_channels,
    depth_sensor,
    rgbd_scenes,
)
from dynamics.mixprompt.scenes import FAR, NEAR


def test_depth_carries_the_near_far_label():
    sc = rgbd_scenes(64, 16, rng=0)
    assert set(np.unique(sc.labels)) <= {0, 1, 2, 3}
    np.testing.assert_array_equal(sc.depth[sc.labels == 1], np.float32(NEAR))
    np.testing.assert_array_equal(sc.depth[sc.labels == 2], np.float32(FAR))
    bg, disk = sc.depth[sc.labels == 0], sc.depth[sc.labels == 3]
    assert bg.min() >= 0.8 and bg.max() <= 1.0
    assert disk.min() >= 0.2 and disk.max() <= 0.7


def test_camouflage_changes_only_box_pixels():
    a = rgbd_scenes(32, 16, camouflage=0.0, rng=1)
    b = rgbd_scenes(32, 16, camouflage=1.0, rng=1)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.depth, b.depth)
    diff = np.any(a.rgb != b.rgb, -1)
    assert diff.any()
    assert not np.any(diff & (a.labels == 0))


def test_source_task_has_three_classes_and_no_camouflage():
    sc = rgbd_scenes(32, 16, kind="source", rng=2)
    assert set(np.unique(sc.labels)) <= {0, 1, 2}


def test_sensor_noise_and_holes():
    d = np.full((200, 16, 16), 0.5, np.float32)
    np.testing.assert_array_equal(depth_sensor(d, noise=0.0, holes=0.0, rng=0), d)
    m = depth_sensor(d, rng=0)
    hole = m == 0
    n = hole.size
    assert abs(hole.mean() - 0.05) < 4 * np.sqrt(0.05 * 0.95 / n)
    resid = m[~hole] - 0.5
    # std of a sample std: sigma / sqrt(2 k)
    assert abs(resid.std() - 0.02) < 4 * 0.02 / np.sqrt(2 * resid.size)


def test_depth_channels_encoding():
    d = np.array([[0.0, DEPTH_MEAN], [1.0, DEPTH_MEAN + DEPTH_STD]], np.float32)
    out = depth_channels(d)
    assert out.shape == (2, 2, 3)
    np.testing.assert_allclose(out[..., 1], (d - 0.449) / 0.226, rtol=1e-6)
    np.testing.assert_array_equal(out[..., 0], out[..., 2])


def test_bad_input():
    with pytest.raises(ValueError, match="camouflage"):
        rgbd_scenes(4, camouflage=1.5)
    with pytest.raises(ValueError, match="kind"):
        rgbd_scenes(4, kind="thermal")
    with pytest.raises(ValueError, match="depth"):
        depth_sensor(np.zeros(5))
    with pytest.raises(ValueError, match="holes"):
        depth_sensor(np.zeros((4, 4)), holes=2.0)
