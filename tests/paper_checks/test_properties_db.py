"""The example database of ``theorylab verify``: a second run starts each property at or below
the smallest slack the first found, and replays a counterexample first."""

import pytest

import paper_checks.properties  # noqa: F401  (registers the properties)
from paper_checks import PROPERTIES
from paper_checks._properties import default_db, verify

CHEAP = [
    "rmt.semicircle_stieltjes",
    "aegisguard.path_fraction_bound",
    "aegisguard.cost_counts_bytes",
]


@pytest.mark.parametrize("pid", CHEAP)
def test_second_run_starts_at_the_first_runs_tightest(pid, tmp_path):
    p = PROPERTIES[pid]
    first = verify(p, 25, seed=0, db=tmp_path)
    second = verify(p, 25, seed=1, db=tmp_path)
    assert first["status"] == second["status"] == "holds"
    assert second["first_slack"] <= first["min_slack"]
    assert second["min_slack"] <= first["min_slack"]


def test_a_counterexample_is_replayed_first(tmp_path):
    p = PROPERTIES["aegisguard.path_fraction_bound"]
    first = verify(p, 200, seed=0, mutant="min_ratio", db=tmp_path)
    second = verify(p, 200, seed=5, mutant="min_ratio", db=tmp_path)
    assert first["status"] == second["status"] == "counterexample"
    assert second["caught_at"] == 1


def test_without_a_db_nothing_is_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_db() == tmp_path / "theorylab" / "hypothesis"
    verify(PROPERTIES["rmt.semicircle_stieltjes"], 5, seed=0)
    assert not (tmp_path / "theorylab").exists()
