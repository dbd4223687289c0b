"""The report a reviewer reads: the verdict line and the changed claims first, short cells, a
self-contained HTML, one progress line per task without a terminal, and two runs compared."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from paper_checks import Registry, claim, measure, paired_gap, record, within
from theorylab._cli import main

SHIFT = 0.0  # moved by the comparison test


def _registry(n_changed: int = 12) -> Registry:
    reg = Registry()
    for i in range(30):

        @claim(f"ok.c{i:02d}", paper="Paper A", statement="holds", where="Thm 1", registry=reg)
        def _ok(size, seed, i=i):
            long = {f"key_{k}": [0.123456789 * k] * 30 for k in range(5)}  # a long measurement
            return measure(within(1.0 + SHIFT, 1.0, 0.1, name="v"), extra=long)

    for i in range(n_changed):

        @claim(f"bad.c{i:02d}", paper="Paper B", statement="fails", where="Tab. 2", registry=reg)
        def _bad(size, seed, i=i):
            return measure(within(1.0, 2.0 + i, 0.1, name="v"))

    @claim(
        "rec.gap",
        paper="Paper B",
        statement="a gap",
        where="Fig. 3",
        recorded=record(quick="inconclusive", reason="needs more seeds"),
        registry=reg,
    )
    def _rec(size, seed):
        a = np.array([0.3, -0.2, 0.4, -0.1])
        return measure(paired_gap(a, 0 * a, paper=0.3, name="gap"))

    return reg


def test_report_md_opens_with_the_verdict_line_and_every_changed_claim(tmp_path):
    assert (
        main(
            ["reproduce", "--out", str(tmp_path), "-q"], registry=_registry(), figures_package=None
        )
        == 1
    )
    md = (tmp_path / "report.md").read_text().splitlines()
    assert md[0].startswith(
        "# theorylab report — 43 claims: 30 reproduced, 12 not reproduced, 1 inconclusive"
    )
    assert "31 as recorded, 12 changed" in md[0]
    assert "scale quick" in md[2] and "peak RSS" in md[2] and "theorylab" in md[2]
    head = "\n".join(md[:40])
    # headlines of the changed claims, worst first (bad.c11 is 110 tolerances off, bad.c00 10)
    heads = re.findall(r"### `(bad\.c\d\d)`", "\n".join(md))
    assert heads[:3] == ["bad.c11", "bad.c10", "bad.c09"] and len(heads) == 12
    assert "bad.c11" in head
    for line in md:  # table cells at most 80 characters
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            assert max(len(c) for c in cells) <= 80, line
    assert not any("1e+300" in line or "inf" in line.split() for line in md)


def test_report_html_is_self_contained_and_embeds_every_figure(tmp_path, monkeypatch):
    import os

    pkg = tmp_path / "pkg" / "rep_figures"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ok_fig.py").write_text(
        "import matplotlib.pyplot as plt\nID = 'ok.fig'\nTITLE = 't'\n"
        "def make(scale, seed=0):\n    f, ax = plt.subplots()\n    ax.plot([0, 1])\n    return f\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    out = tmp_path / "out"
    reg = _registry(1)

    @claim("ok.other", paper="Paper C", statement="holds", where="Thm 2", registry=reg)
    def _other(size, seed):  # a second paper in the figure's area: the figure is shown once
        return measure(within(1.0, 1.0, 0.1, name="v"))

    main(["reproduce", "--out", str(out), "-q"], registry=reg, figures_package="rep_figures")
    html = (out / "report.html").read_text()
    assert os.path.getsize(out / "report.html") < 5e6
    assert html.count("data:image/png;base64,") == 1
    assert (out / "report.md").read_text().count("(ok_fig.png)") == 1
    # no external reference: no http(s) URL, no src/href that is not a data: URI or an anchor
    assert "http://" not in html and "https://" not in html
    refs = re.findall(r"""(?:src|href)=["']([^"']*)""", html)
    assert refs and all(r.startswith("data:") or r.startswith("#") for r in refs), refs


def test_progress_lines_on_stderr_without_a_terminal(tmp_path):
    """`theorylab reproduce > log 2> err`: one line per finished claim and figure in err."""
    cmd = [
        sys.executable,
        "-m",
        "theorylab",
        "reproduce",
        "--scale",
        "smoke",
        "--only",
        "rmt.*",
        "--out",
        str(tmp_path),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [x for x in res.stderr.splitlines() if x.startswith("[")]
    assert res.returncode == 0, res.stderr[-2000:]
    n = len(json.loads((tmp_path / "report.json").read_text())["claims"]) + len(
        json.loads((tmp_path / "report.json").read_text())["figures"]
    )
    assert len(lines) == n and lines[-1].startswith(f"[{n}/{n}] ")
    assert re.match(r"\[1/\d+\] rmt\.\w+ (reproduced|written) [\d.]+ s, ~\d+ s left", lines[0])
    quiet = subprocess.run([*cmd, "-q"], capture_output=True, text=True, timeout=600)
    assert not [x for x in quiet.stderr.splitlines() if x.startswith("[")]


def test_report_compares_two_runs_and_the_readme_table(tmp_path, capsys):
    global SHIFT
    reg = _registry(1)
    main(
        ["reproduce", "--out", str(tmp_path / "a"), "-q", "--only", "ok.*"],
        registry=reg,
        figures_package=None,
    )
    SHIFT = 0.05  # a move under 3 x the rule's tolerance (0.1): not listed
    try:
        main(
            ["reproduce", "--out", str(tmp_path / "b"), "-q", "--only", "ok.*"],
            registry=reg,
            figures_package=None,
        )
        SHIFT = 0.5
        main(
            ["reproduce", "--out", str(tmp_path / "c"), "-q", "--only", "ok.*"],
            registry=reg,
            figures_package=None,
        )
    finally:
        SHIFT = 0.0
    capsys.readouterr()
    a, b, c = (str(tmp_path / x / "report.json") for x in "abc")
    assert main(["report", a, b]) == 0  # 0.05 is under 3 tolerances: nothing moved
    assert "no verdict changed" in capsys.readouterr().out
    assert main(["report", a, c]) == 1
    out = capsys.readouterr().out
    assert "| `ok.c00` | reproduced | not reproduced | v: 1 -> 1.5 |" in out
    assert main(["report", a]) == 2
    assert main(["report", "--markdown"], registry=reg) == 0
    table = capsys.readouterr().out
    assert "| `rec.gap` | Fig. 3 | inconclusive | needs more seeds |" in table
    assert "| Paper B | `rec` | 0 of 1 | `theorylab reproduce --only 'rec.*'` |" in table


@pytest.mark.parametrize("bad", ["missing.json", "not-json"])
def test_report_refuses_a_file_that_is_not_a_report(tmp_path, bad, capsys):
    path = tmp_path / "x.json"
    if bad == "not-json":
        path.write_text("{")
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"claims": []}))
    assert main(["report", str(path), str(good)]) == 2
    assert "report.json" in capsys.readouterr().err
