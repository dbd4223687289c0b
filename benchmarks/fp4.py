"""FP4 benchmarks: quantiser throughput against a plain ``astype(float4_e2m1fn)`` cast (close to the
memory-bound limit), and the fully quantised training step against the float32 step.

Run: ``python benchmarks/fp4.py`` (prints a table of ratios measured in the same run).
"""

import time

import jax
import jax.numpy as jnp
import optax

import nn
from nn import quant as Q


def _time(f, *args, reps=20):
    jax.block_until_ready(f(*args))
    t0 = time.perf_counter()
    for _ in range(reps):
        out = f(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / reps


def main():
    x = jax.random.normal(jax.random.PRNGKey(0), (4096, 1024), jnp.float32)
    key = jax.random.PRNGKey(1)
    cast = jax.jit(lambda x: x.astype(jnp.float4_e2m1fn).astype(jnp.float32))
    base = _time(cast, x)
    rows = [("astype float4_e2m1fn (baseline)", base)]
    for name, fmt, rnd in [
        ("NVFP4 nearest", "nvfp4", "nearest"),
        ("NVFP4 stochastic", "nvfp4", "stochastic"),
        ("MXFP4 nearest", "mxfp4", "nearest"),
        ("E2M1 stochastic", "e2m1", "stochastic"),
    ]:
        f = jax.jit(lambda x, k, fmt=fmt, rnd=rnd: Q.quantize(x, fmt, rnd, key=k))
        rows.append((name, _time(f, x, key)))
    # the U[0, 1) draws behind stochastic rounding: nn.quant's Threefry RngBitGenerator op against
    # jax.random.uniform with the default (threefry) and the "rbg" (Philox RngBitGenerator) keys
    rbg = jax.random.key(1, impl="rbg")
    for name, f, k in [
        ("U[0,1): nn.quant (SR draws)", lambda k: Q._uniform(k, x.shape, x.dtype), key),
        ("U[0,1): jax.random threefry", lambda k: jax.random.uniform(k, x.shape), key),
        ("U[0,1): jax.random rbg", lambda k: jax.random.uniform(k, x.shape), rbg),
    ]:
        rows.append((name, _time(jax.jit(f), k)))
    print(f"quantiser throughput, {x.size:,} float32 elements")
    print(f"{'method':<34}{'Melem/s':>10}{'time / baseline':>18}")
    for name, t in rows:
        print(f"{name:<34}{x.size / t / 1e6:>10.1f}{t / base:>18.2f}")

    lm = nn.TransformerLM(64, 128, 4, 2, 64, dtype=jnp.float32, key=jax.random.PRNGKey(2))
    batch = jax.random.randint(jax.random.PRNGKey(3), (16, 65), 0, 64)
    opt = optax.adam(1e-3)
    print("\ntraining step, TransformerLM d=128, 2 layers, batch 16 x 64 tokens")
    print(f"{'step':<34}{'ms':>10}{'time / float32':>18}")
    ref = None
    for name, mm in [
        ("float32", None),
        ("FQT NVFP4 (paper recipe)", Q.QuantMatmul.fqt("nvfp4")),
        ("FQT MXFP4", Q.QuantMatmul.fqt("mxfp4")),
        ("QAF NVFP4", Q.QuantMatmul.qaf("nvfp4")),
    ]:
        model = nn.set_matmul(lm, mm)
        tr, fr = nn.split(model)
        st = opt.init(tr)
        step = nn.make_step(nn.lm_loss, opt)
        t = _time(step, tr, fr, st, batch, key, reps=10)
        ref = ref or t
        print(f"{name:<34}{t * 1e3:>10.2f}{t / ref:>18.2f}")


if __name__ == "__main__":
    main()
