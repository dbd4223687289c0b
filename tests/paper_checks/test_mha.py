"""`mha.token_uniformity` helpers: the matched-loss reading (`cosine_at_loss`) and its languages."""

import numpy as np
import pytest

from _core.streams import substream_seed
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


def test_each_replicate_has_its_own_language_and_each_seed_its_own_set():
    """``mha.token_uniformity`` pools languages: replicate j of claim seed s trains on the
    order-2 chain drawn with seed 1000 s + j, on the claim's vocabulary."""
    from dynamics.distill import Order2Markov
    from paper_checks.mha import TU, _languages

    a, b = _languages(0, 3), _languages(1, 3)
    for s, langs in ((0, a), (1, b)):
        for j, lang in enumerate(langs):
            want = Order2Markov.random(substream_seed(s, j), TU["vocab"], concentration=0.1)
            np.testing.assert_array_equal(lang.P, want.P)
    chains = [lang.P for lang in a + b]
    assert all(not np.array_equal(p, q) for i, p in enumerate(chains) for q in chains[i + 1 :])
