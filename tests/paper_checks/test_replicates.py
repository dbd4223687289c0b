"""Claims that declare their Monte Carlo replicates: the declaration matches what the check runs,
and a check fed replicates computed elsewhere, in chunks, measures what the serial check does.
A claim whose replicates are all :func:`~paper_checks.unit` calls is fed the calls' results and
not rerun serially: its check reads each result where the serial check would make that same
call (memoised units too: were a unit read inside a memoised function, a warm cache would skip
the read and fail the read assertion, not pass)."""

import time
from pathlib import Path

import jax
import numpy as np
import pytest

from paper_checks import (
    REGISTRY,
    Registry,
    claim,
    clear_caches,
    compute_plan,
    measure,
    memo,
    run_claim,
    within,
)
from paper_checks._units import Replicates, _call, computed, run_replicates, shared, unit

CHUNKED = [c.id for c in REGISTRY if c.replicates is not None]


class _Recording(dict):
    """Provided replicate results that remember which were read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


def _chunked(reps):
    """``reps`` computed as three chunks of uneven length, concatenated."""
    cuts = [0, reps.count // 3, reps.count // 3 + 1, reps.count]
    return [x for a, b in zip(cuts, cuts[1:], strict=False) for x in reps.run(a, b)]


def test_the_heavy_monte_carlo_claims_declare_replicates():
    assert {"rmt.bbp", "spectral.phase_transition", "ecc.debiasing", "ecc.coverage"} <= set(CHUNKED)


@pytest.mark.parametrize("claim_id", CHUNKED)
def test_declared_replicates_are_what_the_check_reads_and_give_the_serial_numbers(
    claim_id, smoke_checked
):
    c = REGISTRY[claim_id]
    plan = c.replicate_plan("smoke", 0)
    assert plan and len(set(plan)) == len(plan)
    given = _Recording({reps: _chunked(reps) for reps in plan})
    units = all(reps.fn is _call for reps in plan)
    if not units:  # a memoised simulation would not read the given results
        clear_caches(compiled=False)
    chunked = run_claim(c, "smoke", 0, results=given)
    assert given.read == set(plan), "declared replicates the check does not read"
    smoke_checked(c, chunked)
    if units:
        return  # each given result is the very call the serial check would make
    clear_caches(compiled=False)
    serial = run_claim(c, "smoke", 0)
    assert (chunked.status, chunked.rule, chunked.detail) == (
        serial.status,
        serial.rule,
        serial.detail,
    )
    np.testing.assert_array_equal(
        np.asarray(_without_wall_time(chunked.measured)),
        np.asarray(_without_wall_time(serial.measured)),
    )


def _without_wall_time(measured):
    """``measured`` less its wall times (entries named ``seconds``), which no two runs share."""
    if isinstance(measured, dict):
        return {k: _without_wall_time(v) for k, v in measured.items() if k != "seconds"}
    return measured


def _draw(seed, i):
    return float(np.random.default_rng([seed, i]).standard_normal())


def test_undeclared_replicates_are_an_error_and_each_result_depends_on_its_index_alone():
    reg = Registry()

    @claim("demo.mc", paper="-", statement="-", where="-", registry=reg)
    def _mc(size, seed):
        x = run_replicates(Replicates(_draw, (seed,), 8))
        return measure(within(float(np.mean(x)), 0.0, 10.0, name="mean"))

    with pytest.raises(ValueError, match="does not declare.*_draw"):
        run_claim(reg["demo.mc"], "smoke", 0, results={})
    reps = Replicates(_draw, (3,), 8)
    assert reps.run(5, 8) == reps.run()[5:] == [_draw(3, i) for i in (5, 6, 7)]


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="Linux memory maps")
def test_release_compiled_frees_the_maps_of_compiled_programs():
    """Past the threshold the compiled programs go (their memory maps with them); below it
    nothing happens, and a jitted function still runs after the release."""
    import jax
    import jax.numpy as jnp

    from _core.runtime import release_compiled

    def maps():
        return len(Path("/proc/self/maps").read_bytes().splitlines())

    fs = [jax.jit(lambda x, i=i: jnp.sin(x) * i) for i in range(40)]
    for f in fs:
        f(jnp.ones(3)).block_until_ready()
    before = maps()
    assert not release_compiled(max_maps=before + 1000)
    assert release_compiled(max_maps=0)
    assert maps() < before - 100
    assert float(fs[3](jnp.ones(3))[0]) == pytest.approx(3 * np.sin(1.0))


_SOURCE_CALLS = []


@memo
def _source(seed):
    _SOURCE_CALLS.append(seed)
    time.sleep(0.05)  # long enough for two threads to both miss the cache, were it not run first
    return seed * 10


def _adapted(seed, k):  # a unit that starts from a shared source, in float64 as serially
    import jax.numpy as jnp

    return shared(_source, seed) + k, str(jnp.zeros(1).dtype)


def test_threads_compute_the_plan_once_each_and_give_the_serial_results():
    """:func:`compute_plan` on two threads: the shared need runs once, a unit reads it, chunked
    replicates come back in index order, JAX runs in float64 in every thread; a claim run with
    ``threads=2`` measures what it does serially."""
    need = unit(_source, 3)
    units = [unit(_adapted, 3, k, needs=[need]) for k in range(4)]
    reps = Replicates(_draw, (5,), 7)
    clear_caches(compiled=False)
    _SOURCE_CALLS.clear()
    jax.config.update("jax_enable_x64", False)  # the tests' global setting off: threads see it
    try:
        got = compute_plan([*units, reps], threads=2)
    finally:
        jax.config.update("jax_enable_x64", True)
    assert _SOURCE_CALLS == [3]
    assert [got[u] for u in units] == [[(30 + k, "float64")] for k in range(4)]
    assert got[reps] == reps.run()

    reg = Registry()

    @claim("toy.threads", paper="-", statement="-", where="-", registry=reg,
           replicates=lambda size, seed: [*units, reps])  # fmt: skip
    def _toy(size, seed):
        total = sum(computed(_adapted, 3, k)[0] for k in range(4)) + sum(run_replicates(reps))
        return measure(within(total, 0.0, 1e9, name="total"))

    serial, threaded = (run_claim(reg["toy.threads"], "quick", 0, threads=t) for t in (1, 2))
    assert serial.measured == threaded.measured
    with pytest.raises(ValueError, match=r"`threads` must be an integer in \[1, 512\]; got 0"):
        run_claim(reg["toy.threads"], "quick", 0, threads=0)
    with pytest.raises(TypeError, match="`threads` must be an integer; got 2.0"):
        compute_plan([reps], threads=2.0)
