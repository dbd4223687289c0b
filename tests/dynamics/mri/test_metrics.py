"""Metrics on a fixed intensity scale against closed forms and a brute-force SSIM."""

import numpy as np
import pytest

from dynamics.mri.metrics import hfen, psnr, psnr_normalized, ssim

RNG = np.random.default_rng(0)
REF = RNG.uniform(0, 2, (3, 12, 14))
X = REF + 0.1 * RNG.standard_normal(REF.shape)


def test_psnr_of_a_constant_offset():
    c = 0.05
    want = 20 * np.log10(REF.max(axis=(-2, -1)) / c)
    np.testing.assert_allclose(psnr(REF + c, REF), want, rtol=1e-12)


def test_normalised_psnr_is_blind_to_gain_and_offset():
    """The pitfall of the official metric: ``a x + b`` scores as ``x``
    (``docs/papers/d2sa.md#departures-and-why``)."""
    np.testing.assert_allclose(psnr_normalized(1.6 * X + 0.3, REF), psnr_normalized(X, REF))
    assert np.all(psnr(1.6 * X + 0.3, REF) < psnr(X, REF) - 3)


def _ssim_brute(x, y, rng, w=7):
    c1, c2 = (0.01 * rng) ** 2, (0.03 * rng) ** 2
    vals = []
    for i in range(x.shape[0] - w + 1):
        for j in range(x.shape[1] - w + 1):
            a, b = x[i : i + w, j : j + w].ravel(), y[i : i + w, j : j + w].ravel()
            ma, mb = a.mean(), b.mean()
            va, vb = a.var(ddof=1), b.var(ddof=1)
            cab = np.cov(a, b)[0, 1]
            vals.append(
                (2 * ma * mb + c1) * (2 * cab + c2) / ((ma**2 + mb**2 + c1) * (va + vb + c2))
            )
    return np.mean(vals)


def test_ssim_matches_window_by_window_definition():
    got = ssim(X, REF)
    for k in range(3):
        rng = REF[k].max() - REF[k].min()
        np.testing.assert_allclose(got[k], _ssim_brute(X[k], REF[k], rng), rtol=1e-10)
    np.testing.assert_allclose(ssim(REF, REF), 1.0, rtol=1e-12)


def test_hfen_zero_at_reference_and_linear_in_the_error():
    np.testing.assert_allclose(hfen(REF, REF), 0.0, atol=1e-15)
    e = hfen(X, REF)
    np.testing.assert_allclose(hfen(REF + 2.5 * (X - REF), REF), 2.5 * e, rtol=1e-12)
    np.testing.assert_allclose(hfen(3 * X, 3 * REF), e, rtol=1e-12)


def test_bad_input():
    with pytest.raises(TypeError, match="`x` must be real"):
        psnr(X + 1j, REF)
    with pytest.raises(ValueError, match="`x` must have the shape of `ref`"):
        ssim(X[:2], REF)
    with pytest.raises(ValueError, match="`ref` must be finite"):
        hfen(X, REF * np.nan)
    with pytest.raises(ValueError, match="win_size"):
        ssim(X, REF, win_size=4)
