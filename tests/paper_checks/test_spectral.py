"""The finite-n band of the spectral null-edge claim: the Tracy–Widom scale factor of the edge."""

import numpy as np
import pytest

import spectral
from paper_checks.spectral import edge_scale
from spectral import sigmas


@pytest.mark.parametrize(
    "sigma",
    [sigmas.zero(), sigmas.tanh(1.70974534, 0.58384117), sigmas.tanh(1.0, 1.0)],
    ids=["zero", "tanh_opt", "tanh_1_1"],
)
def test_edge_scale_matches_the_square_root_edge_of_the_density(sigma):
    # rho(x) = (c/pi) sqrt(E+ - x) near the edge, gamma = c^{-2/3} (derived in edge_scale): fit
    # (pi rho)^2 = c^2 (E+ - x) on the last 0.03 of the free-convolution density (Biane's curve)
    dens = spectral.bulk_density(sigma, points=4001)
    edge = spectral.bulk_edge(sigma)
    near = (dens.x > edge - 0.03) & (dens.density > 0)
    c2 = np.polyfit(edge - dens.x[near], (np.pi * dens.density[near]) ** 2, 1)[0]
    gamma = edge_scale(sigma)
    assert gamma == pytest.approx(c2 ** (-1 / 3), rel=1e-2)
    if sigma.upper > 0:  # a wrong exponent (gamma = E[(z* - sigma)^-3]^{1/2}) is rejected
        assert abs(gamma**1.5 - c2 ** (-1 / 3)) > 0.05 * c2 ** (-1 / 3)


def test_edge_scale_is_one_for_the_semicircle():
    assert edge_scale(sigmas.zero()) == pytest.approx(1.0, abs=1e-12)
