"""``theorylab reproduce | list | check ID`` (see DESIGN.md, "Entry points").

``--seed N`` changes every random draw; ``check ID --mutant NAME`` runs a claim under one of its
declared mutants; ``reproduce --mutants`` also runs every mutant and reports how many each claim
kills. Exit status: 0 when every selected claim passes, 1 when one fails or errors (or, with
``--mutants``, a mutant survives), 2 for bad command-line input (one line on stderr). An
interrupted run (Ctrl-C) writes the rows it has, marked partial, and exits 130.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

from tqdm import tqdm

__all__ = ["main", "run_claims"]


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + message otherwise)
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="theorylab", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    rep = sub.add_parser("reproduce", help="run every claim and figure, write the report")
    rep.add_argument("--scale", default="quick", help="smoke, quick (default) or full")
    rep.add_argument("--only", default=None, metavar="GLOB", help="claim/figure ids to run")
    rep.add_argument("--out", default="theorylab-out", metavar="DIR", help="output folder")
    rep.add_argument("--seed", default=0, type=_seed, help="seed of every random draw (0)")
    rep.add_argument("--mutants", action="store_true",
                     help="also run every declared mutant; report killed / declared")
    sub.add_parser("list", help="list the registered claims")
    chk = sub.add_parser("check", help="run one claim")
    chk.add_argument("id")
    chk.add_argument("--scale", default="quick", help="smoke, quick (default) or full")
    chk.add_argument("--out", default=None, metavar="DIR", help="also write the report here")
    chk.add_argument("--seed", default=0, type=_seed, help="seed of every random draw (0)")
    chk.add_argument("--mutant", default=None, metavar="NAME",
                     help="run under this declared mutant (a planted bug)")
    return p


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32); got {text!r}")
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32); got {text!r}")
    return value


def _jsonable(x):
    """Floats, lists and dicts for report.json; NaN/inf written as strings."""
    try:
        import numpy as np

        if isinstance(x, np.ndarray):
            x = x.tolist()
        elif isinstance(x, np.generic):
            x = x.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if x is None or isinstance(x, bool | int | float | str):
        return x
    return str(x)


def _fmt(x, width: int | None = 28) -> str:
    """Short text of a measured/expected value, cut to ``width`` characters (None: uncut)."""
    if isinstance(x, float):
        s = f"{x:.6g}"
    elif isinstance(x, list | tuple):
        s = "[" + ", ".join(_fmt(v, None) for v in x) + "]"
    elif isinstance(x, dict):
        s = "{" + ", ".join(f"{k}: {_fmt(v, None)}" for k, v in x.items()) + "}"
    else:
        s = str(x)
    return s if width is None or len(s) <= width else s[: width - 1] + "…"


def _run_one(c, scale: str, seed: int, mutant: str | None = None) -> dict:
    """One claim's row; a claim that raises is an ``error`` row with its message."""
    from paper_checks import run_claim

    try:
        m = run_claim(c, scale, seed, mutant)
        return dict(status="pass" if m.passed else "fail", measured=m.measured,
                    expected=m.expected, tolerance=m.tolerance, rule=m.rule, detail=m.detail)
    except Exception as err:  # a claim that raises is reported, not fatal
        tb = traceback.extract_tb(err.__traceback__)[-1]
        return dict(status="error", measured=None, expected=None, tolerance=None, rule="",
                    detail=f"{type(err).__name__}: {err} ({Path(tb.filename).name}:{tb.lineno})")


def run_claims(claims, scale: str, seed: int = 0, *, mutants: bool = False,
               rows: list | None = None) -> list[dict]:
    """Run each claim (appending to ``rows``); with ``mutants`` also each declared mutant, whose
    names and statuses go in the row's ``mutant_runs`` (a mutant is killed when it fails)."""
    rows = [] if rows is None else rows
    for c in tqdm(claims, desc="claims", unit="claim", disable=None):
        t0 = time.perf_counter()
        row = _run_one(c, scale, seed)
        runs = {m.name: _run_one(c, scale, seed, m.name)["status"] for m in c.mutants} \
            if mutants else None
        killed = None if runs is None else sum(s == "fail" for s in runs.values())
        rows.append(dict(id=c.id, paper=c.paper, statement=c.statement, where=c.where,
                         seconds=round(time.perf_counter() - t0, 3), mutants=len(c.mutants),
                         killed=killed, mutant_runs=runs, **row))
    return rows


def _mutant_cell(r) -> str:
    return f"{r['mutants']}" if r["killed"] is None else f"{r['killed']}/{r['mutants']}"


def _table(rows) -> str:
    head = (f"{'id':<36} {'status':<6} {'measured':<28} {'expected':<28} {'tolerance':<20} "
            f"{'mutants':>7} {'s':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['id']:<36} {r['status']:<6} {_fmt(r['measured']):<28} "
                     f"{_fmt(r['expected']):<28} {_fmt(r['tolerance'], 20):<20} "
                     f"{_mutant_cell(r):>7} {r['seconds']:>7.1f}")
    n_pass = sum(r["status"] == "pass" for r in rows)
    lines.append(f"{n_pass} of {len(rows)} claims passed")
    return "\n".join(lines)


REPORT_KEYS = ("id", "paper", "statement", "status", "measured", "expected", "tolerance", "rule",
               "mutants", "killed", "mutant_runs", "detail", "seconds")


def _write_report(rows, figures, out: Path, scale: str, seed: int = 0, *,
                  partial: bool = False) -> None:
    out.mkdir(parents=True, exist_ok=True)
    body = dict(scale=scale, seed=seed, partial=partial,
                claims=[{k: _jsonable(r[k]) for k in REPORT_KEYS} for r in rows])
    (out / "report.json").write_text(json.dumps(body, indent=2))
    title = f"# theorylab report (scale: {scale}, seed: {seed})"
    md = [title + (" — PARTIAL: the run was interrupted" if partial else ""), "",
          "| id | status | measured | expected | tolerance | rule | mutants | where | detail |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["id"], f"**{r['status']}**", _fmt(r["measured"], None),
                 _fmt(r["expected"], None), _fmt(r["tolerance"], None), r["rule"],
                 _mutant_cell(r), f"{r['paper']}, {r['where']}", r["detail"]]
        md.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    md += ["", "## Statements", ""] + [f"- `{r['id']}`: {r['statement']}" for r in rows]
    if figures:
        md += ["", "## Figures", ""]
        for fid, status, paths in figures:
            md.append(f"- `{fid}`: {status}" + (f" ({', '.join(Path(p).name for p in paths)})"
                                                  if paths else ""))
    (out / "report.md").write_text("\n".join(md) + "\n")


def _make_figures(pattern, scale, out: Path, package: str, seed: int = 0):
    import inspect

    import matplotlib

    matplotlib.use("Agg")
    from figures import figure_modules, save

    done = []
    for mod in tqdm(figure_modules(pattern, package), desc="figures", unit="fig", disable=None):
        try:
            # TRANSITION: figures not yet converted take the scale alone (removed once all are)
            legacy = "seed" not in inspect.signature(mod.make).parameters
            fig = mod.make("quick" if legacy and scale == "smoke" else scale) if legacy \
                else mod.make(scale, seed=seed)
            done.append((mod.ID, "written", save(fig, out, mod.ID)))
        except Exception as err:
            done.append((mod.ID, f"error: {type(err).__name__}: {err}", []))
    return done


def main(argv=None, *, registry=None, figures_package: str | None = "figures") -> int:
    """Entry point of the ``theorylab`` command; returns the exit status."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from paper_checks import REGISTRY, SCALES

    registry = REGISTRY if registry is None else registry
    try:
        args = _parser().parse_args(argv)
        if getattr(args, "scale", "quick") not in SCALES:
            raise _UsageError(f"unknown scale {args.scale!r}; choose one of {', '.join(SCALES)}")
        if args.command == "check" and args.id not in registry:
            raise _UsageError(f"unknown claim id {args.id!r}; `theorylab list` lists them")
        if args.command == "check" and args.mutant is not None:
            try:
                registry[args.id].mutant(args.mutant)
            except ValueError as err:
                raise _UsageError(str(err)) from None
        out_arg = getattr(args, "out", None)
        if out_arg is not None and Path(out_arg).exists() and not Path(out_arg).is_dir():
            raise _UsageError(f"--out must be a folder; {out_arg!r} is a file")
    except _UsageError as err:
        print(f"theorylab: error: {err}", file=sys.stderr)
        return 2
    if args.command == "list":
        for c in registry:
            print(f"{c.id:<36} [{len(c.mutants)} mutants] {c.paper} ({c.where}): {c.statement}")
        return 0
    if args.command == "check":
        c = registry[args.id]
        t0 = time.perf_counter()
        row = dict(id=c.id, paper=c.paper, statement=c.statement, where=c.where,
                   mutants=len(c.mutants), killed=None, mutant_runs=None,
                   **_run_one(c, args.scale, args.seed, args.mutant))
        row["seconds"] = round(time.perf_counter() - t0, 3)
        if args.out:
            _write_report([row], [], Path(args.out), args.scale, args.seed)
        print(_table([row]))
        if args.mutant:
            print(f"under mutant {args.mutant!r}: {c.mutant(args.mutant).description}")
        for text in (row["rule"], row["detail"]):
            if text:
                print(text)
        return 0 if row["status"] == "pass" else 1
    claims = registry.select(args.only)
    if not claims and args.only:
        print(f"theorylab: error: no claim matches {args.only!r}", file=sys.stderr)
        return 2
    out = Path(args.out)
    rows: list[dict] = []
    try:
        run_claims(claims, args.scale, args.seed, mutants=args.mutants, rows=rows)
        figs = (_make_figures(args.only, args.scale, out, figures_package, args.seed)
                if figures_package else [])
    except KeyboardInterrupt:
        _write_report(rows, [], out, args.scale, args.seed, partial=True)
        print(f"theorylab: interrupted; partial report of {len(rows)} claims: {out / 'report.md'}",
              file=sys.stderr)
        return 130
    _write_report(rows, figs, out, args.scale, args.seed)
    print(_table(rows))
    for fid, status, _ in figs:
        if status != "written":
            print(f"figure {fid}: {status}")
    print(f"report: {out / 'report.md'}")
    failed = (any(r["status"] != "pass" for r in rows) or any(s != "written" for _, s, _ in figs)
              or any(r["killed"] is not None and r["killed"] < r["mutants"] for r in rows))
    return 1 if failed else 0
