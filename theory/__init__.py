"""Theorem statements as executable code: closed forms, bounds, thresholds, random-matrix
laws, Gaussian quadrature exact for kinked functions, and honest root finding.

The foundation helpers are imported here; each paper's topic module is a public submodule loaded
on first access (``theory.sgd``, ``theory.fp4``, ``theory.marchenko_pastur``, ``theory.ecc``,
``theory.free_convolution``, ``theory.nonlinear_laplacian``, ``theory.transformer``).
"""

import importlib

from . import bbp, gaussian, roots, semicircle
from .bbp import bbp_overlap, bbp_top_eigenvalue
from .gaussian import gauss_hermite_expectation, gaussian_expectation
from .roots import NoRootError, RootResult, find_root
from .semicircle import semicircle_cdf, semicircle_edge, semicircle_pdf, semicircle_stieltjes

_TOPICS = (
    "ecc",
    "fp4",
    "free_convolution",
    "marchenko_pastur",
    "nonlinear_laplacian",
    "sgd",
    "transformer",
)

__all__ = [
    "bbp",
    "gaussian",
    "roots",
    "semicircle",
    *_TOPICS,
    "bbp_overlap",
    "bbp_top_eigenvalue",
    "gauss_hermite_expectation",
    "gaussian_expectation",
    "NoRootError",
    "RootResult",
    "find_root",
    "semicircle_cdf",
    "semicircle_edge",
    "semicircle_pdf",
    "semicircle_stieltjes",
]


def __getattr__(name):  # PEP 562: topic modules load on first use (sympy, cvxpy stay unloaded)
    if name in _TOPICS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
