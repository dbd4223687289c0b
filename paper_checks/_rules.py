"""Typed pass rules: each returns a :class:`Verdict` holding whether it holds, the rule's text
and, where the claim states the paper's effect, the rule's power to see it.

A claim ends with ``measure(rule, rule, ..., detail=...)``; the claim's status combines its rules
(:mod:`paper_checks._measurement`) and the report prints each rule's text beside the numbers it
compared. No claim computes ``passed`` by hand.

**The paper's effect and power.** A rule that compares with a number or a direction the paper
states takes ``paper=`` (the paper's value of the measured quantity, in the rule's units) and
the measurement's standard error (``se=``; :func:`paired_gap` and :func:`equivalent` compute it
from their replicates). Its ``power`` is the probability that the rule would hold if the true
value were the paper's, under a normal measurement error of that SE (derived here, tested in
``tests/paper_checks/test_power.py`` against simulation). A failing rule with power >= 0.8 says
"not reproduced"; with less it says "inconclusive" and ``resolve`` gives the replicates (or the
SE) that would reach power 0.8. A rule without ``paper=`` (an identity, an exact value, a bound)
is two-valued.

- :func:`within` -- two-sided: ``|measured - expected| <= tol`` elementwise (a paper's value);
- :func:`at_most` / :func:`at_least` -- one-sided bounds (a paper's inequality);
- :func:`paired_gap` -- a paired difference over seeds beyond ``n_se`` standard errors;
- :func:`equivalent` -- a paired difference within ``±margin`` at ``n_se`` standard errors;
- :func:`slope_within` -- the least-squares slope of ``log y`` on ``log x``, two-sided;
- :func:`holds` -- a named boolean fact (an exact identity, an event), for what has no number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from _core.validation import as_array, check_bool, check_instance, check_int, check_scalar

from ._power import (
    Power,
    equivalence_power,
    one_sided_power,
    paired_power,
    two_sided_power,
)

__all__ = [
    "Verdict",
    "within",
    "at_most",
    "at_least",
    "paired_gap",
    "equivalent",
    "slope_within",
    "holds",
]


@dataclass(frozen=True)
class Verdict:
    """One rule applied: ``passed``, its ``rule`` text, the numbers it compared and, for a rule
    given the paper's effect, ``paper``, the measurement's ``se`` and the rule's :class:`Power`
    (None: a two-valued rule)."""

    name: str
    passed: bool
    rule: str
    measured: Any
    expected: Any
    tolerance: Any
    se: Any = None
    paper: Any = None
    power: Power | None = None
    excess: float = 0.0  # how far past its threshold, in tolerance (or SE) units: > 0 fails

    @property
    def two_valued(self) -> bool:
        return self.power is None


def _plain(x):
    """Floats, lists and dicts (numpy arrays and scalars converted), for the report."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def _values(x, name) -> np.ndarray:
    """The numbers of a scalar, sequence or dict (values in key order) as a float64 array.

    Text, None, objects, complex and ragged input raise naming ``name``; NaN is allowed (a
    failed measurement, or a bound computed from one, fails its rule)."""
    if isinstance(x, dict):
        parts = [_values(v, name).ravel() for v in x.values()]
        return np.concatenate(parts) if parts else np.zeros(0)
    return as_array(x, name, finite=False, allow_bool=True)


def _name(name):
    return check_instance(name, "name", str)


def _finite(arr: np.ndarray) -> bool:
    return bool(arr.size) and bool(np.all(np.isfinite(arr)))


def _effect(paper, se, replicates, name):
    """The paper's value and the SE of a rule given ``paper=`` (both as float arrays), and the
    replicate count behind the SE (None: unknown); None when the rule is two-valued."""
    if paper is None:
        if se is not None or replicates is not None:
            raise ValueError(f"rule {name!r}: `se` and `replicates` go with `paper=`.")
        return None
    p = _values(paper, "paper")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"`paper` of rule {name!r} must be finite; got {paper!r}.")
    if se is None:
        raise ValueError(
            f"rule {name!r}: `paper=` needs the measurement's standard error `se=` (the power "
            "to see the paper's effect is computed from it)."
        )
    s = _values(se, "se")
    if replicates is not None:
        replicates = check_int(replicates, "replicates", lower=1)
    return p, s, replicates


def within(
    measured, expected, tol, *, name: str = "value", paper=None, se=None, replicates=None
) -> Verdict:
    """Two-sided: ``|measured - expected| <= tol`` for every entry (NaN fails).

    ``measured``/``expected`` are scalars, arrays or dicts with the same keys; ``tol`` a scalar or
    of the same structure. ``paper``: the paper's value of ``measured`` (often ``expected``),
    with ``se`` its standard error and ``replicates`` the count behind it: the rule then has a
    power (module docstring); without, it is two-valued.
    """
    _name(name)
    m, e = _values(measured, "measured"), _values(expected, "expected")
    t = _values(tol, "tol")  # NaN (a tolerance from a failed SE) fails the rule, as NaN does
    if np.any(t < 0):
        raise ValueError(f"`tol` must be >= 0; got {t.min():g}.")
    if m.shape != e.shape:
        raise ValueError(f"within({name!r}): measured has shape {m.shape}, expected {e.shape}.")
    effect = _effect(paper, se, replicates, name)
    err = np.abs(m - e)
    ok = _finite(m) and bool(np.all(err <= t))
    worst = float(np.max(err / np.maximum(t, 1e-300))) if _finite(m) else math.inf
    power = (
        None
        if effect is None
        else two_sided_power(e, t, effect[1], effect[0], replicates=effect[2], name=name)
    )
    return Verdict(
        name,
        ok,
        f"|{name} - expected| <= tol (worst |error|/tol = {worst:.3g})",
        _plain(measured),
        _plain(expected),
        _plain(tol),
        *_extras(effect, power, se, paper),
        excess=worst - 1.0,
    )


def _ratio(num: float, den: float) -> float:
    """``num / den`` with the sign of ``num`` when ``den`` is 0 (a zero SE or tolerance)."""
    if den > 0:
        return num / den
    return 0.0 if num == 0 else math.copysign(math.inf, num)


def _extras(effect, power, se, paper) -> tuple:
    return (None, None, None) if effect is None else (_plain(se), _plain(paper), power)


def _bound(measured, bound, tol, name, paper, se, replicates, side) -> Verdict:
    _name(name)
    m, b = _values(measured, "measured"), _values(bound, "bound")
    tol = check_scalar(tol, "tol", lower=0.0)
    effect = _effect(paper, se, replicates, name)
    if side == "most":
        ok, rule = (
            _finite(m) and bool(np.all(m <= b + tol)),
            f"{name} <= bound" + (f" + {tol:g}" if tol else ""),
        )
        edge = b + tol
    else:
        ok, rule = (
            _finite(m) and bool(np.all(m >= b - tol)),
            f"{name} >= bound" + (f" - {tol:g}" if tol else ""),
        )
        edge = b - tol
    power = (
        None
        if effect is None
        else one_sided_power(edge, effect[1], effect[0], side=side, replicates=effect[2], name=name)
    )
    gap = np.ravel((m - edge) if side == "most" else (edge - m))
    unit = np.ravel(effect[1] if effect is not None else np.abs(edge) + tol)
    gap, unit = np.broadcast_arrays(gap, unit)
    excess = (
        max(_ratio(float(g), float(u)) for g, u in zip(gap, unit, strict=True))
        if _finite(m) and gap.size
        else math.inf
    )
    return Verdict(
        name,
        ok,
        rule,
        _plain(measured),
        _plain(bound),
        tol,
        *_extras(effect, power, se, paper),
        excess=excess,
    )


def at_most(
    measured, bound, *, tol: float = 0.0, name: str = "value", paper=None, se=None, replicates=None
) -> Verdict:
    """One-sided: ``measured <= bound + tol`` for every entry (NaN fails); ``paper``/``se`` as in
    :func:`within`."""
    return _bound(measured, bound, tol, name, paper, se, replicates, "most")


def at_least(
    measured, bound, *, tol: float = 0.0, name: str = "value", paper=None, se=None, replicates=None
) -> Verdict:
    """One-sided: ``measured >= bound - tol`` for every entry (NaN fails); ``paper``/``se`` as in
    :func:`within`."""
    return _bound(measured, bound, tol, name, paper, se, replicates, "least")


def _paired(a, b) -> tuple[float, float, int]:
    a, b = as_array(a, "a", finite=False), as_array(b, "b", finite=False)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(
            f"`a` and `b` must be 1-D with the same length >= 2 (paired replicates); got shapes "
            f"{a.shape} and {b.shape}."
        )
    d = a - b
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)), d.size


def _paper_scalar(paper, name) -> float | None:
    if paper is None:
        return None
    return check_scalar(paper, "paper", lower=-1e300, upper=1e300)


def paired_gap(
    a,
    b,
    *,
    n_se: float = 2.0,
    margin: float = 0.0,
    direction: str = "greater",
    name: str = "a - b",
    paper: float | None = None,
) -> Verdict:
    """A paired difference over replicates: ``mean(a - b) > margin + n_se * SE`` (``"greater"``)
    or ``mean(a - b) < -margin - n_se * SE`` (``"less"``); SE is ``std(ddof=1)/sqrt(k)``.
    ``paper``: the paper's value of ``mean(a - b)``; the rule then has a power (module
    docstring) and says how many pairs would give it power 0.8."""
    _name(name)
    n_se = check_scalar(n_se, "n_se", lower=0.0)
    margin = check_scalar(margin, "margin")  # negative: non-inferiority within |margin|
    paper = _paper_scalar(paper, name)
    mean, se, k = _paired(a, b)
    if direction == "greater":
        ok, rule = mean - n_se * se > margin, f"{name} > {margin:g} + {n_se:g} SE"
    elif direction == "less":
        ok, rule = mean + n_se * se < -margin, f"{name} < -{margin:g} - {n_se:g} SE"
    else:
        raise ValueError(f"`direction` must be 'greater' or 'less'; got {direction!r}.")
    ok = ok and math.isfinite(mean)
    power = None
    if paper is not None:
        power = paired_power(margin, n_se, se, paper, direction=direction, replicates=k, name=name)
    return Verdict(
        name,
        bool(ok),
        f"{rule} (paired over {k})",
        {"mean": mean, "se": se},
        {direction: margin},
        {"n_se": n_se, "se": se},
        None if paper is None else se,
        paper,
        power,
        excess=_ratio(
            margin + n_se * se - mean if direction == "greater" else mean + n_se * se + margin,
            se,
        )
        if math.isfinite(mean)
        else math.inf,
    )


def equivalent(
    a, b, *, margin: float, n_se: float = 2.0, name: str = "a - b", paper: float | None = None
) -> Verdict:
    """Paired equivalence: ``|mean(a - b)| + n_se * SE <= margin`` (the interval inside ±margin);
    ``paper`` as in :func:`paired_gap` (a paper claiming no difference states 0)."""
    _name(name)
    n_se = check_scalar(n_se, "n_se", lower=0.0)
    margin = check_scalar(margin, "margin", lower=0.0)
    paper = _paper_scalar(paper, name)
    mean, se, k = _paired(a, b)
    ok = math.isfinite(mean) and abs(mean) + n_se * se <= margin
    power = None
    if paper is not None:
        power = equivalence_power(margin, n_se, se, paper, replicates=k, name=name)
    return Verdict(
        name,
        bool(ok),
        f"|{name}| + {n_se:g} SE <= {margin:g} (paired over {k})",
        {"mean": mean, "se": se},
        0.0,
        margin,
        None if paper is None else se,
        paper,
        power,
        excess=_ratio(abs(mean) + n_se * se - margin, se) if math.isfinite(mean) else math.inf,
    )


def _slope(u: np.ndarray, v: np.ndarray) -> float:
    """Least-squares slope of ``v`` on ``u`` (non-constant), each scaled by its largest magnitude
    first so that values near the float64 limits neither overflow nor lose the fit (``polyfit``
    returns 0 for ``u = v = 1e200 x``); a slope beyond float64 is inf."""
    su, sv = np.abs(u).max(), np.abs(v).max() or 1.0
    a, b = u / su, v / sv
    a, b = a - a.mean(), b - b.mean()
    with np.errstate(over="ignore"):
        return float(sv / su * (a @ b) / (a @ a))


def slope_within(
    x,
    y,
    expected: float,
    tol: float,
    *,
    log: bool = True,
    name: str = "slope",
    paper: float | None = None,
    se: float | None = None,
) -> Verdict:
    """Least-squares slope of ``log y`` on ``log x`` (``log=False``: of ``y`` on ``x``) within
    ``expected ± tol``; a NaN or infinite point (a failed measurement), a point outside the log
    domain (``<= 0``) or ``x`` without two distinct values (no slope) fails the rule. ``paper``
    and ``se`` (of the slope) as in :func:`within`."""
    _name(name)
    effect = _effect(paper, se, None, name)
    log = check_bool(log, "log")
    expected = check_scalar(expected, "expected")
    tol = check_scalar(tol, "tol", lower=0.0)
    x, y = as_array(x, "x", finite=False), as_array(y, "y", finite=False)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(
            f"`x` and `y` must be 1-D arrays of equal length >= 2 (slope_within({name!r})); "
            f"got shapes {x.shape} and {y.shape}."
        )
    s = math.nan
    if (
        np.isfinite(x).all()
        and np.isfinite(y).all()
        and not (log and (x.min() <= 0 or y.min() <= 0))
    ):
        u, v = (np.log(x), np.log(y)) if log else (x, y)
        if u.max() > u.min():
            s = _slope(u, v)
    ok = math.isfinite(s) and abs(s - expected) <= tol
    kind = "log-log slope" if log else "slope"
    power = (
        None if effect is None else two_sided_power(expected, tol, effect[1], effect[0], name=name)
    )
    return Verdict(
        name,
        bool(ok),
        f"|{kind} - {expected:g}| <= {tol:g}",
        s,
        expected,
        tol,
        *_extras(effect, power, se, paper),
        excess=_ratio(abs(s - expected) - tol, tol) if math.isfinite(s) else math.inf,
    )


def holds(condition: bool, *, name: str, rule: str, measured: Any = None) -> Verdict:
    """A named fact with no tolerance: an exact identity or an event (``rule`` says which).
    ``condition`` is a bool (Python, NumPy, or a 0-d boolean array)."""
    _name(name)
    check_instance(rule, "rule", str)
    if getattr(condition, "ndim", None) == 0 and str(getattr(condition, "dtype", "")) == "bool":
        condition = bool(condition)
    condition = check_bool(condition, "condition")
    m = _plain(measured) if measured is not None else condition
    return Verdict(name, bool(condition), rule, m, True, 0.0, excess=0.0 if condition else 1.0)
