"""σ searches: implicit-differentiation gradient of β*, grids, Nelder–Mead vs gradient."""

import numpy as np
import pytest

import spectral
from spectral import sigmas


@pytest.mark.parametrize(
    "fam,p,prior",
    [
        ("tanh", [1.2, 0.7], "planted_submatrix"),
        ("zshape", [5.0, 3.0, -3.0], "planted_submatrix"),
        ("step3", [-1.0, 1.0, 0.5, 0.5, 0.7, 0.4], "planted_submatrix"),  # breaks on grid points
        ("tanh", [1.0, 0.3], "sparse_nnpca"),  # irregular regime
    ],
)
def test_gradient_matches_finite_differences(fam, p, prior):
    p = np.array(p)
    b, g, res = spectral.threshold_and_gradient(fam, p, prior)
    assert b == pytest.approx(spectral.critical_threshold(spectral.family(fam).make(p), prior))
    h = 1e-6
    fd = [
        (
            spectral.threshold_and_gradient(fam, p + h * e, prior)[0]
            - spectral.threshold_and_gradient(fam, p - h * e, prior)[0]
        )
        / (2 * h)
        for e in np.eye(p.size)
    ]
    np.testing.assert_allclose(g, fd, atol=2e-8)


def test_gradient_reaches_paper_tanh_optimum_with_fewer_evaluations():
    target = 0.7550073893  # official Nelder–Mead result from (1, 1): 78 evaluations
    gr = spectral.optimize_threshold("tanh", [1.0, 1.0], method="gradient")
    nm = spectral.optimize_threshold("tanh", [1.0, 1.0], method="nelder-mead")
    assert gr.beta_star <= target + 1e-10 and nm.beta_star <= target + 1e-10
    assert gr.evaluations_to_reach(target) < nm.evaluations_to_reach(target)
    np.testing.assert_allclose(gr.params, [1.70974534, 0.58384117], atol=1e-4)


def test_grid_matches_pointwise_and_reports_min():
    g = spectral.threshold_grid("zshape", {"a": [6.0, 7.5], "b": [4.0, 4.5]}, {"c": -5.2})
    assert g.values.shape == (2, 2)
    direct = spectral.critical_threshold(sigmas.zshape(7.5, 4.5, -5.2))
    assert g.values[1, 1] == pytest.approx(direct)
    assert g.argmin[2] == g.values.min()
    with pytest.raises(ValueError, match="axes"):
        spectral.threshold_grid("zshape", {"a": [1.0]}, {"c": 0.0})


def test_bad_family():
    with pytest.raises(ValueError, match="family"):
        spectral.family("relu")
