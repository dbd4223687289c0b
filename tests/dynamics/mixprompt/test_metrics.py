"""mIoU (:mod:`dynamics.mixprompt.metrics`) on hand-computed cases."""

import numpy as np
import pytest

from dynamics.mixprompt import confusion_matrix, miou


def test_two_class_case():
    # t0: p0 = 1; t1: p0 = 1, p1 = 2 -> IoU0 = 1 / 2, IoU1 = 2 / 3
    p, t = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
    np.testing.assert_array_equal(confusion_matrix(p, t, 2), [[1, 0], [1, 2]])
    assert miou(p, t, 2) == pytest.approx(7 / 12, abs=1e-15)
    assert miou(p, t, 3) == pytest.approx(7 / 12, abs=1e-15)  # class 2 absent: left out


def test_class_predicted_but_absent_counts_zero():
    # IoU0 = 1 / 2 (one pixel right, one predicted 2), IoU2 = 0 / 1
    assert miou(np.array([2, 0]), np.array([0, 0]), 3) == pytest.approx(0.25, abs=1e-15)


def test_perfect_and_ignored():
    t = np.array([[0, 1], [2, 3]])
    assert miou(t, t, 4) == 1.0
    p = np.array([[1, 1], [2, 3]])  # the only error is on a pixel of the ignored class 0
    assert miou(p, t, 4, ignore_index=0) == 1.0


def test_bad_input():
    with pytest.raises(ValueError, match="target"):
        miou(np.zeros(3, int), np.zeros(4, int), 2)
    with pytest.raises(ValueError, match="pred"):
        miou(np.array([0, 5]), np.array([0, 1]), 2)
    with pytest.raises(TypeError, match="pred"):
        miou(np.array([0.0, 1.0]), np.array([0, 1]), 2)
    with pytest.raises(ValueError, match="num_classes"):
        miou(np.array([0]), np.array([0]), 0)
