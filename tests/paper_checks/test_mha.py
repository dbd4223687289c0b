"""The matched-loss reading of ``mha.token_uniformity`` (``paper_checks.mha.cosine_at_loss``)."""

import numpy as np
import pytest

from paper_checks.mha import cosine_at_loss


def test_cosine_at_loss_interpolates_at_the_first_crossing():
    nll = np.array([[3.0, 2.0, 1.0, 1.5, 0.5], [3.0, 2.9, 2.8, 2.7, 2.6]])
    cos = np.array([[0.9, 0.5, 0.1, 0.3, 0.0], [0.9, 0.8, 0.7, 0.6, 0.5]])
    # run 0 crosses 1.25 between checkpoints 1 (2.0) and 2 (1.0), three quarters of the way
    # from 2.0, so the cosine is 0.5 + 0.75 (0.1 - 0.5) = 0.2; the later dip to 0.5 does not
    # count. Run 1 never reaches 1.25.
    got = cosine_at_loss(nll, cos, np.array([1.25, 1.25]))
    assert got[0] == pytest.approx(0.2, rel=1e-12)
    assert np.isnan(got[1])
    # already below at the first checkpoint: that checkpoint's cosine; exactly at a checkpoint:
    # that checkpoint's cosine
    np.testing.assert_array_equal(cosine_at_loss(nll, cos, np.array([4.0, 2.8])), [0.9, 0.7])
