"""The command line every benchmark script shares (issue 23): ``--quick`` (the default, under two
minutes on two cores) or ``--full`` (the sizes the issue that built it names), and
``--json PATH`` to keep what was measured, with the commit and machine, for comparison across
commits. A script defines ``bench(scale, args) -> dict`` (it prints its own tables, ratios
against baselines timed in the same run) and ends with ``run(bench, __doc__, ...)``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=Path(__file__).parent, check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def run(
    bench: Callable[[str, argparse.Namespace], dict],
    doc: str,
    *,
    quick: str,
    full: str,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
    argv=None,
) -> dict:
    """Parse the command line, run ``bench`` at the chosen scale, write ``--json`` if asked.

    ``quick``/``full`` describe the two scales' sizes in the help; ``options`` adds a script's
    own arguments. Returns the record written: ``benchmark``, ``scale``, ``commit``, ``when``,
    ``machine`` and ``results`` (what ``bench`` returned).
    """
    ap = argparse.ArgumentParser(description=" ".join(doc.strip().split("\n\n")[0].split()))
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help=f"{quick} (default; < 2 min)")
    size.add_argument("--full", action="store_true", help=full)
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    if options is not None:
        options(ap)
    args = ap.parse_args(argv)
    scale = "full" if args.full else "quick"
    record = dict(
        benchmark=Path(sys.argv[0]).stem,
        scale=scale,
        commit=_commit(),
        when=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        results=bench(scale, args),
    )
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1, default=float) + "\n")
    return record
