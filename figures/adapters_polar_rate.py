"""PoLAR vs LoRA on a reconstructed low-rank fitting problem (the paper's theorem could not be
read): relative objective against iteration, with a fitted geometric rate for PoLAR, a fitted
power law for LoRA's late phase from small random factors, and LoRA from its own init (B = 0)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.adapters.polar import polar_rate_runs

ID = "adapters.polar_convergence"
TITLE = "PoLAR (Riemannian GD, QR retraction) vs LoRA (GD) on 1/2||dW - M||^2, rank M = 4, r = 8"


def make(scale: str = "quick"):
    res = polar_rate_runs(scale)
    t = np.arange(1, res["steps"] + 1)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.semilogy(t, np.maximum(res["lora"], 1e-32), color="C0",
                label="LoRA, GD from small random (B, A)")
    ax.semilogy(t, np.maximum(res["lora_peft"], 1e-32), color="C0", ls=":",
                label="LoRA, GD from its own init (B = 0)")
    ax.semilogy(t, np.maximum(res["polar"], 1e-32), color="C3", label="PoLAR, Riemannian GD")
    p = res["polar"]
    sel = (p > 1e-26) & (p < 1e-3)
    if sel.sum() > 5:
        k, c = np.polyfit(t[sel], np.log(p[sel]), 1)
        ax.semilogy(t, np.exp(c + k * t), "k:", lw=1, label=f"geometric fit, rate {np.exp(k):.3f}")
    h = len(t) // 2
    q, c2 = np.polyfit(np.log(t[h:]), np.log(res["lora"][h:]), 1)
    ax.semilogy(t[h:], np.exp(c2) * t[h:] ** q, "k--", lw=1, label=f"power-law fit t^{q:.2f}")
    ax.set_ylim(1e-32, 2)
    ax.set_xlabel("iteration")
    ax.set_ylabel("relative objective f / f(0)")
    ax.legend(frameon=False, fontsize=8)
    ax.set_title(TITLE, fontsize=9)
    return fig
