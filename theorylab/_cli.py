"""``theorylab reproduce | verify | list | check ID`` (see README.md, "The command").

- ``reproduce [--scale smoke|quick|full] [--only GLOB] [--out DIR] [--seed N] [--mutants]
  [--workers N | --scheduler ADDRESS] [--no-compile-cache] [--threads N]``: every claim and
  figure, the report in DIR; ``--mutants`` also runs every declared mutant (killed / declared
  column); without workers, a claim's declared independent runs use ``--threads`` threads.
- ``verify [--only GLOB] [--examples N] [--seed S] [--out DIR] [--mutant NAME] [--replay BLOB]
  [--db PATH | --no-db] [--workers N | --scheduler ADDRESS]``: the properties, searched by
  Hypothesis; the example database (counterexamples and each property's tightest instance,
  replayed first) lives in ``$XDG_CACHE_HOME/theorylab/hypothesis`` unless ``--db``/``--no-db``;
  ``--time 10m`` shares a time budget among the properties; ``--strength`` runs each property
  under each of its mutants and reports the share caught and the median examples to catch.
- ``check ID [--scale] [--seed] [--mutant NAME] [--out DIR] [--threads N]``: one claim.
- ``report OLD.json NEW.json``: the claims whose verdict or measured value (beyond 3 SE) moved;
  ``report --markdown``: the README's claims table from the registry's recorded outcomes.
- ``reproduce --compare OLD.json`` prints the same comparison at the end of a run; ``-q``
  silences the progress (a bar on a terminal, else one line per finished task on stderr).

Exit status: 0 when every claim's verdict matches the outcome it records (``reproduced`` where
none is recorded), every figure is written, every mutant is caught and every property holds; 1
when a verdict changed, a claim or figure errored, a mutant survived or a property has a
counterexample; 2 for bad command-line input (one line on stderr);
130 when interrupted (Ctrl-C), after writing the rows it has to a report marked partial.
JAX's persistent compilation cache lives in ``$XDG_CACHE_HOME/theorylab/jax`` (else
``~/.cache/theorylab/jax``); ``--no-compile-cache`` or ``THEORYLAB_NO_COMPILE_CACHE=1`` turn it off.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from . import _report, _verify_report
from ._tasks import (
    claim_row,
    device_name,
    execute,
    figure_row,
    peak_rss_mb,
    property_row,
    setup_jax,
    strength_row,
)

__all__ = ["main"]


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + message otherwise)
        raise _UsageError(message)


def _bounded_int(lo: int, hi: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo}, {hi}]; got {text!r}")
        return value

    return parse


def _address(text: str) -> str:
    """A scheduler address: an empty one would silently start a local cluster instead."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"must be a scheduler address (tcp://host:port); got {text!r}"
        )
    return text


def _cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _load_report(path: str) -> dict:
    try:
        body = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise _UsageError(f"{path!r} is not a readable report.json: {err}") from None
    if not isinstance(body, dict) or "claims" not in body:
        raise _UsageError(f"{path!r} is not a report.json of theorylab (no 'claims')")
    return body


def _report_command(args, registry) -> int:
    if args.markdown:
        if args.runs:
            raise _UsageError("--markdown takes no report files")
        from paper_checks import REGISTRY

        print(_report.readme_table(REGISTRY if registry is None else registry))
        return 0
    if len(args.runs) != 2:
        raise _UsageError("report needs two files, OLD.json NEW.json (or --markdown)")
    old, new = (_load_report(p) for p in args.runs)
    changes = _report.compare(old, new)
    print(_report.comparison_table(changes))
    return 1 if changes else 0


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="theorylab", description="Reproduce and verify the papers' claims.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(q, out_default):
        q.add_argument("--only", default=None, metavar="GLOB", help="ids to run (shell glob)")
        q.add_argument("--out", default=out_default, metavar="DIR", help="output folder")
        q.add_argument(
            "--seed",
            default=0,
            type=_bounded_int(0, 2**32 - 1),
            help="seed of every random draw (default 0)",
        )
        par = q.add_mutually_exclusive_group()
        par.add_argument(
            "--workers",
            type=_bounded_int(1, 512),
            default=None,
            metavar="N",
            help="run as Dask tasks on a local cluster of N worker processes",
        )
        par.add_argument(
            "--scheduler",
            default=None,
            type=_address,
            metavar="ADDRESS",
            help="run as Dask tasks on an existing cluster (tcp://host:port)",
        )
        q.add_argument(
            "--no-compile-cache",
            action="store_true",
            help="do not use JAX's persistent compilation cache",
        )

    def threads(q):
        q.add_argument(
            "--threads",
            type=_bounded_int(1, 512),
            default=_cores(),
            metavar="N",
            help="threads for a claim's independent runs in this process (default: the cores "
            "this process may use; the numbers do not depend on it)",
        )

    rep = sub.add_parser("reproduce", help="run every claim and figure, write the report")
    rep.add_argument("--scale", default="quick", help="smoke, quick (default) or full")
    rep.add_argument(
        "--mutants",
        action="store_true",
        help="also run every declared mutant; report killed / declared",
    )
    common(rep, "theorylab-out")
    threads(rep)
    ver = sub.add_parser("verify", help="search the properties for counterexamples")
    ver.add_argument(
        "--examples",
        default=100,
        type=_bounded_int(1, 10**7),
        metavar="N",
        help="examples per property (default 100)",
    )
    ver.add_argument(
        "--mutant",
        default=None,
        metavar="NAME",
        help="verify under this declared mutant (one property, with --only ID)",
    )
    ver.add_argument(
        "--replay",
        default=None,
        metavar="BLOB",
        help="evaluate one instance printed by an earlier run (with --only ID)",
    )
    ver.add_argument(
        "--db",
        default=None,
        metavar="PATH",
        help="example database folder (default $XDG_CACHE_HOME/theorylab/hypothesis): "
        "counterexamples and each property's tightest instance, replayed first next run",
    )
    ver.add_argument("--no-db", action="store_true", help="no example database (start afresh)")
    ver.add_argument(
        "--time",
        default=None,
        type=_duration,
        metavar="DURATION",
        help="a time budget (90s, 10m, 1h) shared among the properties, more to those whose "
        "slack is still falling; replaces --examples",
    )
    ver.add_argument(
        "--strength",
        action="store_true",
        help="run each property under each of its mutants (--examples each): caught?, after "
        "how many examples",
    )
    common(ver, "theorylab-out")
    rep.add_argument(
        "--compare",
        default=None,
        metavar="OLD.json",
        help="at the end, list the claims whose verdict or measured value moved since OLD.json",
    )
    rep.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar or per-task lines on stderr"
    )
    sub.add_parser("list", help="list the registered claims and properties")
    rpt = sub.add_parser(
        "report",
        help="compare two runs (OLD.json NEW.json), or print the README's claims table",
    )
    rpt.add_argument("runs", nargs="*", metavar="REPORT.json", help="two report.json files")
    rpt.add_argument(
        "--markdown",
        action="store_true",
        help="print the README's claims table (each claim's recorded verdict at quick)",
    )
    chk = sub.add_parser("check", help="run one claim")
    chk.add_argument("id")
    chk.add_argument("--scale", default="quick", help="smoke, quick (default) or full")
    chk.add_argument("--out", default=None, metavar="DIR", help="also write the report here")
    chk.add_argument(
        "--seed",
        default=0,
        type=_bounded_int(0, 2**32 - 1),
        help="seed of every random draw (default 0)",
    )
    chk.add_argument(
        "--mutant",
        default=None,
        metavar="NAME",
        help="run under this declared mutant (a planted bug)",
    )
    threads(chk)
    return p


def _duration(text: str) -> float:
    from paper_checks import parse_duration

    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _validate(args, registry, properties) -> None:
    from paper_checks import SCALES

    if getattr(args, "scale", "quick") not in SCALES:
        raise _UsageError(f"unknown scale {args.scale!r}; choose one of {', '.join(SCALES)}")
    out = getattr(args, "out", None)
    if out is not None:
        if Path(out).exists() and not Path(out).is_dir():
            raise _UsageError(f"--out must be a folder; {out!r} is a file")
        try:  # fail now, not after an hour of claims
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / ".write-test").touch()
            (Path(out) / ".write-test").unlink()
        except OSError as err:
            raise _UsageError(
                f"--out must be a folder that can be written; {out!r}: {err.strerror or err}"
            ) from None
    if getattr(args, "compare", None) is not None:
        args.compare_body = _load_report(args.compare)
    if args.command == "check":
        if args.id not in registry:
            raise _UsageError(f"unknown claim id {args.id!r}; `theorylab list` lists them")
        if args.mutant is not None:
            try:
                registry[args.id].mutant(args.mutant)
            except ValueError as err:
                raise _UsageError(str(err)) from None
    if args.command in ("reproduce", "verify"):
        pool = registry if args.command == "reproduce" else properties
        if args.only is not None and not pool.select(args.only):  # "" too: it matches nothing
            raise _UsageError(
                f"no {'claim' if pool is registry else 'property'} matches {args.only!r}"
            )
    if args.command == "verify" and args.strength and (args.mutant or args.replay or args.time):
        raise _UsageError("--strength runs every mutant: not with --mutant, --replay or --time")
    if args.command == "verify" and (args.mutant or args.replay):
        chosen = properties.select(args.only)
        if args.only is None or len(chosen) != 1:
            raise _UsageError("--mutant and --replay need --only with one property id")
        if args.mutant:
            try:
                chosen[0].mutant(args.mutant)
            except ValueError as err:
                raise _UsageError(str(err)) from None


def _check(args, registry) -> int:
    c = registry[args.id]
    t0 = time.perf_counter()
    row = claim_row(c, args.scale, args.seed, mutant=args.mutant, threads=args.threads)
    if args.out:
        _report.write_report([row], [], Path(args.out), header=_header(args, t0))
    print(_report.claims_table([row]))
    if args.mutant:
        print(f"under mutant {args.mutant!r}: {c.mutant(args.mutant).description}")
    for text in (row["rule"], row["resolve"], row["detail"]):
        if text:
            print(text)
    if row["reason"]:
        print(f"recorded {row['recorded']}: {row['reason']}")
    return 0 if row["matches"] else 1


def _header(args, t0: float, partial: bool = False, areas: dict | None = None) -> dict:
    """The run's header: scale, seed, device, wall time, peak memory, threads, version, commit,
    and (serial runs) each area's wall seconds and its own peak memory."""
    import importlib.metadata
    import subprocess

    try:
        version = importlib.metadata.version("theorylab")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return dict(
        scale=args.scale,
        seed=args.seed,
        device=device_name(),
        wall_seconds=round(time.perf_counter() - t0, 1),
        peak_rss_mb=peak_rss_mb(),
        threads=getattr(args, "threads", 1),
        workers=getattr(args, "workers", None),
        version=version,
        commit=commit,
        partial=partial,
        areas=areas or {},
    )


def _split(done: list) -> tuple[list[dict], list]:
    """Claim rows (dicts) and figure rows (tuples) of one run's results."""
    return [r for r in done if isinstance(r, dict)], [r for r in done if isinstance(r, tuple)]


def _area_of(job) -> str:
    fn, args, _ = job
    return (args[0].id if fn is claim_row else args[1]).split(".")[0]


def _reproduce(args, registry, figures_package, cache: bool) -> int:
    out = Path(args.out)
    par = dict(workers=args.workers, scheduler=args.scheduler, compile_cache=cache)
    serial = args.workers is None and args.scheduler is None  # else chunks are Dask tasks
    kw = dict(mutants=args.mutants, threads=args.threads if serial else 1)
    jobs = [(claim_row, (c, args.scale, args.seed), kw) for c in registry.select(args.only)]
    if figures_package:  # one run for both, so a figure reads the replicates its claims computed
        from figures import figure_modules

        jobs += [
            (figure_row, (m.__name__, m.ID, args.scale, args.seed, str(out)), {})
            for m in figure_modules(args.only, figures_package)
        ]
    # one area after another, its claims then its figures (which read the claims' memoised
    # simulations); serially, what an area computed is released before the next starts
    jobs.sort(key=lambda job: _area_of(job))
    last_of_area = {_area_of(job): i for i, job in enumerate(jobs)}
    done: list = []
    areas: dict = {}
    t0 = time.perf_counter()
    try:
        execute(
            jobs,
            desc="claims and figures",
            rows=done,
            quiet=args.quiet,
            release_after={i: area for area, i in last_of_area.items()},
            areas=areas,
            **par,
        )
    except KeyboardInterrupt:
        rows, figs = _split(done)
        _report.write_report(rows, figs, out, header=_header(args, t0, partial=True, areas=areas))
        print(
            f"theorylab: interrupted; partial report of {len(rows)} claims: {out / 'report.md'}",
            file=sys.stderr,
        )
        return 130
    rows, figs = _split(done)
    body = _report.write_report(rows, figs, out, header=_header(args, t0, areas=areas))
    print(_report.claims_table(rows))
    for fid, status, *_ in figs:
        if status != "written":
            print(f"figure {fid}: {status}")
    if args.compare:
        print(f"against {args.compare}:")
        print(_report.comparison_table(_report.compare(args.compare_body, body)))
    print(f"report: {out / 'report.md'} and {out / 'report.html'}")
    failed = (
        any(not r["matches"] for r in rows)
        or any(s != "written" for _, s, *_ in figs)
        or any(r["killed"] is not None and r["killed"] < r["mutants"] for r in rows)
    )
    return 1 if failed else 0


def _verify(args, properties, cache: bool) -> int:
    from paper_checks import replay

    chosen = properties.select(args.only)
    if args.replay:
        try:
            r = replay(chosen[0], args.replay)
        except ValueError as err:
            print(f"theorylab: error: --replay: {err}", file=sys.stderr)
            return 2
        print(f"{r['id']}: slack {r['slack']:.6g} at {r['instance']} -> {r['status']}")
        return 0 if r["status"] == "holds" else 1
    out = Path(args.out)
    from paper_checks import default_db

    db = None if args.no_db else str(Path(args.db) if args.db else default_db())
    if args.strength:
        return _strength(args, chosen, out, cache)
    if args.time:
        from paper_checks import verify_budget

        meta = dict(examples=None, seed=args.seed, device=device_name(), budget=args.time)
        rows = verify_budget(chosen, args.time, args.seed, db=db)
        return _verify_done(rows, out, meta)
    jobs = [(property_row, (p, args.examples, args.seed, args.mutant), {"db": db}) for p in chosen]
    rows: list[dict] = []
    meta = dict(examples=args.examples, seed=args.seed, device=device_name())
    try:
        execute(
            jobs,
            desc="properties",
            rows=rows,
            workers=args.workers,
            scheduler=args.scheduler,
            compile_cache=cache,
        )
    except KeyboardInterrupt:
        _verify_report.write_verify_report(rows, out, partial=True, **meta)
        print(
            f"theorylab: interrupted; partial report of {len(rows)} properties: "
            f"{out / 'verify.md'}",
            file=sys.stderr,
        )
        return 130
    return _verify_done(rows, out, meta)


def _verify_done(rows, out: Path, meta: dict) -> int:
    _verify_report.write_verify_report(rows, out, **meta)
    print(_verify_report.verify_table(rows))
    for r in rows:
        if r["status"] == "counterexample":
            print(
                f"{r['id']}: counterexample {r['counterexample']} (slack "
                f"{r['counterexample_slack']:.4g}); replay: theorylab verify --only {r['id']} "
                f"--replay {r['blob']}"
            )
        elif r["status"] == "error":
            print(f"{r['id']}: error: {r['error']}")
    print(f"report: {out / 'verify.md'}")
    return 0 if all(r["status"] == "holds" for r in rows) else 1


def _strength(args, chosen, out: Path, cache: bool) -> int:
    from paper_checks import strength_summary

    jobs = [(strength_row, (p, args.examples, args.seed), {}) for p in chosen if p.mutants]
    rows: list[dict] = []
    execute(
        jobs,
        desc="mutants",
        rows=rows,
        workers=args.workers,
        scheduler=args.scheduler,
        compile_cache=cache,
    )
    summary = strength_summary(rows, within=args.examples)
    meta = dict(examples=args.examples, seed=args.seed, device=device_name())
    _verify_report.write_strength_report(rows, summary, out, **meta)
    print(_verify_report.strength_table(rows, summary))
    print(f"report: {out / 'verify.md'}")
    return 0 if summary["caught"] == summary["mutants"] else 1


def _list(registry, properties) -> int:
    """Print the claims and properties; from the static index (no JAX import) unless registries
    are passed in."""
    from paper_checks import index_entries, load_index

    if registry is None and properties is None:
        rows = load_index()
    else:
        from paper_checks import PROPERTIES, REGISTRY

        rows = index_entries(
            REGISTRY if registry is None else registry,
            PROPERTIES if properties is None else properties,
        )
    try:
        for r in rows:
            print(
                f"{r['id']:<40} {r['kind']:<8} [{r['mutants']} mutants] {r['paper']} "
                f"({r['where']}): {r['statement']}"
            )
    except BrokenPipeError:  # `theorylab list | head`: stop quietly, as other commands do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def main(
    argv=None, *, registry=None, properties=None, figures_package: str | None = "figures"
) -> int:
    """Entry point of the ``theorylab`` command; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
    except _UsageError as err:
        print(f"theorylab: error: {err}", file=sys.stderr)
        return 2
    cache = not (
        getattr(args, "no_compile_cache", False)
        or os.environ.get("THEORYLAB_NO_COMPILE_CACHE", "") not in ("", "0")
    )
    if args.command == "list":
        return _list(registry, properties)
    if args.command == "report":
        try:
            return _report_command(args, registry)
        except _UsageError as err:
            print(f"theorylab: error: {err}", file=sys.stderr)
            return 2
    setup_jax(cache)
    from paper_checks import PROPERTIES, REGISTRY

    registry = REGISTRY if registry is None else registry
    properties = PROPERTIES if properties is None else properties
    try:
        _validate(args, registry, properties)
    except _UsageError as err:
        print(f"theorylab: error: {err}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        if args.command == "check":
            return _check(args, registry)
        if args.command == "verify":
            return _verify(args, properties, cache)
        return _reproduce(args, registry, figures_package, cache)
    except (RuntimeError, OSError) as err:  # no Dask, no scheduler, an unwritable --out
        print(f"theorylab: error: {err}", file=sys.stderr)
        return 2
    finally:
        if args.command in ("reproduce", "verify"):
            print(f"wall time: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
