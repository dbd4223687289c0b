"""Trained LoRA encoders recover the exact singular values of OU and the noisy logistic map.

Accuracy statement: a canonical correlation s estimated from N pairs has standard error about
(1 - s^2) / sqrt(N) (the asymptotic s.e. of a correlation coefficient); the read-out uses
N = 2e5 fresh pairs, and each tolerance is 4 such standard errors plus a 1% allowance for the
optimisation error of a short run (about 2-3% for the top two non-trivial modes) and 8% for the
last learned mode, whose subspace is the least determined
(docs/papers/koopman_lora.md#accuracy-to-expect: 3-7%).
"""

import jax
import numpy as np
import pytest

from dynamics.koopman import (
    NoisyLogisticMap,
    OrnsteinUhlenbeck,
    fit_koopman,
    fit_koopman_batch,
    principal_angles,
    relative_singular_value_errors,
)


@pytest.fixture(scope="module")
def ou_fit():
    ou = OrnsteinUhlenbeck(theta=1.0, tau=0.5)
    X, Y = ou.pairs(50_000, rng=0)
    model = fit_koopman(
        X,
        Y,
        4,
        nesting="jnt",
        width=32,
        depth=2,
        batch_size=512,
        steps=1500,
        lr=3e-3,
        shared=True,
        key=jax.random.key(0),
        progress=False,
    )
    return ou, model


def _tol(s, n):
    return 4 * (1 - s**2) / np.sqrt(n) / s + 0.01


def test_ou_singular_values_and_subspaces(ou_fit):
    ou, model = ou_fit
    Xt, Yt = ou.pairs(200_000, rng=1)
    ro = model.readout(Xt, Yt)
    s = ou.singular_values(4)
    err = relative_singular_value_errors(ro.singular_values, s)
    assert err[0] < 1e-12  # the constant mode is exact by construction
    assert np.all(err[1:3] < _tol(s[1:3], Xt.size)), err
    assert err[3] < 0.08, err
    ang = principal_angles(model.f(Xt), ou.left_singular_functions(Xt, 3))
    assert np.cos(ang).min() > 0.995, ang
    # nested pairs: each ||f_i|| ||g_i|| estimates s_i (gauge-free), never ||f_i||^2 alone
    f, g = model.f(Xt), model.g(Yt)
    prod = np.sqrt(np.mean(f**2, 0) * np.mean(g**2, 0))
    assert np.all(np.abs(prod[1:3] / ou.singular_values(3)[1:] - 1) < 0.03), prod
    # Koopman eigenvalues = singular values (reversible): the leading ones within 2%
    lam = np.sort(ro.eigenvalues.real)[::-1]
    assert np.all(np.abs(lam[1:3] / ou.singular_values(3)[1:] - 1) < 0.02), lam


def test_logistic_singular_values():
    L = NoisyLogisticMap()
    tr = L.trajectory(50_000, rng=0)
    model = fit_koopman(
        tr[:-1],
        tr[1:],
        4,
        nesting="jnt",
        embedding="fourier",
        width=64,
        depth=2,
        batch_size=256,
        steps=2000,
        lr=2e-3,
        key=jax.random.key(1),
        progress=False,
    )
    te = L.trajectory(200_000, rng=1)
    ro = model.readout(te[:-1], te[1:])
    s = L.singular_values(4)
    err = relative_singular_value_errors(ro.singular_values, s)
    # consecutive pairs of one trajectory: correlated, but the map mixes within a few steps
    assert np.all(err[1:3] < _tol(s[1:3], te.size)), (ro.singular_values, err)
    assert err[3] < 0.08, (ro.singular_values, err)
    assert ro.singular_values[1] > ro.singular_values[2] > ro.singular_values[3]


def test_bad_input():
    X = np.linspace(0, 1, 100)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="`k`"):
        fit_koopman(X, X, 5, depth=0, batch_size=10, key=key)  # linear encoder: 1 feature + 1
    with pytest.raises(ValueError, match="Y"):
        fit_koopman(X, X[:50], 3, batch_size=10, key=key)
    bad = X.copy()
    bad[7] = np.nan
    with pytest.raises(ValueError, match="X"):
        fit_koopman(bad, X, 3, batch_size=10, key=key)
    with pytest.raises(ValueError, match="nesting"):
        fit_koopman(X, X, 3, nesting="joint", batch_size=10, key=key)
    with pytest.raises(ValueError, match="batch_size"):
        fit_koopman(X, X, 3, batch_size=1000, key=key)
    with pytest.raises(ValueError, match="loss"):
        fit_koopman(X, X, 3, loss="vamp3", batch_size=10, key=key)


def test_batch_training_equals_one_fit_per_replicate():
    """fit_koopman_batch trains each replicate as fit_koopman does (same key, same data): equal
    losses and features to float32 rounding of the vmap-ed program."""
    ou = OrnsteinUhlenbeck(theta=1.0, tau=0.5)
    data = [ou.pairs(2000, rng=s) for s in range(2)]
    keys = [jax.random.key(s) for s in range(2)]
    opts = dict(
        nesting="jnt",
        width=8,
        depth=1,
        batch_size=100,
        steps=60,
        lr=3e-3,
        embedding="fourier",
        progress=False,
    )
    batch = fit_koopman_batch([d[0] for d in data], [d[1] for d in data], 3, keys=keys, **opts)
    for (X, Y), key, m in zip(data, keys, batch, strict=True):
        one = fit_koopman(X, Y, 3, key=key, **opts)
        np.testing.assert_allclose(m.losses, one.losses, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(m.f(X[:50]), one.f(X[:50]), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="one length"):
        fit_koopman_batch([data[0][0]], [data[0][1]], 3, keys=keys, **opts)
