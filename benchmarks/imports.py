"""Benchmark: import time of each top-level package, and whether it pulls in JAX or scipy.stats.

Run: ``python benchmarks/imports.py [--quick | --full] [--json PATH]`` (``--quick``, the default:
5 fresh interpreters per package, a few seconds; ``--full``: 25). Each import runs in a fresh
``python -c`` so nothing is cached in the process; the table gives the median wall time of the
interpreter with the import, the same minus a bare interpreter that imports numpy (the floor any
of these packages pays), and the ratio to that floor. Also ``theorylab list``, which reads the
static claim index and must stay under one second (issue 23).
"""

from __future__ import annotations

import subprocess
import sys
import time

from _harness import run

PACKAGES = ("theory", "estimators", "spectral", "dynamics", "nn", "paper_checks", "figures")
PROBE = "import sys, {m}; print(int('jax' in sys.modules), int('scipy.stats' in sys.modules))"


def _wall(code: str, runs: int) -> tuple[float, str]:
    """Median wall seconds of ``python -c code`` over ``runs`` fresh interpreters (after one
    untimed run that warms the file cache), and its stdout."""
    times, out = [], ""
    for i in range(runs + 1):
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout
        if i:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], out


def bench(scale: str, args) -> dict:
    runs = 25 if scale == "full" else 5
    floor, _ = _wall("import numpy", runs)
    rows = {}
    for m in PACKAGES:
        t, out = _wall(PROBE.format(m=m), runs)
        jax_in, stats_in = (bool(int(v)) for v in out.split())
        rows[m] = dict(seconds=t, over_floor=t - floor, ratio=t / floor, jax=jax_in,
                       scipy_stats=stats_in)  # fmt: skip
    code = "import sys; from theorylab._cli import main; sys.exit(main(['list']))"
    t, _ = _wall(code, runs)
    rows["theorylab list"] = dict(seconds=t, over_floor=t - floor, ratio=t / floor,
                                  jax=False, scipy_stats=False)  # fmt: skip
    print(f"import numpy (the floor): {1e3 * floor:.0f} ms, median of {runs}")
    print(f"{'import':<16}{'ms':>8}{'over floor':>12}{'x floor':>9}{'jax':>6}{'stats':>7}")
    for k, r in rows.items():
        print(f"{k:<16}{1e3 * r['seconds']:>8.0f}{1e3 * r['over_floor']:>12.0f}"
              f"{r['ratio']:>9.2f}{'yes' if r['jax'] else 'no':>6}"
              f"{'yes' if r['scipy_stats'] else 'no':>7}")  # fmt: skip
    return dict(floor_seconds=floor, rows=rows)


if __name__ == "__main__":
    run(bench, __doc__, quick="5 interpreters per import", full="25 interpreters per import")
