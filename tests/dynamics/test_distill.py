"""dynamics.distill: the order-2 Markov entropy rate (exact, and against sampled log-likelihood),
KL identities, ILD trains the mixers only, and bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynamics.distill import Order2Markov, ild, kl_to_teacher
from nn.hybrid import HybridLM, hybrid_from_teacher

KEY = jax.random.key(0)


def test_entropy_rate_of_an_iid_chain_and_by_sampling():
    V = 4
    p = np.array([0.1, 0.2, 0.3, 0.4])
    iid = Order2Markov(np.broadcast_to(p, (V, V, V)).copy())
    assert iid.entropy_rate == pytest.approx(-np.sum(p * np.log(p)), rel=1e-12)
    c = Order2Markov.random(1, 5, concentration=0.5)
    toks = np.asarray(c.sample(400, 60, key=KEY))
    nll = -np.log(c.P[toks[:, :-2], toks[:, 1:-1], toks[:, 2:]])
    per_seq = nll.mean(1)
    se = per_seq.std(ddof=1) / math.sqrt(len(per_seq))
    assert abs(per_seq.mean() - c.entropy_rate) < 4 * se


def _teacher(L=2):
    return HybridLM(7, 8, 2, 1, 4, ("gqa",) * L, mlp_hidden=8, rope_theta=100.0, key=KEY)


def test_kl_is_zero_for_the_teacher_and_positive_otherwise():
    t = _teacher()
    toks = jax.random.randint(KEY, (2, 6), 0, 7)
    assert float(kl_to_teacher(t, t, toks)) == pytest.approx(0.0, abs=1e-14)
    s = hybrid_from_teacher(t, ("mla", "mamba2"), kv_rank=4, rope_dim=2, init="random", key=KEY)
    # run layer by layer, it is the KL of the whole models' outputs
    lt, ls = (jax.nn.log_softmax(m(toks), -1) for m in (t, s))
    want = float(jnp.mean(jnp.sum(jnp.exp(lt) * (lt - ls), -1)))
    assert want > 0
    assert float(kl_to_teacher(t, s, toks)) == pytest.approx(want, rel=1e-10)


def test_ild_trains_mixers_only():
    t = _teacher()
    s = hybrid_from_teacher(t, ("mla", "mamba2"), kv_rank=4, rope_dim=2, key=KEY)
    c = Order2Markov.random(0, 7)
    s2, losses = ild(t, s, c, steps=3, batch=2, length=6, key=KEY)
    assert losses.shape == (3,) and np.all(np.isfinite(losses))
    for a, b in zip(
        jax.tree.leaves(s.layers[0].mlp), jax.tree.leaves(s2.layers[0].mlp), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(s.embed.weight, s2.embed.weight)
    assert (
        float(
            jnp.max(jnp.abs(s.layers[0].mixer.kv_down.weight - s2.layers[0].mixer.kv_down.weight))
        )
        > 0
    )


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: Order2Markov.random(0, 1), "vocab_size"),
        (lambda: Order2Markov.random(0, 4, concentration=0.0), "concentration"),
        (lambda: hybrid_from_teacher(_teacher(), ("mla",), kv_rank=4, key=KEY), "kinds"),
        (lambda: hybrid_from_teacher(_teacher(), ("mla", "ssm"), kv_rank=4, key=KEY), "kinds"),
        (
            lambda: hybrid_from_teacher(_teacher(), ("mla", "mla"), kv_rank=4, init="svd", key=KEY),
            "init",
        ),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_layer_sensitivity_of_an_exact_mla_layer_is_the_mamba2_kl():
    """Teacher without positions, one layer: the full-rank SVD MLA is the teacher (KL 0), so the
    score of that layer is the all-Mamba2 student's KL."""
    from dynamics.distill import layer_sensitivity

    with jax.enable_x64(True):
        t = HybridLM(7, 8, 2, 1, 4, ("gqa",), mlp_hidden=8, dtype=jnp.float64, key=KEY)
        mla = hybrid_from_teacher(t, ("mla",), kv_rank=8, key=KEY)
        m2 = hybrid_from_teacher(t, ("mamba2",), key=KEY)
        toks = jax.random.randint(KEY, (3, 6), 0, 7)
        assert float(kl_to_teacher(t, mla, toks)) == pytest.approx(0.0, abs=1e-12)
        s = layer_sensitivity(t, mla, m2, toks)
        assert s.shape == (1,)
        assert s[0] == pytest.approx(float(kl_to_teacher(t, m2, toks)), rel=1e-10)
        assert s[0] > 1e-4
        with pytest.raises(ValueError, match="mla_model"):
            layer_sensitivity(t, m2, m2, toks)
