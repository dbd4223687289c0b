"""The claims registry: each claim of a paper, with a ``check(scale) -> Measurement``.

A claim module (``paper_checks/<area>.py``) registers its claims with :func:`claim`; the registry
imports every public module of the package on first use, so adding an area needs no edit here.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Measurement", "Claim", "Registry", "REGISTRY", "claim", "SCALES"]

SCALES = ("quick", "full")


@dataclass(frozen=True)
class Measurement:
    """What a check measured and how it compares with the claim.

    ``measured``, ``expected`` and ``tolerance`` are floats, or lists / dicts of floats when a claim
    is checked at several points; ``passed`` is the verdict; ``detail`` a short line for the report.
    """

    measured: Any
    expected: Any
    tolerance: Any
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Claim:
    """A paper's claim: ``id`` is ``AREA.NAME``; ``where`` the theorem/table/figure stating it."""

    id: str
    paper: str
    statement: str
    where: str
    check: Callable[[str], Measurement] = field(repr=False)


class Registry:
    """An ordered collection of claims, optionally filled by importing a package's modules."""

    def __init__(self, package: str | None = None):
        self._claims: dict[str, Claim] = {}
        self._package = package
        self._loaded = package is None

    def add(self, c: Claim) -> Claim:
        area, _, name = c.id.partition(".")
        if not area or not name:
            raise ValueError(f"claim id must be 'AREA.NAME'; got {c.id!r}.")
        if c.id in self._claims:
            raise ValueError(f"claim id {c.id!r} is registered twice.")
        self._claims[c.id] = c
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
                self.add(Claim(id=f"{info.name}.import", paper="-", where="-",
                               statement=f"module paper_checks.{info.name} imports",
                               check=_reraise(err)))


    def __iter__(self):
        self._load()
        return iter(list(self._claims.values()))

    def __len__(self):
        self._load()
        return len(self._claims)

    def __contains__(self, claim_id):
        self._load()
        return claim_id in self._claims

    def __getitem__(self, claim_id) -> Claim:
        self._load()
        return self._claims[claim_id]

    def select(self, pattern: str | None) -> list[Claim]:
        """Claims whose id matches the shell-style glob ``pattern`` (all when None)."""
        return [c for c in self if pattern is None or fnmatch.fnmatchcase(c.id, pattern)]


REGISTRY = Registry("paper_checks")


def claim(id: str, *, paper: str, statement: str, where: str, registry: Registry = REGISTRY):
    """Decorator registering ``check(scale) -> Measurement`` as the claim ``id``."""

    def wrap(check):
        registry.add(Claim(id=id, paper=paper, statement=statement, where=where, check=check))
        return check

    return wrap


def _reraise(err: Exception):
    def check(scale):
        raise err

    return check
