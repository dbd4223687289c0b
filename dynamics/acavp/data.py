"""Digits rendered on a 32x32 RGB canvas: the source task and the target suite of
``docs/papers/acavp.md#small-scale-experiment``.

scikit-learn's ``load_digits`` (1,797 grey 8x8 images) is split once per seed into a source half
(pre-training the frozen CNN) and a disjoint target half (train / validation / test of every
target task). A digit is drawn by one bilinear affine map from its 8x8 grid to the canvas
(side ``size`` pixels, centre ``(15.5, 15.5) + offset`` with a +-1 px jitter, rotation), then
coloured ``fg * d + bg * (1 - d)``. Target tasks (:data:`TASKS`):

* inside ACAVP's reachable set: ``geo`` (digit 25 px instead of 20, offset (-2, +2) px: a centred
  shrink s = 0.8 and a 1.6 px shift undo it), ``colour`` (digit tinted (0.5, 0.2, 0.3): a
  positive per-channel gain undoes it), ``both`` (geo + 5 degrees + colour);
* outside (negative controls): ``small`` (digit 12 px: the prompt can shrink, never zoom),
  ``colour_bg`` (tint on a (0.6, 0.5, 0.2) background: a positive gain cannot send it to 0);
* ``perm``: source rendering, labels ``(y + 3) mod 10`` (a linear probe relabels for free).

Shifted test sets (never trained on): Gaussian pixel noise 0.1, brightness x0.7, and 3 px of
extra horizontal translation.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import cast

import numpy as np

from _core.streams import substream
from _core.validation import as_array, check_choice, check_int, check_scalar

__all__ = [
    "CANVAS",
    "SOURCE",
    "TASKS",
    "SHIFTS",
    "Task",
    "digits",
    "render",
    "source_task",
    "target_task",
]

CANVAS = 32
TINT = (0.5, 0.2, 0.3)
SOURCE = dict(size=20.0, offset=(0.0, 0.0), rotation=0.0, fg=(1.0, 1.0, 1.0), bg=(0.0, 0.0, 0.0))
TASKS = {
    "geo": dict(size=25.0, offset=(-2.0, 2.0)),
    "colour": dict(fg=TINT),
    "both": dict(size=25.0, offset=(-2.0, 2.0), rotation=5.0, fg=TINT),
    "perm": dict(label_shift=3),
    "small": dict(size=12.0),
    "colour_bg": dict(fg=TINT, bg=(0.6, 0.5, 0.2)),
}
SHIFTS = ("noise", "dark", "translate")
N_SOURCE = 900  # digits for the source task; the other 897 are the target pool
TEST_FRACTION, VAL_FRACTION = 0.4, 0.15


@functools.cache
def digits():
    """``(images (1797, 8, 8) in [0, 1], labels)`` of scikit-learn's ``load_digits``."""
    from sklearn.datasets import load_digits
    from sklearn.utils import Bunch

    d = cast(Bunch, load_digits())  # the stubs union in the ``return_X_y=True`` tuple
    return (d.images / 16.0).astype(np.float32), d.target.astype(np.int32)


def render(images, *, size=20.0, offset=(0.0, 0.0), rotation=0.0, fg=(1.0, 1.0, 1.0),
           bg=(0.0, 0.0, 0.0), jitter=None):  # fmt: skip
    """Draw 8x8 digits ``(N, 8, 8)`` on the RGB canvas ``(N, 3, 32, 32)`` (bilinear).

    ``size`` the digit's side in pixels, ``offset`` ``(dx, dy)`` pixels from the canvas centre,
    ``rotation`` degrees, ``fg``/``bg`` RGB in [0, 1]; ``jitter`` optional per-image extra
    offsets ``(N, 2)``.

    Examples
    --------
    >>> x = render(np.ones((1, 8, 8)), size=16.0)  # a white square, 16 px wide, in the centre
    >>> x.shape, float(x[0, 0, 16, 16]), float(x[0, 0, 0, 0])
    ((1, 3, 32, 32), 1.0, 0.0)
    """
    images = as_array(images, "images", shape=(None, 8, 8), lower=0.0, upper=1.0)
    size = check_scalar(size, "size", lower=1.0, upper=4.0 * CANVAS)
    rotation = check_scalar(rotation, "rotation", lower=-180.0, upper=180.0)
    offset = as_array(offset, "offset", shape=(2,), lower=-CANVAS, upper=CANVAS)
    fg = as_array(fg, "fg", shape=(3,), lower=0.0, upper=1.0)
    bg = as_array(bg, "bg", shape=(3,), lower=0.0, upper=1.0)
    n = images.shape[0]
    jit = np.zeros((n, 2)) if jitter is None else jitter
    jit = as_array(jit, "jitter", shape=(n, 2), lower=-CANVAS, upper=CANVAS)
    k, a = size / 8.0, math.radians(rotation)
    c = (CANVAS - 1) / 2.0
    mats = np.zeros((n, 3, 3))
    for i in range(n):  # digit grid (centre 3.5) -> canvas point (centre c + offset + jitter)
        tx, ty = c + offset[0] + jit[i, 0], c + offset[1] + jit[i, 1]
        r = k * np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
        mats[i, :2, :2] = r
        mats[i, :2, 2] = np.array([tx, ty]) - r @ np.array([3.5, 3.5])
        mats[i, 2, 2] = 1.0
    inv = np.linalg.inv(mats)[:, :2]  # canvas (x, y, 1) -> digit grid (x, y)
    yy, xx = np.mgrid[:CANVAS, :CANVAS].astype(np.float64)
    grid = np.stack([xx.ravel(), yy.ravel(), np.ones(CANVAS * CANVAS)])
    sx, sy = np.einsum("nij,jp->nip", inv, grid).transpose(1, 0, 2)
    d = _bilinear(images, sx, sy).reshape(n, 1, CANVAS, CANVAS)
    fg_, bg_ = (np.asarray(v, np.float32).reshape(1, 3, 1, 1) for v in (fg, bg))
    return np.clip(fg_ * d + bg_ * (1.0 - d), 0.0, 1.0).astype(np.float32)


def _bilinear(images, sx, sy):
    """Bilinear samples of ``images (N, 8, 8)`` at ``(sx, sy) (N, P)`` with zero padding (as
    ``scipy.ndimage.map_coordinates(order=1, mode="grid-constant")`` and torch's zero-padded
    ``grid_sample``)."""
    pad = np.pad(images, ((0, 0), (1, 1), (1, 1)))  # a zero border: outside samples read 0
    x0, y0 = np.floor(sx), np.floor(sy)
    fx, fy = sx - x0, sy - y0
    n = np.arange(images.shape[0])[:, None]
    out = np.zeros_like(sx)
    for dx, dy, wgt in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)),
                        (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):  # fmt: skip
        xi = np.clip(x0 + dx + 1, 0, 9).astype(int)
        yi = np.clip(y0 + dy + 1, 0, 9).astype(int)
        inside = (x0 + dx >= -1) & (x0 + dx <= 8) & (y0 + dy >= -1) & (y0 + dy <= 8)
        out += np.where(inside, wgt * pad[n, yi, xi], 0.0)
    return out


@dataclasses.dataclass(frozen=True)
class Task:
    """One task's splits: images ``(N, 3, 32, 32)``, integer labels; ``shifted`` maps each of
    :data:`SHIFTS` to a shifted copy of the test images."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    shifted: dict


def _split(seed):
    perm = np.random.default_rng(seed).permutation(digits()[0].shape[0])
    return perm[:N_SOURCE], perm[N_SOURCE:]


def _draw(idx, spec, rng, extra=(0.0, 0.0)):
    imgs, labels = digits()
    spec = {**SOURCE, **{k: v for k, v in spec.items() if k != "label_shift"}}
    jit = rng.uniform(-1.0, 1.0, (idx.size, 2)) + np.asarray(extra)
    x = render(imgs[idx], jitter=jit, **spec)
    return x, labels[idx]


def source_task(seed: int = 0):
    """``(x_train, y_train, x_test, y_test)`` of the source task (80 / 20 split of the source
    digits of ``seed``'s split)."""
    seed = check_int(seed, "seed", lower=0, upper=2**32 - 1)
    idx, _ = _split(seed)
    x, y = _draw(idx, {}, np.random.default_rng(seed + 1))
    n = int(0.8 * idx.size)
    return x[:n], y[:n], x[n:], y[n:]


def target_task(name: str, seed: int = 0) -> Task:
    """Target task ``name`` of :data:`TASKS` on ``seed``'s target digits, with shifted tests."""
    name = check_choice(name, "name", tuple(TASKS))
    seed = check_int(seed, "seed", lower=0, upper=2**32 - 1)
    _, idx = _split(seed)
    spec = TASKS[name]
    rng = np.random.default_rng(substream(seed, list(TASKS).index(name)))
    x, y = _draw(idx, spec, rng)
    y = (y + spec.get("label_shift", 0)) % 10
    n_test, n_val = int(TEST_FRACTION * idx.size), int(VAL_FRACTION * idx.size)
    te, va, tr = slice(0, n_test), slice(n_test, n_test + n_val), slice(n_test + n_val, None)
    x_test = x[te]
    moved, _ = _draw(idx[te], spec, np.random.default_rng(rng.integers(2**31)), (3.0, 0.0))
    noise = np.random.default_rng(rng.integers(2**31)).normal(0.0, 0.1, x_test.shape)
    shifted = {
        "noise": np.clip(x_test + noise, 0.0, 1.0).astype(np.float32),
        "dark": (0.7 * x_test).astype(np.float32),
        "translate": moved,
    }
    return Task(name, x[tr], y[tr], x[va], y[va], x_test, y[te], shifted)
