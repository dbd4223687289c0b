"""theorylab.spectral: nonlinear-Laplacian spectral detection (Ma & Kunisky 2025, arXiv 2505.12528).

Entry points: :func:`nonlinear_laplacian`, :func:`critical_threshold`, :func:`outlier`,
:func:`bulk_edge`; σ families in :mod:`spectral.sigmas`; planted models and the detector.
"""

from . import sigmas
from ._models import (
                      Detection,
                      Instance,
                      detect,
                      finite_sample_limits,
                      goe,
                      nonlinear_laplacian,
                      planted_clique,
                      planted_submatrix,
                      spiked_wigner,
                      top_eigenpair,
)
from ._search import (
    FAMILIES,
    Family,
    GridResult,
    OptimizationResult,
    family,
    optimize_threshold,
    threshold_and_gradient,
    threshold_grid,
)
from ._theory import (
                      PRIORS,
                      as_prior,
                      bulk_density,
                      bulk_edge,
                      critical_threshold,
                      outlier,
                      outlier_limits,
                      threshold,
)

__all__ = ["sigmas", "nonlinear_laplacian", "critical_threshold", "outlier", "bulk_edge",
           "threshold", "outlier_limits", "bulk_density", "as_prior", "PRIORS", "Instance",
           "goe", "spiked_wigner", "planted_submatrix", "planted_clique", "Detection", "detect",
           "top_eigenpair", "finite_sample_limits", "Family", "FAMILIES", "family",
           "threshold_and_gradient", "GridResult", "threshold_grid", "OptimizationResult",
           "optimize_threshold"]

from ._learn import LearnedSigma, learn_sigma, make_dataset  # noqa: E402

__all__ += ["LearnedSigma", "learn_sigma", "make_dataset"]
