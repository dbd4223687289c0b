"""Memoised simulations shared by claims and figures, and the one switch that clears them (and
the library's own caches) so that a mutant or a new seed never reads a stale result."""

from __future__ import annotations

import functools
import sys

__all__ = ["memo", "clear_caches", "OWN"]

#: the packages whose module attributes a mutant patches and whose caches are cleared
OWN = ("theory", "estimators", "spectral", "dynamics", "nn", "paper_checks", "figures")
_MEMOS: list = []


def memo(f):
    """``functools.cache`` for simulations shared by claims and figures; cleared by
    :func:`clear_caches` (so a mutant or a new seed never reads a stale result)."""
    if not callable(f):
        raise TypeError(f"`f` must be a callable (the simulation to memoise); got {f!r}.")
    cached = functools.cache(f)
    _MEMOS.append(cached)
    return cached


def clear_caches(compiled: bool = True) -> None:
    """Clear every :func:`memo` cache, every ``functools`` cache of this package's modules (the
    library's own memoised thresholds too, so a result computed under a mutant never outlives
    it) and, if ``compiled``, JAX's compiled programs (a jitted function traced before a mutant
    was patched in would keep the unpatched code; without a patch they can stay)."""
    for m in _MEMOS:
        m.cache_clear()
    for name, mod in list(sys.modules.items()):
        if mod is None or name.split(".")[0] not in OWN:
            continue
        for val in list(vars(mod).values()):
            if callable(getattr(val, "cache_clear", None)) and hasattr(val, "cache_info"):
                val.cache_clear()
    if compiled and "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
