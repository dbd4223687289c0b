"""What a claim's check returns, its status, the outcome a claim records, and when a mutant counts
as caught.

**Status** (DESIGN, "Claims contract"): ``"reproduced"`` when every rule holds; otherwise
``"not reproduced"`` when a failing rule is two-valued (an identity, an exact value, a bound) or
had the power to see the paper's effect (:mod:`paper_checks._power`), and ``"inconclusive"`` when
every failing rule lacked it, with ``resolve`` saying what would give it. ``"error"`` is a check
that raised (set by the runner, never here).

**Recorded outcomes**, as pytest records expected failures: a claim known not to reproduce at a
scale records that verdict with its reason (:func:`record`); a run matches when every status
equals its record (``"reproduced"`` where none is recorded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from _core.validation import check_instance

from ._rules import Verdict, _plain

__all__ = [
    "STATUSES",
    "Measurement",
    "measure",
    "Recorded",
    "record",
    "moved",
]

STATUSES = ("reproduced", "not reproduced", "inconclusive", "error")
_SCALES = ("smoke", "quick", "full")


@dataclass(frozen=True)
class Measurement:
    """What a check measured and how it compares with the claim.

    Built by :func:`measure` from typed rules: ``measured``, ``expected`` and ``tolerance`` are
    floats, or lists / dicts of floats; ``status`` one of :data:`STATUSES` (not ``"error"``);
    ``rule`` the rules' text; ``resolve`` what would resolve an inconclusive verdict (else "");
    ``detail`` a short line for the report; ``verdicts`` the rules themselves.
    """

    measured: Any
    expected: Any
    tolerance: Any
    status: str
    detail: str = ""
    rule: str = ""
    resolve: str = ""
    verdicts: tuple[Verdict, ...] = field(default=(), repr=False)

    @property
    def distance(self) -> float:
        """How far past its rule the claim is, in tolerance (or SE) units: the largest excess of
        a failing rule (> 0), else of any rule (<= 0). Orders the report's changed claims."""
        failing = [v.excess for v in self.verdicts if not v.passed]
        return max(failing or [v.excess for v in self.verdicts] or [0.0])

    @property
    def values(self) -> dict[str, dict]:
        """Per rule, the numbers it judged (``value``, a flat list) and the scale a change must
        exceed to count (``scale``: the SE, else the tolerance; :func:`moved`); what the
        comparison of two runs reads."""
        out = {}
        for v in self.verdicts:
            arr = _scalars(v)
            scale = _scale(v, arr) if arr.size else np.zeros(0)
            out[v.name] = {
                "value": arr.tolist(),
                "scale": float(np.min(scale)) if scale.size else None,
            }
        return out

    @property
    def passed(self) -> bool:
        return self.status == "reproduced"


def _status(verdicts) -> tuple[str, str]:
    failing = [v for v in verdicts if not v.passed]
    if not failing:
        return "reproduced", ""
    if any(v.two_valued or v.power.powered for v in failing):
        return "not reproduced", ""
    return "inconclusive", "; ".join(f"{v.name}: {v.power.text()}" for v in failing)


def measure(*verdicts: Verdict, detail: str = "", extra: dict | None = None) -> Measurement:
    """The :class:`Measurement` of a claim from its rules (its status as the module says).

    One verdict gives its numbers as they are; several are keyed by their names. ``extra`` adds
    measured values that no rule compares (shown in the report, not judged).
    """
    if not verdicts:
        raise ValueError("measure() needs at least one rule.")
    for v in verdicts:
        check_instance(v, "verdicts", Verdict, "Verdicts (from within, at_most, ...)")
    check_instance(detail, "detail", str)
    check_instance(extra, "extra", (dict, type(None)), "a dict or None")
    names = [v.name for v in verdicts]
    if len(set(names)) != len(names):
        raise ValueError(f"rule names must differ; got {names}.")
    if len(verdicts) == 1 and not extra:
        v = verdicts[0]
        meas, exp, tol = v.measured, v.expected, v.tolerance
    else:
        meas = {v.name: v.measured for v in verdicts} | _plain(extra or {})
        exp = {v.name: v.expected for v in verdicts}
        tol = {v.name: v.tolerance for v in verdicts}

    def text(v):
        power = "" if v.power is None else f"; {v.power.text()}"
        mark = f" [{'ok' if v.passed else 'FAILS'}{power}]" if len(verdicts) > 1 or power else ""
        return v.rule + mark

    status, resolve = _status(verdicts)
    return Measurement(
        measured=meas,
        expected=exp,
        tolerance=tol,
        status=status,
        detail=detail,
        rule="; ".join(text(v) for v in verdicts),
        resolve=resolve,
        verdicts=tuple(verdicts),
    )


@dataclass(frozen=True)
class Recorded:
    """The outcome a claim records per scale (``"reproduced"`` where none is given) and why."""

    outcomes: Mapping[str, str]
    reason: str

    def at(self, scale: str) -> str:
        return self.outcomes.get(scale, "reproduced")


def record(*, reason: str, **outcomes: str) -> Recorded:
    """A claim's recorded outcomes, e.g. ``record(quick="inconclusive", reason="...")``: the
    verdict the claim is known to give at each named scale and why (the report prints it; a run
    whose verdict differs reports a change). Only ``"not reproduced"`` (a powered test that the
    paper does not survive) and ``"inconclusive"`` (a scale too small to resolve the paper's
    effect) can be recorded."""
    check_instance(reason, "reason", str)
    if not reason.strip():
        raise ValueError("`reason` must say why the outcome is recorded; got an empty string.")
    for scale, outcome in outcomes.items():
        if scale not in _SCALES:
            raise ValueError(f"record(): scale must be one of {_SCALES}; got {scale!r}.")
        if outcome not in ("not reproduced", "inconclusive"):
            raise ValueError(
                f"record({scale}=...) must be 'not reproduced' or 'inconclusive'; got {outcome!r}."
            )
    if not outcomes:
        raise ValueError("record() needs at least one scale's outcome, e.g. quick='inconclusive'.")
    return Recorded(dict(outcomes), reason)


NOTHING_RECORDED = Recorded({}, "")


def _scalars(v: Verdict) -> np.ndarray:
    m = v.measured
    if isinstance(m, dict) and "mean" in m:  # paired rules
        m = m["mean"]
    try:
        arr = np.asarray(list(m.values()) if isinstance(m, dict) else m, dtype=float).ravel()
    except (TypeError, ValueError):
        return np.zeros(0)
    return arr


def _scale(v: Verdict, clean: np.ndarray) -> np.ndarray:
    """The scale a mutant must move a rule's measured value by: its SE, else its tolerance,
    else 1e-9 of the value (an exact quantity)."""
    for cand in (v.se, v.tolerance if not isinstance(v.tolerance, dict) else None):
        try:
            arr = np.broadcast_to(np.asarray(cand, dtype=float), clean.shape)
        except (TypeError, ValueError):
            continue
        if np.all(np.isfinite(arr)) and np.all(arr > 0):
            return arr
    if isinstance(v.tolerance, dict) and isinstance(v.tolerance.get("se"), float):
        se = v.tolerance["se"]
        if math.isfinite(se) and se > 0:
            return np.full(clean.shape, se)
    return 1e-9 * np.maximum(np.abs(clean), 1.0)


def moved(clean: Measurement, mutant: Measurement, n_se: float = 3.0) -> bool:
    """Whether ``mutant`` moved some rule's measured value by more than ``n_se`` of its scale
    (SE, else tolerance) from ``clean``: how a mutant of a claim that does not reproduce counts
    as caught (issue 44, item 5)."""
    by_name = {v.name: v for v in mutant.verdicts}
    for v in clean.verdicts:
        w = by_name.get(v.name)
        if w is None:
            return True
        a, b = _scalars(v), _scalars(w)
        if a.shape != b.shape:
            return True
        if not a.size:
            continue
        if np.any(np.isfinite(a) != np.isfinite(b)):
            return True
        ok = np.isfinite(a)
        if np.any(np.abs(a[ok] - b[ok]) > n_se * _scale(v, a)[ok]):
            return True
        if v.passed != w.passed:
            return True
    return False
