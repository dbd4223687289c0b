"""The claims registry: each claim of a paper, its sizes per scale, its mutants and its check.

A claim module (``paper_checks/<area>.py``) registers its claims with :func:`claim`; the registry
imports every public module of the package on first use, so adding an area needs no edit here::

    SIZES = sizes(smoke=dict(n=200, trials=2), quick=dict(n=2000, trials=10),
                  full=dict(n=4000, trials=40))

    @claim("rmt.bbp", paper=..., statement=..., where=..., sizes=SIZES,
           mutants=[wrap("theory.bbp.bbp_top_eigenvalue", scaled(1.05),
                         "outlier location 5 % high")])
    def _bbp(size, seed) -> Measurement:
        sim = simulate(size.n, size.trials, seed)
        return measure(within(sim.lam, theory, tol, name="top_eigenvalue"), detail=...)

``size`` is the row of the table for the scale asked for (attributes, plus ``size.scale``);
``seed`` changes every random draw of the check. A mutant is a plausible bug in the library code
the claim exercises, applied by patching for the length of one run (:func:`run_claim`).

A claim that is a large Monte Carlo declares its independent replicates (:class:`Replicates`,
``replicates=`` of :func:`claim`) and its check obtains them through :func:`run_replicates`: in
a loop here, or computed beforehand in chunks on a Dask cluster (``theorylab._tasks``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from _core.runtime import float64
from _core.validation import check_int

from ._measurement import NOTHING_RECORDED, Measurement, Recorded
from ._mutants import Mutant, find_mutant
from ._units import Replicates, compute_plan, providing

__all__ = [
    "matches",
    "Claim",
    "Registry",
    "REGISTRY",
    "claim",
    "SCALES",
    "Sizes",
    "sizes",
    "run_claim",
]

SCALES = ("smoke", "quick", "full")


class Sizes(Mapping):
    """One row of a size table: a read-only mapping with attribute access and ``.scale``."""

    def __init__(self, row: dict):
        self._row = MappingProxyType(dict(row))

    def __getitem__(self, key):
        return self._row[key]

    def __iter__(self):
        return iter(self._row)

    def __len__(self):
        return len(self._row)

    def __getattr__(self, key):
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self._row[key]
        except KeyError:
            raise AttributeError(f"size table has no entry {key!r}") from None

    def __repr__(self):
        return f"Sizes({dict(self._row)!r})"


def sizes(**table: dict) -> dict[str, Sizes]:
    """A claim module's size table: one dict per scale, every scale of :data:`SCALES` given,
    every row with the same keys."""
    if set(table) != set(SCALES):
        raise ValueError(f"a size table needs exactly the scales {SCALES}; got {tuple(table)}.")
    for s, row in table.items():
        if not isinstance(row, dict) or not all(isinstance(k, str) for k in row):
            raise TypeError(f"`{s}` must be a dict of sizes keyed by name; got {row!r}.")
    keys = {s: set(row) for s, row in table.items()}
    if len({frozenset(k) for k in keys.values()}) != 1:
        raise ValueError(f"every scale of a size table needs the same keys; got {keys}.")
    return {s: Sizes({**table[s], "scale": s}) for s in SCALES}


NO_SIZES = sizes(smoke={}, quick={}, full={})


@dataclass(frozen=True)
class Claim:
    """A paper's claim: ``id`` is ``AREA.NAME``; ``where`` the theorem/table/figure stating it;
    ``sizes`` its row per scale; ``mutants`` the bugs it must catch; ``replicates`` (optional)
    ``(size, seed) -> [Replicates, ...]``, the Monte Carlo its check runs through
    :func:`run_replicates`; ``recorded`` the outcome it is known to give per scale and why
    (:func:`paper_checks.record`; ``"reproduced"`` where none is recorded)."""

    id: str
    paper: str
    statement: str
    where: str
    check: Callable[[Sizes, int], Measurement] = field(repr=False)
    sizes: dict[str, Sizes] = field(default_factory=lambda: NO_SIZES, repr=False)
    mutants: tuple[Mutant, ...] = ()
    replicates: Callable[[Sizes, int], Sequence[Replicates]] | None = field(
        default=None, repr=False
    )
    recorded: Recorded = NOTHING_RECORDED

    def mutant(self, name: str) -> Mutant:
        return find_mutant(self, name)

    def replicate_plan(self, scale: str, seed: int) -> list[Replicates]:
        """The replicates the check runs at ``scale`` with ``seed`` (none when undeclared)."""
        return [] if self.replicates is None else list(self.replicates(self.sizes[scale], seed))


def run_claim(
    c: Claim,
    scale: str,
    seed: int = 0,
    mutant: str | None = None,
    results: Mapping[Replicates, list] | None = None,
    threads: int = 1,
) -> Measurement:
    """Run ``c`` at ``scale`` with ``seed``, under the mutant named ``mutant`` if given; with
    ``results`` (the replicates of :meth:`Claim.replicate_plan` already computed, under the same
    mutant) the check reads them instead of computing them, and any other is an error. Without
    ``results`` and with ``threads`` > 1, the declared replicates are first computed by that
    many threads (:func:`compute_plan`; the same numbers)."""
    if scale not in SCALES:
        raise ValueError(f"`scale` must be one of {SCALES}; got {scale!r}.")
    threads = check_int(threads, "threads", lower=1, upper=512)
    size = c.sizes[scale]
    with float64(), c.mutant(mutant).apply() if mutant else contextlib.nullcontext():
        plan = c.replicate_plan(scale, seed) if results is None and threads > 1 else []
        with providing(compute_plan(plan, threads) if plan else results):
            return c.check(size, seed)


def _broken_claim(name: str, err: Exception) -> Claim:
    def check(size, seed):
        raise err

    return Claim(
        id=f"{name}.import",
        paper="-",
        where="-",
        statement=f"module paper_checks.{name} imports",
        check=check,
    )


def matches(ident: str, pattern: str | None) -> bool:
    """Whether ``ident`` matches the glob ``pattern`` or one of its comma-separated globs
    (``"acavp.*,adapters.polar_*"``); None matches everything."""
    if pattern is None:
        return True
    return any(fnmatch.fnmatchcase(ident, p) for p in pattern.split(","))


class Registry:
    """An ordered collection of claims (or properties), optionally filled by importing every
    public module of a package; a module that fails to import becomes one entry that reports
    the error (``broken(name, err)``), and the others still run."""

    def __init__(self, package: str | None = None, *, broken: Callable | None = None):
        self._items: dict[str, Any] = {}
        self._package = package
        self._loaded = package is None
        self._broken = broken or _broken_claim

    def add(self, c):
        area, _, name = c.id.partition(".")
        if not area or not name:
            raise ValueError(f"id must be 'AREA.NAME'; got {c.id!r}.")
        if c.id in self._items:
            raise ValueError(f"id {c.id!r} is registered twice.")
        names = [m.name for m in c.mutants]
        if len(set(names)) != len(names):
            raise ValueError(f"{c.id!r} declares a mutant name twice: {names}.")
        self._items[c.id] = c
        return c

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        pkg = importlib.import_module(self._package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            try:
                importlib.import_module(f"{self._package}.{info.name}")
            except Exception as err:  # one broken area is reported, the others still run
                self.add(self._broken(info.name, err))

    def __iter__(self):
        self._load()
        return iter(list(self._items.values()))

    def __len__(self):
        self._load()
        return len(self._items)

    def __contains__(self, item_id):
        self._load()
        return item_id in self._items

    def __getitem__(self, item_id):
        self._load()
        return self._items[item_id]

    def select(self, pattern: str | None) -> list:
        """Entries whose id matches the shell-style glob ``pattern``, or one of its
        comma-separated globs (all when None)."""
        return [c for c in self if matches(c.id, pattern)]


REGISTRY = Registry("paper_checks")


def claim(
    id: str,
    *,
    paper: str,
    statement: str,
    where: str,
    sizes: dict | None = None,
    mutants=(),
    replicates: Callable[[Sizes, int], Sequence[Replicates]] | None = None,
    recorded: Recorded = NOTHING_RECORDED,
    registry: Registry = REGISTRY,
):
    """Decorator registering ``check(size, seed) -> Measurement`` as the claim ``id``;
    ``replicates(size, seed)`` lists the :class:`Replicates` the check runs (through
    :func:`run_replicates`), so that a cluster can run them as chunks; ``recorded`` the outcome
    it is known to give (:func:`paper_checks.record`)."""
    table = NO_SIZES if sizes is None else sizes
    if not isinstance(recorded, Recorded):
        raise TypeError(f"claim {id!r}: `recorded` must come from paper_checks.record(...).")
    if set(table) != set(SCALES):
        raise ValueError(f"claim {id!r}: `sizes` must come from paper_checks.sizes(...).")

    def wrap_check(check):
        registry.add(
            Claim(
                id=id,
                paper=paper,
                statement=statement,
                where=where,
                check=check,
                sizes=table,
                mutants=tuple(mutants),
                replicates=replicates,
                recorded=recorded,
            )
        )
        return check

    return wrap_check
