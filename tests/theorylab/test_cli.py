"""The `theorylab` command on temporary registries: exit codes, report files, error rows."""

import json

import pytest

from paper_checks._registry import Measurement, Registry, claim
from theorylab._cli import main


@pytest.fixture
def registry():
    reg = Registry()

    @claim("demo.true", paper="Demo", statement="1 + 1 = 2", where="Eq. (1)", registry=reg)
    def _true(scale):
        return Measurement(measured=2.0, expected=2.0, tolerance=0.0, passed=True)

    @claim("demo.false", paper="Demo", statement="1 + 1 = 3", where="Eq. (2)", registry=reg)
    def _false(scale):
        measured = 1.0 + 1.0
        return Measurement(measured=measured, expected=3.0, tolerance=0.1,
                           passed=abs(measured - 3.0) <= 0.1)

    @claim("other.raises", paper="Demo", statement="raises", where="-", registry=reg)
    def _raises(scale):
        raise RuntimeError("boom")

    return reg


def test_false_claim_fails_run_and_is_reported(registry, tmp_path):
    code = main(["reproduce", "--out", str(tmp_path)], registry=registry, figures_package=None)
    assert code == 1
    rows = {r["id"]: r for r in json.loads((tmp_path / "report.json").read_text())}
    assert rows["demo.true"]["status"] == "pass"
    assert rows["demo.false"]["status"] == "fail" and rows["demo.false"]["measured"] == 2.0
    assert rows["other.raises"]["status"] == "error" and "boom" in rows["other.raises"]["detail"]
    assert set(rows["demo.true"]) == {"id", "paper", "statement", "status", "measured",
                                       "expected", "tolerance", "detail", "seconds"}
    md = (tmp_path / "report.md").read_text()
    assert "demo.false | **fail**" in md


def test_only_glob_and_passing_run(registry, tmp_path):
    code = main(["reproduce", "--only", "demo.t*", "--out", str(tmp_path)], registry=registry,
                figures_package=None)
    assert code == 0
    assert [r["id"] for r in json.loads((tmp_path / "report.json").read_text())] == ["demo.true"]


def test_check_one_claim(registry, capsys):
    assert main(["check", "demo.true"], registry=registry) == 0
    assert main(["check", "demo.false"], registry=registry) == 1
    assert "demo.false" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["check", "no.such"], ["reproduce", "--scale", "huge"],
                                  ["frobnicate"], ["reproduce", "--only", "zzz.*"]])
def test_bad_command_line_prints_one_line_and_exits_2(registry, capsys, argv):
    assert main(argv, registry=registry, figures_package=None) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("theorylab: error:")


def test_list(registry, capsys):
    assert main(["list"], registry=registry) == 0
    out = capsys.readouterr().out
    assert "demo.true" in out and "other.raises" in out


def test_registry_rejects_bad_and_duplicate_ids():
    reg = Registry()
    claim("a.b", paper="p", statement="s", where="w", registry=reg)(lambda s: None)
    with pytest.raises(ValueError, match="twice"):
        claim("a.b", paper="p", statement="s", where="w", registry=reg)(lambda s: None)
    with pytest.raises(ValueError, match="AREA.NAME"):
        claim("nodot", paper="p", statement="s", where="w", registry=reg)(lambda s: None)


def test_figures_written_as_png_and_pdf_and_errors_reported(registry, tmp_path, monkeypatch):
    pkg = tmp_path / "demo_figures"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ok.py").write_text(
        "import matplotlib.pyplot as plt\nID = 'demo.true'\nTITLE = 't'\n"
        "def make(scale):\n    fig, ax = plt.subplots()\n    ax.plot([0, 1])\n    return fig\n")
    (pkg / "bad.py").write_text("ID = 'demo.bad'\nTITLE = 't'\n"
                                "def make(scale):\n    raise ValueError('no data')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    code = main(["reproduce", "--only", "demo.t*", "--out", str(out)], registry=registry,
                figures_package="demo_figures")
    assert code == 0  # the failing figure is not selected by the glob
    assert (out / "demo_true.png").stat().st_size > 0 and (out / "demo_true.pdf").stat().st_size > 0
    code = main(["reproduce", "--only", "demo.*", "--out", str(out)], registry=registry,
                figures_package="demo_figures")
    assert code == 1
    assert "`demo.bad`: error: ValueError: no data" in (out / "report.md").read_text()
