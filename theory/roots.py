"""Bracketed root finding that reports "no root in the bracket" instead of returning an end point.

Wraps :func:`scipy.optimize.brentq` (no hand-written root finder); the result says whether a sign
change was found. Callers that need a root decide what "none" means (no outlier, BBP-like
threshold not crossed, ...), so nothing downstream silently reads a bracket end as a root.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from _core.validation import call_scalar, check_callable, check_int, check_scalar

__all__ = ["RootResult", "find_root", "NoRootError"]


class NoRootError(ValueError):
    """Raised by :meth:`RootResult.value` when no sign change lies in the bracket."""


@dataclass(frozen=True)
class RootResult:
    """Outcome of a bracketed root search.

    ``found`` is False when f has the same sign at both ends; then ``root`` is None and
    ``message`` says so with the end values.
    """

    root: float | None
    found: bool
    bracket: tuple[float, float]
    f_bracket: tuple[float, float]
    iterations: int = 0
    function_calls: int = 0
    message: str = ""

    def value(self) -> float:
        """The root, or :class:`NoRootError` with the message when there is none."""
        if not self.found or self.root is None:
            raise NoRootError(self.message)
        return self.root

    def __repr__(self):
        if self.found:
            return f"RootResult(root={self.root!r}, iterations={self.iterations})"
        return f"RootResult(found=False, bracket={self.bracket})"


def find_root(
    f,
    lo: float,
    hi: float,
    *,
    xtol: float = 1e-14,
    rtol: float = 4 * np.finfo(float).eps,
    maxiter: int = 200,
    expand: float | None = None,
    max_expand: int = 60,
) -> RootResult:
    """Root of a continuous f in [lo, hi] by Brent's method, honest about a missing sign change.

    Brent 1973, ch. 4 (scipy's ``brentq``); standard numerics, no paper formula.

    Parameters
    ----------
    f : callable
        Scalar function, continuous on the bracket.
    lo, hi : float
        Bracket ends, lo < hi. ``hi`` may be ``inf`` when ``expand`` is given.
    expand : float, optional
        When f(lo), f(hi) have the same sign, slide the bracket outwards with widths growing by
        the factor ``expand`` (at most ``max_expand`` times) until the sign changes; for monotone
        f on a half-line. Without it, a missing sign change is reported at once.

    Returns
    -------
    RootResult
        ``found`` False (and ``root`` None) when no sign change was found.

    >>> round(find_root(lambda x: x * x - 2.0, 0.0, 2.0).value(), 12)
    1.414213562373
    >>> find_root(lambda x: x * x + 1.0, -1.0, 1.0).found
    False
    """
    f = check_callable(f, "f")
    lo = check_scalar(lo, "lo")
    hi = check_scalar(hi, "hi", finite=False)
    xtol = check_scalar(xtol, "xtol", lower=0.0, closed="neither")
    rtol = check_scalar(rtol, "rtol", lower=4 * np.finfo(float).eps, upper=0.5)
    maxiter = check_int(maxiter, "maxiter", lower=1, upper=10**6)
    max_expand = check_int(max_expand, "max_expand", lower=0, upper=1000)
    if expand is not None:
        expand = check_scalar(expand, "expand", lower=1.0, upper=1e6, closed="neither")
    if not lo < hi:
        raise ValueError(f"`lo` must be < `hi`; got lo={lo}, hi={hi}.")
    if math.isinf(hi):
        if expand is None:
            raise ValueError("`hi` may be infinite only together with `expand`.")
        hi = lo + 1.0 if lo >= 0 else abs(lo) + 1.0
    flo, fhi = call_scalar(f, lo, "f"), call_scalar(f, hi, "f")
    calls, width = 2, hi - lo
    grow = 1.0 if expand is None else expand
    for _ in range(0 if expand is None else max_expand):
        if flo == 0 or fhi == 0 or (flo < 0) != (fhi < 0):
            break
        # same sign at both ends of a monotone f: the root, if any, lies beyond hi
        width *= grow
        lo, flo = hi, fhi
        hi = lo + width
        if not math.isfinite(hi):
            break
        fhi = call_scalar(f, hi, "f")
        calls += 1
    if math.isnan(flo) or math.isnan(fhi):
        raise ValueError(f"`f` is NaN at a bracket end: f({lo})={flo}, f({hi})={fhi}.")
    if flo == 0.0:
        return RootResult(lo, True, (lo, hi), (flo, fhi), 0, calls, "root at the lower end")
    if fhi == 0.0:
        return RootResult(hi, True, (lo, hi), (flo, fhi), 0, calls, "root at the upper end")
    if (flo < 0) == (fhi < 0):
        return RootResult(
            None,
            False,
            (lo, hi),
            (flo, fhi),
            0,
            calls,
            f"no sign change in the bracket [{lo:g}, {hi:g}]: f = {flo:.3g} and "
            f"{fhi:.3g} at its ends",
        )
    from scipy.optimize import brentq  # imported on first use: scipy.optimize loads in ~1 s

    root, info = brentq(
        f,
        lo,
        hi,
        xtol=xtol,
        # scipy is untyped here: the checker takes rtol's type from its float64 default value
        rtol=rtol,  # pyright: ignore[reportArgumentType]
        maxiter=maxiter,
        full_output=True,
        disp=False,
    )
    if not info.converged:
        return RootResult(
            None,
            False,
            (lo, hi),
            (flo, fhi),
            info.iterations,
            calls + info.function_calls,
            f"Brent did not converge: {info.flag}",
        )
    return RootResult(
        float(root),
        True,
        (lo, hi),
        (flo, fhi),
        info.iterations,
        calls + info.function_calls,
        "converged",
    )
