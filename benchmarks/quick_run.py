"""Benchmark: the wall time and peak memory of ``theorylab reproduce`` against its budget.

Run: ``python benchmarks/quick_run.py [--quick | --full] [--json PATH]`` from an installed
checkout. ``--quick`` (the default) runs the quick reproduce twice in fresh processes: first with
an empty JAX compile cache (cold), then with the cache the first run filled (warm); ``--full``
runs the full scale once, cold. Each run is timed by ``/usr/bin/time -v`` where it exists (its
maximum resident set size is the peak memory), else by the report's own header. Per area, the
report header's wall seconds and the area's own peak memory (sampled by the run). The budget
(``docs/running.md``): 15 minutes cold, 8 warm, about 2 minutes per area, 4 GB.
``tests/test_budget.py`` reads the JSON this writes (``benchmarks/quick_run.json``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import run

BUDGET = dict(cold_seconds=900, warm_seconds=480, area_seconds=120, peak_rss_mb=4096)


def _reproduce(scale: str, cache: str, out: str) -> dict:
    """One ``theorylab reproduce`` in a fresh process; its header and measured wall and RSS."""
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    cmd = [sys.executable, "-m", "theorylab", "reproduce", "--scale", scale, "--out", out, "-q"]
    timer = Path("/usr/bin/time").exists()
    t0 = time.perf_counter()
    done = subprocess.run(
        (["/usr/bin/time", "-v"] if timer else []) + cmd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    header = json.loads((Path(out) / "report.json").read_text())["header"]
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    claims = json.loads((Path(out) / "report.json").read_text())["claims"]
    return dict(
        exit_code=done.returncode,
        wall_seconds=round(wall, 1),
        peak_rss_mb=round(int(rss.group(1)) / 1024, 1) if rss else header["peak_rss_mb"],
        measured_by="/usr/bin/time -v" if rss else "report header",
        threads=header["threads"],
        areas=header["areas"],
        verdicts={s: sum(c["status"] == s for c in claims) for s in {c["status"] for c in claims}},
        changed=[c["id"] for c in claims if not c["matches"]],
    )


def bench(scale: str, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cache, out = str(Path(tmp) / "cache"), Path(args.out or tmp)
        runs = {"cold": _reproduce(scale, cache, str(out / "cold"))}
        if scale == "quick":
            runs["warm"] = _reproduce(scale, cache, str(out / "warm"))
    for name, r in runs.items():
        slow = {a: v["seconds"] for a, v in r["areas"].items() if v["seconds"] > 120}
        print(
            f"{name}: {r['wall_seconds']:.0f} s, peak {r['peak_rss_mb'] / 1024:.2f} GB, exit "
            f"{r['exit_code']}, {r['threads']} threads; areas over 2 min: {slow or 'none'}"
        )
    return dict(budget=BUDGET, cores=os.cpu_count(), **runs)


def _options(ap) -> None:
    ap.add_argument("--out", metavar="DIR", help="keep each run's report in DIR/cold, DIR/warm")


if __name__ == "__main__":
    run(
        bench,
        __doc__,
        quick="quick reproduce, cold then warm compile cache",
        full="full reproduce, cold",
        options=_options,
    )
