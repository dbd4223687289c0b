"""Baseline losses: population values at the exact SVD, invariances, and minibatch consistency."""

import jax.numpy as jnp
import numpy as np
import pytest

from dynamics.koopman import (
    FiniteChain,
    dpnet_from_moments,
    dpnet_loss,
    lora_population,
    vamp2_from_moments,
    vamp2_loss,
    vampe_loss,
)


def _pop_moments(c, F, G):
    return (F.T @ (c.rho0[:, None] * F), G.T @ (c.rho1[:, None] * G), F.T @ c.joint @ G)


def test_vamp2_of_exact_features_and_invariance():
    c = FiniteChain.random(6, rng=0, concentration=0.3)
    st, k = np.arange(6), 3
    phi, psi = c.left_singular_functions(st, k), c.right_singular_functions(st, k)
    s = c.singular_values(k)
    v = -float(vamp2_from_moments(*map(jnp.asarray, _pop_moments(c, phi, psi)), eps=0.0))
    assert v == pytest.approx(np.sum(s**2), abs=1e-12)  # sum_{i<k} s_i^2 incl. s_0 = 1
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((k, k)) + 2 * np.eye(k), rng.standard_normal((k, k)) + 2 * np.eye(k)
    v2 = -float(vamp2_from_moments(*map(jnp.asarray, _pop_moments(c, phi @ A, psi @ B)), eps=0.0))
    assert v2 == pytest.approx(v, abs=1e-10)  # invariant to invertible maps
    l1 = float(lora_population(phi, psi * s, c.kernel, c.rho0))
    l2 = float(lora_population(phi @ A, psi * s @ B, c.kernel, c.rho0))
    assert abs(l1 - l2) > 1e-3  # ... while LoRA is not
    assert l1 == pytest.approx(-np.sum(s**2), abs=1e-12)


def test_dpnet_distortion_vanishes_at_orthonormal_features():
    c = FiniteChain.random(5, rng=2)
    st, k = np.arange(5), 3
    phi, psi = c.left_singular_functions(st, k), c.right_singular_functions(st, k)
    M = tuple(map(jnp.asarray, _pop_moments(c, phi, psi)))
    s = c.singular_values(k)
    assert -float(dpnet_from_moments(*M, gamma=0.7, eps=0.0)) == pytest.approx(
        np.sum(s**2), abs=1e-10
    )
    assert -float(dpnet_from_moments(*M, gamma=0.0, relaxed=True)) == pytest.approx(
        np.sum(s**2), abs=1e-7
    )


def test_minibatch_losses_match_moment_forms_and_vampe_bound():
    rng = np.random.default_rng(3)
    f, g = jnp.asarray(rng.standard_normal((200, 4))), jnp.asarray(rng.standard_normal((200, 4)))
    Mf, Mg, T = f.T @ f / 200, g.T @ g / 200, f.T @ g / 200
    assert float(vamp2_loss(f, g, center=False)) == pytest.approx(
        float(vamp2_from_moments(Mf, Mg, T)), abs=1e-12
    )
    assert float(dpnet_loss(f, g)) == pytest.approx(float(dpnet_from_moments(Mf, Mg, T)), abs=1e-12)
    # in-sample, VAMP-E with its optimal SVD weights equals VAMP-2 (Wu & Noe 2020, Sec. 3.2)
    assert float(vampe_loss(f, g, eps=0.0)) == pytest.approx(
        float(vamp2_loss(f, g, eps=0.0)), abs=1e-10
    )
