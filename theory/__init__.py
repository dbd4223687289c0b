"""Theorem statements as executable code: closed forms, bounds, thresholds, random-matrix
laws, Gaussian quadrature exact for kinked functions, and honest root finding.

Topic modules (``theory.sgd``, ``theory.fp4``, ``theory.marchenko_pastur``, ...) hold one
paper each.
"""

from . import bbp, gaussian, roots, semicircle
from .bbp import bbp_overlap, bbp_top_eigenvalue
from .gaussian import gauss_hermite_expectation, gaussian_expectation
from .roots import NoRootError, RootResult, find_root
from .semicircle import semicircle_cdf, semicircle_edge, semicircle_pdf, semicircle_stieltjes

__all__ = [
    "bbp", "gaussian", "roots", "semicircle",
    "bbp_overlap", "bbp_top_eigenvalue",
    "gauss_hermite_expectation", "gaussian_expectation",
    "NoRootError", "RootResult", "find_root",
    "semicircle_cdf", "semicircle_edge", "semicircle_pdf", "semicircle_stieltjes",
]
