"""TFB (re-factorisation, covariance, sigma search) and Curvature Tuning (the beta activation)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nn
import nn.adapters as ad
from paper_checks import PROPERTIES, verify


def test_refactor_keeps_ba():
    """B'A' = BA and B'^T B' = diag(d^2): the registry property ``adapters.tfb_refactor`` (its one
    copy, searched by ``theorylab verify`` over every shape)."""
    row = verify(PROPERTIES["adapters.tfb_refactor"], examples=30)
    assert row["status"] == "holds" and row["min_slack"] >= 0, row


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
    draws = jax.vmap(lambda k: layer.sample_delta_weight(key=k))(
        jax.random.split(jax.random.key(9), N)
    )
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


def test_tfb_with_a_rank_deficient_b_samples_on_col_b():
    """A layer left at B = 0 and one whose B has rank 1 of r = 2: draws are finite, the first
    layer's is exactly its (zero) mean and the second's deviation lies in col(B), with the
    variance (s sigma)^2 of the full-rank case along it."""
    import equinox as eqx

    base = nn.MLP(6, 3, 10, 2, key=jax.random.key(0))
    a = ad.inject(base, "lora", targets=["layers.0", "layers.1"], key=jax.random.key(1), r=2)
    u = jax.random.normal(jax.random.key(2), (10, 1))
    b1 = u @ jnp.array([[1.0, -2.0]])  # rank 1
    a = eqx.tree_at(lambda m: m.layers()["layers.1"].B, a, b1)
    t = ad.tfb_bayesianize(a, sigma=0.3)
    x = jnp.ones((4, 6))
    assert bool(jnp.all(jnp.isfinite(t(x, key=jax.random.key(3)))))
    zero = t.layers()["layers.0"]
    np.testing.assert_array_equal(zero.sample_delta_weight(key=jax.random.key(4)), 0.0)
    layer, lora = t.layers()["layers.1"], a.layers()["layers.1"]
    N = 2000
    draws = jax.vmap(lambda k: layer.sample_delta_weight(key=k))(
        jax.random.split(jax.random.key(5), N)
    )
    dev = np.asarray(draws - lora.scale * lora.B @ lora.A)
    un = np.asarray(u / jnp.linalg.norm(u))
    np.testing.assert_allclose(dev - un @ (un.T @ dev), 0, atol=1e-12)
    z = np.einsum("i,Nik->Nk", un[:, 0], dev)
    target = (lora.scale * 0.3) ** 2
    se = target * math.sqrt(2 / (N - 1)) / math.sqrt(z.shape[1])
    assert abs(z.var(axis=0).mean() - target) < 4 * se


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


def test_ct_values_at_zero():
    """phi(0) = (1 - c)(1 - beta) ln 2 and phi'(0) = 1/2: the registry property
    ``adapters.ct_at_zero`` (its one copy, searched by ``theorylab verify``)."""
    row = verify(PROPERTIES["adapters.ct_at_zero"], examples=30)
    assert row["status"] == "holds" and row["min_slack"] >= 0, row


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
