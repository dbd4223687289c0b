"""The typed pass rules: verdicts at and just past their boundaries, NaN never passes."""

import math

import numpy as np
import pytest

from paper_checks import (
    at_least,
    at_most,
    equivalent,
    holds,
    measure,
    paired_gap,
    patch,
    slope_within,
    within,
    wrap,
)


def test_within_is_two_sided_and_elementwise():
    assert within(1.05, 1.0, 0.06).passed and within(0.95, 1.0, 0.06).passed
    assert not within(1.07, 1.0, 0.06).passed and not within(0.93, 1.0, 0.06).passed
    assert not within([1.0, 2.2], [1.0, 2.0], [0.1, 0.1]).passed
    assert within({"a": 1.0, "b": 2.0}, {"a": 1.01, "b": 1.99}, 0.02).passed
    assert not within(math.nan, 1.0, 1e9).passed
    with pytest.raises(ValueError, match="shape"):
        within([1.0, 2.0], [1.0], 0.1)


def test_one_sided_bounds():
    assert at_most(1.0, 1.0).passed and not at_most(1.0 + 1e-12, 1.0).passed
    assert at_most(1.05, 1.0, tol=0.1).passed
    assert at_least(1.0, 1.0).passed and not at_least(0.9, 1.0).passed
    assert not at_most(math.nan, 1.0).passed and not at_least([math.nan], 0.0).passed


def test_paired_gap_uses_the_standard_error_of_the_differences():
    a = np.array([1.0, 1.1, 0.9, 1.05])
    d = np.array([0.1, 0.12, 0.08, 0.1])  # mean 0.1, se 0.0082
    assert paired_gap(a, a - d, n_se=2).passed
    assert not paired_gap(a, a - d, n_se=2, margin=0.09).passed  # 0.1 - 2 SE < 0.09
    assert paired_gap(a - d, a, direction="less").passed
    assert not paired_gap(a, a - d, direction="less").passed
    with pytest.raises(ValueError, match="replicates"):
        paired_gap([1.0], [0.0])


def test_equivalence_needs_the_interval_inside_the_margin():
    rng = np.random.default_rng(0)
    a = rng.normal(size=50)
    assert equivalent(a, a + 0.01, margin=0.05).passed
    assert not equivalent(a, a + 0.06, margin=0.05).passed


def test_slope_within_fits_log_log():
    x = np.array([10.0, 100.0, 1000.0])
    assert slope_within(x, 3 * x**-0.5, -0.5, 0.01).passed
    assert not slope_within(x, 3 * x**-0.4, -0.5, 0.05).passed
    assert not slope_within(x, np.array([1.0, -1.0, 1.0]), -0.5, 10).passed
    assert slope_within(x, 2 * x + 1, 2.0, 1e-9, log=False).passed


def test_measure_is_the_conjunction_and_writes_every_rule():
    m = measure(
        within(1.0, 1.0, 0.1, name="a"), at_most(2.0, 1.0, name="b"), extra={"n": 10}, detail="d"
    )
    assert not m.passed and m.measured == {"a": 1.0, "b": 2.0, "n": 10}
    assert "[ok]" in m.rule and "[FAILS]" in m.rule and m.detail == "d"
    one = measure(holds(True, name="identity", rule="merge == unmerged"))
    assert one.passed and one.rule == "merge == unmerged"
    with pytest.raises(ValueError, match="differ"):
        measure(holds(True, name="x", rule="r"), holds(True, name="x", rule="r"))


# --- bad input to the rules (issue 20): named errors; a NaN measurement still just fails ------


def test_rules_name_a_bad_argument_and_a_nan_measurement_still_fails():
    import jax.numpy as jnp

    for bad in (1 + 1j, "1.0", None, object(), [[1.0], [1.0, 2.0]], 10**400):
        with pytest.raises(TypeError, match="`measured`"):
            within(bad, 1.0, 0.1)
        with pytest.raises(TypeError, match="`bound`"):
            at_most(1.0, bad)
    with pytest.raises(ValueError, match="`tol` must be >= 0"):
        within(1.0, 1.0, -0.1)
    for bad_tol in (math.nan, -0.1):
        with pytest.raises(ValueError, match="`tol`"):
            at_least(1.0, 1.0, tol=bad_tol)
    # a failed measurement (or a tolerance or bound computed from one) fails, it is no usage error
    assert not within(math.nan, 1.0, 0.1).passed
    assert not within(1.0, 1.0, math.nan).passed
    assert not within(1.0, math.nan, 0.1).passed
    assert at_most(1.0, math.inf).passed  # an infinite bound is a bound
    a, b = np.array([1.0, 1.2, 0.9]), np.array([0.5, 0.4, 0.6])
    with pytest.raises(ValueError, match="`a` and `b` must be 1-D with the same length"):
        paired_gap(a, b[:2])
    with pytest.raises(ValueError, match="`n_se`"):
        equivalent(a, b, margin=1.0, n_se=-1.0)
    with pytest.raises(ValueError, match="`margin`"):
        equivalent(a, b, margin=-1.0)
    assert paired_gap(b, a, margin=-1.0).passed  # a negative margin: non-inferiority
    with pytest.raises(TypeError, match="`condition` must be a bool"):
        holds("no", name="fact", rule="x == y")  # pyright: ignore[reportArgumentType]
    assert holds(jnp.array(True), name="fact", rule="x == y").passed  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`log` must be a bool"):
        slope_within([1.0, 2.0], [1.0, 2.0], 1.0, 0.1, log="no")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`name` must be str"):
        within(1.0, 1.0, 0.1, name=3)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`verdicts` must be Verdicts"):
        measure(within(1.0, 1.0, 0.1), 0.5)  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    "make,kw,arg",
    [
        (patch, dict(target=3, new=1, description="d"), "target"),
        (patch, dict(target="theory.sgd.x", new=1, description=None), "description"),
        (wrap, dict(target=None, wrapper=lambda f: f, description="d"), "target"),
        (wrap, dict(target="theory.sgd.x", wrapper="f", description="d"), "wrapper"),
    ],
)
def test_mutant_constructors_name_a_bad_argument(make, kw, arg):
    with pytest.raises(TypeError, match=f"`{arg}`"):
        make(**kw)


def test_slope_within_fails_non_finite_points_and_keeps_extreme_scales():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    for bad in (np.nan, np.inf, -np.inf):  # a failed measurement fails the rule, no LinAlgError
        xb = x.copy()
        xb[1] = bad
        for log in (True, False):
            assert not slope_within(xb, x, 1.0, 10.0, log=log).passed
            assert not slope_within(x, xb, 1.0, 10.0, log=log).passed
    assert not slope_within(np.full(4, 3.0), x, 1.0, 10.0).passed  # x constant: no slope
    v = slope_within(1e200 * x, 1e200 * (2 * x + 1), 2.0, 1e-12, log=False)
    assert v.passed, v.measured  # polyfit returned 0 here
    assert slope_within(1e-300 * x, x, 1e300, 1e288, log=False).passed


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda R: R.patch("no-such-option", 1, "d"), ValueError, "`target`"),
        (lambda R: R.wrap("theory.bbp edge", lambda f: f, "d"), ValueError, "`target`"),
        (lambda R: R.scaled(float("nan")), ValueError, "`factor`"),
        (lambda R: R.scaled("2"), TypeError, "`factor`"),
        (lambda R: R.memo("x"), TypeError, "`f`"),
        (lambda R: R.sizes(smoke=None, quick={}, full={}), TypeError, "`smoke`"),
    ],
)
def test_declarations_refuse_bad_input_at_declaration(call, exc, match):
    """A mutant, size table or memo declared wrongly fails where it is written, naming the
    argument, not later when a claim runs under it."""
    import paper_checks

    with pytest.raises(exc, match=match):
        call(paper_checks)
