"""Every registered property at a small budget: it holds on the examples tried, and each of its
mutants (a planted bug, e.g. a bound's constant lowered) is found as a counterexample."""

import pytest

from paper_checks import PROPERTIES, verify

PROPS = [p.id for p in PROPERTIES]
MUTANTS = [(p.id, m.name) for p in PROPERTIES for m in p.mutants]


@pytest.mark.parametrize("prop_id", PROPS)
def test_property_holds_at_a_small_budget(prop_id):
    row = verify(PROPERTIES[prop_id], examples=25, seed=0)
    assert row["status"] == "holds", row
    assert row["examples"] >= 1 and row["min_slack"] >= 0


@pytest.mark.parametrize("prop_id,mutant", MUTANTS)
def test_every_property_mutant_is_found(prop_id, mutant):
    row = verify(PROPERTIES[prop_id], examples=300, seed=0, mutant=mutant)
    assert row["status"] == "counterexample", row
    assert row["counterexample_slack"] < 0
