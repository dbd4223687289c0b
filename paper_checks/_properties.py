"""The properties registry: a paper's bound or identity over its whole hypothesis space.

A property pairs a Hypothesis strategy of instances (dicts of plain numbers, so an instance is
JSON and replayable) with ``slack(instance) -> float``, the bound's relative room: >= 0 when the
statement holds, < 0 for a counterexample. :func:`verify` searches with ``hypothesis.target`` on
the negative slack, so the search is pushed toward the tightest instances, and shrinks a
counterexample when it finds one::

    @prop("sgd.thm1_bias", paper=PAPER, statement="...", where="Thm 1",
          strategy=lambda st: st.fixed_dictionaries({"be": st.floats(0.05, 1.95), ...}),
          mutants=[wrap("theory.sgd.bias_term", scaled(0.5), "bound halved")])
    def _thm1(ex) -> float:
        ...
        return float(np.min(bound - risk) / bound_scale)
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from _core.runtime import float64

from ._mutants import Mutant, find_mutant
from ._registry import Registry

__all__ = [
    "Property",
    "PROPERTIES",
    "prop",
    "verify",
    "replay",
    "encode",
    "decode",
    "default_db",
]


@dataclass(frozen=True)
class Property:
    """A property: ``strategy(st)`` builds the instance strategy from ``hypothesis.strategies``;
    ``slack(instance)`` is >= 0 exactly when the statement holds on that instance."""

    id: str
    paper: str
    statement: str
    where: str
    strategy: Callable = field(repr=False)
    slack: Callable[[dict], float] = field(repr=False)
    mutants: tuple[Mutant, ...] = ()

    def mutant(self, name: str) -> Mutant:
        return find_mutant(self, name)


def _broken(name: str, err: Exception) -> Property:
    def slack(ex):
        raise err

    return Property(
        f"{name}.import",
        "-",
        f"module paper_checks.{name} imports",
        "-",
        strategy=lambda st: st.just({}),
        slack=slack,
    )


PROPERTIES = Registry("paper_checks", broken=_broken)


def prop(
    id: str,
    *,
    paper: str,
    statement: str,
    where: str,
    strategy: Callable,
    mutants=(),
    registry: Registry = PROPERTIES,
):
    """Decorator registering ``slack(instance) -> float`` as the property ``id``."""

    def wrap_slack(slack):
        registry.add(Property(id, paper, statement, where, strategy, slack, tuple(mutants)))
        return slack

    return wrap_slack


def encode(instance: dict) -> str:
    """An instance as a replay blob (URL-safe base64 of its JSON)."""
    return base64.urlsafe_b64encode(json.dumps(instance, sort_keys=True).encode()).decode()


def decode(blob: str) -> dict:
    """The instance of a replay blob; ``ValueError`` naming ``blob`` when it is not one."""
    try:
        out = json.loads(base64.urlsafe_b64decode(blob.encode()))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(
            f"`blob` must be a replay blob printed by `theorylab verify`; got {blob[:40]!r}."
        ) from err
    if not isinstance(out, dict):
        raise ValueError(f"`blob` must encode an instance (a JSON object); got {out!r}.")
    return out


class _Violation(AssertionError):
    pass


def default_db() -> Path:
    """The example database's folder: ``$XDG_CACHE_HOME/theorylab/hypothesis``, else
    ``~/.cache/theorylab/hypothesis``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "theorylab" / "hypothesis"


def _tightest_path(db: Path, pid: str, mutant: str | None) -> Path:
    return db / "tightest" / f"{pid}{'' if mutant is None else '@' + mutant}.json"


def _stored(db: Path | None, pid: str, mutant: str | None) -> list[dict]:
    """The instances stored by earlier runs (the tightest first), replayed before the search."""
    if db is None:
        return []
    path = _tightest_path(db, pid, mutant)
    try:
        blobs = json.loads(path.read_text())
        return [decode(b) for b in blobs]
    except (OSError, ValueError):  # none yet, or a file this version cannot read: start afresh
        return []


def verify(
    p: Property,
    examples: int,
    seed: int = 0,
    mutant: str | None = None,
    *,
    db: Path | str | None = None,
    shrink: bool = True,
) -> dict:
    """Search ``examples`` instances of ``p`` (Hypothesis, targeted at the smallest slack).

    ``db``: a folder for Hypothesis's example database (counterexamples are replayed first)
    and for the tightest instance found per property, which the next run evaluates first, so a
    second run never starts from a worse slack than the best the first found; None: no memory.
    ``shrink=False`` stops at the first counterexample unshrunk (what a strength run needs).

    Returns a row: ``status`` ("holds", "counterexample" or "error"), ``examples`` tried,
    ``min_slack`` with the ``tightest`` instance, ``first_slack`` (the slack of the first
    example evaluated: the stored tightest one when there is one), ``caught_at`` (the number of
    the first example with negative slack, None when none), and for a counterexample the shrunk
    instance with its replay ``blob``.
    """
    from hypothesis import HealthCheck, Phase, given, settings, target
    from hypothesis import example as hypothesis_example
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st
    from hypothesis.database import DirectoryBasedExampleDatabase

    db = None if db is None else Path(db)
    state = dict(n=0, min=math.inf, tightest=None, fail=None, first=None, caught=None)

    def body(ex):
        s = float(p.slack(ex))
        state["n"] += 1
        if math.isnan(s):
            raise ValueError(f"slack is NaN at instance {ex}")
        if state["first"] is None:
            state["first"] = s
        if s < state["min"]:
            state["min"], state["tightest"] = s, ex
        target(-s, label="negative slack")
        if s < 0:
            state["fail"] = (ex, s)
            if state["caught"] is None:
                state["caught"] = state["n"]
            raise _Violation(f"slack {s:.3g} < 0")

    test = settings(
        max_examples=examples,
        database=None if db is None else DirectoryBasedExampleDatabase(str(db / "examples")),
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
        + ((Phase.shrink,) if shrink else ()),
        print_blob=False,
    )(given(p.strategy(st))(body))
    for ex in _stored(db, p.id, mutant):  # explicit examples run before the search
        test = hypothesis_example(ex)(test)
    test = hypothesis_seed(seed)(test)
    # one database entry per property and mutant (the wrapped body is the same function for all)
    test._hypothesis_internal_database_key = f"theorylab:{p.id}:{mutant}".encode()  # pyright: ignore
    t0 = time.perf_counter()
    row = dict(id=p.id, paper=p.paper, statement=p.statement, where=p.where, mutant=mutant)
    try:
        with float64(), p.mutant(mutant).apply() if mutant else contextlib.nullcontext():
            test()
        row.update(status="holds", counterexample=None, blob=None)
    except _Violation:
        ex, s = state["fail"]
        row.update(
            status="counterexample", counterexample=ex, counterexample_slack=s, blob=encode(ex)
        )
    except Exception as err:  # a property that raises is reported, the run goes on
        row.update(
            status="error", counterexample=None, blob=None, error=f"{type(err).__name__}: {err}"
        )
    row.update(
        examples=state["n"],
        min_slack=state["min"],
        tightest=state["tightest"],
        first_slack=state["first"],
        caught_at=state["caught"],
        seconds=round(time.perf_counter() - t0, 3),
    )
    if db is not None and state["tightest"] is not None:
        path = _tightest_path(db, p.id, mutant)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([encode(state["tightest"])]))
    return row


def replay(p: Property, blob: str) -> dict:
    """Evaluate ``p`` on the instance of ``blob``: ``{"instance", "slack", "status"}``."""
    ex = decode(blob)
    with float64():
        s = float(p.slack(ex))
    return dict(id=p.id, instance=ex, slack=s, status="holds" if s >= 0 else "counterexample")
