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

__all__ = [
    "sigmas",
    "nonlinear_laplacian",
    "critical_threshold",
    "outlier",
    "bulk_edge",
    "threshold",
    "outlier_limits",
    "bulk_density",
    "as_prior",
    "PRIORS",
    "Instance",
    "goe",
    "spiked_wigner",
    "planted_submatrix",
    "planted_clique",
    "Detection",
    "detect",
    "top_eigenpair",
    "finite_sample_limits",
    "Family",
    "FAMILIES",
    "family",
    "threshold_and_gradient",
    "GridResult",
    "threshold_grid",
    "OptimizationResult",
    "optimize_threshold",
]

__all__ += ["LearnedSigma", "learn_sigma", "make_dataset"]

# The searches and the learned sigma run on JAX; they load on first use (PEP 562) so that the
# closed forms above import without it.
_LAZY = {
    "FAMILIES": "_search",
    "Family": "_search",
    "GridResult": "_search",
    "OptimizationResult": "_search",
    "family": "_search",
    "optimize_threshold": "_search",
    "threshold_and_gradient": "_search",
    "threshold_grid": "_search",
    "LearnedSigma": "_learn",
    "learn_sigma": "_learn",
    "make_dataset": "_learn",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
