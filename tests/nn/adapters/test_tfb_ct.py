"""TFB (re-factorisation, covariance, sigma search) and Curvature Tuning (the beta activation)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nn
import nn.adapters as ad


@given(
    st.sampled_from([1, 3, 6]),
    st.sampled_from([6, 12]),
    st.sampled_from([6, 12]),
    st.integers(0, 2**16),
)
def test_refactor_keeps_ba(r, m, n, seed):
    rng = np.random.default_rng(seed)
    b, a = rng.standard_normal((m, r)), rng.standard_normal((r, n))
    bp, ap, d = ad.tfb_refactor(b, a)
    np.testing.assert_allclose(bp @ ap, b @ a, atol=1e-12 * np.abs(b @ a).max())
    np.testing.assert_allclose(bp.T @ bp, np.diag(np.asarray(d) ** 2), atol=1e-12 * d.max() ** 2)


def _trained_lora(seed=0):
    base = nn.MLP(6, 3, 10, 1, key=jax.random.key(0))
    a = ad.inject(base, "lora", targets="layers.0", key=jax.random.key(seed), r=2, alpha=4.0)
    layer = a.layers()["layers.0"]
    import equinox as eqx

    b = jax.random.normal(jax.random.key(seed + 1), layer.B.shape)
    return eqx.tree_at(lambda m: m.layers()["layers.0"].B, a, b)


def test_tfb_covariance_is_isotropic_on_col_b_and_gauge_invariant():
    a = _trained_lora()
    t = ad.tfb_bayesianize(a, sigma=0.3)
    layer = t.layers()["layers.0"]
    lora = a.layers()["layers.0"]
    N = 4000
    draws = jax.vmap(layer.sample_delta_weight)(jax.random.split(jax.random.key(9), N))
    mean = lora.scale * lora.B @ lora.A
    dev = np.asarray(draws - mean)  # (N, m, n)
    u, _, _ = np.linalg.svd(np.asarray(lora.B), full_matrices=False)
    # outside col(B): exactly zero
    np.testing.assert_allclose(np.einsum("ij,Njk->Nik", np.eye(10) - u @ u.T, dev), 0, atol=1e-12)
    # inside: coordinates u^T dW are iid N(0, (s sigma)^2); check variance within 4 SE
    z = np.einsum("ir,Nik->Nrk", u, dev).reshape(N, -1)
    target = (lora.scale * 0.3) ** 2
    var = z.var(axis=0).mean()
    se = target * math.sqrt(2 / (N - 1)) / math.sqrt(z.shape[1])
    assert abs(var - target) < 4 * se + 1e-15
    cov = np.cov(z[:, :4].T)
    assert np.max(np.abs(cov - np.diag(np.diag(cov)))) < 5 * target * math.sqrt(1 / N)
    # gauge: (B G, G^{-1} A) gives the same refactored law (same U U^T, same mean)
    g = np.array([[2.0, 1.0], [0.0, 0.5]])
    bp, ap, d = ad.tfb_refactor(lora.B @ g, np.linalg.solve(g, lora.A))
    u2 = np.asarray(bp / d)
    np.testing.assert_allclose(u2 @ u2.T, u @ u.T, atol=1e-12)
    np.testing.assert_allclose(bp @ ap, lora.B @ lora.A, atol=1e-12)


def test_sigma_search_bisection():
    truth = 0.0123
    f = lambda s: 0.01 * s / truth  # noqa: E731  (monotone; crosses tol = 0.01 at truth)
    res = ad.tfb_search_sigma(f, sigma_max=0.05, tol=0.01, iters=12)
    assert res.sigma <= truth + 1e-15 and truth - res.sigma <= (0.05 - 1e-3) / 2**12
    assert f(res.sigma) <= 0.01
    loose = ad.tfb_search_sigma(f, sigma_max=0.05, tol=1.0)
    assert loose.sigma == 0.05
    tight = ad.tfb_search_sigma(f, sigma_max=0.05, tol=0.0)
    assert tight.sigma == 1e-3
    # sigma* is nondecreasing in the tolerance
    sig = [ad.tfb_search_sigma(f, sigma_max=0.05, tol=t).sigma for t in (0.002, 0.005, 0.01, 0.03)]
    assert all(x <= y for x, y in zip(sig, sig[1:], strict=False))
    assert "sigma" in res.summary()


def test_tfb_mean_is_the_lora_and_ece():
    a = _trained_lora()
    t = ad.tfb_bayesianize(a, sigma=0.1)
    x = jax.random.normal(jax.random.key(0), (5, 6))
    np.testing.assert_allclose(t(x), a(x), atol=1e-13)  # no key: the posterior mean
    assert nn.count_params(t) == 0
    p = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    y = np.array([0, 1, 1])
    # bins of width 1/15: three bins with |acc - conf| = 0.1, 0.6, 0.2
    np.testing.assert_allclose(ad.expected_calibration_error(p, y), (0.1 + 0.6 + 0.2) / 3)
    with pytest.raises(ValueError, match="sigma"):
        ad.tfb_bayesianize(a, sigma=-1.0)
    with pytest.raises(ValueError, match="probs"):
        ad.expected_calibration_error(p[:, 0], y)


@given(st.floats(0.0, 0.999), st.floats(0.0, 1.0))
def test_ct_values_at_zero(beta, c):
    f = lambda x: ad.ctu(x, beta, c)  # noqa: E731
    np.testing.assert_allclose(
        float(f(jnp.asarray(0.0))), (1 - c) * (1 - beta) * math.log(2), atol=1e-15
    )
    np.testing.assert_allclose(float(jax.grad(f)(jnp.asarray(0.0))), 0.5, atol=1e-13)


def test_ct_beta_one_is_the_relu_network_exactly():
    mlp = nn.MLP(5, 3, 9, 2, activation=jax.nn.relu, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (20, 5))
    np.testing.assert_array_equal(ad.ct_steer(mlp, 1.0)(x), mlp(x))
    tct, mask = ad.ct_trainable(mlp, train=("layers.2",))
    import equinox as eqx

    ones = jax.tree.map(
        lambda n: (
            eqx.tree_at(lambda m: m.raw_beta, n, jnp.full_like(n.raw_beta, jnp.inf))
            if isinstance(n, ad.CTLinear)
            else n
        ),
        tct,
        is_leaf=lambda n: isinstance(n, ad.CTLinear),
    )
    np.testing.assert_array_equal(ones(x), mlp(x))  # sigmoid(inf) = 1: the ReLU branch
    assert nn.count_params(tct, mask) == 2 * (9 + 9) + 9 * 3 + 3
    np.testing.assert_allclose(ad.ct_steer(mlp, 0.8)(x), tct(x), atol=1e-13)  # same init


def test_ct_bad_input():
    mlp = nn.MLP(5, 3, 9, 1, activation=jax.nn.relu, key=jax.random.key(0))
    with pytest.raises(ValueError, match="beta"):
        ad.ct_steer(mlp, 1.5)
    with pytest.raises(ValueError, match="beta"):
        ad.ct_gap_bound(-0.1, 0.5)
    with pytest.raises(ValueError, match="model"):
        ad.ct_steer(nn.MLP(5, 3, 9, 1, key=jax.random.key(0)), 0.9)  # gelu MLP
