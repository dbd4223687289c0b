"""MoORE claim (Yuan et al. 2025, arXiv 2506.14436): resistance to forgetting of the original
task."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn.adapters as ad
from paper_checks._registry import Measurement, claim
from paper_checks._stats import mean_se
from paper_checks.adapters._base import D_IN, fit, mse, pretrained, shifted_task

MOORE = "Yuan, Zheng, Wang, Liu & Xu 2025 (MoORE, arXiv 2506.14436)"


# MoORE forgetting
@functools.cache
def moore_runs(scale: str = "quick"):
    """Adapt to a shifted task (task id 1) with MoORE and with LoRA, then measure the loss on the
    original task (the pretraining teacher; task id 0 for MoORE), relative to the base's loss."""
    with jax.enable_x64(True):
        teacher, student, _ = pretrained(scale)
        seeds = range(3 if scale == "quick" else 8)
        steps = 600 if scale == "quick" else 3000
        xo = jax.random.normal(jax.random.key(40), (1024, D_IN))
        yo = teacher(xo)
        base_orig = float(mse(student, xo, yo))
        out = {"lora": {"orig": [], "new": []}, "moore": {"orig": [], "new": []}}
        for s in seeds:
            _, (x, y), (xt, yt) = shifted_task(scale, 50 + s, rank=4, size=2.0)
            base_new = float(mse(student, xt, yt))
            a = ad.inject(student, "lora", targets="layers.1", key=jax.random.key(s), r=8,
                          alpha=8.0)
            a, _ = fit(a, lambda m, x=x, y=y: mse(m, x, y), optax.adam(3e-3), steps)
            out["lora"]["orig"].append(float(mse(a, xo, yo)) / base_orig)
            out["lora"]["new"].append(float(mse(a, xt, yt)) / base_new)
            b = ad.inject(student, "moore", targets="layers.1", key=jax.random.key(s), r=8,
                          num_experts=16, task_dim=8, num_tasks=2)
            b, _ = fit(b, lambda m, x=x, y=y: jnp.mean((m(x, task=1) - y) ** 2),
                       optax.adam(3e-3), steps)
            out["moore"]["orig"].append(float(jnp.mean((b(xo, task=0) - yo) ** 2)) / base_orig)
            out["moore"]["new"].append(float(jnp.mean((b(xt, task=1) - yt) ** 2)) / base_new)
        return out


@claim("adapters.moore_forgetting", paper=MOORE,
       statement="MoORE forgets the original task less than LoRA after adapting to a new one "
                 "(its update keeps the column space of W0 and is task-routed).",
       where="Abstract; Sec. 4 (forgetting of the base model's abilities)")
def _check_moore(scale: str) -> Measurement:
    r = moore_runs(scale)
    d = np.asarray(r["lora"]["orig"]) - np.asarray(r["moore"]["orig"])
    mu, se = mean_se(d)
    return Measurement(
        measured={"orig_loss_ratio_lora": float(np.mean(r["lora"]["orig"])),
                  "orig_loss_ratio_moore": float(np.mean(r["moore"]["orig"])),
                  "new_loss_ratio_lora": float(np.mean(r["lora"]["new"])),
                  "new_loss_ratio_moore": float(np.mean(r["moore"]["new"]))},
        expected={"orig_loss_ratio_moore < orig_loss_ratio_lora": True},
        tolerance={"2 SE of the paired difference": 2 * se},
        passed=bool(mu > 2 * se),
        detail=f"pretrained MLP, hidden layer adapted to a rank-4 shift, {len(d)} seeds; loss on "
               f"the original task / the base's; paired gap {mu:.3g} +- {se:.2g}",
    )
