"""Registry of the papers' claims, each a check that measures and compares.

One module per area; each registers its claims with :func:`claim`, keeps one size table per scale
(:func:`sizes`: ``smoke`` seconds, ``quick`` the default, ``full`` the papers' own sizes),
declares mutants (:func:`patch`, :func:`wrap`) and ends with typed rules (:func:`within`,
:func:`at_most`, :func:`at_least`, :func:`paired_gap`, :func:`equivalent`, :func:`slope_within`,
:func:`holds`) combined by :func:`measure`. Properties (:func:`prop`, searched by :func:`verify`)
state a bound over its whole hypothesis space; they live in ``paper_checks.properties``.
"""

from ._properties import PROPERTIES, Property, prop, replay, verify
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
    compute_plan,
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

__all__ = [
    "PROPERTIES",
    "Property",
    "prop",
    "replay",
    "verify",
    "REGISTRY",
    "SCALES",
    "Claim",
    "Measurement",
    "Mutant",
    "Registry",
    "Sizes",
    "claim",
    "clear_caches",
    "compute_plan",
    "memo",
    "patch",
    "run_claim",
    "scaled",
    "sizes",
    "wrap",
    "Verdict",
    "at_least",
    "at_most",
    "equivalent",
    "holds",
    "measure",
    "paired_gap",
    "slope_within",
    "within",
]
