"""Every registered property at a small budget: it holds on the examples tried, and each of its
mutants (a planted bug, e.g. a bound's constant lowered) is found as a counterexample."""

import numpy as np
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
    _, pvalue = ks_2samp(draws[draws > 0], np.concatenate(direct))
    assert pvalue > 1e-3
