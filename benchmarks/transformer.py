"""Benchmark: adaptive gradient-flow solve (diffrax Tsit5 + PID) against fixed-step gradient descent
(the baseline a user would write) for the same trajectory accuracy.

Task: the small-init Transformer of Chen & Luo 2025 on ``gaussian_task(64, 4, 8, "bilinear")``
from N(0, eps^2) weights, over stage 1, the escape and the first part of stage 2
(``T = 1.25 x`` the predicted escape time). Reference: the same flow at ``rtol = 1e-13``.
Error: max over 201 equally spaced times of ``||theta(t) - theta_ref(t)|| / max_t ||theta_ref||``.
For each target error, the fewest GD steps (step ``T / (200 m)``, m doubling) and the loosest
solver tolerance (rtol by decades) reaching it; wall times are of compiled runs
(best of 2), measured in this run. Run: ``python benchmarks/transformer.py [--quick | --full]
[--eps 1e-2] [--json PATH]`` (quick: the 1e-2 target only).
"""

from __future__ import annotations

import time

import jax
import numpy as np
from _harness import run

import dynamics.transformer as dt
from dynamics.transformer import PARAMS


def _flat(path):
    return np.concatenate([path.weights[k].reshape(path.t.size, -1) for k in PARAMS], axis=1)


def _best_time(fn, reps=2):
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def compare(eps: float, targets) -> dict:
    jax.config.update("jax_enable_x64", True)
    X, y = dt.gaussian_task(64, 4, 8, labels="bilinear", rng=0)
    key = jax.random.key(0)
    esc = dt.escape_time(X, y, eps, key=key)
    T = 1.25 * esc.t_predicted
    m0 = dt.SmallInitTransformer.init(8, eps, key=key)
    ts = np.linspace(0.0, T, 201)
    ref = _flat(dt.gradient_flow(m0, X, y, T, ts=ts, rtol=1e-13, atol=1e-16))
    scale = np.max(np.linalg.norm(ref, axis=1))

    def err(path):
        return float(np.max(np.linalg.norm(_flat(path) - ref, axis=1)) / scale)

    gd = []
    for j in range(0, 13):
        m = 2**j
        steps = 200 * m
        lr = T / steps
        dt.gradient_descent(m0, X, y, lr, steps, save_every=m)  # compile / warm
        wall, p = _best_time(
            lambda lr=lr, steps=steps, m=m: dt.gradient_descent(m0, X, y, lr, steps, save_every=m)
        )
        e = err(p) if np.all(np.isfinite(p.loss)) else np.inf
        gd.append((steps, wall, e))
        if e <= min(targets):
            break
    ode = []
    for rtol in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10):
        dt.gradient_flow(m0, X, y, T, ts=ts, rtol=rtol, atol=rtol * 1e-3)
        wall, p = _best_time(
            lambda rtol=rtol: dt.gradient_flow(m0, X, y, T, ts=ts, rtol=rtol, atol=rtol * 1e-3)
        )
        ode.append((p.num_steps, wall, err(p), rtol))
    print(
        f"small-init Transformer, eps = {eps:g}, horizon T = {T:.4g} "
        f"(escape predicted at {esc.t_predicted:.4g})"
    )
    print(
        f"{'target err':>10} | {'GD steps':>9} {'GD s':>8} | {'ODE steps':>9} {'ODE s':>8} "
        f"{'rtol':>7} | {'steps GD/ODE':>12} {'time GD/ODE':>11}"
    )
    table = {}
    for tgt in targets:
        g = next((r for r in gd if r[2] <= tgt), None)
        o = next((r for r in ode if r[2] <= tgt), None)
        if g is None or o is None:
            print(
                f"{tgt:10.0e} | not reached within the search (GD best "
                f"{min(r[2] for r in gd):.2e}, ODE best {min(r[2] for r in ode):.2e})"
            )
            continue
        print(
            f"{tgt:10.0e} | {g[0]:9d} {g[1]:8.3f} | {o[0]:9d} {o[1]:8.3f} {o[3]:7.0e} | "
            f"{g[0] / o[0]:12.1f} {g[1] / o[1]:11.1f}"
        )
        table[f"{tgt:.0e}"] = dict(gd_steps=g[0], gd_seconds=g[1], ode_steps=o[0], ode_seconds=o[1],
                                   rtol=o[3], steps_gd_over_ode=g[0] / o[0],
                                   time_gd_over_ode=g[1] / o[1])  # fmt: skip
    print("GD errors by steps:  " + ", ".join(f"{s}:{e:.1e}" for s, _, e in gd))
    print("ODE errors by rtol:  " + ", ".join(f"{r:.0e}:{e:.1e} ({s} steps)" for s, _, e, r in ode))

    return dict(eps=eps, horizon=T, targets=table)


def bench(scale: str, args) -> dict:
    return compare(args.eps, (1e-2,) if scale == "quick" else (1e-2, 1e-3))


def _options(ap):
    ap.add_argument("--eps", type=float, default=1e-2, help="initial weight scale (default 1e-2)")


if __name__ == "__main__":
    run(bench, __doc__, quick="target error 1e-2", full="target errors 1e-2 and 1e-3",
        options=_options)  # fmt: skip
