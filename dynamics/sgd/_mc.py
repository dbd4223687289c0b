"""Monte Carlo of constant-step SGD: a fused Numba kernel for quadratics, JAX for the rest.

Randomness of the JAX path: path ``i`` has key ``fold_in(key, i)``; the draws of its steps
``bL, ..., bL + L - 1`` come from ``fold_in(fold_in(key, i), b)`` (blocks of ``L`` steps, one
vectorised draw per block). So a path does not depend on how many paths ran, on the chunking,
or on which horizons are recorded.

Quadratic instances with i.i.d. sampling (the common case) run on the fused Numba kernel of
:mod:`dynamics.sgd._kernel` (its own counter-based stream, with the same independence of the
number of paths, the chunking and the recorded horizons).

Other cases (non-quadratic losses, reshuffling, sample counts) use :func:`_advance`: the state of
all paths of a chunk is advanced together by a ``lax.scan`` over the steps of a block (inside a
``fori_loop`` over blocks, masked outside ``[t0, t1)``); iterates are read off at the recorded
horizons between segments.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from dynamics.sgd._instances import FiniteSum, QuadraticSum
from dynamics.sgd._kernel import quadratic_paths, seed_of

__all__ = ["simulate_recorded"]

_PERM_SALT = 0x5EED
_BLOCK = 32


@partial(jax.jit, static_argnames=("loss", "L", "order", "track_counts", "noisy", "uniform"))
def _advance(
    W,
    cnt,
    path_keys,
    t0,
    t1,
    eta,
    cdf,
    B,
    c,
    noise_sd,
    X,
    y,
    *,
    loss,
    L,
    order,
    track_counts,
    noisy,
    uniform,
):
    n = cdf.shape[0]
    k = c.shape[-1]

    def block(b, carry):
        bkeys = jax.vmap(lambda pk: jax.random.fold_in(pk, b))(path_keys)
        steps = b * L + jnp.arange(L)
        if order == "reshuffle":

            def one(pk):
                pk = jax.random.fold_in(pk, _PERM_SALT)
                return jax.vmap(
                    lambda t: jax.random.permutation(jax.random.fold_in(pk, t // n), n)[t % n]
                )(steps)

            idx = jax.vmap(one)(path_keys)
        elif n == 1:
            idx = jnp.zeros((path_keys.shape[0], L), dtype=jnp.int32)
        else:
            u = jax.vmap(
                lambda bk: jax.random.uniform(jax.random.fold_in(bk, 1), (L,), dtype=cdf.dtype)
            )(bkeys)
            if uniform:
                idx = jnp.minimum((u * n).astype(jnp.int32), n - 1)
            else:
                idx = jnp.minimum(jnp.searchsorted(cdf, u, side="right", method="sort"), n - 1)
        if noisy:
            eps = jax.vmap(
                lambda bk: jax.random.normal(jax.random.fold_in(bk, 2), (L, k), dtype=W.dtype)
            )(bkeys)
            eps = jnp.swapaxes(eps, 0, 1)
        else:
            eps = jnp.zeros((L, 1, 1), dtype=W.dtype)

        def step(carry, xs):
            Wc, cc = carry
            t, i, e = xs
            if loss is None:
                Bi = B[i]  # elementwise forms fuse
                r = jnp.sum(Bi * Wc[:, None, :], axis=-1) - c[i]
                if noisy:
                    r = r - noise_sd * e
                g = jnp.sum(Bi * r[:, :, None], axis=1)
            else:
                g = jax.vmap(jax.grad(loss))(Wc, X[i], y[i])
            active = (t >= t0) & (t < t1)
            Wn = jnp.where(active, Wc - eta * g, Wc)
            if track_counts:
                cc = cc + active * jax.nn.one_hot(i, n, dtype=cc.dtype)
            return (Wn, cc), None

        out, _ = jax.lax.scan(step, carry, (steps, idx.T, eps), unroll=4)
        return out

    return jax.lax.fori_loop(t0 // L, (t1 + L - 1) // L, block, (W, cnt))


def simulate_recorded(
    inst,
    eta,
    grid,
    *,
    key,
    n_paths,
    chunk=4096,
    order="iid",
    track_counts=False,
    dtype="float64",
):
    """Iterates at horizons ``grid`` (sorted unique ints >= 0): ``(n_paths, G, d)``, float64.

    With ``track_counts`` also returns how often each sample was drawn up to each horizon,
    ``(n_paths, G, n)``. ``order`` is ``"iid"`` (with replacement, probabilities ``inst.probs``)
    or ``"reshuffle"`` (a fresh uniform permutation of the samples every ``n`` steps).
    ``dtype`` (``"float32"`` or ``"float64"``) is the arithmetic of quadratic i.i.d. runs; the
    other cases run in float64.
    """
    grid = np.asarray(grid, dtype=np.int64)
    if isinstance(inst, QuadraticSum) and order == "iid" and not track_counts:
        W = quadratic_paths(inst, eta, grid, seed_of(key=key), n_paths, dtype)
        return W.astype(np.float64, copy=False)
    chunk = int(min(chunk, n_paths))
    n = inst.n_samples
    with jax.enable_x64(True):
        cdf = jnp.asarray(np.cumsum(inst.probs))
        if isinstance(inst, QuadraticSum):
            B, c = jnp.asarray(inst.B), jnp.asarray(inst.c)
            X = y = jnp.zeros((1, 1))
            loss, noisy = None, inst.noise_var > 0
            noise_sd = float(np.sqrt(inst.noise_var))
        elif isinstance(inst, FiniteSum):
            B, c = jnp.zeros((1, 1, 1)), jnp.zeros((1, 1))
            X, y = jnp.asarray(inst.X), jnp.asarray(inst.y)
            loss, noisy, noise_sd = inst.loss, False, 0.0
        else:  # pragma: no cover - guarded at the public boundary
            raise TypeError(f"unsupported instance type {type(inst).__name__}.")
        L = int(min(_BLOCK, max(1, grid.max())))
        uniform = bool(np.all(inst.probs == inst.probs[0]))
        outs, couts = [], []
        for start in range(0, n_paths, chunk):
            ids = jnp.arange(start, start + chunk, dtype=jnp.uint32)
            keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(ids)
            W = jnp.tile(jnp.asarray(inst.w0), (chunk, 1))
            cnt = jnp.zeros((chunk, n if track_counts else 1))
            rec, crec, t_prev = [], [], 0
            for g in grid:
                if g > t_prev:
                    W, cnt = _advance(
                        W,
                        cnt,
                        keys,
                        jnp.int64(t_prev),
                        jnp.int64(g),
                        jnp.asarray(float(eta)),
                        cdf,
                        B,
                        c,
                        noise_sd,
                        X,
                        y,
                        loss=loss,
                        L=L,
                        order=order,
                        track_counts=track_counts,
                        noisy=noisy,
                        uniform=uniform,
                    )
                    t_prev = int(g)
                rec.append(np.asarray(W))
                crec.append(np.asarray(cnt))
            take = min(chunk, n_paths - start)
            outs.append(np.stack(rec, axis=1)[:take])
            if track_counts:
                couts.append(np.stack(crec, axis=1)[:take])
        Wall = np.concatenate(outs)
        if track_counts:
            return Wall, np.concatenate(couts)
        return Wall
