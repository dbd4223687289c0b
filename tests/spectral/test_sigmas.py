"""σ families: values, declared bounds and breaks, stable gaps, validation."""

import numpy as np
import pytest

import spectral
from spectral import sigmas

T = np.linspace(-30, 30, 2001)
FAMILIES = [
    sigmas.tanh(1.7, 0.58),
    sigmas.zshape(7.4, 4.4, -5.2),
    sigmas.zshape(0.0, 2.0, 1.0),
    sigmas.step([-1.0, 0.0, 0.0, 2.0], [-1.0, 0.0, 0.5, 0.7, 3.0]),
    sigmas.constant(2.5),
    sigmas.monotone_mlp([0.3, -1.0], [0.5, 2.0], [0.0, -1.0], 0.2),
    sigmas.tanh(1.0, 1.0) + 3.0,
]


@pytest.mark.parametrize("s", FAMILIES, ids=str)
def test_bounded_monotone_with_consistent_gaps(s):
    v = s(T)
    assert np.all(np.diff(v) >= -1e-15)
    assert v.max() <= s.upper + 1e-12 and v.min() >= s.lower - 1e-12
    np.testing.assert_allclose(s.gap_upper(T), s.upper - v, atol=1e-12)
    np.testing.assert_allclose(s.gap_lower(T), v - s.lower, atol=1e-12)
    assert np.all(s.gap_upper(T) >= 0) and np.all(s.gap_lower(T) >= 0)


def test_family_values():
    t = np.array([-3.0, -1.0, 0.4, 2.0])
    np.testing.assert_allclose(sigmas.tanh(2.0, 0.5)(t), 2 * np.tanh(0.5 * t))
    z = sigmas.zshape(2.0, 4.0, -1.0)
    np.testing.assert_allclose(z(np.array([-2.0, -1.0, 0.0, 1.0, 5.0])), [0, 0, 2, 4, 4])
    assert z.breaks == (-1.0, 1.0)
    st = sigmas.step([0.0, 1.0], [0.0, 1.0, 3.0])
    np.testing.assert_allclose(st(np.array([-0.5, 0.0, 0.99, 1.0])), [0, 1, 1, 3])


def test_tanh_gap_has_no_cancellation():
    s = sigmas.tanh(1.0, 2.0)
    g = s.gap_upper(np.array([10.0]))[0]
    assert g == pytest.approx(2 / (1 + np.exp(40.0)), rel=1e-14) and g > 0


def test_bad_sigma_input():
    with pytest.raises(ValueError, match="`a`"):
        sigmas.tanh(-1.0, 1.0)
    with pytest.raises(ValueError, match="`b`"):
        sigmas.tanh(1.0, np.nan)
    with pytest.raises(ValueError, match="levels"):
        sigmas.step([0.0, 1.0], [0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="breaks"):
        sigmas.step([1.0, 0.0], [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="upper"):
        sigmas.custom(lambda t: t, upper=np.inf, lower=-np.inf)  # unbounded
    with pytest.raises(ValueError, match="fn"):
        sigmas.custom(lambda t: -np.tanh(t), upper=1.0, lower=-1.0)  # decreasing
    with pytest.raises(ValueError, match="fn"):
        sigmas.custom(np.arctan, upper=1.0, lower=-1.0)  # leaves its declared bounds
    with pytest.raises(TypeError, match="sigma"):
        spectral.critical_threshold(np.tanh)
    with pytest.raises(ValueError, match="prior"):
        spectral.critical_threshold(sigmas.zero(), "clique")
    with pytest.raises(ValueError, match="beta"):
        spectral.outlier(sigmas.zero(), -1.0)


def test_custom_agrees_with_family():
    s = sigmas.custom(lambda t: np.clip(t, 0.0, 1.0), upper=1.0, lower=0.0, breaks=[0.0, 1.0])
    assert spectral.critical_threshold(s) == pytest.approx(
        spectral.critical_threshold(sigmas.zshape(1.0, 1.0, 0.0)), abs=1e-11
    )
