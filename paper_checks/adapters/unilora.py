"""Uni-LoRA claim (Li et al. 2025, arXiv 2506.00799): LoRA's accuracy at a small fraction of its
parameters."""

from __future__ import annotations

import functools

import jax
import numpy as np
import optax

import nn
import nn.adapters as ad
from paper_checks._registry import Measurement, claim
from paper_checks._stats import mean_se
from paper_checks.adapters._base import fit, mse, shifted_task

UNILORA = "Li et al. 2025 (Uni-LoRA, arXiv 2506.00799)"


METHOD_SETUPS = {
    "lora": (dict(r=8, alpha=8.0), lambda: optax.adam(1e-3)),
    "unilora": (dict(r=8, d=64), lambda: optax.adam(3e-3)),
}


@functools.cache
def adapt_runs(scale: str = "quick"):
    """LoRA and Uni-LoRA on the shifted tasks: stable ranks, test losses, counts."""
    with jax.enable_x64(True):
        seeds = range(3 if scale == "quick" else 8)
        steps = 600 if scale == "quick" else 3000
        out = {k: {"sr": [], "test": [], "base": [], "count": 0, "curve": None}
               for k in METHOD_SETUPS}
        for s in seeds:
            student, (x, y), (xt, yt) = shifted_task(scale, s)
            base_test = float(mse(student, xt, yt))
            for name, (cfg, make_opt) in METHOD_SETUPS.items():
                a = ad.inject(student, name, targets="layers.1", key=jax.random.key(s), **cfg)
                a2, ls = fit(a, lambda m, x=x, y=y: mse(m, x, y), make_opt(), steps)
                dw = list(ad.delta_weights(a2).values())[0]
                rec = out[name]
                rec["sr"].append(float(ad.stable_rank(dw)))
                rec["test"].append(float(mse(a2, xt, yt)) / base_test)
                rec["count"] = nn.count_params(a)
                if rec["curve"] is None:
                    rec["curve"] = ls
        return out


@claim("adapters.unilora_accuracy", paper=UNILORA,
       statement="Uni-LoRA matches LoRA's accuracy with a small fraction of its parameters.",
       where="Tables 1-3 (GLUE, math, instruction tuning)")
def _check_unilora(scale: str) -> Measurement:
    runs = adapt_runs(scale)
    gain_l = 1 - np.asarray(runs["lora"]["test"])
    gain_u = 1 - np.asarray(runs["unilora"]["test"])
    ratio = gain_u / gain_l
    mu, se = mean_se(ratio)
    frac = runs["unilora"]["count"] / runs["lora"]["count"]
    return Measurement(
        measured={"gain_ratio": mu, "param_fraction": frac},
        expected={"gain_ratio": 1.0, "param_fraction": "<= 1/8"},
        tolerance={"gain_ratio": max(2 * se, 0.1)},
        passed=bool(mu >= 1 - max(2 * se, 0.1) and frac <= 0.125),
        detail=f"test-loss reduction of Uni-LoRA (d = {runs['unilora']['count']}) over LoRA "
               f"(r = 8, {runs['lora']['count']} parameters); 0.1 = 'matches' margin",
    )
