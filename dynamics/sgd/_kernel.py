"""Fused Monte Carlo kernel of constant-step SGD on a quadratic finite sum, compiled by Numba.

Why a kernel of its own: XLA's CPU backend runs a loop body op by op, one pass over memory per op
(gather the row, reduce the dot, scale, subtract), and its dot reduction does not vectorise across
``d``; per path-step that measured 36 ns for ``d = 50`` (dot 12.9, gather 8.2, random bits 8.8,
update 3.7, loop 2; issue 23). Here a path runs all its steps in L1: per step, one 64-bit
counter-based draw, a dot and an axpy over the sampled row (``4 d k`` flops; the row and the
iterate are read twice and the iterate written once). A single path is latency-bound (the axpy
waits for the dot, the next dot for the axpy: 17 ns per step at ``d = 50``), so ``_LANES``
paths are advanced together, their chains overlapping (8 ns single-threaded, float32); ``d`` is
padded with zero columns to whole 64-byte blocks; the paths are spread over one thread per
core. What remains bounds it by the L1 load ports: 4 loads of ``d`` numbers per path-step. With one
row per sample (``k = 1``, rank-one least squares) the next step's row is drawn ahead, so the axpy
of step ``t`` and the dot of step ``t + 1`` share one pass over the iterate (:func:`_run_rank1`):
3 loads and a store of ``d`` numbers per path-step, 1.5x faster (measured, one thread, ``d = 50``,
float32 and float64).

Random stream (derived here, SplitMix64 of Steele, Lea & Flood 2014, used as a counter-based
generator): path ``p`` starts from ``s_p = mix(seed ^ mix((p + 1) * GOLDEN))`` and its ``m``-th
draw is ``mix(s_p + m * GOLDEN)``: one per step for the row and, with label noise, ``k`` more
(noiseless: step ``t`` reads ``m = t + 1``). A path's draws depend on its global index and
``seed`` only: not on the number of paths, the chunking, the thread, or the recorded horizons.
The row index is ``floor(u n / 2**32)`` from the top 32 bits ``u`` (multiply-shift; each index
has probability ``1/n`` up to a relative ``n / 2**32``) or, for non-uniform probabilities, the
first ``j`` with ``cdf[j] > (u + 1/2) / 2**32``; label noise is Box-Muller on the two 32-bit
halves of one draw.

The dot is summed with reassociation allowed (``fastmath`` ``reassoc``, ``contract``), so it
vectorises; results are deterministic for a given machine and Numba build.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from _core.runtime import cpu_cores
from _core.validation import check_int

__all__ = ["padded_dim", "quadratic_paths", "seed_of"]

_FAST = {"reassoc", "contract"}
_LANES = 8  # paths interleaved in one loop: their steps' latency chains overlap
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(inline="always")
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def _row(z, n, uniform, cdf):
    """The sampled row, unsigned: Numba wraps negative signed indices, three instructions per
    use in the step loop (float32 kernel 8 % faster without them, measured)."""
    u = z >> np.uint64(32)
    if uniform:
        return (u * np.uint64(n)) >> np.uint64(32)
    x = (np.float64(u) + 0.5) * 2.0**-32
    lo, hi = 0, n - 1  # first j with cdf[j] > x (cdf[n - 1] = 1 > x)
    while lo < hi:
        mid = (lo + hi) // 2
        if cdf[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    return np.uint64(lo)


@njit(inline="always")
def _normal(z):
    u1 = (np.float64(z >> np.uint64(32)) + 0.5) * 2.0**-32
    u2 = (np.float64(z & np.uint64(0xFFFFFFFF)) + 0.5) * 2.0**-32
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


@njit(nogil=True, cache=True, fastmath=_FAST)
def _run(w0, B, c, eta, cdf, uniform, noise_sd, ends, seed, first, out):  # pragma: no cover
    P, G, d = out.shape
    n, k = B.shape[0], B.shape[1]
    W = np.empty((_LANES, d), out.dtype)  # the iterates of _LANES paths, advanced together
    s = np.empty(_LANES, np.uint64)
    idx = np.empty(_LANES, np.uint64)
    r = np.empty((_LANES, k), out.dtype)
    for p0 in range(0, P, _LANES):
        nq = min(_LANES, P - p0)
        for q in range(nq):
            W[q] = w0
            s[q] = _mix(seed ^ _mix(np.uint64(first + p0 + q + 1) * _GOLDEN))
        t = 0
        for g in range(G):
            while t < ends[g]:
                for q in range(nq):
                    s[q] += _GOLDEN
                    idx[q] = _row(_mix(s[q]), n, uniform, cdf)
                for q in range(nq):  # residuals: independent dependency chains, one per path
                    i = idx[q]
                    for j in range(k):
                        acc = -c[i, j]
                        for m in range(d):
                            acc += B[i, j, m] * W[q, m]
                        if noise_sd > 0:  # kept out of acc: the dot stays in out's dtype
                            s[q] += _GOLDEN
                            r[q, j] = eta * (acc - noise_sd * _normal(_mix(s[q])))
                        else:
                            r[q, j] = eta * acc
                for q in range(nq):
                    i = idx[q]
                    for j in range(k):
                        rq = r[q, j]
                        for m in range(d):
                            W[q, m] -= rq * B[i, j, m]
                t += 1
            for q in range(nq):
                out[p0 + q, g] = W[q]
    return out


@njit(nogil=True, cache=True, fastmath=_FAST)
def _run_rank1(w0, B, c, eta, cdf, uniform, noise_sd, ends, seed, first, out):  # pragma: no cover
    """:func:`_run` for ``k = 1``, fused: the same draws (step ``t``'s row at counter ``t per + 1``,
    its noise at ``t per + 2``), each path-step one pass over the iterate."""
    P, G, d = out.shape
    n = B.shape[0]
    per = 2 if noise_sd > 0 else 1  # draws per step
    zero = out.dtype.type(0.0)
    W = np.empty((_LANES, d), out.dtype)
    s = np.empty(_LANES, np.uint64)
    idx = np.empty(_LANES, np.uint64)  # row of the current step
    nxt = np.empty(_LANES, np.uint64)  # row of the next step
    acc = np.empty(_LANES, out.dtype)  # the current row's dot with the iterate
    r = np.empty(_LANES, out.dtype)
    for p0 in range(0, P, _LANES):
        nq = min(_LANES, P - p0)
        for q in range(nq):
            W[q] = w0
            s[q] = _mix(seed ^ _mix(np.uint64(first + p0 + q + 1) * _GOLDEN))
            i = _row(_mix(s[q] + _GOLDEN), n, uniform, cdf)
            idx[q] = i
            a = zero
            for m in range(d):
                a += B[i, 0, m] * w0[m]
            acc[q] = a
        t = 0
        for g in range(G):
            while t < ends[g]:
                for q in range(nq):
                    a = acc[q] - c[idx[q], 0]
                    if noise_sd > 0:
                        a -= noise_sd * _normal(_mix(s[q] + np.uint64(t * per + 2) * _GOLDEN))
                    r[q] = eta * a
                    nxt[q] = _row(_mix(s[q] + np.uint64((t + 1) * per + 1) * _GOLDEN), n,
                                  uniform, cdf)  # fmt: skip
                for q in range(nq):  # W -= r a_i and the dot with the next row, one pass
                    i, i2, rq = idx[q], nxt[q], r[q]
                    a = zero
                    for m in range(d):
                        w = W[q, m] - rq * B[i, 0, m]
                        W[q, m] = w
                        a += B[i2, 0, m] * w
                    acc[q] = a
                    idx[q] = i2
                t += 1
            for q in range(nq):
                out[p0 + q, g] = W[q]
    return out


def seed_of(*, key) -> np.uint64:
    """A 64-bit seed from a JAX key's data (every word mixed in)."""
    import jax

    seed = np.uint64(0)
    with np.errstate(over="ignore"):
        for word in np.asarray(jax.random.key_data(key)).ravel().astype(np.uint64):
            seed = _mix((seed ^ word) + _GOLDEN)
    return seed


def padded_dim(d, dtype) -> int:
    """``d`` rounded up to whole 64-byte blocks of ``dtype``, the width the kernels run at: their
    loops step two AVX2 vectors at a time, and a scalar tail cost 20 % at ``d = 50`` (float32
    padded to 56: 15.4 ns per path-step, to 64: 12.4).

    >>> padded_dim(50, np.float32), padded_dim(50, np.float64)
    (64, 56)
    """
    d = check_int(d, "d", lower=0)
    m = 64 // np.dtype(dtype).itemsize
    return -(-d // m) * m


def quadratic_paths(inst, eta, ends, seed, n_paths, dtype):
    """Iterates ``(n_paths, G, d)`` at horizons ``ends`` of ``n_paths`` paths of SGD with stepsize
    ``eta`` on the quadratic sum ``inst`` (i.i.d. rows with probabilities ``inst.probs``, Gaussian
    label noise of variance ``inst.noise_var``), in ``dtype``; path ``p`` is the same whatever
    ``n_paths`` and ``ends``."""
    dt = np.dtype(dtype)
    d = inst.dim
    dp = padded_dim(d, dt)
    out = np.empty((n_paths, len(ends), dp), dt)
    n, k = inst.B.shape[:2]
    B = np.zeros((n, k, dp), dt)  # zero columns: the padded coordinates stay 0
    B[..., :d] = inst.B
    w0 = np.zeros(dp, dt)
    w0[:d] = inst.w0
    args = (
        w0,
        B,
        np.ascontiguousarray(inst.c, dt),
        dt.type(eta),
        np.cumsum(inst.probs),
        bool(np.all(inst.probs == inst.probs[0])),
        dt.type(np.sqrt(inst.noise_var)),
        np.asarray(ends, np.int64),
        np.uint64(seed),
    )
    cuts = np.linspace(0, n_paths, min(cpu_cores(), n_paths) + 1).astype(int)

    kernel = _run_rank1 if B.shape[1] == 1 else _run

    def part(a, b):  # the kernel releases the GIL: one thread per core
        kernel(*args, np.int64(a), out[a:b])

    part(0, 0)  # no path: compiles (or loads from Numba's cache) once, before the threads
    with ThreadPoolExecutor(max_workers=cuts.size - 1) as pool:
        list(pool.map(part, cuts[:-1], cuts[1:]))
    return out[..., :d]
