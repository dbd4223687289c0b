"""PoLAR vs LoRA on the reconstructed low-rank fitting problem 1/2||dW - M||^2 (rank M = 4, r = 8;
the paper's theorem could not be read): relative objective against iteration for LoRA by GD from
its default init and from small random factors, and PoLAR by its landing iteration, each at its
best step size; a geometric fit beside each linearly converging curve."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.adapters.polar import RATE_LEVEL, RATE_SIZES, polar_rate_runs

ID = "adapters.polar_convergence"
TITLE = "LoRA (GD) vs PoLAR (landing) on 1/2||dW - M||^2, rank M = 4, r = 8"
STYLE = {
    "lora": ("C0", "-", "LoRA, GD from its init (B = 0)"),
    "lora_small": ("C0", ":", "LoRA, GD from small random (B, A)"),
    "polar": ("C3", "-", "PoLAR, landing iteration"),
}


def make(scale: str = "quick", seed: int = 0):
    z = RATE_SIZES[scale]
    r = polar_rate_runs(z.instances, z.steps, seed)
    t = np.arange(1, r["steps"] + 1)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for k, (col, ls, lab) in STYLE.items():
        c = r[k]["curves"]
        for i, y in enumerate(c):
            ax.semilogy(
                t,
                np.maximum(y, 1e-32),
                color=col,
                ls=ls,
                lw=0.7,
                label=f"{lab} (step {r[k]['eta']:g})" if i == 0 else None,
            )
        y = c[0]
        sel = (y > 1e-26) & (y < 1e-3)
        if sel.sum() > 5:
            k_, b = np.polyfit(t[sel], np.log(y[sel]), 1)
            ax.semilogy(t, np.exp(b + k_ * t), "k", ls=ls, lw=0.6, alpha=0.6)
    ax.axhline(RATE_LEVEL, color="grey", lw=0.8, label=f"level {RATE_LEVEL:g}")
    ax.set_ylim(1e-32, 2)
    ax.set_xlabel("iteration")
    ax.set_ylabel("relative objective f / f(0)")
    ax.legend(frameon=False, fontsize=7)
    ax.set_title(TITLE, fontsize=9)
    return fig
