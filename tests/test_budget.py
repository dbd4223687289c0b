"""The quick run's budget (``docs/running.md``, issue 46), checked against the last recorded run:
``benchmarks/quick_run.json``, written by ``python benchmarks/quick_run.py --json ...`` on a
2-core machine from an installed checkout."""

import json
from pathlib import Path

import pytest

RECORD = Path(__file__).resolve().parents[1] / "benchmarks" / "quick_run.json"


@pytest.fixture(scope="module")
def record():
    return json.loads(RECORD.read_text())


def test_the_record_is_a_whole_quick_run(record):
    r = record["results"]
    assert record["scale"] == "quick" and r["cores"] >= 2 and "cold" in r
    for name in [k for k in ("cold", "warm") if k in r]:
        run = r[name]
        assert run["measured_by"].startswith(("/usr/bin/time -v", "report header")), name
        assert sum(run["verdicts"].values()) >= 90, run["verdicts"]  # every claim ran
        assert len(run["areas"]) >= 15, sorted(run["areas"])  # every paper's area ran
        # an area's peak is sampled from Linux's per-thread-batched RSS counters: the record of
        # cfc5453 (before AreaPeak capped it) has one 0.3 MB above the process's high-water mark
        top = max(a["peak_rss_mb"] for a in run["areas"].values())
        assert 0 < top <= run["peak_rss_mb"] + 1.0


@pytest.mark.xfail(
    strict=True,
    reason="issue 46 open: the recorded quick run exceeds the 2-minute share of several areas and "
    "the 15/8-minute totals (benchmarks/quick_run.json); remove this mark when it fits",
)
def test_the_quick_run_fits_the_budget(record):
    r, b = record["results"], record["results"]["budget"]
    assert (b["cold_seconds"], b["warm_seconds"]) == (900, 480)
    assert (b["area_seconds"], b["peak_rss_mb"]) == (120, 4096)
    assert "warm" in r, "no warm run recorded"
    assert r["cold"]["wall_seconds"] <= b["cold_seconds"]
    assert r["warm"]["wall_seconds"] <= b["warm_seconds"]
    for name in ("cold", "warm"):
        assert r[name]["peak_rss_mb"] <= b["peak_rss_mb"], name
        over = {a: v["seconds"] for a, v in r[name]["areas"].items() if v["seconds"] > 120}
        assert not over, (name, over)
