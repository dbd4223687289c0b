"""Shared machinery of the generated bad-input tests (``tests/<area>/test_bad_input.py``).

Each area registers one valid call per public callable (:class:`Case`); :func:`public_callables`
finds every callable in a package's ``__all__`` (one level into public submodules), so a new
public function without a registered call fails :func:`missing_cases`. Hypothesis then takes a
registered call, replaces one argument by a value from the bad classes of :func:`bad_values`
(chosen from the kind of the valid value) and :func:`check_outcome` demands one of: a
``ValueError``/``TypeError`` whose message names that argument, the documented
``theory.NumericalError``, or a finite result, within a few seconds.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import importlib.util
import inspect
import math
import numbers
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from contextlib import chdir, contextmanager
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import NumericalError

SECONDS = 5.0  # "nothing slower than a few seconds": a call over this fails
HANG = 20  # a call still running after this is interrupted and reported as a hang
# every call runs in this directory, so a mutated path argument never writes into the checkout
WORKDIR = tempfile.mkdtemp(prefix="theorylab-bad-input-")
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)


@dataclasses.dataclass
class Case:
    """One valid call ``fn(**kwargs)``; ``targets`` the arguments mutated (default: all of
    ``kwargs`` plus defaults of simple kinds); ``allow_inf`` for results where inf is meaningful;
    ``heavy`` for calls that compile an ODE solver or a training loop (seconds each): those run
    only in the slow exhaustive test."""

    fn: Callable
    kwargs: dict
    targets: tuple | None = None
    allow_inf: bool = False
    heavy: bool = False

    def target_names(self):
        if self.targets is not None:
            return tuple(self.targets)
        names = list(self.kwargs)
        try:
            params = inspect.signature(self.fn).parameters.values()
        except (TypeError, ValueError):
            params = ()
        for p in params:
            if p.name in names or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.default is not p.empty and _kind(p.name, p.default) in (
                "float",
                "int",
                "bool",
                "str",
                "rng",
            ):
                names.append(p.name)
        return tuple(names)

    def value(self, name):
        if name in self.kwargs:
            return self.kwargs[name]
        return inspect.signature(self.fn).parameters[name].default


def public_callables(package: str) -> dict[str, object]:
    """``{"pkg.name": obj}`` for every callable in ``__all__`` of ``package`` and of its public
    submodules (exceptions excluded), each object once."""
    found, seen = {}, set()

    def walk(mod, prefix, depth):
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                if depth < 2:
                    walk(obj, f"{prefix}.{name}", depth + 1)
                continue
            if not callable(obj) or id(obj) in seen:
                continue
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            seen.add(id(obj))
            found[f"{prefix}.{name}"] = obj

    walk(importlib.import_module(package), package, 0)
    return found


def resolve(path: str):
    mod, _, rest = path.partition(".")
    obj = importlib.import_module(mod)
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def missing_cases(package, cases: dict, not_entry_points: dict) -> list[str]:
    """Public callables of ``package`` with neither a registered call nor a stated reason."""
    covered = {id(resolve(k)) for k in (*cases, *not_entry_points)}
    return sorted(k for k, v in public_callables(package).items() if id(v) not in covered)


# --- classes of bad values --------------------------------------------------------------------


def _is_key(v):
    dt = getattr(v, "dtype", None)
    if dt is None:
        return False
    if jax.dtypes.issubdtype(dt, jax.dtypes.prng_key):
        return True
    return isinstance(v, jax.Array) and dt == jnp.uint32 and v.shape == (2,)


def _kind(name, v):
    if name in ("rng", "seed") and (v is None or isinstance(v, int | np.random.Generator)):
        return "rng"
    if name == "key" or _is_key(v):
        return "key"
    if isinstance(v, bool | np.bool_):
        return "bool"
    if isinstance(v, numbers.Integral):
        return "int"
    if isinstance(v, numbers.Real):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, np.ndarray | jax.Array):
        return "array" if v.ndim else "float"
    if isinstance(v, list | tuple) and v and all(isinstance(t, numbers.Real) for t in v):
        return "array"
    if callable(getattr(v, "init", None)) and callable(getattr(v, "update", None)):
        return "transform"
    if inspect.isfunction(v) or inspect.isbuiltin(v) or isinstance(v, np.ufunc):
        return "callable"
    return "other"


_SCALAR = [
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -1e308,
    0.0,
    -1.0,
    1e-300,
    1 + 1j,
    "1.0",
    None,
    True,
    10**400,
    -(10**400),
    np.array([1.0, 2.0]),
]
_INT = [0, -1, -(10**9), 10**12, 10**400, 2.5, "3", None, True, math.nan, 3.0]
_OTHER = [None, "x", 1.5, object()]


def _array_variants(a):
    if np.iscomplexobj(a):  # complex data: the real variants, less the one made complex
        return [v for v in _array_variants(np.real(a)) if not np.iscomplexobj(v)]
    a = np.asarray(a, dtype=float)
    out = []
    flat = a.ravel()
    if flat.size:
        for bad in (math.nan, math.inf):
            b = flat.copy()
            b[len(b) // 2] = bad
            out.append(b.reshape(a.shape))
        out += [
            a + 1j,
            a.astype(str),
            a.astype(object).tolist() + ["x"] if a.ndim == 1 else a.astype(str),
            a > 0,
            np.zeros_like(a),
            np.full_like(a, 1e300),
            -a,
            a[..., None],
            a[:-1] if a.shape[0] > 1 else a[:0],
        ]
    out += [np.float64(1.0), np.empty((0,) * max(a.ndim, 1)), "array", None]
    return out


def bad_values(name, valid):
    """The bad-value classes for an argument whose valid value is ``valid``."""
    kind = _kind(name, valid)
    if kind == "float":
        return list(_SCALAR)
    if kind == "int":
        return list(_INT)
    if kind == "bool":
        return ["no", 0, 1, None, 2, np.array([True, False])]
    if kind == "str":
        return ["no-such-option", "", 3, None, b"x", ["a"]]
    if kind == "rng":
        return ["seed", 1.5, -1, object(), [1.5, "a"], np.random.RandomState(0), 10**400]
    if kind == "key":
        k = jax.random.key(0)
        return [
            0,
            "key",
            np.array([1.0, 2.0]),
            jax.random.split(k, 3),
            None,
            1.5,
            jnp.zeros((3,), jnp.uint32),
        ]
    if kind == "array":
        return _array_variants(valid)
    if kind == "transform":
        return ["adam", 0.1, None, (lambda g: g)]
    if kind == "callable":
        return ["relu", 3, None, object()]
    return list(_OTHER)


# --- outcome ---------------------------------------------------------------------------------


class Hang(Exception):
    pass


@contextmanager
def _alarm(seconds):
    def handler(signum, frame):
        raise Hang(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def nonfinite_leaves(out, depth=0):
    """Paths of NaN (or infinite) leaves in a result (dataclasses, tuples, dicts, arrays)."""
    if depth > 6 or out is None or isinstance(out, str | bytes | bool):
        return []
    if isinstance(out, numbers.Number):
        return [] if np.isfinite(complex(out)) else [repr(out).lower()]
    if isinstance(out, np.ndarray | jax.Array):
        if isinstance(out, jax.core.Tracer):
            return []
        if jax.dtypes.issubdtype(out.dtype, jax.dtypes.prng_key):
            return []
        arr = np.asarray(out)
        if np.issubdtype(arr.dtype, np.inexact) and not np.isfinite(arr).all():
            return [f"array{arr.shape} with {'nan' if np.isnan(arr).any() else 'inf'}"]
        return []
    if isinstance(out, dict):
        items = out.items()
    elif isinstance(out, list | tuple):
        items = enumerate(out)
    elif dataclasses.is_dataclass(out):
        items = ((f.name, getattr(out, f.name, None)) for f in dataclasses.fields(out))
    else:
        return []
    bad = []
    for k, v in items:
        bad += [f"{k}.{p}" for p in nonfinite_leaves(v, depth + 1)]
    return bad


def call(case: Case, name=None, value=None):
    """Run the case with argument ``name`` replaced by ``value``; return (outcome, elapsed)."""
    kwargs = dict(case.kwargs)
    if name is not None:
        kwargs[name] = value
    t0 = time.perf_counter()
    with chdir(WORKDIR), _alarm(3 * HANG if case.heavy else HANG):
        try:
            out = case.fn(**kwargs)
            jax.block_until_ready(jax.tree_util.tree_leaves(out))
        except (ValueError, TypeError, NumericalError) as err:
            return err, time.perf_counter() - t0
    return out, time.perf_counter() - t0


def check_outcome(case: Case, name, value, label):
    """Assert the contract for one mutated call; ``label`` names it in failure messages."""
    shown = repr(value)[:60]
    try:
        out, elapsed = call(case, name, value)
        if elapsed > SECONDS:  # first calls pay imports and compilation: time a warm second call
            out, elapsed = call(case, name, value)
    except Hang as err:
        raise Hang(f"{label}({name}={shown}) hung: {err}") from None
    assert elapsed < SECONDS, f"{label}({name}={shown}) took {elapsed:.1f} s"
    if isinstance(out, NumericalError):
        return
    if isinstance(out, ValueError | TypeError):
        msg = str(out)
        # a shape that no longer matches another argument may be reported under either name
        reshaped = isinstance(value, np.ndarray) and np.shape(value) != np.shape(case.value(name))
        names = [*case.kwargs, name] if reshaped else [name]
        assert any(
            re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", msg) for n in names
        ), f"{label}({name}={shown}) raised {type(out).__name__} not naming `{name}`: {msg}"
        return
    bad = nonfinite_leaves(out)
    if case.allow_inf:
        bad = [p for p in bad if "inf" not in p]
    assert not bad, f"{label}({name}={shown}) returned non-finite {bad}"


def case_files(test_file):
    """``(cases, not_entry_points)`` merged from the ``_cases_*.py`` files beside ``test_file``:
    a paper's valid calls live in ``tests/<package>/_cases_<paper>.py`` (dicts ``CASES`` and,
    optionally, ``NOT_ENTRY_POINTS``), so adding a paper touches no shared test module."""
    cases, not_entry = {}, {}
    for path in sorted(Path(test_file).parent.glob("_cases_*.py")):
        spec = importlib.util.spec_from_file_location(f"_bad_input_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for src, dst in ((mod.CASES, cases), (getattr(mod, "NOT_ENTRY_POINTS", {}), not_entry)):
            clash = set(src) & set(dst)
            if clash:
                raise ValueError(f"{path.name} registers {sorted(clash)} twice")
            dst.update(src)
    return cases, not_entry


def make_tests(package, cases, not_entry_points, *, max_examples):
    """The three tests of an area: coverage of ``__all__``, each valid call finite, and
    ``max_examples`` generated bad calls (plus, marked slow, every bad value of every argument).
    The generated calls are derandomised: every run draws the same ``max_examples`` cases."""
    import pytest
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    pairs = [
        (label, arg)
        for label in sorted(cases)
        if not cases[label].heavy
        for arg in cases[label].target_names()
    ]
    labels = [
        pytest.param(k, marks=pytest.mark.slow) if cases[k].heavy else k for k in sorted(cases)
    ]

    def test_every_public_callable_has_a_valid_call():
        missing = missing_cases(package, cases, not_entry_points)
        assert not missing, f"register a valid call (Case) in this module for: {missing}"

    @pytest.mark.parametrize("label", labels)
    def test_valid_call_is_finite(label):
        out, elapsed = call(cases[label])
        if elapsed > SECONDS:  # imports and compilation on the first call: time a warm one
            out, elapsed = call(cases[label])
        assert not isinstance(out, Exception), f"{label}: the registered call raised {out!r}"
        bad = nonfinite_leaves(out)
        if cases[label].allow_inf:
            bad = [p for p in bad if "inf" not in p]
        assert not bad, f"{label}: the registered call returned non-finite {bad}"
        assert elapsed < SECONDS

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,  # the same draws on every run: CI never sees a new case by chance
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def test_bad_input(data):
        label, arg = data.draw(st.sampled_from(pairs), label="call")
        value = data.draw(st.sampled_from(bad_values(arg, cases[label].value(arg))), label="value")
        check_outcome(cases[label], arg, value, label)

    @pytest.mark.slow
    @pytest.mark.parametrize("label", sorted(cases))
    def test_bad_input_exhaustive(label):
        case = cases[label]
        failures = []
        for arg in case.target_names():
            for value in bad_values(arg, case.value(arg)):
                try:
                    check_outcome(case, arg, value, label)
                except (AssertionError, Hang) as err:
                    failures.append(str(err).splitlines()[0][:200])
                except Exception as err:
                    failures.append(
                        f"{label}({arg}={repr(value)[:40]}) crashed: "
                        f"{type(err).__name__}: {str(err)[:120]}"
                    )
        assert not failures, "\n".join(failures)

    return (
        test_every_public_callable_has_a_valid_call,
        test_valid_call_is_finite,
        test_bad_input,
        test_bad_input_exhaustive,
    )
