"""Every registered claim and figure at ``smoke`` (default run); mutants and seeds (``slow``).

At ``smoke`` the verdict is not asserted: the claim runs, its numbers are finite, its verdict comes
from a typed rule, and it declares at least one mutant (a claim that declares replicates is run
so in test_replicates.py, beside its chunked run). The slow tests assert, at ``quick``, that
each claim gives the verdict it records, that each of its mutants is caught (turned into ``not
reproduced``, or, for a claim that does not reproduce, moved by more than 3 SE), and that it
gives one verdict for seeds 0, 1 and 2.
"""

from pathlib import Path

import matplotlib
import pytest

from figures import figure_modules, save
from paper_checks import REGISTRY, moved, run_claim

matplotlib.use("Agg")
CLAIMS = [c.id for c in REGISTRY]
# a claim that declares replicates runs at smoke in test_replicates.py, with the same assertions
UNCHUNKED = [c.id for c in REGISTRY if c.replicates is None]
MUTANTS = [(c.id, m.name) for c in REGISTRY for m in c.mutants]


@pytest.mark.parametrize("claim_id", UNCHUNKED)
def test_claim_runs_at_smoke_with_a_typed_rule_sizes_and_mutants(claim_id, smoke_checked):
    smoke_checked(REGISTRY[claim_id], run_claim(REGISTRY[claim_id], "smoke", seed=0))


@pytest.mark.parametrize("mod", figure_modules(), ids=lambda m: m.ID)
def test_figure_is_written_at_smoke(mod, tmp_path):
    paths = save(mod.make("smoke", seed=0), tmp_path, mod.ID)
    assert [p[-4:] for p in paths] == [".png", ".pdf"]
    assert all(Path(p).stat().st_size > 1000 for p in paths)


@pytest.mark.slow
@pytest.mark.parametrize("claim_id,mutant", MUTANTS)
def test_every_mutant_is_killed_at_quick(claim_id, mutant):
    c = REGISTRY[claim_id]
    clean, under = run_claim(c, "quick", 0), run_claim(c, "quick", 0, mutant)
    if clean.status == "reproduced":
        assert under.status == "not reproduced", f"mutant {mutant} survives"
    else:
        assert moved(clean, under), f"mutant {mutant} moves no value by 3 SE"


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", CLAIMS)
def test_verdict_is_the_same_for_seeds_0_1_2(claim_id):
    c = REGISTRY[claim_id]
    verdicts = {seed: run_claim(c, "quick", seed).status for seed in (0, 1, 2)}
    assert set(verdicts.values()) == {c.recorded.at("quick")}, verdicts
