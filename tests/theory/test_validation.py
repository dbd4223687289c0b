import numpy as np
import pytest

from theory._validation import as_array, check_choice, check_int, check_scalar


def test_messages_name_argument_requirement_and_value():
    with pytest.raises(ValueError, match=r"`X` must be 2-D; got shape \(3,\)"):
        as_array([1, 2, 3], "X", ndim=2)
    with pytest.raises(ValueError, match=r"`y` must have shape \(4, \*\); got shape \(3, 2\)"):
        as_array(np.ones((3, 2)), "y", shape=(4, None))
    with pytest.raises(ValueError, match="`a` must be finite; got 1 NaN"):
        as_array([1.0, np.nan], "a")
    with pytest.raises(ValueError, match=r"`eta` must lie in \(0, 2\); got 2.5"):
        check_scalar(2.5, "eta", lower=0, upper=2, closed="neither")
    with pytest.raises(TypeError, match="`lam` must be a real number"):
        check_scalar("x", "lam")
    with pytest.raises(TypeError, match="`T` must be an integer"):
        check_int(2.0, "T")
    with pytest.raises(ValueError, match=r"`T` must be an integer in \[1, inf\]; got 0"):
        check_int(0, "T", lower=1)
    with pytest.raises(ValueError, match="`split` must be one of 2, 3; got 4"):
        check_choice(4, "split", (2, 3))
