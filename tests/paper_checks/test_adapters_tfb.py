"""The TFB claim's law check: the sampled update of a Bayesianized LoRA has no noise outside
col(B) and variance (s sigma)^2 along each left singular vector of B; without the
re-factorisation the variance along u_i is (s sigma d_i)^2 (TFB, arXiv 2412.05723, Sec. 3)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nn
import nn.adapters as ad
from paper_checks import patch, wrap
from paper_checks.adapters import tfb


def _trained_lora(seed=0):
    """A LoRA (r = 3, alpha = 6) on a 5 -> 7 layer with a random B of spread singular values."""
    lin = nn.Linear(5, 7, key=jax.random.key(seed))
    a = ad.inject(lin, "lora", key=jax.random.key(seed + 1), r=3, alpha=6.0)
    rng = np.random.default_rng(seed)
    u = np.linalg.qr(rng.standard_normal((7, 3)))[0]
    v = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    b = (u * np.array([3.0, 1.0, 0.2])) @ v.T
    return eqx.tree_at(lambda m: next(iter(m.layers().values())).B, a, jnp.asarray(b))


def test_law_of_the_sampled_update_is_isotropic_on_col_b():
    lora = _trained_lora()
    keys = jax.random.split(jax.random.key(5), 400)
    law = tfb.law_of_update(lora, ad.tfb_bayesianize(lora, 0.3), keys)
    assert law["outside"] < 1e-25
    assert law["rel_se"] == pytest.approx(np.sqrt(2.0 / (400 * 5)))
    # each ratio is a mean of 2000 chi^2_1 / 2000: 5 relative SEs hold it with room
    np.testing.assert_allclose(law["ratio"], 1.0, atol=5 * law["rel_se"])


def test_without_refactorisation_the_variance_follows_b_singular_values():
    lora = _trained_lora()
    keys = jax.random.split(jax.random.key(6), 400)
    mutant = patch("nn.adapters._tfb.tfb_refactor", tfb._no_refactor(None), "no refactor")
    with mutant.apply():
        law = tfb.law_of_update(lora, ad.tfb_bayesianize(lora, 0.3), keys)
    assert law["outside"] < 1e-25  # B E still lies in col(B)
    np.testing.assert_allclose(law["ratio"], [9.0, 1.0, 0.04], rtol=5 * law["rel_se"])


def test_noise_on_both_factors_leaves_col_b():
    lora = _trained_lora()
    keys = jax.random.split(jax.random.key(7), 400)
    mutant = wrap("nn.adapters._tfb.TFBLoRALinear.delta", tfb._noise_on_both, "both factors")
    with mutant.apply():
        law = tfb.law_of_update(lora, ad.tfb_bayesianize(lora, 0.3), keys)
    assert law["outside"] > 0.1
