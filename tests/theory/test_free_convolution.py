"""Free convolution μ_SC ⊞ ν: edges, density, mass (theory/free_convolution.py)."""

import numpy as np
import pytest

from theory.free_convolution import (
    AtomicLaw,
    edge_point,
    free_convolution_density,
    left_edge,
    right_edge,
)
from theory.semicircle import semicircle_pdf


def test_delta_gives_semicircle():
    law = AtomicLaw.from_values([0.0], [1.0])
    assert right_edge(law) == pytest.approx(2.0, abs=1e-13)
    assert left_edge(law) == pytest.approx(-2.0, abs=1e-13)
    dens = free_convolution_density(law)
    x = np.linspace(-1.99, 1.99, 101)
    np.testing.assert_allclose(dens(x), semicircle_pdf(x), atol=2e-5)
    assert dens.mass == pytest.approx(1.0, abs=1e-4)


def test_shift_of_an_atom_shifts_everything():
    law = AtomicLaw.from_values([3.0], [1.0])
    assert right_edge(law) == pytest.approx(5.0, abs=1e-12)
    assert left_edge(law) == pytest.approx(1.0, abs=1e-12)


def test_two_atoms_edges_solve_hprime_and_mass():
    # ν = (δ0 + δ_b)/2: H'(z) = 1 - (1/z² + 1/(z-b)²)/2 has a closed form root for b=3
    b = 3.0
    law = AtomicLaw.from_values([0.0, b], [0.5, 0.5])
    ep = edge_point(law)
    z = law.upper + ep.u
    assert 1 - 0.5 / z**2 - 0.5 / (z - b) ** 2 == pytest.approx(0.0, abs=1e-13)
    assert ep.edge == pytest.approx(z + 0.5 / z + 0.5 / (z - b), abs=1e-13)
    dens = free_convolution_density(law)
    assert dens.mass == pytest.approx(1.0, abs=1e-4)
    # symmetric about b/2
    x = np.linspace(-1, 4, 41)
    np.testing.assert_allclose(dens(x), dens(b - x), atol=1e-4)


def test_density_matches_subordination_fixed_point():
    # independent route: iterate G <- E[1/(z - G - σ)] at z = x + 1e-7 i (interior points)
    vals, w = np.array([0.0, 1.0, 2.5]), np.array([0.5, 0.3, 0.2])
    dens = free_convolution_density(AtomicLaw.from_values(vals, w))
    for x in (-1.0, 0.3, 1.2, 2.6):
        z, G = x + 1e-7j, -0.5j
        for _ in range(20000):
            G = 0.5 * G + 0.5 * np.sum(w / (z - G - vals))
        assert dens(x) == pytest.approx(-G.imag / np.pi, abs=1e-5)


def test_irregular_edge_for_thin_top():
    # atoms whose distance to the top is large: E[gap^-2] <= 1, edge = H(s+)
    law = AtomicLaw.from_values([0.0], [1.0], upper=1.5)
    ep = edge_point(law)
    assert not ep.regular and ep.u == 0.0
    assert ep.edge == pytest.approx(1.5 + 1 / 1.5, abs=1e-14)


def test_bad_input():
    with pytest.raises(ValueError, match="weights"):
        AtomicLaw.from_values([0.0, 1.0], [1.0, -0.5])
    with pytest.raises(ValueError, match="values"):
        AtomicLaw.from_values([0.0, np.nan], [0.5, 0.5])
