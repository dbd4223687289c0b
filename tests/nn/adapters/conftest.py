"""Shared helpers of the adapter tests."""

import jax
import pytest

import nn


@pytest.fixture
def randomise():
    """Replace every trainable leaf ``x`` of an adapted model by ``x + N(0, 1)`` noise."""

    def go(a, seed):
        tr, fr = nn.split(a)
        leaves, td = jax.tree.flatten(tr)
        ks = jax.random.split(jax.random.key(seed), len(leaves))
        leaves = [
            x + jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, ks, strict=True)
        ]
        return nn.combine(jax.tree.unflatten(td, leaves), fr)

    return go
