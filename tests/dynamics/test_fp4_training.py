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
    # a step without quantisation noise has ratio +inf: the window holding it never crosses
    assert F.detect_crossing(np.r_[np.full(5, 1.0), np.inf, np.full(5, 1.0)], window=3) == 2
    assert F.detect_crossing(np.r_[np.inf, np.full(4, 1.0)], window=2) == 2
    for bad in (-np.inf, -1.0):
        with pytest.raises(ValueError, match="ratios"):
            F.detect_crossing(np.r_[np.full(5, 1.0), bad])


def _loss(m, batch, *, key=None):
    X, y = batch
    return 0.5 * jnp.mean((m(X, key=key)[:, 0] - y) ** 2)


_SGD = optax.sgd(0.1)  # one object: train_fp4 runs with the same loss and shapes share a compile


def _regression(n=512, d=16):
    k = jax.random.key(0)
    X = jax.random.normal(k, (n, d))
    y = X @ jnp.ones(d) + 0.3 * jax.random.normal(jax.random.key(1), (n,))
    return nn.Linear(d, 1, False, init=jax.nn.initializers.zeros, key=k), (X, y)


def test_switch_run_recovers_full_precision_and_frozen_ratio_semantics():
    m0, (X, y) = _regression()
    k = jax.random.key(0)
    wls = jnp.linalg.lstsq(X, y)[0]
    lmin = float(0.5 * jnp.mean((X @ wls - y) ** 2))
    opt = _SGD
    kw = dict(key=jax.random.key(2), mode="backward", progress=False)
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


def test_gradient_pair_same_forward_unbiased_noise_and_train_fp4_ratio():
    m, data = _regression()
    R = 200
    pair = jax.jit(jax.vmap(lambda k: F.gradient_pair(m, _loss, data, key=k, mode="backward")))
    gq, ghp = pair(jax.random.split(jax.random.key(3), R))
    gq, ghp = np.asarray(gq.weight), np.asarray(ghp.weight)
    assert np.all(ghp == ghp[0])  # the high-precision gradient does not depend on the SR draws
    assert np.all(np.any(gq != gq[0], axis=(1, 2))[1:])  # the FP4 one does
    se = gq.std(0, ddof=1) / np.sqrt(R)
    z = (gq.mean(0) - ghp[0]) / se
    assert np.all(np.abs(z) < 4.5)  # SR backward is unbiased
    # train_fp4's step-0 norms are those of gradient_pair at the step-0 key fold_in(key, 0)
    key = jax.random.key(4)
    r = F.train_fp4(m, _loss, lambda t: data, _SGD, 1, key=key, mode="backward", progress=False)
    q0, h0 = F.gradient_pair(m, _loss, data, key=jax.random.fold_in(key, 0), mode="backward")
    np.testing.assert_allclose(r.grad_norms[0], np.linalg.norm(h0.weight), rtol=1e-12)
    np.testing.assert_allclose(r.noise_norms[0], np.linalg.norm(q0.weight - h0.weight), rtol=1e-12)
    np.testing.assert_allclose(r.ratios[0], r.grad_norms[0] / r.noise_norms[0], rtol=1e-15)


def test_qaf_optimizer_fresh_at_switch_warmup_from_zero_and_default_keeps_state():
    """Paper Sec. 5.2 QAF: the learning-rate schedule (and, our documented choice, the Adam state)
    restart at the switch; with qaf_optimizer=None the training optimiser and state carry on."""
    m0, data = _regression()
    opt = optax.adam(0.05)
    qaf = optax.adam(optax.warmup_cosine_decay_schedule(0.0, 0.05, 4, 12))
    S, extra = 15, 12
    kw = dict(key=jax.random.key(2), mode="backward", progress=False)
    before = F.train_fp4(m0, _loss, lambda t: data, opt, S, switch=None, **kw)
    at = F.train_fp4(m0, _loss, lambda t: data, opt, S + 1, switch=S, qaf_optimizer=qaf, **kw)
    # warm-up from 0: the switch step's update is exactly zero
    assert at.switch_step == S
    np.testing.assert_array_equal(at.model.weight, before.model.weight)
    np.testing.assert_array_equal(at.losses[:S], before.losses)
    # after the switch: exactly a fresh qaf run (schedule count and Adam moments from 0) with
    # high-precision gradients of the same (exact, mode="backward") forward
    after = F.train_fp4(
        m0, _loss, lambda t: data, opt, S + extra, switch=S, qaf_optimizer=qaf, **kw
    )
    start = nn.set_matmul(before.model, None)
    fresh = nn.train(start, _loss, lambda t: data, qaf, extra, key=kw["key"], progress=False)
    np.testing.assert_allclose(after.losses[S:], fresh.losses, rtol=1e-12)
    np.testing.assert_allclose(after.model.weight, fresh.model.weight, rtol=1e-12, atol=1e-15)
    assert int(after.opt_state[-1].count) == extra
    # default (qaf_optimizer=None): the same Adam and its state continue across the switch
    dflt = F.train_fp4(m0, _loss, lambda t: data, opt, S + extra, switch=S, **kw)
    cont = nn.train(
        start,
        _loss,
        lambda t: data,
        opt,
        extra,
        key=kw["key"],
        opt_state=before.opt_state,
        start_step=S,
        progress=False,
    )
    np.testing.assert_allclose(dflt.losses[S:], cont.losses, rtol=1e-12)
    np.testing.assert_allclose(dflt.model.weight, cont.model.weight, rtol=1e-12, atol=1e-15)
    assert not np.allclose(dflt.model.weight, after.model.weight)
    with pytest.raises(TypeError, match="qaf_optimizer"):
        F.train_fp4(m0, _loss, lambda t: data, opt, 1, key=kw["key"], qaf_optimizer=0.1)
