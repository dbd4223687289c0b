"""Vectorised Monte Carlo of constant-step SGD in JAX.

Randomness: path ``i`` has key ``fold_in(key, i)``; the draws of its steps ``bL, ..., bL + L - 1``
come from ``fold_in(fold_in(key, i), b)`` (blocks of ``L`` steps, one vectorised draw per block).
So a path does not depend on how many paths ran, on the chunking, or on which horizons are
recorded.

Quadratic instances with i.i.d. sampling (the common case) run on :func:`_quadratic_iid`, built
for XLA's CPU backend, which executes a loop body op by op, each op one pass over its arrays:

* paths are cut into blocks of ``_PATH_BLOCK`` that are advanced through *all* their steps before
  the next block starts, so a block's iterates (and the rows of ``B``) stay in L1/L2 cache, where a
  vectorised-over-all-paths step streams every array through L3 or memory at every step;
* the row indices of ``L`` steps are drawn at once, 32 random bits per step (multiply-shift, no
  floating point), instead of a float64 uniform per step;
* the loop carries only the iterates (no masks, no counters, no noise of noiseless instances), and
  runs in float32 when asked (half the bytes per pass and twice the SIMD width);
* each XLA call is one sequential loop on one core, so the path blocks are split into one call
  per core, run from a thread each.

Per path-step the rank-one update costs ``4d`` flops (a dot and an axpy) and, op by op, about five
passes of ``d`` numbers over L1/L2 (the gathered row written once and read twice, the iterate read
twice and written once): about ``20 d`` bytes in float32.

Other cases (non-quadratic losses, reshuffling, sample counts) use :func:`_advance`: the state of
all paths of a chunk is advanced together by a ``lax.scan`` over the steps of a block (inside a
``fori_loop`` over blocks, masked outside ``[t0, t1)``); iterates are read off at the recorded
horizons between segments.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from dynamics.sgd._instances import FiniteSum, QuadraticSum

__all__ = ["simulate_recorded"]

_PERM_SALT = 0x5EED
_BLOCK = 32
_STEP_BLOCK = 64  # steps per counter-based draw in _quadratic_iid
_COMPILED = set()  # signatures of _quadratic_iid calls compiled so far
_PATH_BLOCK = 512  # paths advanced together through all steps (512 x 50 float32: 100 kB)


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


def _row_indices(bkeys, L, n, uniform, cdf):
    """Sample indices ``(Pb, L)`` of one step block from 32 random bits per step and path.

    Uniform: ``floor(u n / 2**32)`` (multiply-shift), so each index has probability
    ``1/n`` up to a relative ``n / 2**32``; otherwise the bits give ``u = (bits + 1/2) / 2**32`` and
    the index is the first ``j`` with ``cdf[j] > u`` (probabilities exact up to ``2**-32``).
    """
    bits = jax.vmap(lambda bk: jax.random.bits(jax.random.fold_in(bk, 1), (L,), jnp.uint32))(bkeys)
    if uniform:
        return ((bits.astype(jnp.uint64) * n) >> 32).astype(jnp.int32)
    u = (bits.astype(jnp.float64) + 0.5) * 2.0**-32
    return jnp.minimum(jnp.searchsorted(cdf, u, side="right", method="sort"), n - 1).astype(
        jnp.int32
    )


@partial(jax.jit, static_argnames=("shape", "L", "uniform", "noisy", "dtype"))
def _quadratic_iid(
    key, first, w0, starts, ends, eta, cdf, B, c, noise_sd, *, shape, L, uniform, noisy, dtype
):
    """Iterates ``(NB, G, Pb, d)`` of paths ``first, ..., first + NB Pb - 1`` (``shape = (NB, Pb)``,
    blocks of ``Pb`` paths) at horizons ``ends``.

    Segment ``g`` runs steps ``starts[g] <= t < ends[g]``; step ``t`` of a path uses sample
    ``idx[t]`` of the draw of its step block ``t // L`` and, for noisy instances, the normal vector
    drawn with it: the same stream as :func:`_advance`'s blocks, so a step's sample does not
    depend on where the segment boundaries fall.
    """
    n, k, d = B.shape
    B, c, eta = B.astype(dtype), c.astype(dtype), eta.astype(dtype)
    rank_one = k == 1
    A, b = B[:, 0, :], c[:, 0]

    def one_block(pkeys):
        def step_block(blk, carry):
            W, t0, t1 = carry
            bkeys = jax.vmap(lambda pk: jax.random.fold_in(pk, blk))(pkeys)
            if n == 1:
                idx = jnp.zeros((L, pkeys.shape[0]), jnp.int32)
            else:
                idx = _row_indices(bkeys, L, n, uniform, cdf).T  # (L, Pb)
            if noisy:
                eps = jax.vmap(
                    lambda bk: jax.random.normal(jax.random.fold_in(bk, 2), (L, k), dtype=dtype)
                )(bkeys)
                eps = noise_sd * jnp.swapaxes(eps, 0, 1)  # (L, Pb, k)

            def step(j, W):  # the carry is the iterates only
                i = idx[j]
                if rank_one:  # one row per sample: a dot and an axpy per path
                    a = A[i]
                    r = jnp.sum(a * W, axis=-1) - b[i]
                    if noisy:
                        r = r - eps[j][:, 0]
                    return W - (eta * r)[:, None] * a
                Bi = B[i]
                r = jnp.einsum("pkd,pd->pk", Bi, W) - c[i]
                if noisy:
                    r = r - eps[j]
                return W - eta * jnp.einsum("pk,pkd->pd", r, Bi)

            lo = jnp.maximum(t0 - blk * L, 0)
            hi = jnp.minimum(t1 - blk * L, L)
            return jax.lax.fori_loop(lo, hi, step, W), t0, t1

        def segment(W, bounds):
            t0, t1 = bounds
            W, _, _ = jax.lax.fori_loop(t0 // L, (t1 + L - 1) // L, step_block, (W, t0, t1))
            return W, W

        W0 = jnp.broadcast_to(w0.astype(dtype), (pkeys.shape[0], d))
        return jax.lax.scan(segment, W0, (starts, ends))[1]

    ids = first + jnp.arange(shape[0] * shape[1], dtype=jnp.uint32)
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(ids)
    return jax.lax.map(one_block, keys.reshape(shape + keys.shape[1:]))


def _workers():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _quadratic_recorded(inst, eta, grid, key, n_paths, chunk, dtype):
    """:func:`simulate_recorded` for a quadratic instance with i.i.d. sampling.

    Calls of at most ``chunk`` paths (whole blocks of ``_PATH_BLOCK``) run in a thread per core:
    each XLA call is one sequential loop, so separate calls are what occupies several cores.
    """
    Pb = int(min(_PATH_BLOCK, n_paths))
    blocks = -(-n_paths // Pb)
    calls = min(max(-(-n_paths // max(chunk, Pb)), _workers()), blocks)
    per_call = -(-blocks // calls) * Pb
    ends = np.asarray(grid, dtype=np.int64)
    with jax.enable_x64(True):
        args = (
            jnp.asarray(inst.w0),
            jnp.asarray(np.concatenate([[0], ends[:-1]])),
            jnp.asarray(ends),
            jnp.asarray(float(eta)),
            jnp.asarray(np.cumsum(inst.probs)),
            jnp.asarray(inst.B),
            jnp.asarray(inst.c),
            float(np.sqrt(inst.noise_var)),
        )
        static = dict(
            shape=(per_call // Pb, Pb),
            L=_STEP_BLOCK,
            uniform=bool(np.all(inst.probs == inst.probs[0])),
            noisy=bool(inst.noise_var > 0),
            dtype=dtype,
        )

        def run(first):
            with jax.enable_x64(True):  # the flag is thread-local
                rec = _quadratic_iid(key, jnp.uint32(first), *args, **static)
                rec = np.swapaxes(np.asarray(rec), 1, 2)  # (NB, Pb, G, d)
            return rec.reshape(per_call, ends.size, inst.dim)[: n_paths - first]

        firsts = list(range(0, n_paths, per_call))
        sig = (tuple(static.items()), ends.size, inst.B.shape, str(jax.typeof(key)))
        outs = []
        if sig not in _COMPILED:  # compile once, not once per thread
            outs.append(run(firsts.pop(0)))
            _COMPILED.add(sig)
        with ThreadPoolExecutor(max_workers=max(1, min(_workers(), len(firsts)))) as pool:
            outs += list(pool.map(run, firsts))
    return np.concatenate(outs).astype(np.float64, copy=False)


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
        return _quadratic_recorded(inst, eta, grid, key, n_paths, chunk, dtype)
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
