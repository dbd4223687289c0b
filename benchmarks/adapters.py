"""Benchmark: adapter training steps against LoRA and against dense fine-tuning, Uni-LoRA's
projection as a gather against a dense matrix, and Stiefel retractions against each other and the
landing step.

Run: ``python benchmarks/adapters.py [--quick | --full] [--json PATH]`` (``--quick``, the default,
takes under two minutes on two cores). Prints tables of median wall times (compilation excluded,
``block_until_ready``) and ratios measured in this run; ``--json`` also writes them to ``PATH``.

1. One jitted AdamW step (loss, gradient, update) of a 12-layer TransformerLM (d_model 64 quick,
   256 full) with each method on the q/k/v/o projections, against the LoRA r = 8 step and the
   dense fine-tuning step (every weight trainable). The methods are timed in rounds, one step of
   each per round in turn, so that load from other processes hits them alike. Memory beside
   time: the bytes of the trainable arrays and their optimiser state (the frozen base is the
   same for all) and XLA's temporary buffers of the compiled step (``memory_analysis``), as
   ratios to dense fine-tuning.
2. ``theta_D = P theta`` with Uni-LoRA's one-nonzero-per-row ``P`` (D = 1e5, d = 1e3): gather
   (``theta[index] * value``) against a dense ``D x d`` float32 matmul (what a generic random
   projection costs); also ``P^T g`` as a segment sum against the dense transpose product.
3. Stiefel steps at p = 4096, r = 32: QR (CholeskyQR2), polar (eigh of the r x r Gram matrix),
   Cayley (rank-2r Woodbury) retractions and the landing field (matmuls only), ratios against
   the landing step; the same QR and polar retractions through XLA's Householder QR and SVD of
   the tall matrix (what ``jnp.linalg`` gives a user) as baselines.
"""

from __future__ import annotations

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from _harness import run

import nn
import nn.adapters as ad
from nn import riemannian as rm


def timeit(f, *args, repeat=20):
    out = f(*args)
    jax.block_until_ready(out)  # compile
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def bench_steps(repeat, d_model, batch, seq):
    lm = nn.TransformerLM(256, d_model, 4, 12, seq, key=jax.random.key(0), dtype=jnp.float32)
    tokens = jax.random.randint(jax.random.key(1), (batch, seq + 1), 0, 256)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj"]
    adamw0 = optax.adamw(1e-3, weight_decay=0.0)  # PoLAR's inner optimiser (weight decay 0)
    setups = {
        "dense fine-tuning": (None, {}, optax.adamw(1e-3)),
        "lora r=8": ("lora", dict(r=8), optax.adamw(1e-3)),
        "polar r=8 landing": ("polar", dict(r=8), ad.polar_optimizer(adamw0, stiefel="landing")),
        "polar r=8 qr": ("polar", dict(r=8), ad.polar_optimizer(adamw0, stiefel="qr")),
        "unilora d=1024": ("unilora", dict(r=8, d=1024), optax.adamw(1e-3)),
        "vera r=64": ("vera", dict(r=64), optax.adamw(1e-3)),
        "tied_lora r=8": ("tied_lora", dict(r=8), optax.adamw(1e-3)),
        "vblora": ("vblora", dict(r=8, num_vectors=64, vector_length=16), optax.adamw(1e-3)),
        "ravan 4x2": ("ravan", dict(r=2, heads=4), optax.adamw(1e-3)),
        "moore": ("moore", dict(r=8, num_experts=32, task_dim=16), optax.adamw(1e-3)),
    }
    runs = {}
    for name, (meth, cfg, opt) in setups.items():
        model = (
            lm
            if meth is None
            else ad.inject(lm, meth, targets=targets, key=jax.random.key(2), **cfg)
        )
        tr, fr = nn.split(model)
        st = opt.init(tr)

        @eqx.filter_jit
        def step(tr, st, fr=fr, opt=opt):
            loss, g = eqx.filter_value_and_grad(lambda t: nn.lm_loss(nn.combine(t, fr), tokens))(tr)
            u, st = opt.update(g, st, tr)
            return eqx.apply_updates(tr, u), st, loss

        step = step.lower(tr, st).compile()
        mem = step.compiled.memory_analysis()
        jax.block_until_ready(step(tr, st))
        state = sum(a.nbytes for a in jax.tree.leaves((tr, st)) if eqx.is_array(a))
        runs[name] = (step, tr, st, nn.count_params(model), state, mem.temp_size_in_bytes)
    times = {name: [] for name in runs}
    for _ in range(repeat):
        for name, (step, tr, st, *_) in runs.items():
            t = time.perf_counter()
            jax.block_until_ready(step(tr, st))
            times[name].append(time.perf_counter() - t)
    med = {k: float(np.median(v)) for k, v in times.items()}
    rows = [
        dict(
            method=k,
            trainable=runs[k][3],
            ms=1e3 * med[k],
            vs_lora=med[k] / med["lora r=8"],
            vs_dense=med[k] / med["dense fine-tuning"],
            state_mb=runs[k][4] / 2**20,
            state_vs_dense=runs[k][4] / runs["dense fine-tuning"][4],
            temp_mb=runs[k][5] / 2**20,
            temp_vs_dense=runs[k][5] / runs["dense fine-tuning"][5],
        )
        for k in runs
    ]
    print(
        f"\n1. One AdamW step, TransformerLM d={d_model} x 12 layers, batch {batch} x {seq} "
        f"tokens (float32), median of {repeat} rounds"
    )
    print(
        f"{'method':<22}{'trainable':>12}{'time (ms)':>12}{'vs LoRA':>10}{'vs dense':>10}"
        f"{'state MB':>10}{'vs dense':>10}{'temp MB':>10}{'vs dense':>10}"
    )
    for r in rows:
        print(
            f"{r['method']:<22}{r['trainable']:>12d}{r['ms']:>12.3f}{r['vs_lora']:>10.2f}"
            f"{r['vs_dense']:>10.2f}{r['state_mb']:>10.2f}{r['state_vs_dense']:>10.2f}"
            f"{r['temp_mb']:>10.2f}{r['temp_vs_dense']:>10.2f}"
        )
    return dict(d_model=d_model, layers=12, batch=batch, seq=seq, repeat=repeat, rows=rows)


def bench_projection(repeat, D=100_000, d=1_000):
    idx, val = ad.isometric_projection(D, d, 0)
    idx_j, val_j = jnp.asarray(idx), jnp.asarray(val, jnp.float32)
    dense = jnp.zeros((D, d), jnp.float32).at[jnp.arange(D), idx_j].set(val_j)
    theta = jax.random.normal(jax.random.key(0), (d,), jnp.float32)
    g = jax.random.normal(jax.random.key(1), (D,), jnp.float32)
    gather = jax.jit(lambda th: ad.project(th, idx_j, val_j))
    seg = jax.jit(lambda gg: ad.project_transpose(gg, idx_j, val_j, d))
    mv = jax.jit(lambda th: dense @ th)
    mtv = jax.jit(lambda gg: dense.T @ gg)
    err = float(jnp.max(jnp.abs(gather(theta) - mv(theta))))
    t = [timeit(f, x, repeat=repeat) for f, x in ((gather, theta), (mv, theta), (seg, g), (mtv, g))]
    print(
        f"\n2. Uni-LoRA projection, D = {D:g}, d = {d:g} (float32; "
        f"max |gather - dense| = {err:.1e})"
    )
    print(f"{'operation':<28}{'gather (ms)':>12}{'dense (ms)':>12}{'dense/gather':>14}")
    print(f"{'P theta':<28}{1e3 * t[0]:>12.3f}{1e3 * t[1]:>12.3f}{t[1] / t[0]:>14.1f}")
    print(f"{'P^T g (segment sum)':<28}{1e3 * t[2]:>12.3f}{1e3 * t[3]:>12.3f}{t[3] / t[2]:>14.1f}")
    print(
        f"{'memory (MB)':<28}{(idx.nbytes + val_j.nbytes) / 1e6:>12.2f}{dense.nbytes / 1e6:>12.1f}"
    )
    return dict(
        D=D,
        d=d,
        max_abs_diff=err,
        gather_ms=1e3 * t[0],
        dense_ms=1e3 * t[1],
        segment_sum_ms=1e3 * t[2],
        dense_transpose_ms=1e3 * t[3],
    )


def bench_stiefel(repeat, p=4096, r=32):
    x = rm.random_stiefel(p, r, key=jax.random.key(0), dtype=jnp.float32)
    gr = 1e-2 * jax.random.normal(jax.random.key(1), (p, r), jnp.float32)
    fs = {"landing field": jax.jit(lambda x, g: x - 0.1 * rm.landing_field(x, g, 1.0))}
    for k, f in rm.RETRACTIONS.items():
        fs[f"{k} retraction"] = jax.jit(lambda x, g, f=f: f(x, rm.project_tangent(x, -g)))

    def householder_qr(x, g):
        q, rr = jnp.linalg.qr(x + rm.project_tangent(x, -g))
        return q * jnp.sign(jnp.diagonal(rr))

    def svd_polar(x, g):
        u, _, wt = jnp.linalg.svd(x + rm.project_tangent(x, -g), full_matrices=False)
        return u @ wt

    fs["qr via jnp.linalg.qr"] = jax.jit(householder_qr)
    fs["polar via jnp.linalg.svd"] = jax.jit(svd_polar)
    t = {k: timeit(f, x, gr, repeat=repeat) for k, f in fs.items()}
    print(f"\n3. One Stiefel step, p = {p}, r = {r} (float32)")
    print(f"{'step':<26}{'time (ms)':>12}{'vs landing':>12}")
    for k, v in t.items():
        print(f"{k:<26}{1e3 * v:>12.3f}{v / t['landing field']:>12.2f}")
    return dict(
        p=p,
        r=r,
        ms={k: 1e3 * v for k, v in t.items()},
        vs_landing={k: v / t["landing field"] for k, v in t.items()},
    )


def bench(scale: str, args) -> dict:
    if scale == "full":
        return {
            "steps": bench_steps(20, 256, 16, 128),
            "projection": bench_projection(20, D=100_000),
            "stiefel": bench_stiefel(20),
        }
    return {
        "steps": bench_steps(5, 64, 8, 32),
        "projection": bench_projection(5, D=20_000),
        "stiefel": bench_stiefel(5, p=1024, r=16),
    }


if __name__ == "__main__":
    run(bench, __doc__, quick="d_model 64, batch 8 x 32, D = 2e4, p = 1024",
        full="d_model 256, batch 16 x 128, D = 1e5, p = 4096")  # fmt: skip
