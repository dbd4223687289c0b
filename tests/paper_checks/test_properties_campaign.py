"""``verify --time`` (a budget shared among properties) and ``verify --strength`` (each property
under each of its mutants), on a planted registry and on the package's cheap properties."""

import json
import math

import pytest

import paper_checks.properties  # noqa: F401  (registers the properties)
from paper_checks import PROPERTIES, Registry, patch, prop
from paper_checks._campaign import parse_duration, strength, strength_summary, verify_budget
from theorylab._cli import main

BOUND = 1.0


@pytest.fixture
def demo():
    reg = Registry()

    @prop(
        "demo.square",
        paper="Demo",
        statement="x^2 <= BOUND * |x| on [-1, 1]",
        where="Eq. (3)",
        strategy=lambda st: st.fixed_dictionaries({"x": st.floats(-1.0, 1.0)}),
        mutants=[
            patch(f"{__name__}.BOUND", 0.5, "constant halved", name="half"),
            patch(
                f"{__name__}.BOUND", 1.0, "no change: a mutant the search cannot catch", name="same"
            ),
        ],  # fmt: skip
        registry=reg,
    )
    def _square(ex):
        return BOUND * abs(ex["x"]) - ex["x"] ** 2

    return reg


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("1.5h", 5400.0)]
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0", "-5m", "10 minutes", "m"])
def test_parse_duration_refuses_what_is_not_a_duration(text):
    with pytest.raises(ValueError, match="`time` must be a positive duration"):
        parse_duration(text)


def test_strength_counts_caught_mutants_and_the_examples_to_catch(demo):
    row = strength(demo["demo.square"], 300, seed=0)
    by = {m["mutant"]: m for m in row["mutants"]}
    assert by["half"]["caught"] and 1 <= by["half"]["caught_at"] <= 300
    assert not by["same"]["caught"] and by["same"]["caught_at"] is None
    s = strength_summary([row], within=300)
    assert (s["mutants"], s["caught"], s["share_caught"]) == (2, 1, 0.5)
    assert s["median_examples"] == math.inf  # the middle of (k, inf) for two mutants


def test_budget_runs_rounds_keeps_the_smallest_slack_and_reports_time(tmp_path):
    props = [PROPERTIES["rmt.semicircle_stieltjes"], PROPERTIES["rmt.bbp_stieltjes"]]
    rows = verify_budget(props, 3.0, seed=0, db=tmp_path, base=10)
    assert [r["id"] for r in rows] == [p.id for p in props]
    for r in rows:
        assert r["status"] == "holds" and r["rounds"] >= 1 and r["examples"] >= 10
        assert 0 < r["seconds"] and r["min_slack"] <= r["first_slack"]


def test_cli_strength_and_time_write_one_readable_report(demo, tmp_path, capsys):
    out = str(tmp_path / "out")
    argv = ["verify", "--strength", "--examples", "200", "--out", out]
    assert main(argv, properties=demo) == 1  # the mutant "same" is not caught
    printed = capsys.readouterr().out
    assert "1 of 2 mutants caught within 200 examples (50.0 %)" in printed
    argv = ["verify", "--time", "2s", "--db", str(tmp_path / "db"), "--out", out]
    assert main(argv, properties=demo) == 0
    body = json.loads((tmp_path / "out" / "verify.json").read_text())
    assert body["budget_seconds"] == 2.0 and body["properties"][0]["examples"] > 0
    md = (tmp_path / "out" / "verify.md").read_text()
    assert md.splitlines()[2].startswith("**1 of 1 properties hold (a budget of 2 s")
    assert "Strength: 1 of 2 mutants caught" in md and "half: " in md
    page = (tmp_path / "out" / "verify.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "http" not in page
    assert main(["verify", "--strength", "--time", "1m"], properties=demo) == 2
    assert main(["verify", "--time", "soon"], properties=demo) == 2
