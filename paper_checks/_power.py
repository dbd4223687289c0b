"""The power of a rule to see the paper's effect, and the replicates that would give it power.

A rule compares a measurement ``X`` with a threshold. If the true value were the paper's, with
``X ~ N(paper, se^2)`` (the normal approximation behind every SE-based rule here), the rule would
hold with probability ``power(se)`` (derived here; ``tests/paper_checks/test_power.py`` checks
each form against simulation):

- two-sided ``|X - e| <= t``: ``Phi((e + t - paper)/se) - Phi((e - t - paper)/se)``, a product
  over the entries of an array rule;
- one-sided ``X >= b`` / ``X <= b``: ``Phi((paper - b)/se)`` / ``Phi((b - paper)/se)``;
- paired gap ``mean - z se > m``: ``Phi((paper - m)/se - z)`` (mirrored for ``"less"``);
- equivalence ``|mean| + z se <= m``: ``Phi((c - paper)/se) - Phi((-c - paper)/se)``,
  ``c = m - z se`` (0 when ``c <= 0``).

Each decreases as ``se`` grows once the paper's value satisfies the rule, so the SE at which the
power reaches :data:`TARGET` is found by bisection on the factor ``f`` in ``se -> f se``; an SE
falling as ``1/sqrt(n)``, that is ``n / f^2`` replicates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

__all__ = [
    "TARGET",
    "Power",
    "power_of",
    "two_sided_power",
    "one_sided_power",
    "paired_power",
    "equivalence_power",
]

#: the probability with which the paper's effect must pass a rule for its failure to count
TARGET = 0.8


@dataclass(frozen=True)
class Power:
    """A rule's ``power`` at the measured SE to see the paper's effect; ``se_factor`` the factor
    on that SE giving power :data:`TARGET` (1 when it already has it); ``replicates`` the count
    behind the SE (None: not known) and ``needed`` the count that would give it."""

    power: float
    se_factor: float
    replicates: int | None = None

    @property
    def powered(self) -> bool:
        return self.power >= TARGET

    @property
    def needed(self) -> int | None:
        if self.replicates is None:
            return None
        return math.ceil(self.replicates / self.se_factor**2 - 1e-9)

    def text(self) -> str:
        """What would resolve an underpowered rule, in words."""
        head = f"power {self.power:.2f} to see the paper's effect"
        if self.powered:
            return head
        if self.replicates is not None:
            return f"{head}; about {self.needed} replicates (now {self.replicates}) for {TARGET:g}"
        return f"{head}; an SE {1 / self.se_factor:.3g}x smaller for {TARGET:g}"


def power_of(prob: Callable[[float], float], replicates: int | None, what: str) -> Power:
    """:class:`Power` from ``prob(f)``, the probability that the rule holds at the paper's value
    when the SE is ``f`` times the measured one (decreasing in ``f``)."""
    p = float(prob(1.0))
    if not math.isfinite(p):  # a NaN SE (a failed measurement): no power, nothing to resolve
        return Power(0.0, math.nan, replicates)
    if p >= TARGET:
        return Power(p, 1.0, replicates)
    lo, hi = 1e-9, 1.0
    if prob(lo) < TARGET:
        raise ValueError(
            f"{what}: the paper's value does not pass the rule even without noise (probability "
            f"{prob(lo):.3g} < {TARGET}); the rule cannot test the paper's effect."
        )
    for _ in range(80):  # bisection in log f: prob(lo) >= TARGET > prob(hi)
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if prob(mid) >= TARGET else (lo, mid)
    return Power(p, lo, replicates)


def _se(se, name: str) -> np.ndarray:
    se = np.asarray(se, dtype=float)
    if np.any(se < 0):
        raise ValueError(f"`se` of rule {name!r} must be >= 0; got {se.min():g}.")
    return np.maximum(se, 1e-300)


def two_sided_power(expected, tol, se, paper, *, replicates=None, name="value") -> Power:
    """Power of ``|X - expected| <= tol`` (every entry) at ``X ~ N(paper, se^2)``."""
    e, t, p, s = (np.asarray(v, dtype=float) for v in (expected, tol, paper, _se(se, name)))

    def prob(f):
        z = f * s
        return float(np.prod(ndtr((e + t - p) / z) - ndtr((e - t - p) / z)))

    return power_of(prob, replicates, name)


def one_sided_power(bound, se, paper, *, side: str, replicates=None, name="value") -> Power:
    """Power of ``X >= bound`` (``side="least"``) or ``X <= bound`` (``"most"``), every entry."""
    b, p, s = (np.asarray(v, dtype=float) for v in (bound, paper, _se(se, name)))
    sign = 1.0 if side == "least" else -1.0

    def prob(f):
        return float(np.prod(ndtr(sign * (p - b) / (f * s))))

    return power_of(prob, replicates, name)


def paired_power(margin, n_se, se, paper, *, direction: str, replicates: int, name) -> Power:
    """Power of ``mean - n_se se > margin`` (``"greater"``; ``mean + n_se se < -margin`` for
    ``"less"``) when the mean difference is the paper's ``paper``."""
    sign = 1.0 if direction == "greater" else -1.0
    s = float(_se(se, name))

    def prob(f):
        return float(ndtr((sign * paper - margin) / (f * s) - n_se))

    return power_of(prob, replicates, name)


def equivalence_power(margin, n_se, se, paper, *, replicates: int, name) -> Power:
    """Power of ``|mean| + n_se se <= margin`` when the mean difference is the paper's."""
    s = float(_se(se, name))

    def prob(f):
        c = margin - n_se * f * s
        return 0.0 if c <= 0 else float(ndtr((c - paper) / (f * s)) - ndtr((-c - paper) / (f * s)))

    return power_of(prob, replicates, name)
