"""MRI physics and phantoms for test-time adaptation under distribution shift (D2SA, Zhang et
al., NeurIPS 2025, arXiv 2503.20815).

* physics (:mod:`.physics`): :func:`fft2c`/:func:`ifft2c` (centred, orthonormal),
  :func:`coil_maps`, the forward operator :func:`forward` ``A = M F S``, :func:`adjoint`,
  :func:`normal`, :func:`kspace_consistency` and :func:`data_consistency` (hard and soft),
  :func:`num_lines`, :func:`cartesian_mask` (random / equispaced columns with a fully sampled
  centre), :func:`ssdu_split`, :func:`resubsample`, and the self-supervised losses
  :func:`normalized_l1_l2` (SSDU) and :func:`relative_l1` (D2SA / Darestani et al.);
* phantoms (:mod:`.phantoms`): :class:`Patient`, :func:`shepp_logan_3d`, :func:`random_patient`,
  :func:`slice_ellipses`, :func:`rasterize`, :func:`ellipse_kspace` (analytic, via :func:`j1`),
  :func:`polynomial_field`, :func:`random_bias`, :func:`random_phase`, :func:`apply_contrast`,
  :func:`simulate`, and the five shifts :data:`SHIFTS` / :func:`shift_setting` from
  :data:`SOURCE`; :func:`cohort` draws the patients of a setting.

Submodules (loaded on first use): :mod:`.metrics` (PSNR and SSIM on a fixed scale, HFEN, the
official code's normalised PSNR) and :mod:`.tta` (the single-shot test-time-training baseline and
D2SA on the U-Net of :mod:`nn.unet`).
"""

import importlib

from .phantoms import (
    CONTRASTS,
    SHEPP_LOGAN_3D,
    SHIFTS,
    SOURCE,
    Cohort,
    Patient,
    apply_contrast,
    cohort,
    ellipse_kspace,
    j1,
    polynomial_field,
    random_bias,
    random_patient,
    random_phase,
    rasterize,
    shepp_logan_3d,
    shift_setting,
    simulate,
    slice_ellipses,
)
from .physics import (
    adjoint,
    cartesian_mask,
    coil_maps,
    data_consistency,
    fft2c,
    forward,
    ifft2c,
    kspace_consistency,
    normal,
    normalized_l1_l2,
    num_lines,
    relative_l1,
    resubsample,
    ssdu_split,
)

_SUBMODULES = ("metrics", "tta")

__all__ = [
    *_SUBMODULES,  # pyright: ignore[reportUnsupportedDunderAll]
    "fft2c",
    "ifft2c",
    "coil_maps",
    "forward",
    "adjoint",
    "normal",
    "kspace_consistency",
    "data_consistency",
    "num_lines",
    "cartesian_mask",
    "ssdu_split",
    "resubsample",
    "normalized_l1_l2",
    "relative_l1",
    "Patient",
    "SHEPP_LOGAN_3D",
    "CONTRASTS",
    "SHIFTS",
    "SOURCE",
    "shepp_logan_3d",
    "random_patient",
    "slice_ellipses",
    "rasterize",
    "j1",
    "ellipse_kspace",
    "polynomial_field",
    "random_bias",
    "random_phase",
    "apply_contrast",
    "simulate",
    "shift_setting",
    "Cohort",
    "cohort",
]


def __getattr__(name):  # PEP 562
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
