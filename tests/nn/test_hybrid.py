"""nn.hybrid: the layer-selection rule against brute force over placements and the shipped
configs; composition of a student from two ILD models; bad input."""

import itertools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nn.hybrid import HybridLM, compose_hybrid, hybrid_from_teacher, select_mla_layers

KEY = jax.random.key(0)


def _brute(scores, n, keep_first, slack):
    L = len(scores)
    gap = max(1, L // n - slack)
    best, arg = -np.inf, None
    for p in itertools.combinations(range(L), n):  # lexicographic: ties go to lower indices
        if keep_first and p[0] != 0:
            continue
        if any(b - a < gap for a, b in itertools.pairwise(p)):
            continue
        v = sum(scores[i] for i in p)
        if v > best + 1e-12:
            best, arg = v, p
    return arg, best


@settings(max_examples=60, deadline=None)
@given(
    L=st.integers(1, 9),
    data=st.data(),
    keep_first=st.booleans(),
    slack=st.integers(0, 3),
)
def test_rule_is_the_best_feasible_placement(L, data, keep_first, slack):
    n = data.draw(st.integers(1, L))
    scores = data.draw(st.lists(st.integers(-5, 5), min_size=L, max_size=L))
    p = select_mla_layers(np.array(scores, float), n, keep_first=keep_first, slack=slack)
    want, total = _brute(scores, n, keep_first, slack)
    assert sum(scores[i] for i in p) == total
    assert len(p) == n and list(p) == sorted(set(p))


def test_rule_hand_cases():
    s = np.array([5.0, 1.0, 4.0, 3.0])
    assert select_mla_layers(s, 2) == (0, 2)
    assert select_mla_layers(-s, 2) == (0, 1)  # layer 0 kept even when it scores worst
    assert select_mla_layers(s, 1, keep_first=False) == (0,)
    # spacing binds: L=8, 2 layers at least 4 - 0 = 4 apart; the greedy top two (1, 2) is out
    s8 = np.array([0, 9, 8, 0, 0, 0, 1, 0], float)
    assert select_mla_layers(s8, 2, keep_first=False, slack=0) == (1, 6)
    assert select_mla_layers(s8, 0) == ()


@pytest.mark.parametrize(
    "L,layers",
    [
        (16, (0, 5, 10, 14)),
        (16, (0, 2, 5, 8, 11, 14)),
        (28, (0, 5, 10, 16, 21, 26)),
        (28, (0, 3, 7, 10, 14, 18, 22, 26)),
        (32, (0, 4, 8, 12, 16, 20, 25, 30)),
    ],
)
def test_shipped_configs_are_reachable(L, layers):
    """Zebra-Llama's released MLA indices (AMD-Hybrid-Models configs) are what the rule returns
    when the scores favour exactly them: they satisfy its spacing constraint."""
    s = np.zeros(L)
    s[list(layers)] = 1.0
    assert select_mla_layers(s, len(layers)) == layers


def _models():
    t = HybridLM(7, 8, 2, 1, 4, ("gqa",) * 3, mlp_hidden=8, key=KEY)
    a = hybrid_from_teacher(t, ("mla",) * 3, kv_rank=4, key=KEY)
    b = hybrid_from_teacher(t, ("mamba2",) * 3, key=KEY)
    return t, a, b


def test_compose_takes_each_layer_from_its_model():
    t, a, b = _models()
    c = compose_hybrid(a, b, ("mla", "mamba2", "mla"))
    assert c.kinds == ("mla", "mamba2", "mla")
    for i, src in enumerate((a, b, a)):
        want, got = jax.tree.leaves(src.layers[i]), jax.tree.leaves(c.layers[i])
        assert type(c.layers[i].mixer) is type(src.layers[i].mixer)
        assert all(np.array_equal(u, v) for u, v in zip(want, got, strict=True))
    toks = jax.random.randint(KEY, (2, 5), 0, 7)
    np.testing.assert_allclose(compose_hybrid(a, b, ("mla",) * 3)(toks), a(toks), atol=0)
    np.testing.assert_allclose(compose_hybrid(a, b, ("mamba2",) * 3)(toks), b(toks), atol=0)


@pytest.mark.parametrize(
    "call,err,match",
    [
        (lambda a, b: compose_hybrid(a, b, ("mla", "mla")), ValueError, "kinds"),
        (lambda a, b: compose_hybrid(b, a, ("mla", "mla", "mla")), ValueError, "mla_model"),
        (lambda a, b: compose_hybrid(a, b, ("mla", "gqa", "mla")), ValueError, "kinds"),
        (
            lambda a, b: compose_hybrid(a, None, ("mla",) * 3),  # pyright: ignore[reportArgumentType]
            TypeError,
            "mamba2_model",
        ),
        (lambda a, b: select_mla_layers([1.0, 2.0], 3), ValueError, "num_mla"),
        (lambda a, b: select_mla_layers([[1.0, 2.0]], 1), ValueError, "scores"),
        (lambda a, b: select_mla_layers([1.0, np.nan], 1), ValueError, "scores"),
        (lambda a, b: select_mla_layers([1.0, 2.0], 1, slack=-1), ValueError, "slack"),
        (
            lambda a, b: select_mla_layers([1.0, 2.0], 1, keep_first=1),  # pyright: ignore[reportArgumentType]
            TypeError,
            "keep_first",
        ),
    ],
)
def test_bad_input_names_the_argument(call, err, match):
    _, a, b = _models()
    with pytest.raises(err, match=match):
        call(a, b)
