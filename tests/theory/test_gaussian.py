"""Gaussian expectations against closed forms (kinked, step and smooth f)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import ndtr

from theory.gaussian import gauss_hermite_expectation, gaussian_expectation

PHI = lambda x: np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)  # noqa: E731


def relu_mean(s):
    """E[max(s + g, 0)] = s Φ(s) + φ(s)."""
    return s * ndtr(s) + PHI(s)


def test_abs_closed_form_and_gauss_hermite_fails():
    exact = np.sqrt(2 / np.pi)
    assert abs(gaussian_expectation(np.abs, breaks=[0.0]) - exact) < 1e-13
    # plain Gauss–Hermite is not accurate enough for a kink: its error is far above 1e-10
    assert abs(gauss_hermite_expectation(np.abs, order=60) - exact) > 1e-5
    assert abs(gauss_hermite_expectation(np.abs, order=200) - exact) > 1e-6


@given(st.floats(-6, 6), st.floats(-3, 3))
def test_relu_shifted_kink(s, k):
    got = gaussian_expectation(lambda x: np.maximum(x - k, 0.0), s, breaks=[k])
    assert abs(got - relu_mean(s - k)) < 1e-11


@given(
    st.lists(st.floats(-4, 4), min_size=1, max_size=5, unique=True),
    st.lists(st.floats(-2, 2), min_size=6, max_size=6),
    st.floats(-3, 3),
)
def test_step_function_equals_phi_differences(breaks, levels, s):
    b = np.sort(np.array(breaks))
    lev = np.array(levels[: b.size + 1])
    f = lambda x: lev[np.searchsorted(b, x, side="right")]  # noqa: E731
    edges = np.concatenate([[-np.inf], b, [np.inf]])
    exact = float(np.sum(lev * np.diff(ndtr(edges - s))))
    assert abs(gaussian_expectation(f, s, breaks=b) - exact) < 1e-11


def test_smooth_and_vectorised():
    s = np.linspace(-3, 3, 13)
    # E[tanh(s+g)] has no closed form; E[(s+g)^4] = s^4 + 6 s^2 + 3, E[cos(s+g)] = cos(s) e^{-1/2}
    np.testing.assert_allclose(
        gaussian_expectation(lambda x: x**4, s), s**4 + 6 * s**2 + 3, rtol=1e-12
    )
    np.testing.assert_allclose(
        gaussian_expectation(np.cos, s), np.cos(s) * np.exp(-0.5), atol=1e-13
    )
    assert gaussian_expectation(np.cos, s).shape == s.shape


def test_bad_input():
    with pytest.raises(TypeError, match="`f`"):
        gaussian_expectation(3.0)
    with pytest.raises(ValueError, match="`s`"):
        gaussian_expectation(np.abs, np.nan)
    with pytest.raises(ValueError, match="`f`"):
        with np.errstate(invalid="ignore"):
            gaussian_expectation(lambda x: np.log(x))  # NaN on the negative nodes
