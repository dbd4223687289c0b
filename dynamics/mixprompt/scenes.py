"""Synthetic RGB-D scenes where depth carries what RGB lacks (designed here,
``docs/papers/mixprompt.md#as-implemented-here``).

Target scenes (:func:`rgbd_scenes`), classes :data:`CLASSES`: a smooth colour-gradient background
on a tilted depth plane (0.8-1.0); ``objects`` objects, each a **near box** (depth 0.25) or a
**far box** (depth 0.6) drawn from the *same* colour and size distribution (so RGB cannot tell
them apart), or a **disk** (any colour, depth U(0.2, 0.7)). A fraction ``camouflage`` of the boxes
take the background's own colour and are visible only in depth. Objects are painted far to near
(nearer ones occlude). Source scenes (``kind="source"``) are the RGB-only pretraining task: a
different palette, no camouflage, classes background / box / disk.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from _core.validation import as_generator, check_choice, check_int, check_scalar

__all__ = ["CLASSES", "SOURCE_CLASSES", "Scenes", "rgbd_scenes"]

CLASSES = ("background", "near box", "far box", "disk")
SOURCE_CLASSES = ("background", "box", "disk")
NEAR, FAR = 0.25, 0.6


@dataclasses.dataclass(frozen=True)
class Scenes:
    """``rgb (n, H, W, 3)`` in [0, 1], true ``depth (n, H, W)``, ``labels (n, H, W)`` (int32)."""

    rgb: np.ndarray
    depth: np.ndarray
    labels: np.ndarray


def _palette(g, shape, kind):
    """Object colours: target in [0.1, 0.9]^3; source a warm palette (R high, B low)."""
    c = g.uniform(0.1, 0.9, (*shape, 3))
    if kind == "source":
        c = c * np.array([0.4, 0.6, 0.3]) + np.array([0.6, 0.2, 0.0])
    return c


def rgbd_scenes(n, size=16, *, objects=3, camouflage=0.3, kind="target", rng=None) -> Scenes:
    """Draw ``n`` scenes of ``size x size`` pixels (see the module docstring).

    Parameters
    ----------
    n : int, number of scenes.
    size : int, image side (>= 8).
    objects : int, objects per scene.
    camouflage : float in [0, 1], fraction of boxes coloured like the background (target only).
    kind : ``"target"`` (4 classes, depth semantics) or ``"source"`` (3 classes, RGB only).
    rng : numpy Generator or seed.

    Examples
    --------
    >>> sc = rgbd_scenes(2, 8, rng=0)
    >>> sc.rgb.shape, sc.depth.shape, sc.labels.shape, int(sc.labels.max()) < 4  # 4 target classes
    ((2, 8, 8, 3), (2, 8, 8), (2, 8, 8), True)
    """
    n = check_int(n, "n", lower=1, upper=100_000)
    s = check_int(size, "size", lower=8, upper=256)
    k = check_int(objects, "objects", lower=1, upper=16)
    cam = check_scalar(camouflage, "camouflage", lower=0.0, upper=1.0)
    kind = check_choice(kind, "kind", ("target", "source"))
    g = as_generator(rng)
    yy, xx = (np.mgrid[0:s, 0:s] + 0.5) / s  # (s, s) in (0, 1)
    # background: colour c0 + gx x + gy y (clipped), depth plane 0.8 + 0.2 (a x + (1 - a) y)
    c0 = g.uniform(0.2, 0.8, (n, 1, 1, 3))
    grad = g.uniform(-0.3, 0.3, (n, 2, 1, 1, 3))
    rgb = np.clip(c0 + grad[:, 0] * xx[..., None] + grad[:, 1] * yy[..., None], 0.0, 1.0)
    if kind == "source":
        rgb = rgb * 0.5  # darker backgrounds than the target's
    a = g.uniform(0, 1, (n, 1, 1))
    depth = 0.8 + 0.2 * (a * xx + (1 - a) * yy)
    labels = np.zeros((n, s, s), np.int32)
    # object kinds: 0 near box, 1 far box, 2 disk (target); boxes / disks evenly
    kinds = g.choice(3, (n, k), p=[1 / 3, 1 / 3, 1 / 3])
    obj_depth = np.where(kinds == 0, NEAR, np.where(kinds == 1, FAR, g.uniform(0.2, 0.7, (n, k))))
    half = g.uniform(0.12, 0.22, (n, k))  # half side (box) or radius (disk), in image units
    centre = g.uniform(0.15, 0.85, (n, k, 2))
    colour = _palette(g, (n, k), kind)
    camo = (kinds < 2) & (g.uniform(size=(n, k)) < (cam if kind == "target" else 0.0))
    order = np.argsort(-obj_depth, axis=1)  # far to near
    for j in range(k):
        idx = order[:, j]
        kj, hj, dj, cj = (
            np.take_along_axis(v, idx[:, None], 1)[:, 0] for v in (kinds, half, obj_depth, camo)
        )
        cx, cy = (np.take_along_axis(centre[..., t], idx[:, None], 1)[:, 0] for t in (0, 1))
        ex, ey = xx[None] - cx[:, None, None], yy[None] - cy[:, None, None]
        box = (np.abs(ex) <= hj[:, None, None]) & (np.abs(ey) <= hj[:, None, None])
        disk = ex**2 + ey**2 <= hj[:, None, None] ** 2
        m = np.where((kj < 2)[:, None, None], box, disk)
        col = np.take_along_axis(colour, idx[:, None, None], 1)[:, 0]  # (n, 3)
        painted = np.where(cj[:, None, None, None], rgb, col[:, None, None, :])
        rgb = np.where(m[..., None], painted, rgb)
        depth = np.where(m, dj[:, None, None], depth)
        lab = kj + 1 if kind == "target" else np.where(kj < 2, 1, 2)
        labels = np.where(m, lab[:, None, None].astype(np.int32), labels)
    return Scenes(rgb.astype(np.float32), depth.astype(np.float32), labels)
