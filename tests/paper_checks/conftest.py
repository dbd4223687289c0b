"""The assertions every claim's run at ``smoke`` must meet (test_claims, test_replicates); the
test workers take a paper's area whole (``pytest_xdist_make_scheduler`` in tests/conftest.py)."""

import math

import numpy as np
import pytest

from paper_checks import SCALES, STATUSES


def _numbers(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _numbers(v)
    elif isinstance(x, list | tuple | np.ndarray):
        for v in x:
            yield from _numbers(v)
    elif isinstance(x, bool | int | float | np.number):
        yield float(x)


def _smoke_checked(c, m):
    """Claim ``c`` has a size table per scale and a mutant, and its measurement ``m`` carries a
    typed rule's text and only finite numbers (the verdict is not asserted at smoke)."""
    assert set(c.sizes) == set(SCALES)
    assert c.mutants, f"{c.id} declares no mutant"
    assert m.rule, f"{c.id} returned no rule text: its verdict is not from a typed rule"
    assert m.status in STATUSES[:3], m.status
    values = list(_numbers(m.measured))
    assert values and all(math.isfinite(v) for v in values), m.measured


@pytest.fixture
def smoke_checked():
    return _smoke_checked
