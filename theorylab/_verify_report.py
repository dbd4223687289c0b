"""The report of ``theorylab verify``: ``verify.md``/``verify.json`` and the printed table."""

from __future__ import annotations

import json
from pathlib import Path

from ._format import fmt, jsonable
from ._format import md_row as _md_row

__all__ = ["verify_table", "write_verify_report"]


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
