"""Independent units of work of a claim: Monte Carlo replicates (:class:`Replicates`), single
units (:func:`unit`) and what they share, run in a loop, by threads of this process, or as chunks
on a Dask cluster (``theorylab._tasks``), with the same numbers wherever they run."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadpoolctl import threadpool_limits
from tqdm import tqdm

from _core.runtime import float64

__all__ = [
    "Replicates",
    "run_replicates",
    "compute_plan",
    "unit",
    "shared",
    "computed",
    "giving",
    "providing",
]


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


@contextlib.contextmanager
def providing(results: Mapping[Replicates, list] | None) -> Iterator[None]:
    """Inside, :func:`run_replicates` (and :func:`computed`) read ``results`` (replicates computed
    beforehand, e.g. as chunks on a cluster) instead of computing them; None: compute."""
    token = _PROVIDED.set(results)
    try:
        yield
    finally:
        _PROVIDED.reset(token)
