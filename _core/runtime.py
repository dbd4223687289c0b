"""Process-level helpers shared by every layer: float64 for a block of work, the release of
compiled programs before a long run reaches the kernel's memory-map cap, the compile options of
one-off programs, and NumPy's BLAS on one thread."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from threadpoolctl import threadpool_limits

__all__ = [
    "float64",
    "release_compiled",
    "trim_heap",
    "MAX_MAPS",
    "cpu_cores",
    "FAST_COMPILE",
    "fast_compile",
    "one_blas_thread",
]


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, which a container or ``taskset``
    narrows; ``os.cpu_count()`` where the platform has no affinity call)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _map_cap() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65530  # Linux's default


#: Linux caps a process at ``vm.max_map_count`` memory maps (65530 by default) and each compiled
#: XLA CPU program holds about 7: a long run (the default test run, a serial ``theorylab
#: reproduce``) reaches the cap after ~9000 programs, and XLA then crashes in its next compile.
#: Released 10 000 maps (~1400 programs, more than one test or claim compiles) below the cap:
#: each release makes the programs still in use compile again.
MAX_MAPS = max(_map_cap() - 10_000, 10_000)


def release_compiled(max_maps: int = MAX_MAPS) -> bool:
    """Drop JAX's compiled programs (``jax.clear_caches``) when this process holds more than
    ``max_maps`` memory maps (Linux; elsewhere a no-op); :func:`memo` results stay. Called
    between tasks by ``theorylab`` and between tests. Returns whether it released."""
    try:
        with open("/proc/self/maps", "rb") as f:
            n = sum(1 for _ in f)
    except OSError:
        return False
    if n <= max_maps or "jax" not in sys.modules:
        return False
    import gc

    sys.modules["jax"].clear_caches()
    gc.collect()
    return True


def trim_heap() -> None:
    """Collect garbage and hand the heap it freed back to the OS (glibc's ``malloc_trim``; a
    no-op elsewhere): glibc otherwise keeps the memory a freed XLA compile used."""
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@contextlib.contextmanager
def float64() -> Iterator[None]:
    """JAX in float64 for the length of a claim, a replicate or a property, whatever the caller's
    setting: JAX's default dtype changes its random draws, so without this a claim called from
    Python gave other numbers than the same claim run by ``theorylab`` or the tests."""
    import jax

    with jax.enable_x64(True):
        yield


#: XLA CPU compile options for one-off programs: LLVM at -O1, about half the compile time, which
#: dominates short training runs, at the same run time within noise (measured: ``paper_checks.fp4``
#: training claims bit for bit the -O2 numbers; ``dynamics.distill`` ILD bit for bit, KD by
#: rounding; D2SA's float32 training moves by rounding, so it is not a rule: a caller states it)
FAST_COMPILE = {"xla_backend_optimization_level": 1}


def fast_compile() -> dict:
    """``compiler_options`` for a one-off program: :data:`FAST_COMPILE`, or none where JAX already
    compiles at -O0 (``jax_disable_most_optimizations``, as the test run does), which the option
    would raise."""
    import jax

    return {} if jax.config.read("jax_disable_most_optimizations") else dict(FAST_COMPILE)


#: A decorator running its function with NumPy's BLAS and LAPACK on one thread, as the replicate
#: runner (``paper_checks._units``) runs every replicate: for the small products and
#: factorisations of a claim's set-up and read-outs, OpenBLAS's threads cost more than they share
#: (a loaded 2-core machine: a QR of a (2048, 128) design 0.92 CPU-s on its default threads,
#: 0.022 on one; a (100 000 x 5) by (5 x 5) read-out 0.16 against 0.024)
one_blas_thread = threadpool_limits.wrap(limits=1, user_api="blas")
