"""The report of ``theorylab verify``: ``verify.json`` (and ``strength.json`` from ``verify
--strength``), rendered as ``verify.md`` and a self-contained ``verify.html`` in the manner of
the claims report: the summary first, then any counterexample with its replay line, then per
area the properties with smallest slack, examples, time and (when measured) strength."""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

from ._format import fmt, jsonable, num
from ._format import md_row as _md_row
from ._report import _CSS

__all__ = [
    "verify_table",
    "write_verify_report",
    "strength_table",
    "write_strength_report",
    "render_markdown",
    "render_html",
]


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


def _strength_line(s: dict) -> str:
    if not s.get("mutants"):
        return "no mutants run"
    return (
        f"{s['caught']} of {s['mutants']} mutants caught within {s['within']} examples "
        f"({100 * s['share_caught']:.1f} %), median {num(s['median_examples'])} examples to catch"
    )


def strength_table(rows, summary: dict) -> str:
    """The fixed-width table printed by ``verify --strength``: one line per mutant."""
    head = f"{'id':<40} {'mutant':<28} {'caught':<7} {'examples':>8} {'s':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        for m in r["mutants"]:
            at = m["caught_at"] if m["caught"] else "-"
            lines.append(
                f"{r['id']:<40} {m['mutant']:<28} {'yes' if m['caught'] else 'NO':<7} "
                f"{at!s:>8} {m['seconds']:>7.1f}"
            )
    lines.append(_strength_line(summary))
    return "\n".join(lines)


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_verify_report(
    rows,
    out: Path,
    *,
    examples: int | None,
    seed: int,
    device: str,
    partial: bool = False,
    budget: float | None = None,
) -> None:
    """``verify.json``, then ``verify.md`` and ``verify.html`` (with the strength of an earlier
    ``--strength`` run in the same folder, if any)."""
    out.mkdir(parents=True, exist_ok=True)
    body = dict(
        examples=examples,
        budget_seconds=budget,
        seed=seed,
        device=device,
        partial=partial,
        properties=[jsonable(r) for r in rows],
    )
    (out / "verify.json").write_text(json.dumps(body, indent=2))
    _render(out)


def write_strength_report(rows, summary: dict, out: Path, *, examples: int, seed: int,
                          device: str) -> None:  # fmt: skip
    """``strength.json``, then ``verify.md`` and ``verify.html`` re-rendered with it."""
    out.mkdir(parents=True, exist_ok=True)
    body = dict(
        examples=examples, seed=seed, device=device, summary=jsonable(summary),
        properties=[jsonable(r) for r in rows],
    )  # fmt: skip
    (out / "strength.json").write_text(json.dumps(body, indent=2))
    _render(out)


def _render(out: Path) -> None:
    ver, strg = _load(out / "verify.json"), _load(out / "strength.json")
    (out / "verify.md").write_text(render_markdown(ver, strg))
    (out / "verify.html").write_text(render_html(ver, strg))


def _float(x) -> float:
    return float(x) if isinstance(x, int | float | str) else math.nan


def _summary_lines(ver, strg) -> list[str]:
    lines = []
    if ver is not None:
        props = ver["properties"]
        n = sum(r["status"] == "holds" for r in props)
        cex = sum(r["status"] == "counterexample" for r in props)
        err = sum(r["status"] == "error" for r in props)
        run = f"{ver['examples']} examples each" if ver.get("examples") else (
            f"a budget of {num(ver.get('budget_seconds'))} s"
        )  # fmt: skip
        lines.append(
            f"{n} of {len(props)} properties hold ({run}, seed {ver['seed']}, {ver['device']}); "
            f"{cex} counterexample(s), {err} error(s)"
            + (" — PARTIAL: the run was interrupted" if ver.get("partial") else "")
        )
    if strg is not None:
        lines.append("Strength: " + _strength_line(strg["summary"]))
    return lines


def _by_area(ver, strg) -> dict[str, list[tuple[dict | None, dict | None]]]:
    rows = {r["id"]: (r, None) for r in (ver or {}).get("properties", [])}
    for s in (strg or {}).get("properties", []):
        rows[s["id"]] = (rows.get(s["id"], (None, None))[0], s)
    areas: dict[str, list] = {}
    for pid in sorted(rows):
        areas.setdefault(pid.split(".")[0], []).append(rows[pid])
    return areas


def _strength_cell(s: dict | None) -> str:
    if s is None:
        return ""
    return ", ".join(
        f"{m['mutant']}: {m['caught_at'] if m['caught'] else 'missed'}" for m in s["mutants"]
    )


def _cells(r: dict | None, s: dict | None) -> list[str]:
    if r is None:
        return ["", "", "", "", "", _strength_cell(s)]
    return [
        r["status"],
        num(_float(r["min_slack"])),
        fmt(r.get("tightest"), 60),
        str(r["examples"]),
        f"{_float(r['seconds']):.1f}",
        _strength_cell(s),
    ]


def _replay(r) -> str:
    return f"theorylab verify --only {r['id']} --replay {r['blob']}"


def render_markdown(ver, strg) -> str:
    md = ["# theorylab verify", ""] + [f"**{x}**" for x in _summary_lines(ver, strg)] + [""]
    bad = [r for r in (ver or {}).get("properties", []) if r["status"] in ("counterexample",
                                                                             "error")]  # fmt: skip
    md += ["## Counterexamples and errors", ""]
    if not bad:
        md.append("None.")
    for r in bad:
        what = fmt(r.get("counterexample"), None) if r["blob"] else r.get("error", "")
        md.append(f"- `{r['id']}` **{r['status']}**: {what}")
        if r["blob"]:
            md.append(f"  replay: `{_replay(r)}`")
    head = ["id", "status", "smallest slack", "at instance", "examples", "s",
            "strength (examples to catch)"]  # fmt: skip
    for area, items in _by_area(ver, strg).items():
        md += ["", f"## {area}", "", _md_row(head), "|" + "---|" * len(head)]
        for r, s in items:
            pid = (r or s)["id"]
            md.append(_md_row([pid, *_cells(r, s)]))
    if ver is not None:
        md += ["", "## Statements", ""] + [
            f"- `{r['id']}` ({r['paper']}, {r['where']}): {r['statement']}"
            for r in ver["properties"]
        ]
    return "\n".join(md) + "\n"


def render_html(ver, strg) -> str:
    """A self-contained ``verify.html`` (inline style, no network request)."""
    e = html.escape
    lines = _summary_lines(ver, strg)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>theorylab verify</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>theorylab verify — {e(lines[0] if lines else 'nothing run')}</h1>",
        *[f"<p>{e(x)}</p>" for x in lines[1:]],
        "<h2>Counterexamples and errors</h2>",
    ]
    bad = [r for r in (ver or {}).get("properties", []) if r["status"] in ("counterexample",
                                                                             "error")]  # fmt: skip
    if not bad:
        parts.append("<p>None.</p>")
    for r in bad:
        what = fmt(r.get("counterexample"), None) if r["blob"] else r.get("error", "")
        replay = f"<br>replay: <code>{e(_replay(r))}</code>" if r["blob"] else ""
        parts.append(
            f"<div class='card'><b>{e(r['id'])}</b> <span class='error'>{e(r['status'])}</span>"
            f": {e(what)}{replay}<br>{e(r['statement'])} ({e(r['paper'])}, {e(r['where'])})</div>"
        )
    head = ["id", "status", "smallest slack", "at instance", "examples", "s", "strength"]
    for area, items in _by_area(ver, strg).items():
        parts.append(f"<h2>{e(area)}</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in head))
        for r, s in items:
            cells = [(r or s)["id"], *_cells(r, s)]
            status = "reproduced" if cells[1] == "holds" else "error"
            parts.append(
                "<tr>" + "".join(
                    f"<td class='{status}'>{e(c)}</td>" if i == 1 else f"<td>{e(c)}</td>"
                    for i, c in enumerate(cells)
                ) + "</tr>"
            )  # fmt: skip
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
