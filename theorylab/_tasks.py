"""The units of work of the command -- one claim, one figure, one property -- and how they run:
in this process, or as independent tasks on a Dask cluster (``--workers N`` starts a local one,
``--scheduler ADDRESS`` joins an existing one). No scheduler of our own: Dask's distributed
scheduler places the tasks; each task is seeded by its id, so the results do not depend on the
order or the worker. A claim that declares its Monte Carlo replicates
(:class:`paper_checks.Replicates`) becomes, on a cluster, chunks of replicates (one
task each, under the run's mutant) and one task that combines them into the report row; a
figure module that declares the replicates it draws (``replicates(scale, seed)``) reads the same
chunks, so a figure does not recompute the claims' simulations.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from tqdm import tqdm

__all__ = [
    "setup_jax",
    "claim_row",
    "replicate_chunk",
    "figure_row",
    "property_row",
    "execute",
    "Progress",
    "device_name",
]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "theorylab" / "jax"


def setup_jax(compile_cache: bool = True) -> str | None:
    """float64 JAX and, unless turned off, JAX's persistent compilation cache in the user cache
    folder (``$XDG_CACHE_HOME/theorylab/jax``, else ``~/.cache/theorylab/jax``): a second run
    reuses the compiled programs of the first. Returns the cache folder used (None: off)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    if not compile_cache:
        return None
    path = _cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: run without the cache rather than fail
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return str(path)


def _on_worker(compile_cache: bool | None) -> None:
    """Start of a task: on a Dask worker (``compile_cache`` set) set JAX up and, the worker being
    long-lived, release compiled programs past the memory-map cap (``release_compiled``) and
    memoised simulations past its memory share (:func:`relieve_memory`)."""
    if compile_cache is None:
        return
    from _core.runtime import release_compiled

    setup_jax(compile_cache)
    release_compiled()
    relieve_memory()


#: the share of a Dask worker's memory limit past which it drops its memoised simulations
MEMORY_SHARE = 0.5


def relieve_memory(share: float = MEMORY_SHARE) -> bool:
    """On a Dask worker whose process holds more than ``share`` of the worker's memory limit,
    clear every memoised simulation and JAX's compiled programs (``paper_checks.clear_caches``)
    and hand the freed heap back to the OS; a no-op elsewhere. Returns whether it cleared.

    Without it the memo caches of a long run grew each worker past Dask's limit: in a quick
    ``reproduce --workers 2`` both workers restarted at 95 % and the finished results they held
    ran again. A memo is a cache of a seeded computation, so clearing it changes no number."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return False
    limit = worker.memory_manager.memory_limit
    import psutil

    if not limit or psutil.Process().memory_info().rss <= share * limit:
        return False
    _release_area()
    return True


def _release_area() -> None:
    """Release what a finished area holds: memoised simulations, JAX's compiled programs, and
    the freed heap back to the OS (glibc)."""
    from _core.runtime import trim_heap
    from paper_checks import clear_caches

    clear_caches()
    trim_heap()


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MB (Linux reports KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _rss_mb() -> float | None:
    """The process's resident memory now, in MB (Linux's ``/proc/self/statm``; None elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class AreaPeak:
    """Each area's own peak resident memory, sampled every ``interval`` seconds by a daemon
    thread (the process's high-water mark only rises, so after the largest area every area would
    report it; resetting the kernel's mark instead would make ``/usr/bin/time`` under-report the
    run's peak). A lower bound within the sampling interval; where RSS cannot be read, the
    process's peak so far."""

    def __init__(self, interval: float = 0.05):
        import threading

        self._max = _rss_mb()
        self._stop = threading.Event()
        if self._max is not None:
            threading.Thread(target=self._sample, args=(interval,), daemon=True).start()

    def _sample(self, interval: float) -> None:
        while not self._stop.wait(interval):
            now = _rss_mb()
            if now is not None and self._max is not None:
                self._max = max(self._max, now)

    def take(self) -> float:
        """The peak since the last call (MB), and start the next area's at what is held now."""
        if self._max is None:
            return peak_rss_mb()
        now = _rss_mb() or 0.0
        peak, self._max = max(self._max, now), now
        # Linux batches RSS counters per thread: a sample can exceed the process's high-water
        # mark by a few hundred KB (3136.3 against 3136.0 MB, measured); no area exceeds it
        return round(min(peak, peak_rss_mb()), 1)

    def close(self) -> None:
        self._stop.set()


def device_name() -> str:
    """The JAX device the work runs on, e.g. ``cpu`` or ``gpu (NVIDIA H200)``."""
    import jax

    d = jax.devices()[0]
    kind = getattr(d, "device_kind", "")
    return d.platform if not kind or kind == d.platform else f"{d.platform} ({kind})"


def _error_text(err: BaseException) -> str:
    tb = traceback.extract_tb(err.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(err).__name__}: {err}{where}"


def _error_row(detail: str) -> dict:
    """The row of a claim that raised (or whose replicate chunk raised): ``detail`` says why."""
    return dict(
        status="error",
        measured=None,
        expected=None,
        tolerance=None,
        rule="",
        resolve="",
        distance=math.inf,
        values=None,
        detail=detail,
        measurement=None,
    )


def _gathered(chunks) -> tuple[dict | None, str | None]:
    """``chunks`` (``[(Replicates, [replicate_chunk output, ...]), ...]``, or None) as the
    results per :class:`Replicates` in index order, and the first chunk's error (else None)."""
    if chunks is None:
        return None, None
    failed = [ch["error"] for _, outs in chunks for ch in outs if ch["error"]]
    if failed:
        return None, failed[0]
    return {reps: [x for ch in outs for x in ch["results"]] for reps, outs in chunks}, None


def _measure(c, scale: str, seed: int, mutant: str | None, chunks=None, threads: int = 1) -> dict:
    from paper_checks import run_claim

    results, error = _gathered(chunks)
    if error is not None:
        return _error_row(error)
    try:
        m = run_claim(c, scale, seed, mutant, results, threads=threads)
        return dict(
            status=m.status,
            measured=m.measured,
            expected=m.expected,
            tolerance=m.tolerance,
            rule=m.rule,
            resolve=m.resolve,
            distance=m.distance,
            values=m.values,
            detail=m.detail,
            measurement=m,
        )
    except Exception as err:  # a claim that raises is an error row, the run goes on
        return _error_row(_error_text(err))


def claim_row(
    c,
    scale: str,
    seed: int,
    *,
    mutants: bool = False,
    mutant: str | None = None,
    compile_cache: bool | None = None,
    chunks: dict | None = None,
    threads: int = 1,
) -> dict:
    """One claim's report row (under ``mutant`` if named): its status, the outcome it records at
    ``scale`` (``recorded``, ``reason``) and whether they match; with ``mutants`` also every
    declared mutant's status in ``mutant_runs`` (its measured values and rule text in
    ``mutant_measured``), which it caught (``mutant_caught``) and how many (``killed``): a mutant
    is caught when it turns a reproduced claim into ``not reproduced`` (or an error), and, for a
    claim that does not reproduce, when it moves a measured value by more than 3 SE
    (:func:`paper_checks.moved`).
    ``compile_cache`` set: first set JAX up (a task on a worker). ``chunks``: per run (``mutant``
    and, with ``mutants``, each mutant's name) the claim's replicates as computed by
    :func:`replicate_chunk` tasks; ``seconds`` then adds the chunks' time to this task's.
    ``threads``: without ``chunks``, the claim's declared replicates run on that many threads
    (:func:`paper_checks.compute_plan`)."""
    _on_worker(compile_cache)
    t0 = time.perf_counter()
    given = (lambda run: None) if chunks is None else chunks.__getitem__
    row = _measure(c, scale, seed, mutant, given(mutant), threads)
    under = (
        {m.name: _measure(c, scale, seed, m.name, given(m.name), threads) for m in c.mutants}
        if mutants
        else {}
    )
    runs = {k: o["status"] for k, o in under.items()} if mutants else None
    caught = {k: _caught(row, o) for k, o in under.items()} if mutants else None
    recorded = c.recorded.at(scale)
    chunk_seconds = sum(
        ch["seconds"] for per in (chunks or {}).values() for _, outs in per for ch in outs
    )
    return dict(
        id=c.id,
        paper=c.paper,
        statement=c.statement,
        where=c.where,
        mutants=len(c.mutants),
        recorded=recorded,
        reason=c.recorded.reason if recorded != "reproduced" else "",
        sizes={"run": dict(c.sizes[scale]), "full": dict(c.sizes["full"])},
        code=_code_location(c.check),
        matches=row["status"] == recorded,
        killed=None if caught is None else sum(caught.values()),
        mutant_runs=runs,
        mutant_caught=caught,
        mutant_measured={k: {f: o[f] for f in ("measured", "rule")} for k, o in under.items()}
        or None,
        seconds=round(time.perf_counter() - t0 + chunk_seconds, 3),
        **{k: v for k, v in row.items() if k != "measurement"},
    )


def _code_location(fn) -> str:
    """``path:line`` of a claim's check, relative to the repository (or the install)."""
    import inspect

    try:
        path, line = inspect.getsourcefile(fn), inspect.getsourcelines(fn)[1]
    except (OSError, TypeError):
        return ""
    parts = Path(path or "").parts
    for i, part in enumerate(parts):
        if part == "paper_checks":
            return "/".join(parts[i:]) + f":{line}"
    return f"{path}:{line}"


def _caught(clean: dict, under: dict) -> bool:
    """Whether a mutant run (``under``) is told apart from the clean one (``clean``)."""
    from paper_checks import moved

    if under["status"] == "error":
        return True
    if clean["status"] == "reproduced":
        return under["status"] == "not reproduced"
    if clean["measurement"] is None:  # the clean run errored: nothing to compare with
        return False
    return moved(clean["measurement"], under["measurement"])


def replicate_chunk(
    reps, start: int, stop: int, mutant=None, compile_cache: bool | None = None, given=()
) -> dict:
    """Replicates ``start`` to ``stop`` of ``reps`` under ``mutant`` (a
    :class:`~paper_checks.Mutant`, or None): one task of a chunked claim. ``given``: ``(unit,
    replicate_chunk output)`` of each of ``reps.needs`` (one that failed is computed here).
    Returns ``results`` (in index order), ``seconds`` and ``error`` (the text of what it raised,
    else None)."""
    from paper_checks import giving

    _on_worker(compile_cache)
    t0 = time.perf_counter()
    handed = {need: out["results"] for need, out in given if out["error"] is None}
    try:
        with mutant.apply() if mutant is not None else contextlib.nullcontext(), giving(handed):
            results, error = reps.run(start, stop), None
    except Exception as err:  # reported in the claim's row, the run goes on
        results, error = None, _error_text(err)
    return dict(results=results, error=error, seconds=time.perf_counter() - t0)


def _chunk_key(owner: str, run: str | None, reps, start: int, stop: int) -> str:
    """A Dask key naming the computation, so claims and figures that share a simulation share its
    chunks; under a mutant the key is the claim's own (the patch changes what the chunk
    computes)."""
    from dask.base import tokenize

    fn = f"{reps.fn.__module__}.{reps.fn.__qualname__}"
    key = f"replicates-{fn}-{start}-{stop}-{tokenize(fn, reps.args, reps.count)}"
    return key if run is None else f"{key}-{owner}-{run}"


def _submit_chunks(client, plan, owner: str, runs, mutant_of, slots: int, compile_cache: bool):
    """Submit the replicates of ``plan`` for each run (None or a mutant name, ``mutant_of`` giving
    its :class:`~paper_checks.Mutant`) in chunks of about ``count / (2 slots)``; for each run:
    ``[(Replicates, [chunk futures])]``."""
    out = {}
    for run in runs:
        mutant = None if run is None else mutant_of(run)
        per = []
        for reps in plan:
            step = max(1, math.ceil(reps.count / (2 * slots)))
            given = [  # one task per need and key: the units that share it share its result
                (
                    need,
                    client.submit(
                        replicate_chunk,
                        need,
                        0,
                        1,
                        mutant,
                        compile_cache=compile_cache,
                        key=_chunk_key(owner, run, need, 0, 1),
                    ),
                )
                for need in reps.needs
            ]
            futures = [
                client.submit(
                    replicate_chunk,
                    reps,
                    lo,
                    min(lo + step, reps.count),
                    mutant,
                    compile_cache=compile_cache,
                    given=given,
                    key=_chunk_key(owner, run, reps, lo, min(lo + step, reps.count)),
                )
                for lo in range(0, reps.count, step)
            ]
            per.append((reps, futures))
        out[run] = per
    return out


def _submit(client, job, compile_cache: bool, slots: int):
    """Submit one job; a claim or figure that declares replicates goes as chunks plus its task."""
    fn, args, kwargs = job
    try:
        if fn is claim_row and args[0].replicates is not None:
            c, scale, seed = args
            runs = [kwargs.get("mutant")]
            if kwargs.get("mutants"):
                runs += [m.name for m in c.mutants]
            plan = c.replicate_plan(scale, seed)
            chunks = _submit_chunks(client, plan, c.id, runs, c.mutant, slots, compile_cache)
            kwargs = dict(kwargs, chunks=chunks)
        elif fn is figure_row:
            module, fig_id, scale, seed, _ = args
            declared = getattr(sys.modules.get(module), "replicates", None)
            if declared is not None:
                plan = list(declared(scale, seed))
                chunks = _submit_chunks(client, plan, fig_id, [None], None, slots, compile_cache)
                kwargs = dict(kwargs, chunks=chunks[None])
    except Exception:  # a declaration that raises: the task runs its work whole
        pass
    return client.submit(fn, *args, pure=False, compile_cache=compile_cache, **kwargs)


def figure_row(
    module: str,
    fig_id: str,
    scale: str,
    seed: int,
    out: str,
    compile_cache: bool | None = None,
    chunks: list | None = None,
) -> tuple[str, str, list[str], float]:
    """Make and save the figure ``fig_id`` of ``module`` (a module path): ``(ID, status,
    paths, seconds)``; a figure that raises (or does not import) is an error row. ``chunks``:
    the replicates the module declares, as computed by :func:`replicate_chunk` tasks (their
    time is not counted in ``seconds``)."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    _on_worker(compile_cache)
    from _core.runtime import float64
    from figures import save
    from paper_checks import providing

    t0 = time.perf_counter()
    results, error = _gathered(chunks)
    if error is not None:
        return fig_id, f"error: {error}", [], 0.0
    try:
        mod = importlib.import_module(module)
        with providing(results), float64():
            fig = mod.make(scale, seed=seed)
        paths = save(fig, out, fig_id)
        return fig_id, "written", paths, round(time.perf_counter() - t0, 3)
    except Exception as err:
        return fig_id, f"error: {_error_text(err)}", [], round(time.perf_counter() - t0, 3)


def property_row(
    p,
    examples: int,
    seed: int,
    mutant: str | None = None,
    compile_cache: bool | None = None,
    db: str | None = None,
) -> dict:
    """One property's verification row (:func:`paper_checks.verify`; ``db`` its example
    database folder, None for none)."""
    from paper_checks import verify

    _on_worker(compile_cache)
    return verify(p, examples, seed, mutant, db=db)


def strength_row(p, examples: int, seed: int, compile_cache: bool | None = None) -> dict:
    """One property run under each of its mutants (:func:`paper_checks.strength`)."""
    from paper_checks import strength

    _on_worker(compile_cache)
    return strength(p, examples, seed)


class Progress:
    """Progress of a run on stderr: tqdm's bar on a terminal; otherwise (a log file, CI) one line
    per finished task, as pytest and pip write: ``[done/total] id status seconds, ~N s left``
    (the time left from the mean so far); nothing when ``quiet``."""

    def __init__(self, total: int, desc: str, quiet: bool = False):
        self.total, self.desc, self.quiet = total, desc, quiet
        self.tty = sys.stderr.isatty()
        self.count, self.t0 = 0, time.perf_counter()

    def wrap(self, it):
        if self.quiet or not self.tty:
            return it
        return tqdm(it, total=self.total, desc=self.desc, unit="task")

    def done(self, result, seconds: float | None) -> None:
        self.count += 1
        if self.quiet or self.tty:
            return
        if isinstance(result, tuple):  # a figure: (id, status, paths, seconds)
            ident, status = result[0], "written" if result[1] == "written" else "error"
            seconds = result[3]
        elif isinstance(result, dict):
            ident, status = result.get("id", "?"), result.get("status", "?")
            seconds = result.get("seconds", seconds)
        else:
            ident, status = "?", "?"
        elapsed = time.perf_counter() - self.t0
        left = elapsed / self.count * (self.total - self.count)
        took = f" {seconds:.1f} s," if isinstance(seconds, float | int) else ""
        print(
            f"[{self.count}/{self.total}] {ident} {status}{took} ~{left:.0f} s left",
            file=sys.stderr,
            flush=True,
        )


def execute(
    jobs,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    desc: str = "tasks",
    compile_cache: bool = True,
    rows: list | None = None,
    quiet: bool = False,
    release_after: Mapping[int, str] | None = None,
    areas: dict | None = None,
) -> list:
    """Run ``jobs`` (``(function, args, kwargs)``) and return their results in job order.

    Serially here when neither ``workers`` nor ``scheduler`` is given (appending to ``rows`` as
    each finishes, so an interrupted run keeps what it has); else as Dask tasks, one per job, and
    for a claim with declared replicates also one per chunk of them. Progress goes to stderr: a
    bar on a terminal, else one line per finished task (:class:`Progress`); none if ``quiet``.
    Serially, after each job whose index is a key of ``release_after`` (the last of the paper's
    area it names) the memoised simulations and JAX's compiled programs are released (no later
    job reads them; a seeded cache, so no number changes), which bounds the run's memory by its
    largest area's instead of the sum of all areas'; ``areas``, if given, receives each area's
    wall seconds and its own peak resident memory (MB, sampled: :class:`AreaPeak`; it includes
    what the process still held when the area began).
    """
    rows = [] if rows is None else rows
    release_after = {} if release_after is None else release_after
    progress = Progress(len(jobs), desc, quiet)
    if workers is None and scheduler is None:
        from _core.runtime import release_compiled

        t_area, area_peak = time.perf_counter(), AreaPeak()
        try:
            for i, (fn, args, kwargs) in enumerate(progress.wrap(jobs)):
                t0 = time.perf_counter()
                rows.append(fn(*args, **kwargs))
                progress.done(rows[-1], time.perf_counter() - t0)
                if i in release_after:
                    peak = area_peak.take()
                    if areas is not None:
                        areas[release_after[i]] = dict(
                            seconds=round(time.perf_counter() - t_area, 1), peak_rss_mb=peak
                        )
                    _release_area()
                    area_peak.take()  # the next area starts from what the release left
                    t_area = time.perf_counter()
                else:
                    release_compiled()
        finally:
            area_peak.close()
        return rows
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as err:
        raise RuntimeError(
            "--workers/--scheduler need Dask: pip install 'theorylab[cluster]'"
        ) from err
    cluster = None
    if not scheduler:
        import dask.config

        # Dask starts workers with MALLOC_TRIM_THRESHOLD_ set, which keeps glibc from raising
        # its mmap threshold: every large NumPy temporary is then a fresh mmap, 20-30 % slower
        # on the replicates here. Left unset, the workers allocate as this process does.
        with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
            # ":0": the scheduler's HTTP server binds 8787 even with the dashboard off, so a
            # second run on the machine failed with "Port 8787 is already in use"
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
    try:
        with Client(scheduler or cluster) as client:
            slots = max(1, sum(cast(dict, client.nthreads()).values()))
            futures = [_submit(client, job, compile_cache, slots) for job in jobs]
            for fut in progress.wrap(as_completed(futures)):
                progress.done(fut.result(), None)
            rows.extend(client.gather(futures))
    finally:
        if cluster is not None:
            cluster.close()
    return rows
