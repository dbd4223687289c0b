"""Depth sensor model and the auxiliary-image encoding
(``docs/papers/mixprompt.md#as-implemented-here``).

:func:`depth_sensor`: Kinect-like measurement of a true depth map: additive Gaussian noise of
standard deviation ``noise`` and a fraction ``holes`` of pixels dropped to 0 (missing returns).
:func:`depth_channels`: the official loader's encoding (``semseg/datasets/nyu.py``): the depth map
replicated to 3 channels and normalised with mean 0.449, std 0.226.
"""

from __future__ import annotations

import numpy as np

from _core.validation import as_array, as_generator, check_scalar

__all__ = ["depth_sensor", "depth_channels", "DEPTH_MEAN", "DEPTH_STD"]

DEPTH_MEAN, DEPTH_STD = 0.449, 0.226


def depth_sensor(depth, *, noise=0.02, holes=0.05, rng=None) -> np.ndarray:
    """Measured depth ``depth + N(0, noise^2)`` (the Kinect-like sensor of
    ``docs/papers/mixprompt.md#as-implemented-here``),
    with each pixel independently a hole (0) with
    probability ``holes``; ``depth (..., H, W)`` non-negative.

    Examples
    --------
    >>> d = depth_sensor(np.ones((100, 100)), noise=0.0, holes=0.05, rng=0)
    >>> round(float(np.mean(d == 0)), 2), float(d.max())  # about 5 % holes, the rest exact
    (0.05, 1.0)
    """
    d = as_array(depth, "depth", lower=0.0, dtype=np.float32)  # pyright: ignore[reportArgumentType]  # _core as_array's dtype is unannotated
    if d.ndim < 2:
        raise ValueError(f"`depth` must have shape (..., H, W); got shape {d.shape}.")
    noise = check_scalar(noise, "noise", lower=0.0, upper=1.0)
    holes = check_scalar(holes, "holes", lower=0.0, upper=1.0)
    g = as_generator(rng)
    out = d + np.float32(noise) * g.standard_normal(d.shape, dtype=np.float32)
    return np.where(g.uniform(size=d.shape) < holes, np.float32(0.0), out)


def depth_channels(depth) -> np.ndarray:
    """``(..., H, W)`` depth as ``(..., H, W, 3)``: replicated, ``(d - 0.449) / 0.226``.

    Examples
    --------
    >>> c = depth_channels(np.array([[0.223, 0.675]]))  # the mean -+ one standard deviation
    >>> c.shape, [round(float(v), 4) for v in c[0, :, 0]]
    ((1, 2, 3), [-1.0, 1.0])
    """
    d = as_array(depth, "depth", dtype=np.float32)  # pyright: ignore[reportArgumentType]  # _core as_array's dtype is unannotated
    if d.ndim < 2:
        raise ValueError(f"`depth` must have shape (..., H, W); got shape {d.shape}.")
    return np.repeat(((d - DEPTH_MEAN) / DEPTH_STD)[..., None], 3, axis=-1)
