"""Benchmark: SGD Monte Carlo in JAX against a plain NumPy loop, and the exact recursion against
Monte Carlo at matched accuracy.

Run: ``python benchmarks/sgd.py [--quick | --full] [--json PATH]``. ``--quick`` (the default, under
two minutes on 2 cores): 4000 paths x 4000 steps; ``--full``: 10 000 paths x 10 000 steps (the size
of issue 23). Both at d = 50 on a realizable least-squares instance with 200 rows. Prints a table of
wall times and ratios measured in this run; ``--json`` also writes it to ``PATH``.

1. Monte Carlo: ``dynamics.sgd.expected_excess_risk(method="monte_carlo")`` (the fused Numba
   kernel) in float32 and float64 (compiled, or loaded from Numba's cache, beforehand; that time is
   its own row) against a NumPy loop over steps that is vectorised over paths (what a user would
   write, float64).
2. The machine's limits for the same work: ``4 d`` flops per path-step (a dot and an axpy of
   length ``d``) at the float32 rate of a large jitted matrix product, and the kernel's memory
   traffic (per path-step the iterate and two sampled rows loaded, the iterate stored: ``4 d``
   numbers of the padded ``d``) at the rate a plain fused axpy-and-dot loop over arrays held in
   L1 reaches on every core, both measured in this run. The second is the binding one.
3. Exact recursion (one eigendecomposition, every T of a 20-point grid) against the float32 Monte
   Carlo run, which reaches only the relative standard error printed.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import _harness
import jax
import jax.numpy as jnp
import numpy as np
from numba import njit

import dynamics.sgd as S
from _core.runtime import cpu_cores
from dynamics.sgd import padded_dim

SIZES = {"quick": dict(paths=4000, steps=4000), "full": dict(paths=10_000, steps=10_000)}
DIM, ROWS = 50, 200


def numpy_loop(inst, eta, steps, paths, seed):
    rng = np.random.default_rng(seed)
    A, b = inst.B[:, 0, :], inst.c[:, 0]
    W = np.tile(inst.w0, (paths, 1))
    for _ in range(steps):
        i = rng.integers(0, A.shape[0], size=paths)
        a = A[i]
        r = np.einsum("pd,pd->p", a, W) - b[i]
        W -= eta * r[:, None] * a
    return inst.excess_risk(W)


def matmul_rate(n=2048, reps=5):
    """float32 flop/s of a jitted ``n x n`` matrix product: the machine's arithmetic rate."""
    x = jnp.ones((n, n), jnp.float32)
    f = jax.jit(lambda a: a @ a)
    f(x).block_until_ready()
    best = min(_timed(lambda: f(x).block_until_ready()) for _ in range(reps))
    return 2.0 * n**3 / best


@njit(nogil=True, fastmath={"reassoc", "contract"})
def _stream(W, B1, B2, reps, r):  # pragma: no cover
    """The fused kernel's inner loop (``W -= r B1``, then ``B2 . W``) on fixed rows, without
    sampling: one load of ``B1``, ``B2`` and ``W`` and one store of ``W`` per element."""
    tot = W.dtype.type(0.0)
    for _ in range(reps):
        a = W.dtype.type(0.0)
        for m in range(W.size):
            w = W[m] - r * B1[m]
            W[m] = w
            a += B2[m] * w
        tot += a
    return tot


def l1_rate(dtype, reps=20_000, tries=3):
    """Bytes/s of :func:`_stream`'s loads and stores on three 8 KiB arrays per thread (in L1),
    one thread per core as the kernel runs."""
    dt = np.dtype(dtype)
    n = 8192 // dt.itemsize
    threads = cpu_cores()
    arrays = [(np.zeros(n, dt), np.full(n, 1e-3, dt), np.ones(n, dt)) for _ in range(threads)]
    _stream(*arrays[0], 1, dt.type(0.0))
    with ThreadPoolExecutor(threads) as pool:
        best = min(
            _timed(lambda: list(pool.map(lambda a: _stream(*a, reps, dt.type(1e-9)), arrays)))
            for _ in range(tries)
        )
    return 4 * n * dt.itemsize * reps * threads / best


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(paths, steps):
    jax.config.update("jax_enable_x64", True)
    inst = S.gaussian_design(ROWS, 1.0 / np.arange(1, DIM + 1), rng=0)
    eta = 1.0 / inst.beta

    def mc(T, key, precision):
        return S.expected_excess_risk(
            inst, eta, T, method="monte_carlo", key=jax.random.key(key), n_paths=paths,
            chunk=paths, precision=precision,
        )  # fmt: skip

    t_compile = _timed(lambda: mc(64, 1, "float32"))  # compiles the shapes of the timed runs
    mc(64, 1, "float64")
    out = {}
    for p in ("float32", "float64"):  # best of 5: a run is a tenth of a second at quick
        out[p] = mc(steps, 0, p)
        out[p + "_s"] = min(_timed(lambda p=p: mc(steps, 0, p)) for _ in range(5))
    t0 = time.perf_counter()
    r_np = numpy_loop(inst, eta, steps, paths, 0)
    t_np = time.perf_counter() - t0
    flops = 4.0 * DIM * paths * steps
    rate = matmul_rate()
    t_lim = flops / rate
    floor = {}  # seconds of the kernel's loads and stores at the L1 rate, per precision
    for p in ("float32", "float64"):
        dt = np.dtype(p)
        floor[p] = 4 * padded_dim(DIM, dt) * dt.itemsize * paths * steps / l1_rate(dt)

    grid = np.unique(np.geomspace(1, steps, 20).astype(int))
    t0 = time.perf_counter()
    ex = S.expected_excess_risk(inst, eta, grid)
    t_ex = time.perf_counter() - t0

    m32, m64 = out["float32"], out["float64"]
    se_np = r_np.std(ddof=1) / np.sqrt(r_np.size)
    rows = [
        ("NumPy loop over steps, vectorised over paths (float64)", t_np, 1.0),
        ("MC, float32 (fused kernel)", out["float32_s"], t_np / out["float32_s"]),
        ("MC, float64 (fused kernel)", out["float64_s"], t_np / out["float64_s"]),
        ("  compile or cache load + 64 steps (once per dtype)", t_compile, t_np / t_compile),
        ("arithmetic limit: 4d flops/path-step at matmul rate", t_lim, t_np / t_lim),
        (
            "L1 limit, float32: 4 d_pad numbers moved/path-step",
            floor["float32"],
            t_np / floor["float32"],
        ),
        ("L1 limit, float64", floor["float64"], t_np / floor["float64"]),
        (f"exact recursion, {grid.size} horizons (vs float32 MC)", t_ex, out["float32_s"] / t_ex),
    ]
    head = f"SGD Monte Carlo, {paths} paths x {steps} steps, d = {DIM}, n = {ROWS}"
    print(head)
    print(f"{'task':<58}{'seconds':>10}{'ratio':>10}")
    for name, t, r in rows:
        print(f"{name:<58}{t:>10.3f}{r:>10.1f}")
    ps = paths * steps
    checks = dict(
        mc_rel_se=float(m32.se[0] / m32.mean[0]),
        z_float32_vs_exact=float(abs(m32.mean[0] - ex.mean[-1]) / m32.se[0]),
        z_float64_vs_exact=float(abs(m64.mean[0] - ex.mean[-1]) / m64.se[0]),
        z_numpy_vs_float32=float(abs(r_np.mean() - m32.mean[0]) / np.hypot(se_np, m32.se[0])),
        ns_per_path_step_float32=1e9 * out["float32_s"] / ps,
        flops_per_path_step=4 * DIM,
        matmul_gflops=rate / 1e9,
        achieved_gflops_float32=flops / out["float32_s"] / 1e9,
        kernel_over_l1_limit_float32=out["float32_s"] / floor["float32"],
        kernel_over_l1_limit_float64=out["float64_s"] / floor["float64"],
    )
    print(
        f"\nMC relative SE at T={steps}: {checks['mc_rel_se']:.2e}; |MC - exact| = "
        f"{checks['z_float32_vs_exact']:.2f} SE (float32), {checks['z_float64_vs_exact']:.2f} SE "
        f"(float64); |NumPy - JAX| = {checks['z_numpy_vs_float32']:.2f} SE\n"
        f"float32: {checks['ns_per_path_step_float32']:.1f} ns per path-step, "
        f"{checks['achieved_gflops_float32']:.1f} GFLOP/s of {4 * DIM} flops per path-step "
        f"(matmul rate {checks['matmul_gflops']:.0f} GFLOP/s)\n"
        f"kernel time / L1 limit: {checks['kernel_over_l1_limit_float32']:.2f} (float32), "
        f"{checks['kernel_over_l1_limit_float64']:.2f} (float64)"
    )
    return dict(
        paths=paths,
        steps=steps,
        dim=DIM,
        rows=[dict(task=n, seconds=t, ratio=r) for n, t, r in rows],
        checks=checks,
    )


def bench(scale: str, args) -> dict:
    return run(**SIZES[scale])


if __name__ == "__main__":
    _harness.run(bench, __doc__, quick="4000 x 4000", full="10 000 paths x 10 000 steps")
