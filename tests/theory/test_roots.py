import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theory.roots import NoRootError, find_root


@given(st.floats(-50, 50), st.floats(0.1, 10))
def test_monotone_root_found_to_machine_precision(r, slope):
    res = find_root(lambda x: slope * (x - r) + (x - r) ** 3, -100, 100)
    assert res.found and abs(res.root - r) <= 1e-12 * max(1.0, abs(r))


def test_no_sign_change_is_reported_not_returned_as_an_end():
    res = find_root(lambda x: x - 3.0, 0.0, 1.0)
    assert not res.found and res.root is None and "no sign change" in res.message
    with pytest.raises(NoRootError, match="no sign change"):
        res.value()


def test_expanding_bracket_on_half_line():
    res = find_root(lambda x: np.log1p(x) - 10.0, 0.0, math.inf, expand=2.0)
    assert res.found and abs(res.root - math.expm1(10.0)) < 1e-9
    assert not find_root(lambda x: -1.0 - x, 0.0, 1.0, expand=2.0, max_expand=10).found


def test_root_at_endpoint_is_a_real_root():
    assert find_root(lambda x: x, 0.0, 1.0).value() == 0.0


def test_bad_bracket():
    with pytest.raises(ValueError, match="`lo`"):
        find_root(lambda x: x, 1.0, 0.0)
    with pytest.raises(ValueError, match="NaN"):
        find_root(lambda x: math.nan, 0.0, 1.0)
