"""Exact statements of the MRI physics under D2SA (Zhang et al. 2025, arXiv 2503.20815): the
SENSE forward operator and its adjoint, the centred unitary FFT, and the SSDU split."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from dynamics.mri import physics as P
from paper_checks import patch, wrap

from .._properties import prop

PAPER = "Zhang et al. 2025 (D2SA, arXiv 2503.20815); docs/papers/d2sa.md"
#: odd and even sides (fftshift and ifftshift differ only for odd ones), few so that each
#: jitted operator compiles a handful of times per run
_SHAPES = ((4, 4), (5, 5), (4, 7), (7, 6), (3, 8))


def _shape(st):
    return st.sampled_from(_SHAPES)


def _image(g, h, w):
    return g.standard_normal((h, w)) + 1j * g.standard_normal((h, w))


def _swapped_ifft2c(k):  # the centring shifts in the wrong order: right for even sides only
    ax = (-2, -1)
    return jnp.fft.ifftshift(jnp.fft.ifft2(jnp.fft.fftshift(k, axes=ax), norm="ortho"), axes=ax)


def _swapped_fft2c(x):
    ax = (-2, -1)
    return jnp.fft.ifftshift(jnp.fft.fft2(jnp.fft.fftshift(x, axes=ax), norm="ortho"), axes=ax)


@jax.jit
def _apply_h_no_conj(y, m, s):
    if s is None:
        return P.ifft2c(m * y)
    return jnp.sum(s * P.ifft2c(m * y), axis=-3)


@prop(
    "d2sa.adjoint_dot_test",
    paper=PAPER,
    statement="The SENSE operator A x = M F(S x) and its adjoint pass the dot test "
    "<A x, y> = <x, A^H y> for any 0/1 mask, any coil maps (or a single coil with S = 1) and "
    "any odd or even image size, to float64 round-off.",
    where="D2SA forward model y_c = M F(S_c x) (Sec. 3); SENSE, Pruessmann et al. 1999",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "shape": _shape(st),
            "coils": st.sampled_from([0, 1, 3]),
            "density": st.floats(0.0, 1.0),
        }
    ),
    mutants=[
        patch(
            "dynamics.mri.physics._ifft2c",
            _swapped_ifft2c,
            "the inverse FFT centred with fftshift and ifftshift swapped (odd sizes only)",
            name="ifft_shift_swapped",
        ),
        patch(
            "dynamics.mri.physics._apply_h",
            _apply_h_no_conj,
            "the adjoint combines the coils with S_c instead of conj(S_c)",
            name="adjoint_no_conj",
        ),
    ],
)
def _dot(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    (h, w), nc = ex["shape"], ex["coils"]
    mask = (g.random((h, w)) < ex["density"]).astype(float)
    x = _image(g, h, w)
    s = None if nc == 0 else g.standard_normal((nc, h, w)) + 1j * g.standard_normal((nc, h, w))
    y = g.standard_normal((h, w) if s is None else (nc, h, w)) * (1 + 1j)
    y = y + 1j * g.standard_normal(y.shape)
    ax = np.asarray(P.forward(x, mask, s))
    ahy = np.asarray(P.adjoint(y, mask, s))
    lhs, rhs = np.vdot(ax, y), np.vdot(x, ahy)
    scale = np.linalg.norm(ax) * np.linalg.norm(y) + np.linalg.norm(x) * np.linalg.norm(ahy)
    return float(1.0 - abs(lhs - rhs) / (1e-12 * scale + 1e-300))


@prop(
    "d2sa.centred_unitary_fft",
    paper=PAPER,
    statement="The centred orthonormal FFT is unitary (||F x|| = ||x||, F^H F x = x) and puts the "
    "DC sample of a constant image at (H // 2, W // 2), for any odd or even size.",
    where="D2SA k-space convention (official code, fastMRI fft2c); docs/papers/d2sa.md",
    strategy=lambda st: st.fixed_dictionaries(
        {"seed": st.integers(0, 2**31 - 1), "shape": _shape(st)}
    ),
    mutants=[
        patch(
            "dynamics.mri.physics._fft2c",
            _swapped_fft2c,
            "the forward FFT centred with fftshift and ifftshift swapped (odd sizes only)",
            name="fft_shift_swapped",
        )
    ],
)
def _fft(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    h, w = ex["shape"]
    x = _image(g, h, w)
    k = np.asarray(P.fft2c(x))
    back = np.asarray(P.ifft2c(k))
    n = np.linalg.norm(x)
    rooms = [
        1.0 - abs(np.linalg.norm(k) - n) / (1e-13 * n),
        1.0 - np.max(np.abs(back - x)) / (1e-13 * n),
    ]
    dc = np.asarray(P.fft2c(np.ones((h, w), complex)))
    off = np.abs(dc).copy()
    off[h // 2, w // 2] = 0.0
    rooms.append(1.0 - abs(dc[h // 2, w // 2] - math.sqrt(h * w)) / 1e-12)
    rooms.append(1.0 - np.max(off) / 1e-12)
    return float(min(rooms))


@prop(
    "d2sa.ssdu_partition",
    paper=PAPER,
    statement="The SSDU split partitions the acquired set: Theta and Lambda are disjoint 0/1 masks "
    "with Theta + Lambda = Omega, the acquired points of the central ACS block stay in Theta, and "
    "|Lambda| = floor(rho |Omega minus ACS|), for any mask, rho, ACS block and selection density.",
    where="Yaman et al., MRM 84:3172 (2020), Sec. 2; D2SA data/masking.py",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "h": st.integers(2, 12),
            "w": st.integers(2, 12),
            "density": st.floats(0.0, 1.0),
            "rho": st.floats(0.01, 0.99),
            "acs_h": st.integers(0, 6),
            "acs_w": st.integers(0, 6),
            "kind": st.sampled_from(["gaussian", "uniform"]),
        }
    ),
    mutants=[
        wrap(
            "dynamics.mri.physics.ssdu_split",
            lambda f: lambda mask, rho, **k: f(mask, rho, **{**k, "acs": (0, 0)}),
            "the ACS block is not kept out of Lambda",
            name="acs_ignored",
        )
    ],
)
def _ssdu(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    h, w = ex["h"], ex["w"]
    mask = (g.random((h, w)) < ex["density"]).astype(float)
    ah, aw = min(ex["acs_h"], h), min(ex["acs_w"], w)
    theta, lam = P.ssdu_split(
        mask, ex["rho"], key=jax.random.key(ex["seed"]), kind=ex["kind"], acs=(ah, aw)
    )
    theta, lam = np.asarray(theta), np.asarray(lam)
    r0, c0 = (h - ah + 1) // 2, (w - aw + 1) // 2  # the mask centre (H // 2 inside the block)
    acs = np.zeros((h, w), bool)
    acs[r0 : r0 + ah, c0 : c0 + aw] = True
    want = math.floor(ex["rho"] * int(np.sum((mask > 0) & ~acs)))
    ok = (
        np.all((theta == 0) | (theta == 1))
        and np.all((lam == 0) | (lam == 1))
        and np.all(theta * lam == 0)
        and np.array_equal(theta + lam, mask)
        and np.all(theta[acs & (mask > 0)] == 1)
        and int(lam.sum()) == want
    )
    return 1.0 if ok else -1.0
