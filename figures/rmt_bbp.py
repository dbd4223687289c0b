"""The BBP transition: top eigenvalue and squared overlap of the spiked Wigner model against beta,
limits of :mod:`theory.bbp` beside simulated means with error bars (±2 SE)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.rmt import SIZES, simulate_bbp
from theory.bbp import bbp_overlap, bbp_top_eigenvalue

ID = "rmt.bbp"
TITLE = "BBP transition of the spiked Wigner model"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    sim = simulate_bbp(size.n, size.trials, seed)
    grid = np.linspace(0.0, max(sim["beta"]) * 1.05, 400)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax1.plot(grid, bbp_top_eigenvalue(grid), "k-", label="limit (theory)")
    ax1.errorbar(
        sim["beta"],
        sim["lam"],
        yerr=2 * sim["lam_se"],
        fmt="o",
        color="C0",
        capsize=3,
        label=f"simulation, n={sim['n']}",
    )
    ax1.set(xlabel=r"spike strength $\beta$", ylabel=r"top eigenvalue $\lambda_{\max}(Y)$")
    ax2.plot(grid, bbp_overlap(grid), "k-", label="limit (theory)")
    ax2.errorbar(
        sim["beta"],
        sim["overlap"],
        yerr=2 * sim["overlap_se"],
        fmt="o",
        color="C1",
        capsize=3,
        label=f"simulation, n={sim['n']}",
    )
    ax2.set(xlabel=r"spike strength $\beta$", ylabel=r"squared overlap $\langle v, x\rangle^2$")
    for ax in (ax1, ax2):
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
        ax.legend(frameon=False)
    fig.suptitle(f"{TITLE} ({sim['trials']} trials per point, bars ±2 SE)")
    fig.tight_layout()
    return fig
