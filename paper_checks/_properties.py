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
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from _core.runtime import float64

from ._mutants import Mutant, find_mutant
from ._registry import Registry

__all__ = ["Property", "PROPERTIES", "prop", "verify", "replay", "encode", "decode"]


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


def verify(p: Property, examples: int, seed: int = 0, mutant: str | None = None) -> dict:
    """Search ``examples`` instances of ``p`` (Hypothesis, targeted at the smallest slack).

    Returns a row: ``status`` ("holds", "counterexample" or "error"), ``examples`` tried,
    ``min_slack`` with the ``tightest`` instance, and for a counterexample the shrunk instance
    with its replay ``blob``.
    """
    from hypothesis import HealthCheck, Phase, given, settings, target
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    state = dict(n=0, min=math.inf, tightest=None, fail=None)

    def body(ex):
        s = float(p.slack(ex))
        state["n"] += 1
        if math.isnan(s):
            raise ValueError(f"slack is NaN at instance {ex}")
        if s < state["min"]:
            state["min"], state["tightest"] = s, ex
        target(-s, label="negative slack")
        if s < 0:
            state["fail"] = (ex, s)
            raise _Violation(f"slack {s:.3g} < 0")

    test = settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink),
        print_blob=False,
    )(given(p.strategy(st))(body))
    test = hypothesis_seed(seed)(test)
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
        seconds=round(time.perf_counter() - t0, 3),
    )
    return row


def replay(p: Property, blob: str) -> dict:
    """Evaluate ``p`` on the instance of ``blob``: ``{"instance", "slack", "status"}``."""
    ex = decode(blob)
    with float64():
        s = float(p.slack(ex))
    return dict(id=p.id, instance=ex, slack=s, status="holds" if s >= 0 else "counterexample")
