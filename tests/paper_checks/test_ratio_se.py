"""``paper_checks._stats.ratio_se``: the delta-method SE of a ratio of paired sums, checked
against the spread of the ratio over simulated samples."""

import numpy as np

from paper_checks._stats import ratio_se


def test_ratio_se_matches_the_spread_over_samples():
    rng = np.random.default_rng(0)
    n, reps = 200, 4000
    b = rng.gamma(4.0, 10.0, size=(reps, n))  # B1-like step counts
    a = 0.9 * b + rng.normal(0.0, 8.0, size=(reps, n))  # correlated with b, ratio near 0.9
    ratios = a.sum(1) / b.sum(1)
    ses = np.array([ratio_se(x, y)[1] for x, y in zip(a[:200], b[:200], strict=True)])
    sd = ratios.std(ddof=1)
    # the SE of the spread's estimate over 4000 samples is sd / sqrt(2 * 3999), about 1.1 %;
    # the mean delta-method SE must lie within 5 % of the true spread at n = 200
    assert abs(ses.mean() / sd - 1) < 0.05
    assert ratio_se(a[0], b[0])[0] == a[0].sum() / b[0].sum()
