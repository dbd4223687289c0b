"""Learning σ from data: the learned σ is monotone and bounded and training lowers the loss."""

import jax
import numpy as np
import pytest

import spectral


@pytest.mark.slow  # JAX compile + training: ~1 min on a loaded 2-core machine
def test_learn_sigma_small():
    train = spectral.make_dataset(120, 40, 2.0, rng=0)
    test = spectral.make_dataset(60, 40, 2.0, rng=1)
    r = spectral.learn_sigma(
        train, test, units=4, epochs=25, batch=60, lr=0.05, key=jax.random.key(0)
    )
    t = np.linspace(-20, 20, 2001)
    v = r.sigma(t)
    assert np.all(np.diff(v) >= 0) and v.max() <= r.sigma.upper and v.min() >= r.sigma.lower
    assert r.losses[-1] < r.losses[0]
    # at beta = 2 > 1 even PCA separates at n = 40 well above chance on held-out data
    assert r.test_accuracy > 0.7
    # β* of the learned σ is finite; as in the paper, accuracy at small n does not imply β* < 1
    assert np.isfinite(r.beta_star) and r.beta_star > 0.5
