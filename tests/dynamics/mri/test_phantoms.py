"""Ellipsoid phantoms, analytic ellipse k-space, simulated data and the five shifts."""

import math

import jax
import numpy as np
import pytest
import scipy.special

from dynamics import mri

N = 32


def test_j1_matches_scipy():
    x = np.linspace(-80, 80, 4001)
    assert np.abs(np.asarray(mri.j1(x)) - scipy.special.j1(x)).max() < 1e-7  # A&S error bounds


def _ellipses(phi=0.4):
    #               rho   a     b     x0    y0     phi
    return np.array([[1.0, 0.5, 0.3, 0.2, -0.1, phi], [-0.4, 0.15, 0.25, -0.1, 0.2, -0.3]])


def _fine_kspace(el, os):
    """FFT of the ellipses point-sampled on a grid ``os`` times finer, central N x N, scaled."""
    kf = np.fft.fftshift(
        np.fft.fft2(np.fft.ifftshift(np.asarray(mri.rasterize(el, (N * os, N * os)))), norm="ortho")
    )
    c = N * os // 2 - N // 2
    return kf[c : c + N, c : c + N] / os


def _raster_bound(el, os, nu_max):
    """Bound on |raster - analytic| in k-space units (derived here): a point-sampled indicator
    differs from the exact one only in cells the boundary crosses, at most 4 (P/d + 1) cells of
    area d^2 (a curve of length d meets at most 4 cells; perimeter P <= pi sqrt(2 (a^2 + b^2)));
    inside, the midpoint rule errs by at most area (2 pi nu)^2 d^2 / 24; times N/4 (the scale of
    ``ellipse_kspace``)."""
    d = 2.0 / (N * os)
    tot = 0.0
    for rho, a, b, *_ in el:
        per = math.pi * math.sqrt(2 * (a * a + b * b))
        tot += abs(rho) * (
            4 * (per / d + 1) * d * d + math.pi * a * b * (2 * math.pi * nu_max) ** 2 * d * d / 24
        )
    return tot * N / 4


def test_analytic_kspace_matches_a_fine_rasterisation_at_low_frequencies():
    os, half = 32, 4  # |k - N/2| <= 4, i.e. |nu| <= 2 cycles per unit (2 sqrt 2 on the diagonal)
    el = _ellipses()
    lo = slice(N // 2 - half, N // 2 + half + 1)
    exact = np.asarray(mri.ellipse_kspace(el, (N, N)))[lo, lo]
    fine = _fine_kspace(el, os)[lo, lo]
    tol = _raster_bound(el, os, nu_max=half / 2 * math.sqrt(2))
    err = np.abs(exact - fine).max()
    assert err < tol
    assert tol < 0.1 * np.abs(exact[half, half])  # a bound tight enough to mean something
    # the check can fail: the mirrored rotation, or the shift with the wrong sign, exceeds it
    bad_rot = np.asarray(mri.ellipse_kspace(_ellipses(-0.4), (N, N)))[lo, lo]
    assert np.abs(bad_rot - fine).max() > 3 * tol
    flipped = el.copy()
    flipped[:, 3:5] *= -1
    assert np.abs(np.asarray(mri.ellipse_kspace(flipped, (N, N)))[lo, lo] - fine).max() > 3 * tol
    # the DC value is the total intensity, sum rho pi a b, times N/4
    dc = sum(r * math.pi * a * b for r, a, b, *_ in el) * N / 4
    assert exact[half, half].real == pytest.approx(dc, rel=1e-7)


def test_simulate_paths_agree():
    """The fine-grid path with a unit field reproduces the analytic k-space (same bound), and
    multi-coil data combined with the coil maps give back the single-coil image."""
    patient = mri.shepp_logan_3d()
    z = np.array([0.0])
    k, coils = mri.simulate(patient, z, (N, N))
    assert coils is None and k.shape == (1, N, N)
    unit = np.r_[1.0, np.zeros(5)]
    kf, _ = mri.simulate(patient, z, (N, N), bias=unit, oversample=8)
    el = np.asarray(mri.slice_ellipses(patient, 0.0))
    tol = _raster_bound(el, 8, nu_max=N / 4 * math.sqrt(2))
    assert np.abs(np.asarray(k - kf)).max() < tol
    km, coils = mri.simulate(patient, z, (N, N), n_coils=4, bias=unit, oversample=4)
    assert km.shape == (1, 4, N, N) and coils.shape == (4, N, N)
    x_single = np.asarray(mri.ifft2c(kf))
    x_multi = np.asarray(mri.adjoint(km, np.ones((N, N)), coils))
    rel = np.linalg.norm(x_multi - x_single) / np.linalg.norm(x_single)
    assert rel < 0.1, rel


def test_slices_are_exact_sections():
    patient = mri.shepp_logan_3d()
    e = np.asarray(patient.ellipsoids)
    at0 = np.asarray(mri.slice_ellipses(patient, 0.0))
    s = np.sqrt(np.clip(1 - (e[:, 6] / e[:, 3]) ** 2, 0, None))
    np.testing.assert_allclose(at0[:, 1:3], e[:, 1:3] * s[:, None], rtol=1e-14)
    missed = e[:, 6] + e[:, 3] < 0.9
    assert (np.asarray(mri.slice_ellipses(patient, 0.9))[:, 1:3][missed] == 0).all()
    two = np.asarray(mri.slice_ellipses(patient, np.array([0.0, 0.3])))
    np.testing.assert_array_equal(two[0], at0)


@pytest.mark.parametrize("family", ["brain", "knee"])
def test_random_patients(family):
    a = mri.random_patient(key=jax.random.key(0), family=family)
    b = mri.random_patient(key=jax.random.key(0), family=family)
    c = mri.random_patient(key=jax.random.key(1), family=family)
    np.testing.assert_array_equal(a.ellipsoids, b.ellipsoids)
    assert not np.allclose(a.ellipsoids, c.ellipsoids)
    base = mri.random_patient(key=jax.random.key(0), family=family, jitter=0.0)
    if family == "brain":
        np.testing.assert_array_equal(base.ellipsoids, mri.shepp_logan_3d().ellipsoids)
    d = np.asarray(a.ellipsoids) - np.asarray(base.ellipsoids)
    assert np.abs(d[:, 4:7]).max() <= 0.05 + 1e-12
    ratio = np.asarray(a.ellipsoids)[:, 1:4] / np.asarray(base.ellipsoids)[:, 1:4]
    assert np.abs(ratio - 1).max() <= 0.1 + 1e-12
    img = np.asarray(mri.rasterize(mri.slice_ellipses(a, np.array([-0.4, 0.0, 0.4])), (N, N)))
    assert img.min() >= -1e-12 and img.max() > 0.5


def test_bias_field_and_contrast_shifts():
    coeffs = np.asarray(mri.random_bias(key=jax.random.key(2), strength=0.3, gain=(0.6, 1.6)))
    g = coeffs[0]
    assert 0.6 <= g <= 1.6
    field = np.asarray(mri.polynomial_field(coeffs, (N, N)))
    assert (field >= g * 0.7 - 1e-12).all() and (field <= g * 1.3 + 1e-12).all()
    phase = np.asarray(mri.polynomial_field(mri.random_phase(key=jax.random.key(3)), (N, N)))
    assert np.abs(phase).max() <= 0.5 + 1e-12
    sl = mri.shepp_logan_3d()
    np.testing.assert_array_equal(mri.apply_contrast(sl, "T1").ellipsoids, sl.ellipsoids)
    img = {
        c: np.asarray(mri.rasterize(mri.slice_ellipses(mri.apply_contrast(sl, c), 0.0), (64, 64)))
        for c in ("T1", "T2")
    }
    vent, brain = (32, 32 + int(0.22 * 32)), (32 + int(0.5 * 32 * 0.5), 32)  # (row=y, col=x)
    assert img["T1"][vent] < img["T1"][brain] and img["T2"][vent] > img["T2"][brain]


def test_shift_settings_change_one_thing():
    src = mri.shift_setting("source")
    assert src == mri.SOURCE
    changed = {s: {k for k in src if mri.shift_setting(s)[k] != src[k]} for s in mri.SHIFTS}
    assert changed == {
        "anatomy": {"family"},
        "scanner": {"bias"},
        "contrast": {"contrast"},
        "acceleration": {"R", "center_fraction"},
        "mask": {"mask_kind"},
    }


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="`ellipses`"):
        mri.ellipse_kspace(np.ones((2, 5)), (N, N))
    with pytest.raises(ValueError, match="`z`"):
        mri.slice_ellipses(mri.shepp_logan_3d(), 1.5)
    with pytest.raises(TypeError, match="`patient`"):
        mri.simulate(np.ones((3, 8)), 0.0, (N, N))
    with pytest.raises(ValueError, match="`coeffs`"):
        mri.polynomial_field(np.ones(5), (N, N))
    with pytest.raises(ValueError, match="`family`"):
        mri.random_patient(key=jax.random.key(0), family="liver")


def test_noise_has_the_stated_variance():
    """E|n|^2 = noise_std^2 per entry; |n|^2 is exponential, so its mean over n entries has
    relative standard error 1/sqrt(n): within 4 SE."""
    patient, z = mri.shepp_logan_3d(), np.array([0.0])
    clean, _ = mri.simulate(patient, z, (N, N))
    noisy, _ = mri.simulate(patient, z, (N, N), noise_std=0.1, key=jax.random.key(4))
    again, _ = mri.simulate(patient, z, (N, N), noise_std=0.1, key=jax.random.key(4))
    np.testing.assert_array_equal(noisy, again)
    power = np.mean(np.abs(np.asarray(noisy - clean)) ** 2) / 0.01
    assert abs(power - 1) < 4 / math.sqrt(N * N)
    with pytest.raises(ValueError, match="`key`"):
        mri.simulate(patient, z, (N, N), noise_std=0.1)
