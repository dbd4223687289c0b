"""The claims registry: each claim of a paper, its sizes per scale, its mutants and its check.

A claim module (``paper_checks/<area>.py``) registers its claims with :func:`claim`; the registry
imports every public module of the package on first use, so adding an area needs no edit here::

    SIZES = sizes(smoke=dict(n=200, trials=2), quick=dict(n=2000, trials=10),
                  full=dict(n=4000, trials=40))

    @claim("rmt.bbp", paper=..., statement=..., where=..., sizes=SIZES,
           mutants=[wrap("theory.bbp.bbp_top_eigenvalue", scaled(1.05),
                         "outlier location 5 % high")])
    def _bbp(size, seed) -> Measurement:
        sim = simulate(size.n, size.trials, seed)
        return measure(within(sim.lam, theory, tol, name="top_eigenvalue"), detail=...)

``size`` is the row of the table for the scale asked for (attributes, plus ``size.scale``);
``seed`` changes every random draw of the check. A mutant is a plausible bug in the library code
the claim exercises, applied by patching for the length of one run (:func:`run_claim`).

A claim that is a large Monte Carlo declares its independent replicates (:class:`Replicates`,
``replicates=`` of :func:`claim`) and its check obtains them through :func:`run_replicates`: in
a loop here, or computed beforehand in chunks on a Dask cluster (``theorylab._tasks``).
"""

from __future__ import annotations

import contextlib
import contextvars
import fnmatch
import functools
import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from threadpoolctl import threadpool_limits
from tqdm import tqdm

from _core.runtime import float64

__all__ = [
    "Measurement",
    "Claim",
    "Registry",
    "REGISTRY",
    "claim",
    "SCALES",
    "Sizes",
    "sizes",
    "Mutant",
    "patch",
    "wrap",
    "scaled",
    "memo",
    "clear_caches",
    "Replicates",
    "run_replicates",
    "compute_plan",
    "run_claim",
]

SCALES = ("smoke", "quick", "full")
#: the packages whose module attributes a mutant patches (every binding of the patched object)
_OWN = ("theory", "estimators", "spectral", "dynamics", "nn", "paper_checks", "figures")


@dataclass(frozen=True)
class Measurement:
    """What a check measured and how it compares with the claim.

    Built by :func:`paper_checks.measure` from typed rules: ``measured``, ``expected`` and
    ``tolerance`` are floats, or lists / dicts of floats; ``passed`` the conjunction of the rules;
    ``rule`` their text; ``detail`` a short line for the report.
    """

    measured: Any
    expected: Any
    tolerance: Any
    passed: bool
    detail: str = ""
    rule: str = ""


class Sizes(Mapping):
    """One row of a size table: a read-only mapping with attribute access and ``.scale``."""

    def __init__(self, row: dict):
        self._row = MappingProxyType(dict(row))

    def __getitem__(self, key):
        return self._row[key]

    def __iter__(self):
        return iter(self._row)

    def __len__(self):
        return len(self._row)

    def __getattr__(self, key):
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self._row[key]
        except KeyError:
            raise AttributeError(f"size table has no entry {key!r}") from None

    def __repr__(self):
        return f"Sizes({dict(self._row)!r})"


def sizes(**table: dict) -> dict[str, Sizes]:
    """A claim module's size table: one dict per scale, every scale of :data:`SCALES` given,
    every row with the same keys."""
    if set(table) != set(SCALES):
        raise ValueError(f"a size table needs exactly the scales {SCALES}; got {tuple(table)}.")
    for s, row in table.items():
        if not isinstance(row, dict) or not all(isinstance(k, str) for k in row):
            raise TypeError(f"`{s}` must be a dict of sizes keyed by name; got {row!r}.")
    keys = {s: set(row) for s, row in table.items()}
    if len({frozenset(k) for k in keys.values()}) != 1:
        raise ValueError(f"every scale of a size table needs the same keys; got {keys}.")
    return {s: Sizes({**table[s], "scale": s}) for s in SCALES}


NO_SIZES = sizes(smoke={}, quick={}, full={})


# ------------------------------------------------------------------------------------ mutants
@dataclass(frozen=True)
class Mutant:
    """A plausible bug: ``apply()`` is a context manager that patches it in for one run."""

    name: str
    description: str
    apply: Callable[[], contextlib.AbstractContextManager] = field(repr=False)


def _check_mutant(target, description: str) -> None:
    for v, arg in ((target, "target"), (description, "description")):
        if not isinstance(v, str) or not v:
            raise TypeError(f"`{arg}` must be a non-empty str; got {v!r}.")
    if len(parts := target.split(".")) < 2 or not all(p.isidentifier() for p in parts):
        raise ValueError(
            "`target` must be a dotted path 'module.attribute' (e.g. "
            f"'theory.bbp.bbp_top_eigenvalue'); got {target!r}."
        )


def _resolve(target: str):
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
    owner, attr, old = _resolve(target)
    new = make_new(old)
    done = [(owner, attr)]
    setattr(owner, attr, new)
    immutable = isinstance(old, int | float | str | bool | tuple | type(None))
    if not immutable:  # a float constant is rebound only where it is named
        for name, mod in list(sys.modules.items()):
            if mod is None or name.split(".")[0] not in _OWN:
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


# ------------------------------------------------------------------------------------ caches
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
        if mod is None or name.split(".")[0] not in _OWN:
            continue
        for val in list(vars(mod).values()):
            if callable(getattr(val, "cache_clear", None)) and hasattr(val, "cache_info"):
                val.cache_clear()
    if compiled and "jax" in sys.modules:
        sys.modules["jax"].clear_caches()


# ------------------------------------------------------------------------------------ replicates
@dataclass(frozen=True)
class Replicates:
    """``count`` independent Monte Carlo replicates: replicate ``i`` is ``fn(*args, i)``, a
    function of its arguments alone (the seed among them), so its result is the same in whichever
    process, chunk or order it runs. ``fn`` is a module-level function and ``args`` hashable;
    ``label`` names the loop in progress bars; ``needs`` the units ``fn`` reads through
    :func:`shared` (see :func:`unit`; their time is not counted in a claim's seconds)."""

    fn: Callable[..., Any]
    args: tuple
    count: int
    label: str = field(default="", compare=False)
    needs: tuple[Replicates, ...] = field(default=(), compare=False)

    def run(self, start: int = 0, stop: int | None = None, *, progress: bool = False) -> list:
        """Replicates ``start`` to ``stop`` (default: to the end), in index order. Each runs on
        one BLAS thread, as on a Dask worker, so a result does not depend on where it ran."""
        with threadpool_limits(limits=1, user_api="blas"):
            return self._run(start, stop, progress)

    def _run(self, start: int, stop: int | None, progress: bool = False) -> list:
        idx = range(start, self.count if stop is None else stop)
        with float64():  # JAX's x64 switch is per thread
            return [
                self.fn(*self.args, i)
                for i in tqdm(idx, desc=self.label, leave=False, disable=None if progress else True)
            ]


#: the replicate results a claim's check reads instead of computing them (set by run_claim)
_PROVIDED: contextvars.ContextVar[Mapping[Replicates, list] | None] = contextvars.ContextVar(
    "replicates", default=None
)


def run_replicates(reps: Replicates) -> list:
    """The results of ``reps`` in index order: computed here in a loop, or, inside
    :func:`run_claim` given ``results``, those computed beforehand (chunks on a cluster)."""
    provided = _PROVIDED.get()
    if provided is None:
        return reps.run(progress=True)
    try:
        return provided[reps]
    except KeyError:
        raise ValueError(
            f"the check runs replicates it does not declare: {reps.fn.__qualname__}"
            f"{reps.args} x {reps.count}; add them to the claim's `replicates`."
        ) from None


def compute_plan(plan: Sequence[Replicates], threads: int = 2) -> dict[Replicates, list]:
    """The results of a claim's ``plan`` computed by ``threads`` threads of this process, in the
    form :func:`run_claim` reads (``{Replicates: results}``): first the units it ``needs`` (each
    once; they are :func:`memo` results, which :func:`shared` then reads), then every unit and
    chunk of about ``count / (2 threads)`` replicates. Each result is the serial one: replicate
    ``i`` depends on its arguments alone and BLAS runs one thread, as in :meth:`Replicates.run`.
    Threads pay where one XLA program leaves cores idle (small compute-bound programs); a
    replicate that holds the GIL runs as it would serially."""
    from concurrent.futures import ThreadPoolExecutor

    from _core.validation import check_int

    threads = check_int(threads, "threads", lower=1, upper=512)

    def chunks(r):
        step = max(1, -(-r.count // (2 * threads)))
        return [(r, lo, min(lo + step, r.count)) for lo in range(0, r.count, step)]

    needs = list(dict.fromkeys(n for r in plan for n in r.needs))
    jobs = [job for r in dict.fromkeys(plan) for job in chunks(r)]
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda n: n._run(0, 1), needs))
        outs = list(pool.map(lambda job: job[0]._run(job[1], job[2]), jobs))
    results: dict[Replicates, list] = {}
    for (r, _, _), out in zip(jobs, outs, strict=True):
        results.setdefault(r, []).extend(out)
    return results


def _call(fn, args, i):
    return fn(*args)


def unit(fn: Callable[..., Any], *args, label: str = "", needs=()) -> Replicates:
    """``fn(*args)`` as one unit of work (``fn`` module-level, ``args`` hashable): the claims
    that declare the same unit in ``replicates=`` share one task on a cluster, and their checks
    read its result through :func:`computed`. ``needs``: units that ``fn`` starts from and reads
    through :func:`shared` (a pre-trained source model several units adapt); on a cluster each
    runs once, as a task of its own, and its result is handed to every unit that needs it."""
    needs = tuple(needs)
    if not all(isinstance(n, Replicates) and n.count == 1 for n in needs):
        raise TypeError(f"`needs` must hold units (`unit(fn, *args)`); got {needs!r}.")
    return Replicates(_call, (fn, args), 1, label=label or getattr(fn, "__name__", ""), needs=needs)


#: the results of a unit's ``needs``, handed to it on a cluster (set by replicate_chunk)
_GIVEN: contextvars.ContextVar[Mapping[Replicates, list] | None] = contextvars.ContextVar(
    "given", default=None
)


@contextlib.contextmanager
def giving(results: Mapping[Replicates, list] | None) -> Iterator[None]:
    """Inside, :func:`shared` reads ``results`` (the ``needs`` of the unit being run)."""
    token = _GIVEN.set(results)
    try:
        yield
    finally:
        _GIVEN.reset(token)


def shared(fn: Callable[..., Any], *args):
    """``fn(*args)`` for what several units start from: the result handed to this unit when it
    declares ``unit(fn, *args)`` among its ``needs`` and runs on a cluster, else computed here
    (``fn`` a :func:`memo`: once per process). Both are the same seeded computation."""
    given = _GIVEN.get() or {}
    res = given.get(unit(fn, *args))
    return fn(*args) if res is None else res[0]


def computed(fn: Callable[..., Any], *args):
    """``fn(*args)``: computed here, or, inside :func:`run_claim` given ``results``, the result
    of the declared :func:`unit`."""
    return run_replicates(unit(fn, *args))[0]


# ------------------------------------------------------------------------------------ claims
@dataclass(frozen=True)
class Claim:
    """A paper's claim: ``id`` is ``AREA.NAME``; ``where`` the theorem/table/figure stating it;
    ``sizes`` its row per scale; ``mutants`` the bugs it must catch; ``replicates`` (optional)
    ``(size, seed) -> [Replicates, ...]``, the Monte Carlo its check runs through
    :func:`run_replicates`."""

    id: str
    paper: str
    statement: str
    where: str
    check: Callable[[Sizes, int], Measurement] = field(repr=False)
    sizes: dict[str, Sizes] = field(default_factory=lambda: NO_SIZES, repr=False)
    mutants: tuple[Mutant, ...] = ()
    replicates: Callable[[Sizes, int], Sequence[Replicates]] | None = field(
        default=None, repr=False
    )

    def mutant(self, name: str) -> Mutant:
        return find_mutant(self, name)

    def replicate_plan(self, scale: str, seed: int) -> list[Replicates]:
        """The replicates the check runs at ``scale`` with ``seed`` (none when undeclared)."""
        return [] if self.replicates is None else list(self.replicates(self.sizes[scale], seed))


def run_claim(
    c: Claim,
    scale: str,
    seed: int = 0,
    mutant: str | None = None,
    results: Mapping[Replicates, list] | None = None,
    threads: int = 1,
) -> Measurement:
    """Run ``c`` at ``scale`` with ``seed``, under the mutant named ``mutant`` if given; with
    ``results`` (the replicates of :meth:`Claim.replicate_plan` already computed, under the same
    mutant) the check reads them instead of computing them, and any other is an error. Without
    ``results`` and with ``threads`` > 1, the declared replicates are first computed by that
    many threads (:func:`compute_plan`; the same numbers)."""
    if scale not in SCALES:
        raise ValueError(f"`scale` must be one of {SCALES}; got {scale!r}.")
    from _core.validation import check_int

    threads = check_int(threads, "threads", lower=1, upper=512)
    size = c.sizes[scale]
    with float64(), c.mutant(mutant).apply() if mutant else contextlib.nullcontext():
        plan = c.replicate_plan(scale, seed) if results is None and threads > 1 else []
        with providing(compute_plan(plan, threads) if plan else results):
            return c.check(size, seed)


@contextlib.contextmanager
def providing(results: Mapping[Replicates, list] | None) -> Iterator[None]:
    """Inside, :func:`run_replicates` (and :func:`computed`) read ``results`` (replicates computed
    beforehand, e.g. as chunks on a cluster) instead of computing them; None: compute."""
    token = _PROVIDED.set(results)
    try:
        yield
    finally:
        _PROVIDED.reset(token)


def _broken_claim(name: str, err: Exception) -> Claim:
    def check(size, seed):
        raise err

    return Claim(
        id=f"{name}.import",
        paper="-",
        where="-",
        statement=f"module paper_checks.{name} imports",
        check=check,
    )


class Registry:
    """An ordered collection of claims (or properties), optionally filled by importing every
    public module of a package; a module that fails to import becomes one entry that reports
    the error (``broken(name, err)``), and the others still run."""

    def __init__(self, package: str | None = None, *, broken: Callable | None = None):
        self._items: dict[str, Any] = {}
        self._package = package
        self._loaded = package is None
        self._broken = broken or _broken_claim

    def add(self, c):
        area, _, name = c.id.partition(".")
        if not area or not name:
            raise ValueError(f"id must be 'AREA.NAME'; got {c.id!r}.")
        if c.id in self._items:
            raise ValueError(f"id {c.id!r} is registered twice.")
        names = [m.name for m in c.mutants]
        if len(set(names)) != len(names):
            raise ValueError(f"{c.id!r} declares a mutant name twice: {names}.")
        self._items[c.id] = c
        return c

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        pkg = importlib.import_module(self._package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            try:
                importlib.import_module(f"{self._package}.{info.name}")
            except Exception as err:  # one broken area is reported, the others still run
                self.add(self._broken(info.name, err))

    def __iter__(self):
        self._load()
        return iter(list(self._items.values()))

    def __len__(self):
        self._load()
        return len(self._items)

    def __contains__(self, item_id):
        self._load()
        return item_id in self._items

    def __getitem__(self, item_id):
        self._load()
        return self._items[item_id]

    def select(self, pattern: str | None) -> list:
        """Entries whose id matches the shell-style glob ``pattern`` (all when None)."""
        return [c for c in self if pattern is None or fnmatch.fnmatchcase(c.id, pattern)]


REGISTRY = Registry("paper_checks")


def claim(
    id: str,
    *,
    paper: str,
    statement: str,
    where: str,
    sizes: dict | None = None,
    mutants=(),
    replicates: Callable[[Sizes, int], Sequence[Replicates]] | None = None,
    registry: Registry = REGISTRY,
):
    """Decorator registering ``check(size, seed) -> Measurement`` as the claim ``id``;
    ``replicates(size, seed)`` lists the :class:`Replicates` the check runs (through
    :func:`run_replicates`), so that a cluster can run them as chunks."""
    table = NO_SIZES if sizes is None else sizes
    if set(table) != set(SCALES):
        raise ValueError(f"claim {id!r}: `sizes` must come from paper_checks.sizes(...).")

    def wrap_check(check):
        registry.add(
            Claim(
                id=id,
                paper=paper,
                statement=statement,
                where=where,
                check=check,
                sizes=table,
                mutants=tuple(mutants),
                replicates=replicates,
            )
        )
        return check

    return wrap_check
