"""Mutants: plausible bugs in the library code a claim or property exercises, applied by patching
a dotted ``module.attribute`` target for the length of one run."""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ._memo import OWN, clear_caches

__all__ = ["Mutant", "patch", "wrap", "scaled", "find_mutant", "resolve_target"]


@dataclass(frozen=True)
class Mutant:
    """A plausible bug: ``apply()`` is a context manager that patches it in for one run;
    ``target`` the dotted path it patches (:func:`resolve_target` checks that it exists)."""

    name: str
    description: str
    apply: Callable[[], contextlib.AbstractContextManager] = field(repr=False)
    target: str = ""


def _check_mutant(target, description: str) -> None:
    for v, arg in ((target, "target"), (description, "description")):
        if not isinstance(v, str) or not v:
            raise TypeError(f"`{arg}` must be a non-empty str; got {v!r}.")
    if len(parts := target.split(".")) < 2 or not all(p.isidentifier() for p in parts):
        raise ValueError(
            "`target` must be a dotted path 'module.attribute' (e.g. "
            f"'theory.bbp.bbp_top_eigenvalue'); got {target!r}."
        )


def resolve_target(target: str):
    """``"pkg.mod.attr"`` -> (owner object, attribute name, current value)."""
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:-1]:
            owner = getattr(owner, p)
        return owner, parts[-1], getattr(owner, parts[-1])
    raise ValueError(f"mutant target {target!r} does not name a module attribute.")


@contextlib.contextmanager
def _patched(target: str, make_new: Callable[[Any], Any]) -> Iterator[None]:
    """Replace ``target`` and every other binding of the same object in this package's modules
    (``from x import f`` copies included); restore all on exit."""
    owner, attr, old = resolve_target(target)
    new = make_new(old)
    done = [(owner, attr)]
    setattr(owner, attr, new)
    immutable = isinstance(old, int | float | str | bool | tuple | type(None))
    if not immutable:  # a float constant is rebound only where it is named
        for name, mod in list(sys.modules.items()):
            if mod is None or name.split(".")[0] not in OWN:
                continue
            for key, val in list(vars(mod).items()):
                if val is old and (mod, key) != (owner, attr):
                    setattr(mod, key, new)
                    done.append((mod, key))
    clear_caches()
    try:
        yield
    finally:
        for mod, key in done:
            setattr(mod, key, old)
        clear_caches()


def patch(target: str, new: Any, description: str, *, name: str | None = None) -> Mutant:
    """Mutant replacing the object at dotted path ``target`` by ``new``."""
    _check_mutant(target, description)
    return Mutant(
        name or f"{target.rsplit('.', 1)[-1]}_patched",
        description,
        lambda: _patched(target, lambda old: new),
        target,
    )


def wrap(
    target: str,
    wrapper: Callable[[Callable], Callable],
    description: str,
    *,
    name: str | None = None,
) -> Mutant:
    """Mutant replacing the function at ``target`` by ``wrapper(original)``."""
    _check_mutant(target, description)
    if not callable(wrapper):
        raise TypeError(f"`wrapper` must be callable (original -> replacement); got {wrapper!r}.")
    return Mutant(
        name or f"{target.rsplit('.', 1)[-1]}_wrapped",
        description,
        lambda: _patched(target, wrapper),
        target,
    )


def scaled(factor: float) -> Callable[[Callable], Callable]:
    """A wrapper for :func:`wrap`: the original's (array or float) output times ``factor``."""

    from _core.validation import check_scalar

    factor = check_scalar(factor, "factor", lower=-1e300, upper=1e300)

    def wrapper(f):
        @functools.wraps(f)
        def g(*args, **kwargs):
            return f(*args, **kwargs) * factor

        return g

    return wrapper


def find_mutant(owner, name: str) -> Mutant:
    """The mutant called ``name`` of a claim or property; ``ValueError`` listing the declared."""
    for m in owner.mutants:
        if m.name == name:
            return m
    known = ", ".join(m.name for m in owner.mutants) or "none"
    raise ValueError(f"{owner.id!r} has no mutant {name!r}; declared: {known}.")
