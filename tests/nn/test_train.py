"""nn.fit: the pure scan-based training loop, against a hand-written loop, under vmap, bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import nn

KEY = jax.random.key(0)
X = jax.random.normal(jax.random.key(1), (32, 3))
Y = X @ jnp.array([[1.0], [-2.0], [0.5]]) + 0.1


def _mlp(key):
    return nn.MLP(3, 1, 8, 2, key=key)


def _loss(model, t):
    """Mean squared error on a minibatch of 8 drawn from step ``t``'s key."""
    i = jax.random.randint(jax.random.fold_in(KEY, t), (8,), 0, X.shape[0])
    return jnp.mean((model(X[i]) - Y[i]) ** 2)


def _by_hand(model, opt, steps):
    """The scan loop `fit` replaces, written out with optax directly (no nn helper)."""
    tr, fr = eqx.partition(model, eqx.is_inexact_array)

    def step(carry, t):
        tr, st = carry
        val, g = jax.value_and_grad(lambda p: _loss(eqx.combine(p, fr), t))(tr)
        u, st = opt.update(g, st, tr)
        return (optax.apply_updates(tr, u), st), val

    (tr, st), losses = jax.lax.scan(step, (tr, opt.init(tr)), jnp.arange(steps))
    return tr, st, losses


def test_fit_equals_hand_written_loop_bit_for_bit():
    model, opt, steps = _mlp(KEY), optax.adamw(3e-2, weight_decay=0.1), 12
    tr0, fr = nn.split(model)
    tr, st, losses = jax.jit(lambda tr: nn.fit(_loss, opt, tr, jnp.arange(steps), frozen=fr))(tr0)
    ref_tr, ref_st, ref_losses = jax.jit(lambda m: _by_hand(m, opt, steps))(model)
    for a, b in zip(
        jax.tree.leaves((tr, st, losses)),
        jax.tree.leaves((ref_tr, ref_st, ref_losses)),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    assert losses[-1] < 0.5 * losses[0]  # it trains


def test_fit_resumes_and_unrolls_to_the_same_run():
    model, opt = _mlp(KEY), optax.adam(1e-2)
    tr0, fr = nn.split(model)
    run = jax.jit(
        lambda tr, xs, st, u: nn.fit(_loss, opt, tr, xs, frozen=fr, opt_state=st, unroll=u),
        static_argnums=3,
    )
    full = run(tr0, jnp.arange(10), opt.init(tr0), 1)
    tr, st, l1 = run(tr0, jnp.arange(4), opt.init(tr0), 1)
    halves = run(tr, jnp.arange(4, 10), st, 1)
    unrolled = run(tr0, jnp.arange(10), opt.init(tr0), 3)  # other fusion: equal to rounding
    for a, b, c in zip(*(jax.tree.leaves(r[:2]) for r in (full, halves, unrolled)), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(full[2], jnp.concatenate([l1, halves[2]]))
    np.testing.assert_allclose(full[2], unrolled[2], rtol=1e-13)


def test_fit_without_frozen_and_with_length_matches_sgd_by_hand():
    # loss 1/2 |w - c|^2 by SGD at lr (derived here): w_t = c + (1 - lr)^t (w_0 - c),
    # loss_t = 1/2 (1 - lr)^{2t} |c|^2
    c, lr, steps = jnp.array([1.0, -2.0]), 0.3, 5
    w, _, losses = nn.fit(
        lambda w, _: 0.5 * jnp.sum((w - c) ** 2), optax.sgd(lr), jnp.zeros(2), length=steps
    )
    decay = (1 - lr) ** np.arange(steps + 1)
    np.testing.assert_allclose(w, c * (1 - decay[-1]), rtol=1e-14)
    np.testing.assert_allclose(losses, 0.5 * decay[:-1] ** 2 * 5.0, rtol=1e-14)


def test_fit_records_aux_at_every_step():
    # same problem as above (derived there); aux = the parameter the step's loss saw:
    # w_t = c (1 - (1 - lr)^t)
    c, lr, steps = jnp.array([1.0, -2.0]), 0.3, 5
    w, _, (losses, (seen, tag)) = nn.fit(
        lambda w, t: (0.5 * jnp.sum((w - c) ** 2), (w, 2 * t)),
        optax.sgd(lr),
        jnp.zeros(2),
        jnp.arange(steps),
        has_aux=True,
    )
    decay = (1 - lr) ** np.arange(steps + 1)
    np.testing.assert_allclose(seen, c * (1 - decay[:-1, None]), rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(tag, 2 * np.arange(steps))
    np.testing.assert_allclose(losses, 0.5 * decay[:-1] ** 2 * 5.0, rtol=1e-14)
    np.testing.assert_allclose(w, c * (1 - decay[-1]), rtol=1e-14)


def test_fit_vmaps_over_seeds_and_learning_rates():
    lrs, seeds, steps = jnp.array([1e-3, 3e-2]), jnp.arange(3), 6

    def run(lr, seed):
        tr, fr = nn.split(_mlp(jax.random.fold_in(KEY, seed)))
        tr, _, losses = nn.fit(_loss, optax.adam(lr), tr, jnp.arange(steps), frozen=fr)
        return nn.combine(tr, fr), losses

    grid = jax.jit(jax.vmap(jax.vmap(run, in_axes=(None, 0)), in_axes=(0, None)))(lrs, seeds)
    models, losses = grid
    assert losses.shape == (2, 3, steps)
    for i, lr in enumerate(lrs.tolist()):
        for j in range(3):
            one_m, one_l = jax.jit(run)(lr, j)
            np.testing.assert_allclose(losses[i, j], one_l, rtol=1e-12)
            np.testing.assert_allclose(
                models.layers[0].weight[i, j], one_m.layers[0].weight, rtol=1e-12
            )
    # the learning rate matters and the seeds differ
    assert not np.allclose(losses[0, :, -1], losses[1, :, -1])
    assert len(set(np.asarray(losses[1, :, 0]).tolist())) == 3


def test_train_and_fit_share_the_update():
    # train's jitted step and fit run the same update: same model after the same batches
    model, opt, steps = _mlp(KEY), optax.sgd(0.05), 5
    res = nn.train(
        model, lambda m, t, *, key: _loss(m, t), lambda t: t, opt, steps, key=KEY, progress=False
    )
    tr, fr = nn.split(model)
    tr, _, losses = nn.fit(_loss, opt, tr, jnp.arange(steps), frozen=fr)
    np.testing.assert_allclose(res.losses, losses, rtol=1e-12)
    for a, b in zip(jax.tree.leaves(res.model), jax.tree.leaves(nn.combine(tr, fr)), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


W = jnp.zeros(2)
SGD = optax.sgd(0.1)


def _quad(w, _):
    return jnp.sum(w**2)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        (dict(loss_fn=3), TypeError, "`loss_fn` must be callable"),
        (dict(optimizer="adam"), TypeError, "`optimizer` must be an optax"),
        (
            dict(trainable=jnp.zeros(2, int)),
            TypeError,
            "`trainable` must be a pytree with floating",
        ),
        (dict(trainable=None), TypeError, "`trainable` must be a pytree"),
        (dict(length=None), ValueError, "`xs` must have array leaves"),
        (dict(length=-1), ValueError, r"`length` must be an integer in \[0, 1000000000\]; got -1"),
        (dict(length=2.0), TypeError, "`length` must be an integer"),
        (dict(xs=jnp.arange(3)), ValueError, "of length `length` = 4; got leading sizes \\[3\\]"),
        (dict(xs=(jnp.arange(3), jnp.arange(2)), length=None), ValueError, "one leading step axis"),
        (dict(xs=jnp.float32(1.0), length=None), ValueError, "one leading step axis"),
        (dict(unroll=0), ValueError, r"`unroll` must be an integer in \[1, inf\]; got 0"),
        (dict(has_aux=1), TypeError, "`has_aux` must be a bool"),
        (dict(frozen=(1.0, 2.0)), ValueError, "`trainable` and `frozen` must be the two halves"),
    ],
)
def test_fit_rejects_bad_input(kwargs, err, match):
    args = dict(loss_fn=_quad, optimizer=SGD, trainable=W, xs=None, length=4) | kwargs
    with pytest.raises(err, match=match):
        nn.fit(**args)
