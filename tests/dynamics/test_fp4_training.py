"""dynamics.fp4_training: ratio measurement, crossing detection, switching."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nn
from dynamics import fp4_training as F


def test_detect_crossing():
    r = np.r_[np.full(20, 5.0), np.full(20, 1.0)]
    assert F.detect_crossing(r, threshold=np.sqrt(3), window=5) == 24  # t=23: mean 1.8
    assert F.detect_crossing(np.full(30, 5.0)) is None
    with pytest.raises(ValueError, match="window"):
        F.detect_crossing(r, window=0)


def _loss(m, batch, *, key=None):
    X, y = batch
    return 0.5 * jnp.mean((m(X, key=key)[:, 0] - y) ** 2)


def test_switch_run_recovers_full_precision_and_frozen_ratio_semantics():
    k = jax.random.PRNGKey(0)
    n, d = 512, 16
    X = jax.random.normal(k, (n, d))
    y = X @ jnp.ones(d) + 0.3 * jax.random.normal(jax.random.PRNGKey(1), (n,))
    wls = jnp.linalg.lstsq(X, y)[0]
    lmin = float(0.5 * jnp.mean((X @ wls - y) ** 2))
    m0 = nn.Linear(d, 1, False, init=jax.nn.initializers.zeros, key=k)
    opt = optax.sgd(0.1)
    kw = dict(key=jax.random.PRNGKey(2), mode="backward", progress=False)
    ref = F.train_fp4(
        m0, _loss, lambda t: (X, y), opt, 250, key=kw["key"], mode="none", progress=False
    )
    fp4 = F.train_fp4(m0, _loss, lambda t: (X, y), opt, 250, switch=None, **kw)
    sw = F.train_fp4(m0, _loss, lambda t: (X, y), opt, 250, switch="threshold", **kw)
    assert np.all(np.isinf(ref.ratios)) and ref.crossing_step is None
    assert fp4.crossing_step is not None and fp4.ratios[0] > np.sqrt(3) > fp4.ratios[-1]
    assert sw.switch_step == fp4.crossing_step + 1
    # identical trajectories until the switch (same keys), then high precision
    np.testing.assert_array_equal(sw.losses[: sw.switch_step + 1], fp4.losses[: sw.switch_step + 1])
    ex = {n: r.losses[-1] - lmin for n, r in [("ref", ref), ("fp4", fp4), ("sw", sw)]}
    assert ex["fp4"] > 30 * ex["ref"] and ex["sw"] < 3 * ex["ref"] + 1e-14
    assert "crossing step" in sw.summary()
    with pytest.raises(ValueError, match="mode"):
        F.train_fp4(m0, _loss, lambda t: (X, y), opt, 1, key=k, mode="fp4")
    with pytest.raises(ValueError, match="switch"):
        F.train_fp4(m0, _loss, lambda t: (X, y), opt, 1, key=k, switch="sometimes")


def test_gradient_pair_same_forward_unbiased_noise():
    k = jax.random.PRNGKey(0)
    X = jax.random.normal(k, (256, 32))
    y = X @ jnp.ones(32)
    m = nn.Linear(32, 1, False, key=k)
    qs = [
        F.gradient_pair(m, _loss, (X, y), key=jax.random.PRNGKey(i), mode="backward")
        for i in range(40)
    ]
    gq = np.stack([np.asarray(q.weight) for q, _ in qs])
    ghp = np.asarray(qs[0][1].weight)
    se = gq.std(0, ddof=1) / np.sqrt(len(qs))
    assert np.all(np.abs(gq.mean(0) - ghp) < 4.5 * se + 1e-12)  # SR backward is unbiased
