"""Test-wide settings: float64 JAX, and Hypothesis profiles (``HYPOTHESIS_PROFILE=ci|dev``)."""

import os

import jax

os.environ.setdefault("THEORYLAB_NO_COMPILE_CACHE", "1")  # tests never write the user's cache
from hypothesis import HealthCheck, settings

jax.config.update("jax_enable_x64", True)

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True, max_examples=30,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=30,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
