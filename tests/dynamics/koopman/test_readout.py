"""CCA / EDMD read-out and metrics on exact features (population moments by quadrature)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import roots_legendre

from dynamics.koopman import (
    NoisyLogisticMap,
    OrnsteinUhlenbeck,
    cca_readout,
    directed_hausdorff,
    edmd_readout,
    forecast_rmse,
    principal_angles,
    relative_singular_value_errors,
)


@pytest.fixture(scope="module")
def logistic_joint():
    """Nodes (X, Y) and weights of the joint law pi(x) p(y|x) on a 200 x 200 Gauss-Legendre grid."""
    L = NoisyLogisticMap()
    t, w = roots_legendre(200)
    x, w = (t + 1) / 2, w / 2
    W = (
        (w * L.invariant_density(x))[:, None]
        * L.transition_density(x[None, :], x[:, None])
        * w[None, :]
    ).reshape(-1)
    phi, psi = L.left_singular_functions(x, 21), L.right_singular_functions(x, 21)
    n = x.size

    # row (i, j) of the grid is the pair (x_i, x_j): values at X repeat, values at Y tile
    def at_x(a, k):
        return np.repeat(a[:, :k], n, 0)

    def at_y(a, k):
        return np.tile(a[:, :k], (n, 1))

    return L, W, at_x, at_y, phi, psi


# d_H(learned -> true) from the exact top-k singular functions
# (docs/papers/koopman_lora.md#ground-truths,
# from the exact expansion by 2000-node quadrature): deterministic targets
D_H = {3: 0.3413, 5: 0.2535, 7: 0.0588, 9: 0.0354, 15: 0.0068}


@pytest.mark.parametrize("k", [3, 7, 9, 15, 21])
def test_three_eigen_routes_agree_on_exact_features(logistic_joint, k):
    L, W, at_x, at_y, phi, psi = logistic_joint
    assert W.sum() == pytest.approx(1.0, abs=1e-10)
    fx, fy, gx, gy = at_x(phi, k), at_y(phi, k), at_x(psi, k), at_y(psi, k)
    ro = cca_readout(fx, gy, fy, weights=W)
    np.testing.assert_allclose(ro.singular_values, L.singular_values(k), atol=1e-8)
    e_f = edmd_readout(fx, fy, weights=W).eigenvalues
    e_g = edmd_readout(gx, gy, weights=W).eigenvalues
    np.testing.assert_allclose(np.sort_complex(ro.eigenvalues), np.sort_complex(e_f), atol=1e-7)
    np.testing.assert_allclose(np.sort_complex(e_g), np.sort_complex(e_f), atol=1e-7)
    d = directed_hausdorff(ro.eigenvalues, L.eigenvalues())
    if k == 21:
        assert d < 1e-7  # finite rank 21: exact spectrum
    else:
        assert d == pytest.approx(D_H[k], abs=1e-4)


@given(seed=st.integers(0, 2**31 - 1), k=st.integers(2, 6))
def test_cca_is_invariant_to_invertible_feature_maps(seed, k):
    rng = np.random.default_rng(seed)
    ou = OrnsteinUhlenbeck(tau=0.3)
    x, y = ou.pairs(2000, rng=rng)
    fx, gy = ou.left_singular_functions(x, k), ou.right_singular_functions(y, k)
    fx = fx + 0.1 * rng.standard_normal(fx.shape)  # generic, not exact features
    A = rng.standard_normal((k, k)) + 3 * np.eye(k)
    B = rng.standard_normal((k, k)) + 3 * np.eye(k)
    s0 = cca_readout(fx, gy).singular_values
    s1 = cca_readout(fx @ A, gy @ B).singular_values
    np.testing.assert_allclose(s1, s0, atol=1e-9)


def test_forecast_with_exact_ou_features_is_exact():
    """E[X_t | X_0 = x] = r^t x; with exact Hermite features CCA+LoRA and EDMD reproduce it (the
    decoder E[psi~ h] is estimated on 2e5 pairs: error ~ 1/sqrt(n))."""
    ou = OrnsteinUhlenbeck(tau=0.5)
    x, y = ou.pairs(200_000, rng=0)
    k = 4
    ro = cca_readout(
        ou.left_singular_functions(x, k),
        ou.right_singular_functions(y, k),
        ou.left_singular_functions(y, k),
    )
    x0 = np.linspace(-2, 2, 9)
    dec = ro.decoder(ou.right_singular_functions(y, k), y)
    pred = ro.forecast(ou.left_singular_functions(x0, k), dec, [1, 2, 5])
    truth = np.stack([ou.r**t * x0[:, None] for t in (1, 2, 5)])
    err = forecast_rmse(pred, truth)
    assert np.all(err < 0.02)  # |phi~(x0)| <= ~3 times the decoder's ~2e-3 standard error
    ed = edmd_readout(ou.left_singular_functions(x, k), ou.left_singular_functions(y, k))
    pe = ed.forecast(
        ou.left_singular_functions(x0, k),
        ed.decoder(ou.left_singular_functions(x, k), x),
        [1, 2, 5],
    )
    assert np.all(forecast_rmse(pe, truth) < 0.02)
    lam = ro.eigenvalues
    np.testing.assert_allclose(np.sort(lam.real)[::-1], ou.singular_values(k), atol=0.01)


def test_metrics():
    np.testing.assert_allclose(relative_singular_value_errors([1.0, 0.55], [1.0, 0.5]), [0, 0.1])
    t = np.linspace(0, 2 * np.pi, 1000, endpoint=False)
    F = np.stack([np.ones_like(t), np.cos(t)], 1)
    R = np.stack([np.ones_like(t), np.cos(t + 0.3)], 1)  # angle between cos t and cos(t+.3)
    ang = principal_angles(F, R)
    np.testing.assert_allclose(ang, [0.0, 0.3], atol=1e-12)
    assert directed_hausdorff([1.0, 0.5j], [1.0, 0.4j, -1]) == pytest.approx(0.1)


def test_bad_input():
    rng = np.random.default_rng(0)
    fx, gy = rng.standard_normal((50, 3)), rng.standard_normal((50, 3))
    bad = fx.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="fx"):
        cca_readout(bad, gy)
    with pytest.raises(ValueError, match="gy"):
        cca_readout(fx, gy[:, :2])
    with pytest.raises(ValueError, match="horizons"):
        cca_readout(fx, gy, fx).forecast(fx, np.zeros((3, 1)), [0])
    with pytest.raises(ValueError, match="Koopman matrix"):
        cca_readout(fx, gy).eigenfunctions(fx)
    with pytest.raises(ValueError, match="reference"):
        principal_angles(fx, gy[:10])
    with pytest.raises(ValueError, match="estimated"):
        directed_hausdorff([np.nan], [1.0])
