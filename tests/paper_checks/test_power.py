"""Three verdicts decided by power: each rule's power formula against simulation, the replicates
it asks for, how a claim's status combines its rules, recorded outcomes and caught mutants."""

import math

import numpy as np
import pytest

from paper_checks import (
    at_least,
    equivalent,
    holds,
    measure,
    moved,
    paired_gap,
    record,
    within,
)
from paper_checks._power import TARGET


def _rate(flags) -> tuple[float, float]:
    p = float(np.mean(flags))
    return p, math.sqrt(max(p * (1 - p), 1e-4) / len(flags))


def test_paired_gap_power_matches_the_rate_at_which_the_paper_effect_passes():
    """At a true mean gap equal to the paper's, the rule holds at the rate its power says
    (k = 400 pairs, so the SE is known to 3.5 %; 2000 simulated runs)."""
    rng = np.random.default_rng(0)
    k, sigma, paper = 400, 1.0, 0.12
    stated = paired_gap(rng.normal(paper, sigma, k), np.zeros(k), paper=paper).power
    flags = [
        paired_gap(rng.normal(paper, sigma, k), np.zeros(k), paper=paper).passed
        for _ in range(2000)
    ]
    rate, se = _rate(flags)
    assert stated is not None and abs(rate - stated.power) < 4 * se + 0.03, (rate, stated)


def test_within_power_matches_simulation_and_the_needed_se_gives_the_target():
    rng = np.random.default_rng(1)
    expected, tol, se, paper = 1.0, 0.1, 0.08, 1.02
    v = within(1.0, expected, tol, paper=paper, se=se, replicates=10)
    x = rng.normal(paper, se, 20000)
    rate, mc = _rate(np.abs(x - expected) <= tol)
    assert abs(rate - v.power.power) < 4 * mc
    assert not v.power.powered and v.power.needed > 10
    # at the SE the rule asks for, the paper's value passes at the target rate
    se_needed = se * v.power.se_factor
    x = rng.normal(paper, se_needed, 20000)
    rate, mc = _rate(np.abs(x - expected) <= tol)
    assert abs(rate - TARGET) < 4 * mc
    # n / f^2 replicates: an SE shrinking as 1/sqrt(n) reaches it
    assert v.power.needed == math.ceil(10 / v.power.se_factor**2 - 1e-9)


def test_one_sided_and_equivalence_power_against_simulation():
    rng = np.random.default_rng(2)
    v = at_least(0.0, 0.1, paper=0.2, se=0.1)
    rate, mc = _rate(rng.normal(0.2, 0.1, 20000) >= 0.1)
    assert abs(rate - v.power.power) < 4 * mc
    k, sigma = 200, 1.0
    e = equivalent(rng.normal(0, sigma, k), np.zeros(k), margin=0.3, paper=0.0)
    flags = [
        equivalent(rng.normal(0, sigma, k), np.zeros(k), margin=0.3, paper=0.0).passed
        for _ in range(1500)
    ]
    rate, mc = _rate(flags)
    assert abs(rate - e.power.power) < 4 * mc + 0.03


def test_a_rule_the_paper_value_cannot_pass_is_refused():
    with pytest.raises(ValueError, match="does not pass the rule"):
        within(1.0, 1.0, 0.1, paper=1.5, se=0.1)
    with pytest.raises(ValueError, match="`se="):
        within(1.0, 1.0, 0.1, paper=1.0)
    with pytest.raises(ValueError, match="go with `paper=`"):
        within(1.0, 1.0, 0.1, se=0.1)


def test_status_is_decided_by_the_failing_rules_power():
    big = np.array([0.1, -0.1, 0.2, 0.0])  # mean 0.05, SE ~0.065: no power for a 0.1 gap
    weak = measure(paired_gap(big, np.zeros(4), paper=0.1, name="gap"))
    assert weak.status == "inconclusive" and "replicates (now 4)" in weak.resolve
    # the needed count resolves it: at that many pairs the same spread has the power
    n = int(weak.verdicts[0].power.needed)
    rng = np.random.default_rng(3)
    sd = float(np.std(big, ddof=1))
    draws = rng.normal(0.1, sd, (400, n))
    rate = np.mean([paired_gap(d, np.zeros(n), paper=0.1).passed for d in draws])
    assert rate > TARGET - 0.08, (n, rate)
    # a tight measurement far from the paper's effect is powered: not reproduced
    tight = np.full(50, 0.0) + np.random.default_rng(4).normal(0, 0.01, 50)
    assert measure(paired_gap(tight, np.zeros(50), paper=0.1)).status == "not reproduced"
    # a failing two-valued rule is not reproduced whatever the others say
    m = measure(holds(False, name="id", rule="x == y"), paired_gap(big, 0 * big, paper=0.1))
    assert m.status == "not reproduced"
    assert measure(holds(True, name="id", rule="x == y")).status == "reproduced"


def test_record_takes_only_the_two_recordable_outcomes_with_a_reason():
    r = record(quick="inconclusive", reason="needs 40 seeds")
    assert r.at("quick") == "inconclusive" and r.at("full") == "reproduced"
    with pytest.raises(ValueError, match="must be 'not reproduced' or 'inconclusive'"):
        record(quick="reproduced", reason="x")
    with pytest.raises(ValueError, match="scale"):
        record(medium="inconclusive", reason="x")
    with pytest.raises(ValueError, match="reason"):
        record(quick="inconclusive", reason=" ")


def test_a_mutant_counts_when_it_moves_a_value_by_more_than_3_se():
    rng = np.random.default_rng(5)
    a = rng.normal(0.0, 1.0, 100)
    clean = measure(paired_gap(a, np.zeros(100), paper=0.5, name="gap"))
    se = clean.verdicts[0].se
    near = measure(paired_gap(a + 2 * se, np.zeros(100), paper=0.5, name="gap"))
    far = measure(paired_gap(a + 4 * se, np.zeros(100), paper=0.5, name="gap"))
    assert not moved(clean, near) and moved(clean, far)
