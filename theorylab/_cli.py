"""``theorylab reproduce | list | check ID`` (see DESIGN.md, "Entry points").

Exit status: 0 when every selected claim passes, 1 when one fails or errors, 2 for bad
command-line input (one line on stderr).
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
    rep.add_argument("--scale", default="quick", help="quick (default) or full")
    rep.add_argument("--only", default=None, metavar="GLOB", help="claim/figure ids to run")
    rep.add_argument("--out", default="theorylab-out", metavar="DIR", help="output folder")
    sub.add_parser("list", help="list the registered claims")
    chk = sub.add_parser("check", help="run one claim")
    chk.add_argument("id")
    chk.add_argument("--scale", default="quick", help="quick (default) or full")
    chk.add_argument("--out", default=None, metavar="DIR", help="also write the report here")
    return p


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


def run_claims(claims, scale: str) -> list[dict]:
    """Run each claim; one that raises is an ``error`` row with its message, and the run goes on."""
    rows = []
    for c in tqdm(claims, desc="claims", unit="claim", disable=None):
        t0 = time.perf_counter()
        try:
            m = c.check(scale)
            row = dict(status="pass" if m.passed else "fail", measured=m.measured,
                       expected=m.expected, tolerance=m.tolerance, detail=m.detail)
        except Exception as err:  # a claim that raises is reported, not fatal
            tb = traceback.extract_tb(err.__traceback__)[-1]
            row = dict(status="error", measured=None, expected=None, tolerance=None,
                       detail=f"{type(err).__name__}: {err} ({Path(tb.filename).name}:{tb.lineno})")
        rows.append(dict(id=c.id, paper=c.paper, statement=c.statement, where=c.where,
                         seconds=round(time.perf_counter() - t0, 3), **row))
    return rows


def _table(rows) -> str:
    head = f"{'id':<34} {'status':<6} {'measured':<28} {'expected':<28} {'tolerance':<20} {'s':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['id']:<34} {r['status']:<6} {_fmt(r['measured']):<28} "
                     f"{_fmt(r['expected']):<28} {_fmt(r['tolerance'], 20):<20} "
                     f"{r['seconds']:>7.1f}")
    n_pass = sum(r["status"] == "pass" for r in rows)
    lines.append(f"{n_pass} of {len(rows)} claims passed")
    return "\n".join(lines)


def _write_report(rows, figures, out: Path, scale: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    keys = ("id", "paper", "statement", "status", "measured", "expected", "tolerance", "detail",
            "seconds")
    (out / "report.json").write_text(json.dumps([{k: _jsonable(r[k]) for k in keys} for r in rows],
                                                indent=2))
    md = [f"# theorylab report (scale: {scale})", "",
          "| id | status | measured | expected | tolerance | where | detail |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["id"], f"**{r['status']}**", _fmt(r["measured"], None),
                 _fmt(r["expected"], None), _fmt(r["tolerance"], None),
                 f"{r['paper']}, {r['where']}", r["detail"]]
        md.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    md += ["", "## Statements", ""] + [f"- `{r['id']}`: {r['statement']}" for r in rows]
    if figures:
        md += ["", "## Figures", ""]
        for fid, status, paths in figures:
            md.append(f"- `{fid}`: {status}" + (f" ({', '.join(Path(p).name for p in paths)})"
                                                  if paths else ""))
    (out / "report.md").write_text("\n".join(md) + "\n")


def _make_figures(pattern, scale, out: Path, package: str):
    import matplotlib

    matplotlib.use("Agg")
    from figures import figure_modules, save

    done = []
    for mod in tqdm(figure_modules(pattern, package), desc="figures", unit="fig", disable=None):
        try:
            done.append((mod.ID, "written", save(mod.make(scale), out, mod.ID)))
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
    except _UsageError as err:
        print(f"theorylab: error: {err}", file=sys.stderr)
        return 2
    if args.command == "list":
        for c in registry:
            print(f"{c.id:<34} {c.paper} ({c.where}): {c.statement}")
        return 0
    if args.command == "check":
        rows = run_claims([registry[args.id]], args.scale)
        if args.out:
            _write_report(rows, [], Path(args.out), args.scale)
        print(_table(rows))
        if rows[0]["detail"]:
            print(rows[0]["detail"])
        return 0 if rows[0]["status"] == "pass" else 1
    claims = registry.select(args.only)
    if not claims and args.only:
        print(f"theorylab: error: no claim matches {args.only!r}", file=sys.stderr)
        return 2
    out = Path(args.out)
    rows = run_claims(claims, args.scale)
    figs = _make_figures(args.only, args.scale, out, figures_package) if figures_package else []
    _write_report(rows, figs, out, args.scale)
    print(_table(rows))
    for fid, status, _ in figs:
        if status != "written":
            print(f"figure {fid}: {status}")
    print(f"report: {out / 'report.md'}")
    failed = any(r["status"] != "pass" for r in rows) or any(s != "written" for _, s, _ in figs)
    return 1 if failed else 0
