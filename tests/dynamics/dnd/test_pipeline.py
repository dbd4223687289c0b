"""dynamics.dnd: task family, stacked checkpoint collection, generated adapters through
nn.adapters (save, load, merge), the held-out evaluation and the timing helper."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nn
from dynamics import dnd as DD
from dynamics.dnd import _collect
from nn import adapters as AD
from nn import dnd as D


@pytest.fixture(scope="module")
def small():
    fam = DD.task_family(4, 3, key=jax.random.key(0))
    ck = DD.collect_checkpoints(
        fam, fam.theta_train, steps=10, keep=3, horizon=20, n_points=64, batch=16,
        key=jax.random.key(1),
    )  # fmt: skip
    pools = DD.sample_inputs(fam, fam.theta_train, 32, key=jax.random.key(2))
    fit = DD.train_generator(ck.factors, pools, prompts=8, steps=5, batch=2, hidden=(),
                             key=jax.random.key(3))  # fmt: skip
    return fam, ck, fit


def test_inputs_identify_the_task_only_in_the_identifiable_family():
    """Sample means of 4000 inputs: M theta within 5 SE (SE = 1/sqrt(n)) for the family, 0 for
    the control."""
    n = 4000
    for ident in (True, False):
        fam = DD.task_family(2, 2, identifiable=ident, key=jax.random.key(5))
        x = np.asarray(DD.sample_inputs(fam, fam.theta_train, n, key=jax.random.key(6)))
        want = np.asarray(fam.theta_train @ fam.M.T) if ident else np.zeros((2, fam.dim))
        assert np.all(np.abs(x.mean(1) - want) < 5 / np.sqrt(n))


def test_targets_are_base_plus_task_features():
    fam = DD.task_family(2, 2, key=jax.random.key(0))
    X = DD.sample_inputs(fam, fam.theta_train, 5, key=jax.random.key(1))
    y = DD.task_targets(fam, fam.theta_train, X)
    want = np.asarray(fam.base(X))[..., 0] + np.einsum(
        "tnk,tk->tn", np.tanh(np.asarray(X) @ np.asarray(fam.U).T), np.asarray(fam.theta_train)
    )
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-5, atol=1e-6)


def test_stacked_gradient_is_each_tasks_own():
    """The sum-over-tasks loss gives task k's adapter exactly the gradient of task k's own MSE,
    so one stacked run is K independent runs (Adam is elementwise)."""
    fam = DD.task_family(3, 2, key=jax.random.key(0))
    tpl = _collect.lora_template(fam.base, key=jax.random.key(1))
    tr, fr = nn.split(tpl)
    leaves, td = jax.tree.flatten(tr)
    ks = jax.random.split(jax.random.key(2), 3)
    per = [
        jax.tree.unflatten(
            td, [x + 0.1 * jax.random.normal(jax.random.fold_in(k, i), x.shape, x.dtype)
                 for i, x in enumerate(leaves)],
        )
        for k in ks
    ]  # fmt: skip
    stack = _collect._Stack(jax.tree.map(lambda *a: jnp.stack(a), *per), fr)
    X = DD.sample_inputs(fam, fam.theta_train, 16, key=jax.random.key(3))
    y = DD.task_targets(fam, fam.theta_train, X)
    batch, key = (X, y, jnp.zeros(16)), jax.random.key(4)
    idx = jax.random.randint(key, (16,), 0, 16)
    g_stack = jax.grad(lambda a: _collect._stack_loss(_collect._Stack(a, fr), batch, key=key))(
        stack.adapters
    )
    for k in range(3):
        g_k = jax.grad(_collect._task_mse)(per[k], fr, X[k, idx], y[k, idx])
        for u, v in zip(jax.tree.leaves(g_k), jax.tree.leaves(g_stack), strict=True):
            np.testing.assert_allclose(np.asarray(v[k]), np.asarray(u), rtol=1e-5, atol=1e-7)


def test_checkpoints_are_consecutive_steps_of_one_run(small):
    _, ck, _ = small
    np.testing.assert_array_equal(np.asarray(ck.steps), [11, 12, 13])
    a = np.asarray(ck.factors[0][0])  # (K, J, r, d_in)
    assert a.shape[:2] == (4, 3)
    assert np.all(np.abs(np.diff(a, axis=1)).max(axis=(2, 3)) > 0)  # every step moves
    # every run started from the same initialisation (LLaMA-Factory's one seed)
    tpl = DD.lora_template(small[0].base, key=jax.random.key(_collect.LORA_SEED))
    np.testing.assert_array_equal(np.asarray(DD.factors_of(ck.template)[0][0]),
                                  np.asarray(DD.factors_of(tpl)[0][0]))  # fmt: skip


def test_generated_adapter_loads_through_nn_adapters_and_merges(small, tmp_path):
    """One forward pass -> tokens -> factors -> an Adapted model; saved and loaded with
    nn.adapters, its merged forward equals the unmerged one."""
    fam, ck, fit = small
    prompts = DD.sample_inputs(fam, fam.theta_test[0], 8, key=jax.random.key(9))
    tok = DD.generate_tokens(fit, prompts)
    assert tok.shape == fit.centroid.shape and bool(jnp.all(jnp.isfinite(tok)))
    facs = D.detokenize(tok, list(fit.shapes), fit.chunk)
    adapted = DD.with_factors(ck.template, facs)
    path = tmp_path / "generated.safetensors"
    AD.save_adapter(path, adapted)
    loaded = AD.load_adapter(path, fam.base)
    X = DD.sample_inputs(fam, fam.theta_test[0], 32, key=jax.random.key(10))
    unmerged = np.asarray(loaded(X))
    np.testing.assert_allclose(np.asarray(AD.merge(loaded)(X)), unmerged, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(adapted(X)), unmerged)
    for (a, b), (a2, b2) in zip(facs, DD.factors_of(loaded), strict=True):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(a2))
        np.testing.assert_array_equal(np.asarray(b, np.float32), np.asarray(b2))
    # the merged update is s B A with s = alpha / r = 2
    dw = AD.delta_weights(loaded)["layers.0"]
    np.testing.assert_allclose(
        np.asarray(dw), 2.0 * np.asarray(facs[0][1] @ facs[0][0]), rtol=1e-5, atol=1e-7
    )


def test_heldout_scores_are_finite_and_consistent(small):
    fam, ck, fit = small
    h = DD.evaluate_heldout(fam, ck, fit, gens=2, n_eval=64, pool=16, key=jax.random.key(4))
    for f in ("base", "train_avg", "mean_adapter", "centroid", "dnd", "dnd_best", "wrong"):
        v = getattr(h, f)
        assert v.shape == (3,) and np.all(np.isfinite(v)) and np.all(v >= 0)
    assert np.all(h.dnd_best <= h.dnd + 1e-12) and h.full_shot is None
    X = DD.sample_inputs(fam, fam.theta_test[0], 64, key=jax.random.key(4))
    y = DD.task_targets(fam, fam.theta_test[0], X)
    m0 = DD.adapter_mse(ck.template, ck.checkpoint(0, 0), X, y)
    assert np.isfinite(float(m0))


def test_timed_is_a_positive_mean():
    assert DD.timed(lambda x: x * 2.0, jnp.ones(3), warmup=1, repeats=2) > 0


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: DD.task_family(1, 2, key=jax.random.key(0)), "n_train"),
        (lambda: DD.task_family(2, 2, identifiable=1, key=jax.random.key(0)), "identifiable"),
        (
            lambda: DD.sample_inputs(
                DD.task_family(2, 2, key=jax.random.key(0)), jnp.ones(2), 3, key=jax.random.key(0)
            ),
            "theta",
        ),  # fmt: skip
        (lambda: DD.timed(3, warmup=1, repeats=1), "f"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()
