"""Registry of the papers' claims, each a check that measures and compares.

One module per area; each registers its claims with :func:`claim`, keeps one size table per scale
(:func:`sizes`: ``smoke`` seconds, ``quick`` the default, ``full`` the papers' own sizes),
declares mutants (:func:`patch`, :func:`wrap`) and ends with typed rules (:func:`within`,
:func:`at_most`, :func:`at_least`, :func:`paired_gap`, :func:`equivalent`, :func:`slope_within`,
:func:`holds`) combined by :func:`measure` into a status (``reproduced``, ``not reproduced`` or
``inconclusive``), checked against the outcome the claim records (:func:`record`). Properties
(:func:`prop`, searched by :func:`verify`) state a bound over its whole hypothesis space; they
live in ``paper_checks.properties``.
"""

from ._campaign import parse_duration, strength, strength_summary, verify_budget
from ._index import entries as index_entries
from ._index import load as load_index
from ._measurement import STATUSES, Measurement, Recorded, measure, moved, record
from ._memo import clear_caches, memo
from ._mutants import Mutant, find_mutant, patch, resolve_target, scaled, wrap
from ._power import TARGET, Power
from ._properties import PROPERTIES, Property, default_db, prop, replay, verify
from ._registry import (
    REGISTRY,
    SCALES,
    Claim,
    Registry,
    Sizes,
    claim,
    matches,
    run_claim,
    sizes,
)
from ._rules import (
    Verdict,
    at_least,
    at_most,
    equivalent,
    holds,
    paired_gap,
    slope_within,
    within,
)
from ._units import (
    Replicates,
    compute_plan,
    computed,
    giving,
    providing,
    run_replicates,
    shared,
    unit,
)

__all__ = [
    "PROPERTIES",
    "Property",
    "prop",
    "replay",
    "verify",
    "default_db",
    "parse_duration",
    "strength",
    "strength_summary",
    "verify_budget",
    "REGISTRY",
    "SCALES",
    "STATUSES",
    "TARGET",
    "Claim",
    "Measurement",
    "Mutant",
    "Power",
    "Recorded",
    "Registry",
    "Replicates",
    "Sizes",
    "claim",
    "clear_caches",
    "compute_plan",
    "computed",
    "find_mutant",
    "giving",
    "index_entries",
    "load_index",
    "matches",
    "memo",
    "moved",
    "patch",
    "providing",
    "record",
    "resolve_target",
    "run_claim",
    "run_replicates",
    "scaled",
    "shared",
    "sizes",
    "unit",
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
