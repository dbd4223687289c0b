"""Registry of the papers' claims, each a check that measures and compares.

One module per area; each registers its claims with :func:`claim`, keeps one size table per scale
(:func:`sizes`: ``smoke`` seconds, ``quick`` the default, ``full`` the papers' own sizes),
declares mutants (:func:`patch`, :func:`wrap`) and ends with typed rules (:func:`within`,
:func:`at_most`, :func:`at_least`, :func:`paired_gap`, :func:`equivalent`, :func:`slope_within`,
:func:`holds`) combined by :func:`measure`.
"""

from ._registry import (
    REGISTRY,
    SCALES,
    Claim,
    Measurement,
    Mutant,
    Registry,
    Sizes,
    claim,
    clear_caches,
    memo,
    patch,
    run_claim,
    scaled,
    sizes,
    wrap,
)
from ._rules import (
    Verdict,
    at_least,
    at_most,
    equivalent,
    holds,
    measure,
    paired_gap,
    slope_within,
    within,
)

__all__ = ["REGISTRY", "SCALES", "Claim", "Measurement", "Mutant", "Registry", "Sizes", "claim",
           "clear_caches", "memo", "patch", "run_claim", "scaled", "sizes", "wrap", "Verdict",
           "at_least", "at_most", "equivalent", "holds", "measure", "paired_gap", "slope_within",
           "within"]
