"""PoLAR: the Stiefel-factor identities and its optimiser."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nn
import nn.adapters as ad
from nn import riemannian as rm
from paper_checks import PROPERTIES, verify


def _stiefel(p, r, rng):
    q, rr = np.linalg.qr(rng.standard_normal((p, r)))
    return q * np.sign(np.diag(rr))


def test_stable_rank_identity():
    """sr(X Theta Y^T) = sr(Theta), ||X Theta Y^T||_F = ||Theta||_F on Stiefel factors,
    1 <= sr <= r, sr(0) = 0: the registry property ``adapters.polar_stable_rank`` (its one copy,
    searched by ``theorylab verify`` over every shape)."""
    row = verify(PROPERTIES["adapters.polar_stable_rank"], examples=30)
    assert row["status"] == "holds" and row["min_slack"] >= 0, row


def test_zero_update_at_init_and_orthonormal_factors():
    base = nn.MLP(6, 3, 10, 1, key=jax.random.key(0))
    a = ad.inject(base, "polar", key=jax.random.key(1), r=3)
    for layer in a.layers().values():
        assert float(rm.feasibility(layer.X)) < 1e-12 and float(rm.feasibility(layer.Y)) < 1e-12
        assert float(jnp.max(jnp.abs(layer.delta_weight({})))) == 0.0


def _fit_problem(m=12, n=10, r=3, seed=0):
    rng = np.random.default_rng(seed)
    # a spectrum with a gap after the r-th value, so that the top-r subspace is well defined
    spec = np.array([4.0, 3.0, 2.5] + [0.5 * 0.8**i for i in range(min(m, n) - 3)])
    target = _stiefel(m, min(m, n), rng) @ np.diag(spec) @ _stiefel(n, min(m, n), rng).T
    base = nn.Linear(n, m, use_bias=False, init=jax.nn.initializers.zeros, key=jax.random.key(0))
    return target, ad.inject(base, "polar", key=jax.random.key(seed), r=r, alpha=float(r))


def test_retraction_optimiser_reaches_eckart_young():
    """min 1/2 ||X Theta Y^T - M||^2 reaches 1/2 sum_{i>r} sigma_i^2, with Theta -> X^T M Y."""
    target, a = _fit_problem()
    r = 3
    eye = jnp.eye(target.shape[1])

    def loss(model, batch, key=None):
        return 0.5 * jnp.sum((model(eye).T - target) ** 2)

    opt = ad.polar_optimizer(optax.sgd(0.05), stiefel="qr")
    res = nn.train(a, loss, lambda t: None, opt, 600, key=jax.random.key(0), progress=False)
    s = np.linalg.svd(target, compute_uv=False)
    best = 0.5 * np.sum(s[r:] ** 2)
    np.testing.assert_allclose(res.losses[-1], best, rtol=1e-8)
    layer = res.model.layers()[""]
    np.testing.assert_allclose(layer.Theta, layer.X.T @ target @ layer.Y, atol=1e-6)
    assert float(rm.feasibility(layer.X)) < 1e-12


def test_landing_optimiser_keeps_factors_near_manifold():
    target, a = _fit_problem(seed=1)
    eye = jnp.eye(target.shape[1])

    def loss(model, batch, key=None):
        return 0.5 * jnp.sum((model(eye).T - target) ** 2)

    opt = ad.polar_optimizer(optax.sgd(0.05), stiefel="landing", lam=1.0)
    res = nn.train(a, loss, lambda t: None, opt, 600, key=jax.random.key(0), progress=False)
    layer = res.model.layers()[""]
    s = np.linalg.svd(target, compute_uv=False)
    np.testing.assert_allclose(res.losses[-1], 0.5 * np.sum(s[3:] ** 2), rtol=1e-8)
    # landing is infeasible along the way but lands on the manifold at stationarity
    assert float(rm.feasibility(layer.X)) < 1e-6 and float(rm.feasibility(layer.Y)) < 1e-6


def test_stiefel_mask_selects_only_factors():
    a = ad.inject(nn.MLP(6, 3, 10, 1, key=jax.random.key(0)), "polar", key=jax.random.key(1), r=2)
    tr, _ = nn.split(a)
    mask = ad.stiefel_mask(tr)
    n_true = sum(bool(b) for b in jax.tree.leaves(mask))
    assert n_true == 4  # X and Y of two layers
    opt = ad.polar_optimizer(optax.adamw(1e-2, weight_decay=0.0))
    opt.init(tr)  # builds without error on the trainable half
    assert isinstance(opt, optax.GradientTransformation)


def test_inner_transform_acts_on_every_leaf():
    """One step with ``inner = sgd(0.5)``: Theta moves by ``-0.5 G``, X and Y by ``-0.5`` times the
    landing field, ``(G - X G^T X) / 2`` on feasible factors (Ablin & Peyre 2022, eq. 5)."""
    a = ad.inject(nn.MLP(6, 3, 10, 1, key=jax.random.key(0)), "polar", key=jax.random.key(1), r=2)
    tr, _ = nn.split(a)
    leaves, tdef = jax.tree.flatten(tr)
    keys = jax.random.split(jax.random.key(2), len(leaves))
    grads = jax.tree.unflatten(
        tdef, [jax.random.normal(k, p.shape, p.dtype) for k, p in zip(keys, leaves, strict=True)]
    )
    opt = ad.polar_optimizer(optax.sgd(0.5), stiefel="landing", lam=1.0)
    upd, _ = opt.update(grads, opt.init(tr), tr)
    got, g = upd.layers(), grads.layers()  # pyright: ignore[reportAttributeAccessIssue]
    for path, layer in a.layers().items():
        np.testing.assert_allclose(got[path].Theta, -0.5 * g[path].Theta, rtol=1e-6)
        for f in ("X", "Y"):
            x, gx = np.asarray(getattr(layer, f), float), np.asarray(getattr(g[path], f), float)
            want = -0.5 * 0.5 * (gx - x @ gx.T @ x)
            np.testing.assert_allclose(getattr(got[path], f), want, atol=1e-6)


def test_polar_optimizer_rejects_a_non_transform():
    with pytest.raises(TypeError, match="`inner` must be an optax GradientTransformation"):
        ad.polar_optimizer(1e-3)  # pyright: ignore[reportArgumentType]
