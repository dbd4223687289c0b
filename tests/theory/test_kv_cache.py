"""theory.kv_cache: cache/state counts against shapes counted element by element, the headline
ratios by hand, limits and the break-even identity, and bad configurations."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theory.kv_cache import (
    LLAMA,
    ZEBRA,
    HybridConfig,
    LlamaConfig,
    break_even_context,
    gqa_cache_per_token,
    kv_fraction,
    mamba2_state,
    mla_cache_per_token,
    state_fraction,
)


def test_headline_ratios_by_hand():
    assert Fraction(4 * (128 + 32), 2 * 16 * 8 * 64) == Fraction(kv_fraction(ZEBRA["1B"]))
    assert kv_fraction(ZEBRA["3B"]) == 6 * (128 + 64) / (2 * 28 * 8 * 128)
    assert kv_fraction(ZEBRA["8B"]) == 8 * (160 + 64) / (2 * 32 * 8 * 128)


def _count_by_shapes(cfg: HybridConfig, T: int) -> int:
    """Allocate the decode-state tensors of one sequence as the inference code shapes them."""
    b = cfg.base
    n = 0
    for layer in range(b.num_layers):
        if layer < cfg.num_mla:
            n += np.zeros((T, cfg.kv_rank + cfg.rope_dim)).size
        else:
            n += np.zeros((b.num_heads, b.head_dim, cfg.d_state)).size
            n += np.zeros(
                (b.num_heads * b.head_dim + 2 * b.num_kv_heads * b.head_dim, cfg.d_conv)
            ).size
    return n


@pytest.mark.parametrize("name", ["1B", "3B", "8B"])
def test_counts_equal_allocated_shapes(name):
    cfg = ZEBRA[name]
    for T in (1, 7):
        assert mla_cache_per_token(cfg) * T + mamba2_state(cfg) == _count_by_shapes(cfg, T)
    b = cfg.base
    gqa = sum(np.zeros((2, b.num_kv_heads, 5, b.head_dim)).size for _ in range(b.num_layers))
    assert gqa_cache_per_token(b) * 5 == gqa


@given(
    L=st.integers(2, 40),
    nkv=st.sampled_from([1, 2, 4, 8]),
    g=st.integers(1, 4),
    dh=st.sampled_from([16, 64, 128]),
    frac=st.floats(0, 1),
    T=st.integers(1, 10**6),
)
def test_state_fraction_limits_and_break_even(L, nkv, g, dh, frac, T):
    base = LlamaConfig(L, nkv * g, nkv, dh, nkv * g * dh)
    cfg = HybridConfig(base, int(frac * L), min(64, 2 * nkv * dh, base.hidden_size), dh // 2, dh)
    f = state_fraction(cfg, T)
    assert f >= kv_fraction(cfg) - 1e-15  # the headline is the T -> infinity limit
    assert state_fraction(cfg, T + 1) <= f + 1e-15
    be = break_even_context(cfg)
    if cfg.num_mla:
        assert math.isclose(mla_cache_per_token(cfg) * be, mamba2_state(cfg), rel_tol=1e-12)
    else:
        assert be == math.inf


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: LlamaConfig(16, 30, 8, 64, 2048), "num_kv_heads"),
        (lambda: HybridConfig(LLAMA["1B"], 4, 2048, 32, 64), "kv_rank"),
        (lambda: HybridConfig(LLAMA["1B"], 17, 128, 32, 64), "num_mla"),
        (lambda: HybridConfig(LLAMA["1B"], 4, 128, 65, 64), "rope_dim"),
        (lambda: state_fraction(ZEBRA["1B"], 0), "context"),
    ],
)
def test_bad_config_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
