"""Helpers of the transformer claims: the finite-difference energy rate and the softmax order."""

import jax
import numpy as np

import dynamics.transformer as dt
from paper_checks.transformer import _rate3, _rate_fd, softmax_order


def test_finite_difference_rate_is_exact_for_cubics_and_beats_three_points():
    t = np.cumsum(np.random.default_rng(0).uniform(0.1, 1.0, 30))
    E = 3.0 - 2.0 * t + 0.7 * t**2 - 0.1 * t**3
    np.testing.assert_allclose(
        _rate_fd(t, E), -2.0 + 1.4 * t[2:-2] - 0.3 * t[2:-2] ** 2, rtol=1e-10
    )
    # on a smooth non-polynomial E with small steps the extrapolation beats the plain
    # three-point formula by far (here ~300x)
    t = np.cumsum(np.random.default_rng(0).uniform(0.05, 0.1, 30))
    E, dE = np.exp(-t / 3), -np.exp(-t / 3) / 3
    err_rich = np.max(np.abs(_rate_fd(t, E) / dE[2:-2] - 1))
    err_three = np.max(np.abs(_rate3(t, E, 1)[0][1:-1] / dE[2:-2] - 1))
    assert err_rich < err_three / 50


def test_softmax_order_bounds_the_attention_logits():
    X, _ = dt.gaussian_task(16, 4, 6, rng=0)
    m = dt.SmallInitTransformer.init(6, 1e-2, key=jax.random.key(0))
    w = m.numpy()
    logits = np.einsum("ik,kl,ml,ijm->ij", X[:, -1], w["W_Q"], w["W_K"], X) / np.sqrt(6)
    bound = softmax_order(X, m)
    assert np.abs(logits).max() <= bound < 50 * np.abs(logits).max()
