"""Process-level JAX helpers shared by every layer: float64 for a block of work, and the release
of compiled programs before a long run reaches the kernel's memory-map cap."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["float64", "release_compiled", "trim_heap", "MAX_MAPS", "cpu_cores"]


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
