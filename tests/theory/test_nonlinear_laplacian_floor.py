"""The floor of the nonlinear Laplacian (theory/nonlinear_laplacian_floor.py), checked by
independent computations: a root of x e^x = 1, scipy double integrals, sympy, and an exact
(Φ-difference) evaluation of the outlier condition for random step σ, monotone or not."""

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.optimize import brentq
from scipy.stats import halfnorm, norm

import spectral
from spectral import sigmas
from theory.nonlinear_laplacian import EtaLaw
from theory.nonlinear_laplacian_floor import (
    beta_floor,
    extremal_log_kernel,
    floor_equation,
    half_normal_m,
)


def test_planted_floor_is_sqrt_lambert_w1():
    """β0² e^{β0²} = 1: the omega constant W(1) = 0.5671432904097838 by brentq, two ways."""
    omega = brentq(lambda x: x * math.exp(x) - 1.0, 0.1, 1.0, xtol=1e-16)
    assert beta_floor("planted_submatrix") == pytest.approx(math.sqrt(omega), abs=1e-15)
    assert beta_floor(EtaLaw.point(1.0)) == pytest.approx(math.sqrt(omega), abs=1e-13)
    assert beta_floor("planted_submatrix") == pytest.approx(0.7530892, abs=5e-8)  # the issue's


def _nnpca_norm2_dblquad(beta):
    """E[η²η'² e^{sηη'}], η, η' i.i.d. |N(0, 1)|, s = 2β²/π, by a plain 2-D scipy integral."""
    s = 2 * beta**2 / math.pi
    val, _ = integrate.dblquad(
        lambda y, x: x * x * y * y * math.exp(s * x * y - 0.5 * (x * x + y * y)) * 2 / math.pi,
        0.0,
        40.0,
        0.0,
        40.0,
        epsabs=1e-13,
        epsrel=1e-12,
    )
    return val


def test_nnpca_floor_closed_form_against_quadrature_priors_and_dblquad():
    closed = beta_floor("sparse_nnpca")
    assert closed == pytest.approx(beta_floor(EtaLaw.half_normal()), abs=1e-11)
    assert closed == pytest.approx(beta_floor(EtaLaw.from_scipy(halfnorm())), abs=1e-9)
    assert closed == pytest.approx(0.66093, abs=5e-6)  # "about 0.66093" (the issue)
    for beta in (0.5, closed, 0.9):
        want = beta**2 * _nnpca_norm2_dblquad(beta) - 1.0
        assert floor_equation(beta, "sparse_nnpca") == pytest.approx(want, abs=1e-9)
    assert abs(floor_equation(closed, "sparse_nnpca")) < 1e-12


def test_half_normal_m_is_the_sympy_integral():
    """M(τ) = ∫0^∞ x² e^{τx} 2φ(x) dx in closed form (sympy), and log M against scipy quad."""
    sp = pytest.importorskip("sympy")
    x = sp.symbols("x", positive=True)
    t = sp.symbols("t", real=True)
    exact = sp.integrate(x**2 * sp.exp(t * x - x**2 / 2) * 2 / sp.sqrt(2 * sp.pi), (x, 0, sp.oo))
    Phi = (1 + sp.erf(t / sp.sqrt(2))) / 2
    phi = sp.exp(-(t**2) / 2) / sp.sqrt(2 * sp.pi)
    claimed = 2 * sp.exp(t**2 / 2) * ((1 + t**2) * Phi + t * phi)
    assert sp.simplify((exact - claimed).rewrite(sp.erf)) == 0
    for tau in (-9.0, -3.0, -0.5, 0.0, 1.0, 4.0):
        direct, _ = integrate.quad(
            lambda y, tau=tau: y * y * math.exp(tau * y - 0.5 * y * y) * 2 / math.sqrt(2 * math.pi),
            0.0,
            np.inf,
            epsabs=0.0,
            epsrel=1e-13,
        )
        assert float(half_normal_m(tau)) == pytest.approx(math.log(direct), abs=1e-11)


@pytest.mark.parametrize("prior", ["planted_submatrix", "sparse_nnpca"])
def test_extremal_kernel_against_the_generic_rule(prior):
    law = EtaLaw.point(1.0) if prior == "planted_submatrix" else EtaLaw.half_normal()
    t = np.linspace(-6.0, 8.0, 15)
    np.testing.assert_allclose(
        extremal_log_kernel(t, prior), extremal_log_kernel(t, law), atol=1e-9
    )


def _step_outlier_sum(breaks, levels, beta, eta):
    """β E_{η,g}[(η²/m2)/(z* - σ(βηm1/m2 + g))] for a step σ (any levels) by Φ differences,
    with z* the edge point of the atoms of σ(g) (E (z* - σ)^{-2} = 1; an atom sits at max σ);
    also returns E (z* - σ(g))^{-2}."""
    cuts = np.concatenate([[-np.inf], breaks, [np.inf]])
    p0 = np.diff(norm.cdf(cuts))
    top = levels.max()
    z = brentq(lambda z: np.sum(p0 / (z - levels) ** 2) - 1.0, top + 1e-14, top + 50, xtol=1e-15)
    shift = beta * eta.nodes * eta.m1 / eta.m2
    pj = np.diff(norm.cdf(cuts[None, :] - shift[:, None]), axis=1)
    w = eta.probs * eta.nodes**2 / eta.m2
    return beta * float(w @ (pj @ (1.0 / (z - levels)))), float(np.sum(p0 / (z - levels) ** 2))


@pytest.mark.parametrize("eta", [EtaLaw.point(1.0), EtaLaw.half_normal()], ids=["ps", "nnpca"])
def test_cauchy_schwarz_bound_on_random_steps_monotone_or_not(eta):
    """The derivation's inequality β E[(η²/m2) f(aη + g)] <= β‖K_β‖ (steps 1-2 of the module
    doc), with β‖K_β‖ = √(floor_equation + m2²)/m2; below β0 no σ reaches 1 (no outlier)."""
    rng = np.random.default_rng(47)
    b0 = beta_floor(eta)
    worst = 0.0
    for _ in range(60):
        k = int(rng.integers(1, 6))
        breaks = np.sort(rng.uniform(-3.0, 3.0, k))
        levels = rng.uniform(-2.0, 2.0, k + 1)  # not monotone in general
        for beta in (0.3, 0.6, b0, 1.0, 1.2):
            lhs, f2 = _step_outlier_sum(breaks, levels, beta, eta)
            bound = math.sqrt(floor_equation(beta, eta) + eta.m2**2) / eta.m2
            assert f2 == pytest.approx(1.0, abs=1e-9)
            assert lhs <= bound * (1 + 1e-12)
            worst = max(worst, lhs / bound)
            if beta <= b0:
                assert lhs < 1.0
    assert worst > 0.5  # the bound is not vacuous on these σ


def test_shift_identity_on_a_step():
    """E_g f(q + g) = E_g[f(g) e^{qg - q²/2}] (step 1) for a step f, quadrature against Φ."""
    f = sigmas.step([-0.3, 1.1], [0.5, 2.0, 3.5])
    for q in (0.4, 1.3):
        lhs = 0.5 * norm.cdf(-0.3 - q) + 2.0 * (norm.cdf(1.1 - q) - norm.cdf(-0.3 - q))
        lhs += 3.5 * norm.sf(1.1 - q)
        rhs, _ = integrate.quad(
            lambda g, q=q: float(f(np.array([g]))[0]) * math.exp(q * g - q * q / 2) * norm.pdf(g),
            -40,
            40,
            points=[-0.3, 1.1],
            epsabs=1e-13,
            limit=200,
        )
        assert rhs == pytest.approx(lhs, abs=1e-11)


@pytest.mark.parametrize(
    "prior,c",
    [("planted_submatrix", 0.567), ("sparse_nnpca", 0.7855)],
)
def test_extremal_family_approaches_the_floor_from_above(prior, c):
    """β* of the capped extremal σ decreases toward β0 as the cap t0 moves into the tail."""
    b0 = beta_floor(prior)
    got = [spectral.critical_threshold(sigmas.extremal(c, t0, 8.0, prior), prior) for t0 in (3, 5)]
    assert b0 < got[1] < got[0]
    assert got[1] - b0 < 2e-4


@pytest.mark.parametrize("bad,err", [("gaussian", ValueError), (1.0, TypeError)])
def test_bad_prior(bad, err):
    with pytest.raises(err, match="prior"):
        beta_floor(bad)
