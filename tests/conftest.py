"""Test-wide settings: float64 JAX, fast XLA compiles shared by the test workers, and Hypothesis
profiles (``HYPOTHESIS_PROFILE=ci|dev``)."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from threadpoolctl import threadpool_limits

# Most of the default run is XLA compiling small programs once: LLVM at -O0 (XLA's HLO passes
# still run) makes the run ~35 % faster and changes results only by rounding (no test asserts
# more than float64 tolerances). Set through the environment so subprocesses inherit it.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")


def _fast_xla_cpu_codegen():
    """XLA's older elemental CPU emitters and one codegen split compile these small programs
    faster than the fusion emitters: the default run on 2 cores took 549 s against 815 s (1016
    against 1506 worker-seconds); the same HLO, so results differ only by rounding. Set only
    where this jaxlib knows the flags (XLA aborts on an unknown one): probed once, in the
    process that starts the run; test workers and subprocesses inherit the environment."""
    if "PYTEST_XDIST_WORKER" in os.environ or "xla_cpu_use_fusion_emitters" in os.environ.get(
        "XLA_FLAGS", ""
    ):
        return
    flags = " ".join(
        [
            os.environ.get("XLA_FLAGS", ""),
            "--xla_cpu_use_fusion_emitters=false",
            "--xla_cpu_parallel_codegen_split_count=1",
        ]
    ).strip()
    code = "import jax.numpy as jnp; jnp.ones(2).sum().block_until_ready()"
    env = {**os.environ, "XLA_FLAGS": flags}
    try:
        probe = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return
    if probe.returncode == 0:
        os.environ["XLA_FLAGS"] = flags


_fast_xla_cpu_codegen()
import jax  # noqa: E402

os.environ.setdefault("THEORYLAB_NO_COMPILE_CACHE", "1")  # tests never write the user's cache

# Test workers share the cores: each worker's BLAS gets its share of them. OpenBLAS threads spin
# while they wait, and two workers with a thread per core each slowed the BLAS-bound tests by up
# to 1.7x (tests/estimators + tests/spectral on 2 cores: 126 s with 2 threads, 72 s with 1).
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(_share))  # for subprocesses
    threadpool_limits(limits=_share, user_api="blas")

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_disable_most_optimizations", True)

_CACHE = "THEORYLAB_TEST_JAX_CACHE"
_OWNER = pytest.StashKey[str]()


def pytest_configure(config):
    """One JAX persistent compilation cache for the run, in a temporary folder that the process
    that made it (the xdist controller, or the only process) removes at the end: a program that
    one worker compiled, the other reads (test_claims + test_replicates: 499 s -> 454 s)."""
    if _CACHE not in os.environ:  # workers inherit the controller's folder
        os.environ[_CACHE] = tempfile.mkdtemp(prefix="theorylab-test-jax-")
        config.stash[_OWNER] = os.environ[_CACHE]
    jax.config.update("jax_compilation_cache_dir", os.environ[_CACHE])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_unconfigure(config):
    if _OWNER in config.stash:
        shutil.rmtree(config.stash[_OWNER], ignore_errors=True)


# a claim's or a figure's smoke test, by the paper's area of its parameter: "[hybrid.svd_init]"
_AREA = re.compile(r"tests/paper_checks/test_(?:claims|replicates)\.py::\w+\[([a-z0-9_]+)\.")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling with one scope per paper's area for the claims' and figures'
    smoke tests (every other test its own scope): an area's claims and figures run on one worker
    and share its memoised simulations and compiled programs. xdist's ``--dist loadgroup`` does
    not group under pytest >= 9.2: it renames ``item._nodeid``, which ``nodeid`` no longer reads."""
    from xdist.scheduler import LoadScopeScheduling

    class ByArea(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            m = _AREA.match(nodeid)
            return m.group(1) if m else nodeid

    return ByArea(config, log)


settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    max_examples=30,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The bad-input harness, shared by every tests/<area>/test_bad_input.py, loaded once by file:
# adding tests/ to sys.path would shadow the real packages (tests/spectral, tests/nn, ...).
_spec = importlib.util.spec_from_file_location(
    "_bad_input", Path(__file__).with_name("_bad_input.py")
)
sys.modules["_bad_input"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sys.modules["_bad_input"])


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    """A test worker compiles ~10^4 XLA programs; past the Linux memory-map cap XLA crashes, so
    compiled programs are dropped between tests once the process holds many maps."""
    yield
    from _core.runtime import release_compiled

    release_compiled()
