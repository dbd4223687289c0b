"""Rounding statements of the FP4 formats (Chmiel et al. 2025, arXiv 2505.19115)."""

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize_scalar
from scipy.stats import binomtest

import theory.fp4 as T
from nn import quant
from paper_checks import scaled, wrap

from .._properties import prop

PAPER = "Chmiel, Fishman, Banner & Soudry 2025 (arXiv 2505.19115)"
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])  # OCP MX spec, E2M1 magnitudes


@prop(
    "fp4.e2m1_nearest",
    paper=PAPER,
    statement="Round-to-nearest onto E2M1 returns a grid value at the smallest distance from "
    "x (saturating at +-6), so |RtN(x) - x| = dist(x, grid).",
    where="Sec. 2 (FP4 formats; OCP MX spec E2M1 table)",
    strategy=lambda st: st.fixed_dictionaries(
        {"x": st.lists(st.floats(-8.0, 8.0, allow_subnormal=False), min_size=1, max_size=64)}
    ),
    mutants=[
        wrap(
            "nn.quant.round_to",
            lambda f: lambda x, *a, **k: f(x, *a, **k) * 1.02,
            "rounded values 2 % off the grid",
            name="off_grid",
        )
    ],
)
def _nearest(ex) -> float:
    x = np.asarray(ex["x"], np.float64)
    q = np.asarray(quant.round_to(x, "e2m1", "nearest"), np.float64)
    grid = np.concatenate([-E2M1[::-1], E2M1])
    dist = np.min(np.abs(np.clip(x, -6, 6)[:, None] - grid[None, :]), axis=1)
    on_grid = np.min(np.abs(q[:, None] - grid[None, :]), axis=1)
    err = np.max(np.maximum(np.abs(np.abs(q - np.clip(x, -6, 6)) - dist), on_grid))
    return float(1.0 - err / 1e-12)


_SR_N = 1 << 16  # draws per instance
_SR_ALPHA = 1e-7  # two-sided binomial p-value per instance: no false alarm in 1000 (~1e-4)


@prop(
    "fp4.sr_unbiased",
    paper=PAPER,
    statement="Stochastic rounding onto E2M1, alone or through a block quantiser with an exact "
    "power-of-two block scale s, returns only the grid neighbours lo s, hi s of x s and is "
    "unbiased: the count rounded up is Binomial(N, (x - lo) / (hi - lo)), i.e. E[SR] = x s, "
    "with the two-point variance (x - lo)(hi - x) s^2 of sr_variance.",
    where="Sec. 3 (stochastic rounding, unbiased gradient estimates)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "x": st.floats(-6.0, 6.0, allow_subnormal=False),
            "seed": st.integers(0, 2**31 - 1),
            # None: round_to alone; else the block [x s, 6 s] with its exact fp32 scale s = 2^e
            # (a power of two, so every step is exact; for other s the quantiser's decode scale
            # is s to the last float32 bit only, e.g. s = 0.4204482 gives 0.42044824, so the
            # values are the neighbours times the quantiser's own scale, not times s)
            "scale": st.one_of(st.none(), st.integers(-20, 8).map(lambda e: 2.0**e)),
        }
    ),
    mutants=[
        wrap(
            "nn.quant._uniform",
            lambda f: lambda key, shape, dtype: jnp.minimum(f(key, shape, dtype) * 1.02, 1.0),
            "uniform draws 2 % too large (a biased random source rounds down too often)",
            name="u_biased",
        )
    ],
)
def _sr_unbiased(ex) -> float:
    v = np.float32(ex["x"])
    key = jax.random.key(ex["seed"])
    if ex["scale"] is None:
        s = 1.0
        xs = jnp.full((_SR_N,), v, jnp.float32)
        q = np.asarray(quant.round_to(xs, "e2m1", "stochastic", key=key), np.float64)
    else:
        s = float(ex["scale"])
        blocks = jnp.tile(jnp.array([v * s, 6 * s], jnp.float32), (_SR_N, 1))
        fmt: Any = quant.BlockFormat(2, "fp32", False)  # quantize's fmt: a name or a BlockFormat
        q = np.asarray(quant.quantize(blocks, fmt, "stochastic", key=key), np.float64)[:, 0]
    grid = np.concatenate([-E2M1[::-1], E2M1])
    x = float(v)
    lo, hi = grid[np.searchsorted(grid, x, side="right") - 1], grid[np.searchsorted(grid, x)]
    if not np.all((q == lo * s) | (q == hi * s)):
        return -1.0  # a value other than the two neighbours
    if lo == hi:  # x on the grid: SR returns it exactly
        return 1.0
    var = float(quant.sr_variance(np.float64(x))) * s**2
    room_var = 1.0 - abs(var - (x - lo) * (hi - x) * s**2) / (1e-12 * var)
    p_up = (x - lo) / (hi - lo)
    k = int(np.sum(q == hi * s))
    pvalue = float(binomtest(k, _SR_N, p_up).pvalue)
    # log-scale room: 0 at p = alpha, 1 at p = 1
    room_mean = 1.0 - math.log(max(pvalue, 1e-300)) / math.log(_SR_ALPHA)
    return float(min(room_var, room_mean))


@prop(
    "fp4.sigma_crit_argmax",
    paper=PAPER,
    statement="The expected descent's sensitivity to the noise, |dD/dsigma|, peaks at "
    "sigma_crit = sqrt(G / (3 d)), where the gradient-to-noise ratio is sqrt(3).",
    where="Sec. 4 (the sqrt(3) threshold)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "log10_G": st.floats(-3.0, 3.0),
            "d": st.integers(1, 10**6),
            "log10_lam": st.floats(-2.0, 2.0),
        }
    ),
    mutants=[
        wrap(
            "theory.fp4.critical_sigma",
            scaled(1.05),
            "the critical noise level 5 % high",
            name="sigma_crit_5pct",
        )
    ],
)
def _sigma_crit(ex) -> float:
    G, d, lam = 10.0 ** ex["log10_G"], ex["d"], 10.0 ** ex["log10_lam"]

    def sens(s):  # -|dD/dsigma| by central differences of the optimal-step descent
        h = 1e-6 * s
        up = -T.expected_loss_change(G, s + h, d, lam)
        dn = -T.expected_loss_change(G, s - h, d, lam)
        return -abs(up - dn) / (2 * h)

    sc = T.critical_sigma(math.sqrt(G), d)
    res = minimize_scalar(
        sens, bounds=(sc / 20, sc * 20), method="bounded", options={"xatol": sc * 1e-9}
    )
    rho_err = abs(T.gradient_noise_ratio(math.sqrt(G), sc * math.sqrt(d)) - T.SQRT3)
    return float(min(1.0 - abs(res.x / sc - 1) / 1e-3, 1.0 - rho_err / 1e-12))
