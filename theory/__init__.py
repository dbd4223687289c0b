"""Theorem statements as executable code: closed forms, bounds, thresholds, random-matrix
laws, Gaussian quadrature exact for kinked functions, and honest root finding.

The foundation helpers are imported here; each paper's topic module (every other public module
of this folder: ``theory.sgd``, ``theory.fp4``, ``theory.marchenko_pastur``, ...) is a public
submodule loaded on first access, so a new paper's module needs no edit here.
"""

import importlib
import pkgutil

from . import bbp, gaussian, roots, semicircle
from .bbp import bbp_overlap, bbp_top_eigenvalue
from .gaussian import gauss_hermite_expectation, gaussian_expectation
from .roots import NoRootError, RootResult, find_root
from .semicircle import semicircle_cdf, semicircle_edge, semicircle_pdf, semicircle_stieltjes

_FOUNDATION = ("bbp", "gaussian", "roots", "semicircle")
_TOPICS = tuple(
    m.name
    for m in pkgutil.iter_modules(__path__)
    if not m.name.startswith("_") and m.name not in _FOUNDATION
)

__all__ = [
    "bbp",
    "gaussian",
    "roots",
    "semicircle",
    *_TOPICS,  # pyright: ignore[reportUnsupportedDunderAll]  (topics are discovered at import)
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
