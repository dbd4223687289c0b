"""MRI operators, masks, SSDU splits, data consistency and self-supervised losses."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics import mri

H, W, C = 16, 12, 4


def _cplx(g, *shape):
    return g.standard_normal(shape) + 1j * g.standard_normal(shape)


def _vdot(a, b):
    return complex(jnp.vdot(jnp.asarray(a).ravel(), jnp.asarray(b).ravel()))


@pytest.fixture
def g():
    return np.random.default_rng(0)


def test_fft2c_is_unitary_with_dc_at_the_centre(g):
    x, y = _cplx(g, 2, H, W), _cplx(g, 2, H, W)
    kx = mri.fft2c(x)
    assert kx.dtype == jnp.complex128
    np.testing.assert_allclose(np.linalg.norm(kx), np.linalg.norm(x), rtol=1e-13)
    np.testing.assert_allclose(mri.ifft2c(kx), x, atol=1e-13)
    bound = 1e-12 * np.linalg.norm(x) * np.linalg.norm(y)
    assert abs(_vdot(kx, y) - _vdot(x, mri.ifft2c(y))) < bound
    dc = np.array(mri.fft2c(np.ones((H, W), complex)))
    assert dc[H // 2, W // 2] == pytest.approx(math.sqrt(H * W), rel=1e-14)
    dc[H // 2, W // 2] = 0
    assert np.abs(dc).max() < 1e-12


def test_coil_maps_are_normalised_and_smooth():
    s = mri.coil_maps(C, (H, W))
    assert s.shape == (C, H, W) and s.dtype == jnp.complex128
    np.testing.assert_allclose(jnp.sum(jnp.abs(s) ** 2, axis=0), 1.0, rtol=1e-13)
    # smooth: neighbouring pixels differ by far less than the maps' range
    assert float(jnp.abs(jnp.diff(s, axis=-1)).max()) < 0.5 * float(jnp.abs(s).max())
    np.testing.assert_array_equal(mri.coil_maps(1, (H, W)), np.ones((1, H, W)))


@pytest.mark.parametrize("n_coils", [None, C])
def test_adjoint_identity(g, n_coils):
    """<A x, y> = <x, A^H y> for random complex x, y (batch of 2)."""
    mask = mri.cartesian_mask((H, W), 3, 0.2, key=jax.random.key(1))
    coils = None if n_coils is None else mri.coil_maps(n_coils, (H, W))
    x = _cplx(g, 2, H, W)
    y = _cplx(g, 2, H, W) if coils is None else _cplx(g, 2, C, H, W)
    lhs, rhs = _vdot(mri.forward(x, mask, coils), y), _vdot(x, mri.adjoint(y, mask, coils))
    assert abs(lhs - rhs) < 1e-13 * np.linalg.norm(x) * np.linalg.norm(y)
    np.testing.assert_allclose(
        mri.normal(x, mask, coils),
        mri.adjoint(mri.forward(x, mask, coils), mask, coils),
        atol=1e-13,
    )


def test_hard_dc_returns_the_acquired_samples_exactly(g):
    mask = mri.cartesian_mask((H, W), 4, 0.1, key=jax.random.key(2))
    k, y = _cplx(g, H, W), _cplx(g, H, W) * mask
    out = np.asarray(mri.kspace_consistency(k, y, mask))
    m = np.asarray(mask) > 0
    np.testing.assert_array_equal(out[m], np.asarray(y)[m])  # bit-exact
    np.testing.assert_array_equal(out[~m], k[~m])
    x = _cplx(g, H, W)
    np.testing.assert_allclose(mri.forward(mri.data_consistency(x, y, mask), mask), y, atol=1e-13)


def test_soft_dc_is_the_entrywise_minimiser(g):
    """(k + lam y)/(1 + lam) solves min |k' - k|^2 + lam |k' - y|^2 on acquired points."""
    mask = mri.cartesian_mask((H, W), 2, 0.1, key=jax.random.key(3))
    k, y, lam = _cplx(g, H, W), _cplx(g, H, W), 0.7
    out = np.asarray(mri.kspace_consistency(k, y, mask, lam))
    m = np.asarray(mask) > 0
    grad = (out - k) + lam * (out - y)  # half the gradient of the objective
    assert np.abs(grad[m]).max() < 1e-14
    np.testing.assert_array_equal(out[~m], k[~m])
    np.testing.assert_allclose(mri.kspace_consistency(k, y, mask, 0.0), k, atol=0)


@pytest.mark.parametrize("lam", [None, 2.0])
def test_multicoil_dc_is_a_unit_gradient_step(g, lam):
    """With sum |S_c|^2 = 1: dc(x) = x + t A^H (y - A x), t = 1 (hard) or lam/(1 + lam)."""
    mask = mri.cartesian_mask((H, W), 4, 0.1, key=jax.random.key(4))
    coils = mri.coil_maps(C, (H, W))
    x, y = _cplx(g, H, W), _cplx(g, C, H, W) * mask
    t = 1.0 if lam is None else lam / (1 + lam)
    want = x + t * mri.adjoint(y - mri.forward(x, mask, coils), mask, coils)
    np.testing.assert_allclose(mri.data_consistency(x, y, mask, coils, lam), want, atol=1e-13)


CASES = [
    (32, 4, 0.08),
    (64, 8, 0.04),
    (50, 3, 0.1),
    (37, 1, 0.08),
    (16, 2.5, 0.5),
    (20, 10, 0.3),
    (40, 4, 0.0),
]


@pytest.mark.parametrize("kind", ["random", "equispaced"])
@pytest.mark.parametrize(("n", "R", "cf"), CASES)
def test_mask_has_the_stated_number_of_lines(n, R, cf, kind):
    n_low = math.floor(n * cf + 0.5)
    expected = max(n_low, math.floor(n / R + 0.5))
    assert mri.num_lines(n, R, cf) == (expected, n_low)
    m = np.asarray(mri.cartesian_mask((6, n), R, cf, key=jax.random.key(5), kind=kind))
    assert set(np.unique(m)) <= {0.0, 1.0}
    assert (m == m[:1]).all()  # whole columns
    cols = np.flatnonzero(m[0])
    assert cols.size == expected
    p = (n - n_low + 1) // 2
    assert m[0, p : p + n_low].all()
    again = mri.cartesian_mask((6, n), R, cf, key=jax.random.key(5), kind=kind)
    np.testing.assert_array_equal(m, again)
    if kind == "equispaced" and expected - n_low > 1:
        outer = np.r_[np.arange(p), np.arange(p + n_low, n)]
        pos = np.flatnonzero(np.isin(outer, cols))
        gaps = np.diff(pos)
        step = (n - n_low) / (expected - n_low)
        assert gaps.min() >= math.floor(step) and gaps.max() <= math.ceil(step)


def test_random_masks_differ_between_keys():
    masks = {
        tuple(np.asarray(mri.cartesian_mask((2, 64), 4, 0.08, key=jax.random.key(s))[0]))
        for s in range(5)
    }
    assert len(masks) == 5


def test_resubsample_is_a_submask():
    m = mri.cartesian_mask((8, 64), 2, 0.08, key=jax.random.key(6))
    sub = np.asarray(mri.resubsample(m, 2, 0.08, key=jax.random.key(7)))
    assert (sub <= np.asarray(m)).all()
    assert sub[0].sum() < np.asarray(m)[0].sum()


@pytest.mark.parametrize("kind", ["gaussian", "uniform"])
@pytest.mark.parametrize("acs", [(4, 4), (0, 0)])
def test_ssdu_split_partitions_the_acquired_set(kind, acs):
    mask = np.asarray(mri.cartesian_mask((24, 32), 3, 0.1, key=jax.random.key(8)))
    theta, lam = (
        np.asarray(a) for a in mri.ssdu_split(mask, 0.4, key=jax.random.key(9), kind=kind, acs=acs)
    )
    assert (theta * lam == 0).all() and (theta + lam == mask).all()
    r0, c0 = (24 - acs[0] + 1) // 2, (32 - acs[1] + 1) // 2
    block = np.zeros_like(mask, bool)
    block[r0 : r0 + acs[0], c0 : c0 + acs[1]] = True
    assert (theta[block & (mask > 0)] == 1).all()
    assert lam.sum() == math.floor(0.4 * (mask[~block].sum()))


def test_gaussian_selection_is_denser_at_the_centre():
    """Variable density: Lambda lies closer to DC than a uniform selection (over 10 keys)."""
    mask = mri.cartesian_mask((32, 32), 2, 0.1, key=jax.random.key(10))
    rr, cc = np.meshgrid(np.arange(32) - 16, np.arange(32) - 16, indexing="ij")
    dist = np.hypot(rr, cc)

    def mean_dist(kind):
        return np.mean(
            [
                dist[
                    np.asarray(mri.ssdu_split(mask, 0.3, key=jax.random.key(s), kind=kind)[1]) > 0
                ].mean()
                for s in range(10)
            ]
        )

    assert mean_dist("gaussian") < 0.8 * mean_dist("uniform")


@pytest.mark.parametrize("loss", [mri.normalized_l1_l2, mri.relative_l1])
def test_losses_are_scale_invariant_and_see_only_the_mask(g, loss):
    mask = mri.cartesian_mask((H, W), 2, 0.1, key=jax.random.key(11))
    y, yp = _cplx(g, C, H, W), _cplx(g, C, H, W)
    base = float(loss(yp, y, mask))
    for c in (-3.7, 1e-3, 250.0):
        assert float(loss(c * yp, c * y, mask)) == pytest.approx(base, rel=1e-12)
    off = yp + 5 * (1 - mask) * _cplx(g, C, H, W)
    assert float(loss(off, y, mask)) == pytest.approx(base, rel=1e-12)
    assert float(loss(y, y, mask)) == 0.0


def test_loss_values_on_a_hand_example():
    mask = np.zeros((2, 2))
    mask[0, 0] = mask[1, 1] = 1
    y = np.array([[3 + 4j, 0], [0, 1 + 0j]])
    yp = np.array([[3 + 0j, 7], [0, 0j]])  # error 4i and 1 on the mask
    # l1 over real and imaginary parts: |M y|_1 = 3 + 4 + 1 = 8, |M d|_1 = 5, |M y|_2 = sqrt(26),
    # |M d|_2 = sqrt(17)
    assert float(mri.relative_l1(yp, y, mask)) == pytest.approx(5 / 8, rel=1e-14)
    assert float(mri.normalized_l1_l2(yp, y, mask)) == pytest.approx(
        math.sqrt(17 / 26) + 5 / 8, rel=1e-14
    )


def test_bad_input_names_the_argument(g):
    x = _cplx(g, H, W)
    mask = mri.cartesian_mask((H, W), 2, 0.1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`mask`"):
        mri.forward(x, np.ones((H, W + 1)))
    with pytest.raises(ValueError, match="`mask`"):
        mri.forward(x, np.full((H, W), 0.5))
    with pytest.raises(ValueError, match="`R`"):
        mri.cartesian_mask((H, W), 0.5, 0.1, key=jax.random.key(0))
    with pytest.raises(TypeError, match="`y`"):
        mri.adjoint(np.ones((H, W)), mask)
    with pytest.raises(TypeError, match="`x`"):
        mri.forward(np.ones((H, W)), mask)
    with pytest.raises(ValueError, match="`coils`"):
        mri.forward(x, mask, _cplx(g, C, H, W + 1))
    with pytest.raises(ValueError, match="`y`"):
        mri.adjoint(_cplx(g, C + 1, H, W), mask, mri.coil_maps(C, (H, W)))
    with pytest.raises(ValueError, match="`lam`"):
        mri.kspace_consistency(x, x, mask, -1.0)
    with pytest.raises(ValueError, match="`rho`"):
        mri.ssdu_split(mask, 1.0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`y`"):
        mri.relative_l1(x, np.zeros((H, W), complex), mask)
