"""The claims report of ``theorylab reproduce`` and ``check``: ``report.json`` and, written from it,
``report.md`` and a self-contained ``report.html``; the printed table; the comparison of two
runs; the README's claims table.

Both documents open with one verdict line (counts, recorded outcomes against changes, and the
run's scale, seed, device, wall time, peak memory, version and commit), then a card for every
claim that changed or errored, worst first, then one section per paper: a summary, its claims as
rows of short cells, their full measurements in a detail block, and its figures under them.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path

from ._format import fmt, jsonable, md_row, num

__all__ = [
    "REPORT_KEYS",
    "claims_table",
    "verdict_line",
    "write_report",
    "render_markdown",
    "render_html",
    "compare",
    "comparison_table",
    "readme_table",
]

STATUSES = ("reproduced", "not reproduced", "inconclusive", "error")

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
    "distance",
    "values",
    "sizes",
    "code",
    "mutants",
    "killed",
    "mutant_runs",
    "mutant_caught",
    "mutant_measured",
    "detail",
    "seconds",
)


# ------------------------------------------------------------------------------ the printed table
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
    counts = ", ".join(f"{sum(r['status'] == s for r in rows)} {s}" for s in STATUSES)
    changed = sum(not r["matches"] for r in rows)
    return f"{len(rows)} claims: {counts}; {len(rows) - changed} as recorded, {changed} changed"


def _header_line(h: dict) -> str:
    parts = [f"scale {h['scale']}", f"seed {h['seed']}", f"device {h['device']}"]
    if h.get("wall_seconds") is not None:
        parts.append(f"wall {h['wall_seconds']:.0f} s")
    if h.get("peak_rss_mb") is not None:
        parts.append(f"peak RSS {h['peak_rss_mb'] / 1024:.2f} GB")
    if h.get("threads"):
        parts.append(
            f"{h['threads']} threads" + (f", {h['workers']} workers" if h.get("workers") else "")
        )
    parts.append(
        f"theorylab {h.get('version', '?')}" + (f" ({h['commit']})" if h.get("commit") else "")
    )
    return "; ".join(parts)


def _areas_line(h: dict) -> str:
    """Each area's wall seconds and its own peak memory, slowest first ('' if none)."""
    areas = sorted((h.get("areas") or {}).items(), key=lambda kv: -kv[1]["seconds"])
    return (
        "per area (wall s, peak GB at its end): "
        + ", ".join(f"{a} {v['seconds']:.0f} ({v['peak_rss_mb'] / 1024:.1f})" for a, v in areas)
        if areas
        else ""
    )


# ------------------------------------------------------------------------------ the documents
def _one_line(r) -> str:
    """Measured against expected, in one line."""
    if r["status"] == "error":
        return f"error: {fmt(r['detail'], 160)}"
    return f"measured {fmt(r['measured'], 90)} against {fmt(r['expected'], 60)}"


def _replay(r, h) -> str:
    return f"theorylab check {r['id']} --scale {h['scale']} --seed {h['seed']}"


def _changed(rows) -> list[dict]:
    bad = [r for r in rows if not r["matches"] or r["status"] == "error"]
    key = lambda r: (r["status"] != "error", -_distance(r))  # noqa: E731
    return sorted(bad, key=key)


def _distance(r) -> float:
    d = r.get("distance")
    try:
        d = float(d)
    except (TypeError, ValueError):
        return math.inf
    return d if not math.isnan(d) else math.inf


def _papers(rows) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["paper"], []).append(r)
    return out


def _summary(rs, h) -> str:
    n = sum(r["status"] == "reproduced" for r in rs)
    ch = sum(not r["matches"] for r in rs)
    sizes = [r["sizes"] for r in rs if r.get("sizes")]
    size = ""
    if sizes:
        s = sizes[0]
        size = (
            f" Sizes at {h['scale']}: {fmt(s.get('run'), 70)}; at full: {fmt(s.get('full'), 70)}."
        )
    return (
        f"{n} of {len(rs)} claims reproduced at {h['scale']}"
        + (f", {ch} changed against the record" if ch else ", every verdict as recorded")
        + "."
        + size
    )


def _row_cells(r) -> list[str]:
    rec = "as recorded" if r["matches"] else f"recorded: {r['recorded']}"
    return [
        f"`{r['id']}`",
        f"**{r['status']}**",
        rec,
        fmt(r["measured"], 60),
        fmt(r["expected"], 40),
        fmt(r["where"], 40),
    ]


def _mutants_text(r) -> str:
    """Each mutant run, caught or missed; for a claim that does not reproduce, caught means it
    moved a measured value by more than 3 SE."""
    how = "turned not reproduced" if r["status"] == "reproduced" else "moved > 3 SE"
    return "; ".join(
        f"{name}: {'caught' if ok else 'MISSED'} ({r['mutant_runs'][name]}, "
        f"{how if ok else 'unmoved'})"
        for name, ok in r["mutant_caught"].items()
    )


def _figures_of(paper: str, rows, figures) -> list[dict]:
    """The figures shown under ``paper``'s section, each figure once: under the paper of the
    claim it is named for, else under the first paper of its area (an area such as ``adapters``
    holds several papers)."""

    def owner(f):
        for r in rows:
            if r["id"] == f["id"]:
                return r["paper"]
        return next(r["paper"] for r in rows if r["id"].split(".")[0] == f["id"].split(".")[0])

    placed = {r["id"].split(".")[0] for r in rows}
    return [f for f in figures if f["id"].split(".")[0] in placed and owner(f) == paper]


def render_markdown(report: dict) -> str:
    """``report.md`` from a ``report.json`` body."""
    h, rows, figures = report["header"], report["claims"], report["figures"]
    md = [
        f"# theorylab report — {verdict_line(rows)}",
        "",
        _header_line(h) + (" — PARTIAL: the run was interrupted" if h.get("partial") else ""),
        "",
    ]
    if _areas_line(h):
        md += [_areas_line(h), ""]
    changed = _changed(rows)
    md += ["## Changed or errored", ""]
    if not changed:
        md += ["Every verdict matches its record.", ""]
    for r in changed:
        md += [
            f"### `{r['id']}`: {r['status']} (recorded: {r['recorded']})",
            "",
            f"- **Paper**: {r['statement']} ({r['paper']}, {r['where']})",
            f"- **Measured**: {_one_line(r)}",
            f"- **Rule**: {fmt(r['rule'], 400)}",
        ]
        if r.get("resolve"):
            md.append(f"- **Would resolve it**: {r['resolve']}")
        if r.get("reason"):
            md.append(f"- **Recorded reason**: {r['reason']}")
        md += [
            f"- **Code**: `{r.get('code', '')}`; replay: `{_replay(r, h)}`",
            "",
        ]
    for paper, rs in _papers(rows).items():
        md += [f"## {paper}", "", _summary(rs, h), ""]
        md += [
            "| claim | verdict | record | measured | expected | where |",
            "|---|---|---|---|---|---|",
        ]
        md += [md_row(_row_cells(r)) for r in rs]
        md += ["", "<details><summary>Full measurements</summary>", ""]
        for r in rs:
            md += [
                f"- `{r['id']}` — {r['statement']}",
                f"  - rule: {r['rule']}",
                f"  - measured: `{json.dumps(r['measured'])}`",
            ]
            if r.get("resolve"):
                md.append(f"  - to resolve: {r['resolve']}")
            if r.get("reason"):
                md.append(f"  - recorded: {r['recorded']} ({r['reason']})")
            if r.get("detail"):
                md.append(f"  - detail: {r['detail']}")
            if r.get("mutant_caught"):
                md.append(f"  - mutants: {_mutants_text(r)}")
        md += ["", "</details>", ""]
        for f in _figures_of(paper, rows, figures):
            png = [p for p in f["files"] if p.endswith(".png")]
            if png:
                md += [f"![{f['id']}]({png[0]})", ""]
            elif f["status"] != "written":
                md += [f"Figure `{f['id']}`: {f['status']}", ""]
    placed = {r["id"].split(".")[0] for r in rows}
    others = [f for f in figures if f["id"].split(".")[0] not in placed]
    if others:
        md += ["## Other figures", ""]
        md += [f"- `{f['id']}`: {f['status']}" for f in others]
    return "\n".join(md) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;
font-size:13px;text-align:left;vertical-align:top}.card{border:1px solid #c66;border-radius:6px;
padding:.5em 1em;margin:1em 0;background:#fff6f6}.reproduced{color:#160}
.not-reproduced,.error{color:#a00}.inconclusive{color:#a60}img{max-width:100%}code{font-size:12px}
details{margin:.5em 0}"""


def _img(out: Path, name: str) -> str:
    """The figure as an embedded PNG at most 1000 px wide in a 256-colour palette: the plots are
    flat colours, so the page stays a few MB for the quick run's 40 figures (the full-resolution
    PNG and the PDF stay beside the report)."""
    from PIL import Image

    path = out / name
    if not path.exists():
        return ""
    with Image.open(path) as im:
        rgb = im.convert("RGB")
    if rgb.width > 1000:
        rgb = rgb.resize((1000, round(rgb.height * 1000 / rgb.width)), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    rgb.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(buf, "PNG", optimize=True)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'


def render_html(report: dict, out: Path) -> str:
    """A self-contained ``report.html`` (inline style, figures embedded as data: URIs; no
    network request) from a ``report.json`` body; ``out`` holds the figures' PNG files."""
    e = html.escape
    h, rows, figures = report["header"], report["claims"], report["figures"]

    def cls(status):
        return status.replace(" ", "-")

    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>theorylab report</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>theorylab report — {e(verdict_line(rows))}</h1>",
        f"<p>{e(_header_line(h))}{' — PARTIAL' if h.get('partial') else ''}</p>",
        f"<p>{e(_areas_line(h))}</p>" if _areas_line(h) else "",
        "<h2>Changed or errored</h2>",
    ]
    changed = _changed(rows)
    if not changed:
        parts.append("<p>Every verdict matches its record.</p>")
    for r in changed:
        items = [
            ("Paper", f"{r['statement']} ({r['paper']}, {r['where']})"),
            ("Measured", _one_line(r)),
            ("Rule", fmt(r["rule"], 400)),
        ]
        if r.get("resolve"):
            items.append(("Would resolve it", r["resolve"]))
        if r.get("reason"):
            items.append(("Recorded reason", r["reason"]))
        items.append(("Code", f"{r.get('code', '')}; replay: {_replay(r, h)}"))
        parts.append(
            f"<div class='card'><h3><code>{e(r['id'])}</code>: "
            f"<span class='{cls(r['status'])}'>{e(r['status'])}</span> "
            f"(recorded: {e(r['recorded'])})</h3><ul>"
            + "".join(f"<li><b>{e(k)}</b>: {e(str(v))}</li>" for k, v in items)
            + "</ul></div>"
        )
    for paper, rs in _papers(rows).items():
        parts += [f"<h2>{e(paper)}</h2>", f"<p>{e(_summary(rs, h))}</p>", "<table>"]
        parts.append(
            "<tr>"
            + "".join(
                f"<th>{c}</th>"
                for c in ("claim", "verdict", "record", "measured", "expected", "where")
            )
            + "</tr>"
        )
        for r in rs:
            cells = _row_cells(r)
            parts.append(
                f"<tr><td><code>{e(r['id'])}</code></td>"
                f"<td class='{cls(r['status'])}'>{e(r['status'])}</td>"
                + "".join(f"<td>{e(c)}</td>" for c in cells[2:])
                + "</tr>"
            )
        parts.append("</table><details><summary>Full measurements</summary><ul>")
        for r in rs:
            parts.append(
                f"<li><code>{e(r['id'])}</code> — {e(r['statement'])}<br>rule: {e(r['rule'])}"
                f"<br>measured: <code>{e(json.dumps(r['measured']))}</code>"
                + (f"<br>to resolve: {e(r['resolve'])}" if r.get("resolve") else "")
                + (
                    f"<br>recorded: {e(r['recorded'])} ({e(r['reason'])})"
                    if r.get("reason")
                    else ""
                )
                + (f"<br>detail: {e(r['detail'])}" if r.get("detail") else "")
                + (f"<br>mutants: {e(_mutants_text(r))}" if r.get("mutant_caught") else "")
                + "</li>"
            )
        parts.append("</ul></details>")
        for f in _figures_of(paper, rows, figures):
            png = [p for p in f["files"] if p.endswith(".png")]
            if png:
                parts.append(
                    f"<figure>{_img(out, png[0])}<figcaption>{e(f['id'])}</figcaption></figure>"
                )
            elif f["status"] != "written":
                parts.append(f"<p>Figure <code>{e(f['id'])}</code>: {e(f['status'])}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(rows, figures, out: Path, *, header: dict) -> dict:
    """``report.json`` (``header`` and one object per claim and figure), then ``report.md`` and
    ``report.html`` from it; returns the JSON body."""
    out.mkdir(parents=True, exist_ok=True)
    body = dict(
        header=jsonable(header),
        claims=[{k: jsonable(r.get(k)) for k in REPORT_KEYS} for r in rows],
        figures=[
            dict(id=f, status=s, files=[Path(p).name for p in paths], seconds=t)
            for f, s, paths, t in figures
        ],
    )
    (out / "report.json").write_text(json.dumps(body, indent=2))
    (out / "report.md").write_text(render_markdown(body))
    (out / "report.html").write_text(render_html(body, out))
    return body


# ------------------------------------------------------------------------------ two runs compared
def _number(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def compare(old: dict, new: dict, n_se: float = 3.0) -> list[dict]:
    """The claims whose verdict changed, or one of whose rule values moved by more than ``n_se``
    of its scale (its SE, else its tolerance), between two ``report.json`` bodies; claims in one
    run only are listed too."""
    a = {r["id"]: r for r in old["claims"]}
    b = {r["id"]: r for r in new["claims"]}
    out = []
    for cid in list(dict.fromkeys([*a, *b])):
        ra, rb = a.get(cid), b.get(cid)
        if ra is None or rb is None:
            out.append(dict(id=cid, old=ra and ra["status"], new=rb and rb["status"], moved=""))
            continue
        moved = []
        va, vb = ra.get("values") or {}, rb.get("values") or {}
        for name, x in va.items():
            y = vb.get(name)
            if y is None:
                continue
            xs, ys = x.get("value") or [], y.get("value") or []
            scale = _number(x.get("scale"))
            for u, w in zip(xs, ys, strict=False):
                u, w = _number(u), _number(w)
                if math.isfinite(u) != math.isfinite(w) or (
                    math.isfinite(u)
                    and abs(w - u) > n_se * (scale if scale > 0 else 1e-9 * max(abs(u), 1.0))
                ):
                    moved.append(f"{name}: {num(u)} -> {num(w)}")
                    break
        if ra["status"] != rb["status"] or moved:
            out.append(dict(id=cid, old=ra["status"], new=rb["status"], moved="; ".join(moved)))
    return out


def comparison_table(changes: Sequence[dict]) -> str:
    """The output of ``theorylab report OLD NEW`` (and of ``reproduce --compare``)."""
    if not changes:
        return "no verdict changed and no measured value moved beyond its SE"
    lines = ["| claim | before | after | moved beyond 3 SE |", "|---|---|---|---|"]
    lines += [md_row([f"`{c['id']}`", c["old"], c["new"], fmt(c["moved"], 80)]) for c in changes]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the README table
def _paper_name(paper: str) -> str:
    """A claim's paper string, short: the text inside its first parentheses when it names the
    paper (``Chen & Luo 2025 (arXiv ...)`` stays whole), cut to 60 characters."""
    return fmt(paper.split(", extending")[0], 60)


def readme_table(registry, scale: str = "quick") -> str:
    """The README's tables, from the registry (``theorylab report --markdown``): per paper, the
    claims it records as reproduced at ``scale`` and the command that reproduces just that
    paper; then each claim recorded otherwise, with the outcome and why."""
    claims = sorted(registry, key=lambda c: c.id)  # not import order, which tests can change
    papers: dict[tuple[str, str], list] = {}
    for c in claims:
        papers.setdefault((c.id.split(".")[0], _paper_name(c.paper)), []).append(c)
    area_papers: dict[str, int] = {}
    for area, _ in papers:
        area_papers[area] = area_papers.get(area, 0) + 1
    lines = [
        f"| paper | area | reproduced at {scale} | reproduce just this paper |",
        "|---|---|---|---|",
    ]
    for (area, name), cs in papers.items():
        n = sum(c.recorded.at(scale) == "reproduced" for c in cs)
        glob = f"{area}.*" if area_papers[area] == 1 else ",".join(c.id for c in cs)
        cmd = f"`theorylab reproduce --only '{glob}'`"
        lines.append(md_row([name, f"`{area}`", f"{n} of {len(cs)}", cmd]))
    others = [c for c in claims if c.recorded.at(scale) != "reproduced"]
    lines.append("")
    if not others:
        return "\n".join([*lines, f"Every claim records `reproduced` at {scale}."])
    lines += [
        f"Claims recorded as not reproduced or inconclusive at {scale}, and why:",
        "",
        f"| claim | where | verdict at {scale} | why |",
        "|---|---|---|---|",
    ]
    for c in others:
        why = fmt(c.recorded.reason, 200)
        lines.append(md_row([f"`{c.id}`", fmt(c.where, 50), c.recorded.at(scale), why]))
    return "\n".join(lines)
