"""Helpers of the transformer claims: the finite-difference energy rate and the softmax order."""

import jax
import numpy as np

import dynamics.transformer as dt
from paper_checks.transformer import _rate_fd, softmax_order


def test_three_point_rate_is_exact_for_quadratics_on_a_nonuniform_grid():
    t = np.cumsum(np.random.default_rng(0).uniform(0.1, 1.0, 12))
    E = 3.0 - 2.0 * t + 0.7 * t**2
    np.testing.assert_allclose(_rate_fd(t, E), -2.0 + 1.4 * t[1:-1], rtol=1e-12)
    # and second order: the error on a cubic shrinks 4x when the steps halve
    err = [np.max(np.abs(_rate_fd(tt, tt**3) - 3 * tt[1:-1] ** 2))
           for tt in (t[:5] / k for k in (1, 2))]
    assert err[1] < err[0] / 3.5


def test_softmax_order_bounds_the_attention_logits():
    X, _ = dt.gaussian_task(16, 4, 6, rng=0)
    m = dt.SmallInitTransformer.init(6, 1e-2, key=jax.random.key(0))
    w = m.numpy()
    logits = np.einsum("ik,kl,ml,ijm->ij", X[:, -1], w["W_Q"], w["W_K"], X) / np.sqrt(6)
    bound = softmax_order(X, m)
    assert np.abs(logits).max() <= bound < 50 * np.abs(logits).max()
