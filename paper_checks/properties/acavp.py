"""Exact statements of ACAVP's image operations (Enomoto, NeurIPS 2025, arXiv 2510.07823;
official ``s-enmt/ACAVP``, ``docs/papers/acavp.md``): TrivialAugment against Pillow, and the
affine prompt's warp on the pixel grid."""

import math

import jax.numpy as jnp
import numpy as np
from PIL import Image, ImageEnhance, ImageOps

from dynamics.acavp import augment as TA
from nn import acavp as AC
from paper_checks import patch, wrap

from .._properties import prop

PAPER = "Enomoto 2025 (ACAVP, arXiv 2510.07823); Mueller & Hutter 2021 (TrivialAugment)"
#: image sizes (H, W): few, so that the jitted ops compile a handful of times per run
_SIZES = ((8, 8), (12, 12), (10, 16))
#: the ops Pillow computes without a float blend (equal up to its fixed-point affine rounding)
_EXACT = {"identity", "rotate", "solarize", "posterize", "shear_x", "shear_y", "translate_x",
          "translate_y", "equalize", "brightness"}  # fmt: skip


def _pil_op(image, op, level, sign):
    """TrivialAugment's standard-space operation as the authors run it (Pillow, on the uint8
    image; ``strategy_augment.py``); ``tests/dynamics/acavp/test_augment.py`` compares with it
    too."""
    img = Image.fromarray(
        np.round(np.transpose(image, (1, 2, 0)) * 255).astype(np.uint8), mode="RGB"
    )
    m = level / 30
    f = 0.1 + 1.8 * m
    t = 10 * m
    name = TA.OPS[op]
    out = {
        "identity": lambda: img,
        "auto_contrast": lambda: ImageOps.autocontrast(img),
        "equalize": lambda: ImageOps.equalize(img),
        "rotate": lambda: img.rotate(sign * 30.0 * m),
        "solarize": lambda: ImageOps.solarize(img, 256 - int(level * 256 / 30)),
        "color": lambda: ImageEnhance.Color(img).enhance(f),
        "posterize": lambda: ImageOps.posterize(img, 8 - int(level * 4 / 30)),
        "contrast": lambda: ImageEnhance.Contrast(img).enhance(f),
        "brightness": lambda: ImageEnhance.Brightness(img).enhance(f),
        "sharpness": lambda: ImageEnhance.Sharpness(img).enhance(f),
        "shear_x": lambda: img.transform(img.size, Image.AFFINE, (1, sign * 0.3 * m, 0, 0, 1, 0)),
        "shear_y": lambda: img.transform(img.size, Image.AFFINE, (1, 0, 0, sign * 0.3 * m, 1, 0)),
        "translate_x": lambda: img.transform(img.size, Image.AFFINE, (1, 0, sign * t, 0, 1, 0)),
        "translate_y": lambda: img.transform(img.size, Image.AFFINE, (1, 0, 0, 0, 1, sign * t)),
    }[name]()
    return np.transpose(np.asarray(out, np.float64), (2, 0, 1)) / 255.0


def _images(ex):
    g = np.random.default_rng(ex["seed"])
    h, w = _SIZES[ex["size"]]
    x = g.integers(0, 256, (1, 3, h, w)) / 255.0
    if ex["levels"] < 256:  # few grey levels or low contrast: equalize / auto_contrast act
        x = np.round(x * (ex["levels"] - 1)) / (ex["levels"] - 1) * ex["contrast"]
    return np.round(x * 255) / 255


@prop(
    "acavp.trivial_augment_pillow",
    paper=PAPER,
    statement="Each of TrivialAugment's 14 standard-space operations equals Pillow's on any RGB "
    "image, level 0..30 and sign: bit-exact for the geometric and integer ops (up to 2 % of "
    "pixels for rotate, Pillow's 16.16 fixed-point affine), within one grey level for the "
    "float blends.",
    where="TrivialAugment (Mueller & Hutter 2021) standard space, as ACAVP trains with it "
    "(Sec. 4; docs/papers/acavp.md)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "size": st.sampled_from(range(len(_SIZES))),
            "op": st.integers(0, len(TA.OPS) - 1),
            "level": st.integers(0, 30),
            "sign": st.sampled_from([1, -1]),
            "levels": st.sampled_from([2, 5, 9, 256]),
            "contrast": st.floats(0.1, 1.0),
        }
    ),
    mutants=[
        wrap(
            "dynamics.acavp.augment._luma",
            lambda f: lambda q: f(q[::-1]),
            "the grey level weights R and B swapped (BGR read as RGB)",
            name="luma_bgr",
        ),
        wrap(
            "dynamics.acavp.augment._inverse_map",
            lambda f: lambda op, m, sign, h, w, t: f(op, m, -sign, h, w, t),
            "the geometric ops' direction flipped",
            name="geometry_sign",
        ),
    ],
)
def _pillow(ex) -> float:
    x = _images(ex)
    op, level, sign = ex["op"], ex["level"], ex["sign"]
    got = np.asarray(TA.apply_ops(x, [op], [level], [float(sign)]))[0]
    want = _pil_op(x[0], op, level, sign)
    diff = np.abs(got - want) * 255
    if TA.OPS[op] in _EXACT:
        tol = 0.02 if TA.OPS[op] == "rotate" else 1e-9
        return (
            1.0 - float(np.mean(diff > 0.5)) / tol
            if tol > 1e-9
            else (1.0 if np.all(diff <= 0.5) else -1.0)
        )
    return 1.0 - float(diff.max()) / (1.0 + 1e-9) + 1e-9


def _shift_fill(x, dx, dy):
    """``x`` moved by (dx, dy) integer pixels (column, row), zeros entering; and the mask of the
    entering region."""
    h, w = x.shape[-2:]
    out, empty = np.zeros_like(x), np.ones((h, w))
    for r in range(h):
        for c in range(w):
            if 0 <= r - dy < h and 0 <= c - dx < w:
                out[..., r, c] = x[..., r - dy, c - dx]
                empty[r, c] = 0.0
    return out, empty


def _quarter_turns(x, k):
    """Rotation by k quarter turns about the image centre (square images): with ``R(theta)`` on
    ``(x, y) = (column, row)`` as in ``nn.acavp.affine_matrix``, theta = pi/2 maps source
    (c, r) to (n-1-r, c), so out[r, c] = x[n-1-c, r] (derived here from the docstring's R)."""
    for _ in range(k % 4):
        n = x.shape[-1]
        x = x[..., n - 1 - np.arange(n)[None, :], np.arange(n)[:, None]]
    return x


@prop(
    "acavp.prompt_grid_exact",
    paper=PAPER,
    statement="On the pixel grid ACAVP's prompt is exact: with theta a multiple of pi/2 (about the "
    "image centre), unit scale, no shear and an integer translation, acavp_transform(x) = gain "
    "* shift(rot(x)) + additive * (the pixels the warp leaves empty), for any channels, "
    "square size, gain and additive (bilinear sampling at integer points).",
    where="ACAVP prompt (Sec. 3: affine, colour, additive); official s-enmt/ACAVP; "
    "docs/papers/acavp.md",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "n": st.sampled_from([4, 7]),
            "turns": st.integers(0, 3),
            "dx": st.integers(-5, 5),
            "dy": st.integers(-5, 5),
            "gain": st.floats(-3.0, 3.0),
            "additive": st.floats(-3.0, 3.0),
        }
    ),
    mutants=[
        patch(
            "nn.acavp._center",
            lambda center, h, w: (0.0, 0.0),
            "rotation about pixel (0, 0) instead of the image centre",
            name="corner_centre",
        ),
        wrap(
            "nn.acavp._inverse_affine",
            lambda f: lambda a: (lambda mi, t: (mi, -t))(*f(a)),
            "the inverse map's translation with the wrong sign",
            name="inverse_translation_sign",
        ),
    ],
)
def _grid(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    n = ex["n"]
    x = g.standard_normal((2, n, n))
    theta = ex["turns"] * math.pi / 2
    got = np.asarray(
        AC.acavp_transform(
            jnp.asarray(x), theta, jnp.ones(2), jnp.zeros(2),
            jnp.array([float(ex["dx"]), float(ex["dy"])]), ex["gain"], ex["additive"],
        )
    )  # fmt: skip
    moved, empty = _shift_fill(_quarter_turns(x, ex["turns"]), ex["dx"], ex["dy"])
    want = ex["gain"] * moved + ex["additive"] * empty
    scale = 1.0 + abs(ex["gain"]) * np.abs(x).max() + abs(ex["additive"])
    return 1.0 - float(np.max(np.abs(got - want))) / (1e-9 * scale)


@prop(
    "acavp.affine_similarity",
    paper=PAPER,
    statement="ACAVP's affine map about a centre c with isotropic scale s and no shear is a "
    "similarity fixing the centre up to the translation: A c = c + t and |A p - A q| = s |p - q| "
    "for all points; with shear, det A = s_x s_y (the shear matrix has unit determinant).",
    where="ACAVP affine prompt (Sec. 3), kornia get_affine_matrix2d / get_shear_matrix2d",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "theta": st.floats(-4.0, 4.0),
            "s": st.floats(0.1, 3.0),
            "sy": st.floats(0.1, 3.0),
            "shear": st.tuples(st.floats(-1.2, 1.2), st.floats(-1.2, 1.2)),
            "t": st.tuples(st.floats(-20.0, 20.0), st.floats(-20.0, 20.0)),
            "c": st.tuples(st.floats(-20.0, 20.0), st.floats(-20.0, 20.0)),
        }
    ),
    mutants=[
        wrap(
            "nn.acavp.affine_matrix",
            lambda f: lambda *a, center=(0.0, 0.0): f(*a),
            "the centre argument dropped (rotation and scale about pixel (0, 0))",
            name="centre_dropped",
        )
    ],
)
def _similarity(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    s, t, c = ex["s"], np.array(ex["t"]), tuple(ex["c"])
    a = np.asarray(
        AC.affine_matrix(ex["theta"], jnp.array([s, s]), jnp.zeros(2), jnp.asarray(t), center=c)
    )
    p, q = g.standard_normal((2, 2)) * 10
    apply = lambda v: a[:2, :2] @ v + a[:2, 2]  # noqa: E731
    size = 1.0 + np.abs(t).max() + (1 + s) * (np.abs(c).max() + 10)
    errs = [
        np.abs(apply(np.array(c)) - (np.array(c) + t)).max() / size,
        abs(np.linalg.norm(apply(p) - apply(q)) - s * np.linalg.norm(p - q)) / size,
    ]
    sheared = np.asarray(
        AC.affine_matrix(ex["theta"], jnp.array([s, ex["sy"]]), jnp.asarray(ex["shear"]),
                         jnp.asarray(t), center=c)
    )  # fmt: skip
    errs.append(abs(np.linalg.det(sheared[:2, :2]) - s * ex["sy"]) / (s * ex["sy"]))
    return 1.0 - max(errs) / 1e-9
