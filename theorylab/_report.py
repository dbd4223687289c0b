"""Report files and tables of the command: ``report.md``/``report.json`` for claims and figures,
``verify.md``/``verify.json`` for properties."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

__all__ = [
    "claims_table",
    "verdict_line",
    "write_report",
    "verify_table",
    "write_verify_report",
]

_STATUSES = ("reproduced", "not reproduced", "inconclusive", "error")

REPORT_KEYS = (
    "id",
    "paper",
    "statement",
    "where",
    "status",
    "recorded",
    "reason",
    "matches",
    "measured",
    "expected",
    "tolerance",
    "rule",
    "resolve",
    "mutants",
    "killed",
    "mutant_runs",
    "mutant_caught",
    "mutant_measured",
    "detail",
    "seconds",
)


def jsonable(x):
    """Floats, lists and dicts for the JSON reports; NaN/inf written as strings."""
    if isinstance(x, np.ndarray):
        x = x.tolist()
    elif isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if x is None or isinstance(x, bool | int | float | str):
        return x
    return str(x)


def fmt(x, width: int | None = 28) -> str:
    """Short text of a measured/expected value, cut to ``width`` characters (None: uncut)."""
    if isinstance(x, float):
        s = f"{x:.6g}"
    elif isinstance(x, list | tuple):
        s = "[" + ", ".join(fmt(v, None) for v in x) + "]"
    elif isinstance(x, dict):
        s = "{" + ", ".join(f"{k}: {fmt(v, None)}" for k, v in x.items()) + "}"
    else:
        s = str(x)
    return s if width is None or len(s) <= width else s[: width - 1] + "…"


def _mutant_cell(r) -> str:
    return f"{r['mutants']}" if r["killed"] is None else f"{r['killed']}/{r['mutants']}"


def claims_table(rows) -> str:
    """The fixed-width claims table printed by ``reproduce`` and ``check``."""
    head = (
        f"{'id':<36} {'status':<14} {'recorded':<14} {'measured':<28} {'expected':<28} "
        f"{'mutants':>7} {'s':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['id']:<36} {r['status']:<14} "
            f"{'=' if r['matches'] else r['recorded']:<14} {fmt(r['measured']):<28} "
            f"{fmt(r['expected']):<28} {_mutant_cell(r):>7} {r['seconds']:>7.1f}"
        )
    lines.append(verdict_line(rows))
    return "\n".join(lines)


def verdict_line(rows) -> str:
    """The counts of each verdict and of changes against the recorded outcomes."""
    counts = {s: sum(r["status"] == s for r in rows) for s in _STATUSES}
    changed = sum(not r["matches"] for r in rows)
    text = ", ".join(f"{n} {s}" for s, n in counts.items())
    return f"{len(rows)} claims: {text}; {len(rows) - changed} as recorded, {changed} changed"


def _md_row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def write_report(
    rows, figures, out: Path, *, scale: str, seed: int, device: str, partial: bool = False
) -> None:
    """``report.json`` (header fields and one object per claim) and ``report.md``."""
    out.mkdir(parents=True, exist_ok=True)
    body = dict(
        scale=scale,
        seed=seed,
        device=device,
        partial=partial,
        claims=[{k: jsonable(r[k]) for k in REPORT_KEYS} for r in rows],
        figures=[
            dict(id=f, status=s, files=[Path(p).name for p in paths]) for f, s, paths in figures
        ],
    )
    (out / "report.json").write_text(json.dumps(body, indent=2))
    title = f"# theorylab report (scale: {scale}, seed: {seed}, device: {device})"
    md = [
        title + (" — PARTIAL: the run was interrupted" if partial else ""),
        "",
        "| id | status | measured | expected | tolerance | rule | mutants | where | detail |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            _md_row(
                [
                    r["id"],
                    f"**{r['status']}**",
                    fmt(r["measured"], None),
                    fmt(r["expected"], None),
                    fmt(r["tolerance"], None),
                    r["rule"],
                    _mutant_cell(r),
                    f"{r['paper']}, {r['where']}",
                    r["detail"],
                ]
            )
        )
    md += ["", "## Statements", ""] + [f"- `{r['id']}`: {r['statement']}" for r in rows]
    if figures:
        md += ["", "## Figures", ""]
        for fid, status, paths in figures:
            md.append(
                f"- `{fid}`: {status}"
                + (f" ({', '.join(Path(p).name for p in paths)})" if paths else "")
            )
    (out / "report.md").write_text("\n".join(md) + "\n")


def verify_table(rows) -> str:
    """The fixed-width table printed by ``verify``."""
    head = f"{'id':<40} {'status':<15} {'examples':>8} {'min slack':>11} {'s':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['id']:<40} {r['status']:<15} {r['examples']:>8} "
            f"{r['min_slack']:>11.4g} {r['seconds']:>7.1f}"
        )
    n = sum(r["status"] == "holds" for r in rows)
    lines.append(f"{n} of {len(rows)} properties hold on every example tried")
    return "\n".join(lines)


def write_verify_report(
    rows, out: Path, *, examples: int, seed: int, device: str, partial: bool = False
) -> None:
    """``verify.json`` and ``verify.md``: per property the examples tried, the smallest slack
    with the instance attaining it, and a shrunk counterexample with its replay blob."""
    out.mkdir(parents=True, exist_ok=True)
    body = dict(
        examples=examples,
        seed=seed,
        device=device,
        partial=partial,
        properties=[jsonable(r) for r in rows],
    )
    (out / "verify.json").write_text(json.dumps(body, indent=2))
    md = [
        f"# theorylab verify (examples: {examples}, seed: {seed}, device: {device})"
        + (" — PARTIAL: the run was interrupted" if partial else ""),
        "",
        "| id | status | examples | smallest slack | at instance | counterexample | replay |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        replay = f"`theorylab verify --only {r['id']} --replay {r['blob']}`" if r["blob"] else ""
        md.append(
            _md_row(
                [
                    r["id"],
                    f"**{r['status']}**",
                    r["examples"],
                    f"{r['min_slack']:.4g}",
                    fmt(r["tightest"], None),
                    fmt(r.get("counterexample"), None) or r.get("error", ""),
                    replay,
                ]
            )
        )
    md += ["", "## Statements", ""] + [
        f"- `{r['id']}` ({r['paper']}, {r['where']}): {r['statement']}" for r in rows
    ]
    (out / "verify.md").write_text("\n".join(md) + "\n")
