"""Every registered property at a small budget: it holds on the examples tried, and each of its
mutants (a planted bug, e.g. a bound's constant lowered) is found as a counterexample."""

import numpy as np
import pytest

from paper_checks import PROPERTIES, verify

# one compile per width (diffrax): run by tests/dynamics/test_transformer.py at 8 examples
SLOW = {"transformer.flow_blowup_invariants"}
PROPS = [pytest.param(p.id, marks=pytest.mark.slow) if p.id in SLOW else p.id for p in PROPERTIES]
MUTANTS = [(p.id, m.name) for p in PROPERTIES for m in p.mutants]


@pytest.mark.parametrize("prop_id", PROPS)
def test_property_holds_at_a_small_budget(prop_id):
    row = verify(PROPERTIES[prop_id], examples=25, seed=0)
    assert row["status"] == "holds", row
    assert row["examples"] >= 1 and row["min_slack"] >= 0


@pytest.mark.parametrize("prop_id,mutant", MUTANTS)
def test_every_property_mutant_is_found(prop_id, mutant):
    # found is what counts here; shrinking is tested below (and costs most of a slow property)
    row = verify(PROPERTIES[prop_id], examples=300, seed=0, mutant=mutant, shrink=False)
    assert row["status"] == "counterexample", row
    assert row["counterexample_slack"] < 0


@pytest.mark.parametrize("p,m", [(50, 100), (80, 40)])
def test_wishart_sampler_matches_direct_draws(p, m):
    """The bidiagonal sampler of ``ecc.mp_variance_finite_sample`` against eigvalsh of X^T X / m:
    E (1/p) tr S = 1 and E (1/p) tr S^2 = (m + p + 1) / m (Wishart moments, E tr W^2 =
    m p (m + p + 1)) within 4 standard errors, p - m exact zeros when p > m, and the pooled
    nonzero spectrum indistinguishable from direct draws (two-sample KS)."""
    from scipy.stats import ks_2samp

    from paper_checks.properties.ecc import wishart_eigenvalues

    rng = np.random.default_rng(0)
    draws = np.array([wishart_eigenvalues(p, m, rng) for _ in range(400)])
    assert np.all(np.sum(draws == 0.0, axis=1) == max(0, p - m))
    for power, want in ((1, 1.0), (2, (m + p + 1) / m)):
        t = np.mean(draws**power, axis=1)
        assert abs(t.mean() - want) <= 4 * t.std(ddof=1) / np.sqrt(t.size)
    direct = []
    for _ in range(400):
        x = rng.standard_normal((m, p))
        ev = np.linalg.eigvalsh(x @ x.T / m if p > m else x.T @ x / m)
        direct.append(ev)
    pvalue = np.asarray(ks_2samp(draws[draws > 0], np.concatenate(direct)), dtype=float)[1]
    assert pvalue > 1e-3


def test_a_lowered_constant_is_found_at_the_tight_instance():
    """Curvature Tuning's gap bound lowered by 10 % (a planted bug): verify reports the bound's
    tight instance, c = 0 (gap (1 - beta) ln 2 at x = 0), at the smallest beta of the range; the
    blob replays it, and without the bug the bound holds there with no room."""
    from paper_checks import replay

    p = PROPERTIES["adapters.ct_gap_bound"]
    row = verify(p, examples=300, seed=0, mutant="ct_bound_10pct_low")
    assert row["status"] == "counterexample", row
    assert row["counterexample"] == {"beta": 0.5, "c": 0.0}
    # 1 - gap / (0.9 bound) with gap = bound at c = 0: -1/9
    assert abs(row["counterexample_slack"] + 1 / 9) < 1e-9
    with p.mutant("ct_bound_10pct_low").apply():
        assert replay(p, row["blob"])["slack"] == row["counterexample_slack"]
    assert 0 <= replay(p, row["blob"])["slack"] < 1e-9  # the unmutated bound is tight there


def test_a_lowered_constant_over_integer_instances_is_shrunk_to_a_local_minimum():
    """The continual-learning constant 13 lowered to 0.13: the shrunk counterexample fails, and
    lowering any one of its integer fields by one gives an instance that holds or leaves the
    strategy's range (a local minimum; the first failure Hypothesis meets here has seed 16191,
    and most seeds fail, so an unshrunk report would not pass this)."""
    p = PROPERTIES["sgd.continual_13_over_sqrt_k"]
    row = verify(p, examples=300, seed=0, mutant="constant_100x_low")
    assert row["status"] == "counterexample", row
    ex = row["counterexample"]
    lowest = {"seed": 0, "tasks": 2, "dim": 2, "rank": 1}
    with p.mutant("constant_100x_low").apply():
        assert p.slack(ex) < 0
        for key, low in lowest.items():
            if ex[key] > low:
                assert p.slack({**ex, key: ex[key] - 1}) >= 0, (key, ex)
