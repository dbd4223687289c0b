"""The capped extremal σ (spectral.sigmas.extremal) and its search family (issue 47): the gap
against a direct formula, the JAX twin against numpy, the implicit gradient against finite
differences, and β* near the floor at the stored optimum."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import lambertw

import spectral
from spectral import sigmas
from theory.nonlinear_laplacian_floor import beta_floor, extremal_log_kernel

PRIORS = ("planted_submatrix", "sparse_nnpca")


def test_planted_extremal_gap_is_the_capped_exponential():
    """Planted: gap(t) = e^c (e^{-β0 τ} - e^{-β0 t0}), τ = clip(t, t0 - width, t0), β0 = √W(1)."""
    b0 = math.sqrt(lambertw(1.0).real)
    c, t0, width = 0.4, 2.0, 5.0
    s = sigmas.extremal(c, t0, width)
    t = np.linspace(-8.0, 6.0, 57)
    tau = np.clip(t, t0 - width, t0)
    want = math.exp(c) * (np.exp(-b0 * tau) - math.exp(-b0 * t0))
    np.testing.assert_allclose(s.gap_upper(t), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(s(t), -want, rtol=1e-13, atol=1e-15)
    assert s.lower == pytest.approx(-want[0], rel=1e-13) and s.upper == 0.0
    assert np.all(np.diff(s(t)) >= 0)


@pytest.mark.parametrize("prior", PRIORS)
def test_jax_family_gap_matches_the_numpy_sigma(prior):
    fam = spectral.family(f"extremal_{prior}")
    p = np.array([0.7, 3.0, 6.0])
    t = np.linspace(-6.0, 5.0, 45)
    got = np.asarray(fam.gap(jnp.asarray(p), jnp.asarray(t)))
    np.testing.assert_allclose(got, fam.make(p).gap_upper(t), rtol=1e-12, atol=1e-14)
    assert fam.size == 3


def test_nnpca_gap_is_one_over_the_kernel():
    """NNPCA: gap + e^c/K(t0) = e^c/K(τ), K(t)/K(0) = exp(extremal_log_kernel)."""
    s = sigmas.extremal(0.3, 4.0, 7.0, "sparse_nnpca")
    t = np.array([-2.5, 0.0, 1.5, 3.9])
    lhs = s.gap_upper(t) + math.exp(0.3 - float(extremal_log_kernel(4.0, "sparse_nnpca")))
    np.testing.assert_allclose(
        lhs, np.exp(0.3 - extremal_log_kernel(t, "sparse_nnpca")), rtol=1e-12
    )


def test_implicit_gradient_matches_finite_differences():
    p = np.array([0.6, 3.5, 6.0])
    b, g, _ = spectral.threshold_and_gradient("extremal_planted_submatrix", p)
    for i, h in enumerate((1e-5, 1e-5, 1e-5)):
        e = np.zeros(3)
        e[i] = h
        up = spectral.threshold_and_gradient("extremal_planted_submatrix", p + e)[0]
        down = spectral.threshold_and_gradient("extremal_planted_submatrix", p - e)[0]
        assert g[i] == pytest.approx((up - down) / (2 * h), abs=1e-7)
    assert b > beta_floor("planted_submatrix")


@pytest.mark.parametrize("prior", PRIORS)
def test_stored_optimum_is_within_1e4_of_the_floor(prior):
    from paper_checks.spectral import FLOOR_PARAMS, PAPER_BEST

    b = spectral.critical_threshold(sigmas.extremal(*FLOOR_PARAMS[prior], prior), prior)
    assert 0.0 < b - beta_floor(prior) < 1e-4
    assert b < PAPER_BEST[prior]


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(c=0.5, t0=3.0, width=0.0), "width"),
        (dict(c=0.5, t0=30.0, width=1.0), "t0"),
        (dict(c=0.5, t0=3.0, width=1.0, prior="gaussian"), "prior"),
    ],
)
def test_bad_extremal(kw, match):
    with pytest.raises(ValueError, match=match):
        sigmas.extremal(**kw)
