"""Verification as a campaign: a time budget shared among properties, and the strength of the
properties measured by running each under each of its mutants.

:func:`verify_budget` runs rounds of :func:`paper_checks.verify` through one example database,
so each round starts from the tightest instance found so far; a property whose smallest slack
fell in its last round gets twice the examples next round (up to 8x), one that did not falls
back toward the base share. :func:`strength` runs a property under each declared mutant and
records after how many examples the search first saw a negative slack.
"""

from __future__ import annotations

import math
import re
import statistics
import tempfile
import time
from pathlib import Path

from ._properties import Property, verify

__all__ = ["parse_duration", "verify_budget", "strength", "strength_summary"]

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """``"90"``, ``"90s"``, ``"10m"``, ``"1.5h"`` -> seconds; ``ValueError`` naming ``text``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(text))
    if not m or float(m.group(1)) <= 0:
        raise ValueError(
            f"`time` must be a positive duration such as 90s, 10m or 1h; got {text!r}."
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


def _merge(acc: dict | None, r: dict) -> dict:
    """One property's row over rounds: examples and seconds summed, the smallest slack kept,
    the first counterexample kept, ``caught_at`` counted over all rounds."""
    if acc is None:
        return dict(r, rounds=1)
    out = dict(acc)
    out["rounds"] = acc["rounds"] + 1
    if r["caught_at"] is not None and acc["caught_at"] is None:
        out["caught_at"] = acc["examples"] + r["caught_at"]
    out["examples"] = acc["examples"] + r["examples"]
    out["seconds"] = round(acc["seconds"] + r["seconds"], 3)
    if r["min_slack"] < acc["min_slack"]:
        out["min_slack"], out["tightest"] = r["min_slack"], r["tightest"]
    if acc["status"] == "holds" and r["status"] != "holds":
        for k in ("status", "counterexample", "counterexample_slack", "blob", "error"):
            if k in r:
                out[k] = r[k]
    return out


def verify_budget(
    properties, seconds: float, seed: int = 0, *, db: Path | str | None = None, base: int = 25
) -> list[dict]:
    """Verify ``properties`` for about ``seconds`` in all, in rounds of ``base`` examples per
    property times its weight (doubled while its smallest slack keeps falling, at most 8;
    halved toward 1 when it stalls); a property with a counterexample or an error leaves the
    rotation. ``db`` as in :func:`paper_checks.verify` (None: a temporary one for this run).

    Returns one row per property as :func:`paper_checks.verify` does, with ``rounds``; a
    property the budget never reached has ``status`` "not run".
    """
    props: list[Property] = list(properties)
    deadline = time.perf_counter() + float(seconds)
    rows: dict[str, dict | None] = {p.id: None for p in props}
    weight = {p.id: 1.0 for p in props}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) if db is None else Path(db)
        k = 0
        while time.perf_counter() < deadline:
            active = [p for p in props if rows[p.id] is None or rows[p.id]["status"] == "holds"]
            if not active:
                break
            for p in active:
                if time.perf_counter() >= deadline:
                    break
                before = rows[p.id]["min_slack"] if rows[p.id] else math.inf
                r = verify(p, max(1, int(base * weight[p.id])), seed + k, db=folder)
                rows[p.id] = _merge(rows[p.id], r)
                falling = r["min_slack"] < before - 1e-12 * max(1.0, abs(before))
                weight[p.id] = min(8.0, 2 * weight[p.id]) if falling else max(1.0, weight[p.id] / 2)
            k += 1
    out = []
    for p in props:
        r = rows[p.id]
        if r is None:
            r = dict(id=p.id, paper=p.paper, statement=p.statement, where=p.where, mutant=None,
                     status="not run", counterexample=None, blob=None, examples=0,
                     min_slack=math.inf, tightest=None, first_slack=None, caught_at=None,
                     seconds=0.0, rounds=0)  # fmt: skip
        out.append(r)
    return out


def strength(p: Property, examples: int, seed: int = 0) -> dict:
    """``p`` run under each declared mutant (no example database: each search starts afresh;
    no shrinking: it stops at the first negative slack). Returns ``{"id", "status",
    "mutants": [{"mutant", "description", "caught", "caught_at", "error", "seconds"}],
    "seconds"}``; ``status`` is "k of n caught"."""
    rows = []
    for m in p.mutants:
        r = verify(p, examples, seed, m.name, shrink=False)
        rows.append(
            dict(
                mutant=m.name,
                description=m.description,
                caught=r["status"] == "counterexample",
                caught_at=r["caught_at"],
                error=r.get("error"),
                seconds=r["seconds"],
            )
        )
    n = sum(r["caught"] for r in rows)
    return dict(
        id=p.id,
        paper=p.paper,
        status=f"{n} of {len(rows)} caught",
        mutants=rows,
        seconds=round(sum(r["seconds"] for r in rows), 3),
    )


def strength_summary(rows, within: int = 1000) -> dict:
    """Over every mutant of ``rows`` (from :func:`strength`): how many, the share caught within
    ``within`` examples, and the median number of examples to catch (a mutant not caught counts
    as infinitely many)."""
    at = [m["caught_at"] if m["caught"] else math.inf for r in rows for m in r["mutants"]]
    if not at:
        return dict(
            mutants=0, caught=0, share_caught=math.nan, median_examples=math.nan, within=within
        )
    return dict(
        mutants=len(at),
        caught=sum(a <= within for a in at),
        share_caught=sum(a <= within for a in at) / len(at),
        median_examples=float(statistics.median(at)),
        within=within,
    )
