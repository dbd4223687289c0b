"""Coverage of the 95% Wald intervals of the debiased ridge ECC estimators against lambda
(plug-in standard errors), beside the nominal level with its binomial ±2 SE band."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.ecc import PSI, SIZES, Z95, simulate_paper
from theory.ecc import ESTIMATORS

ID = "ecc.coverage"
TITLE = "Coverage of 95% intervals, debiased ridge ECC (fold size 500, p = 250)"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, split in zip(axes, (2, 3), strict=True):
        sim = simulate_paper(split, 250, size.reps, seed)
        lams, reps = sim["lams"], sim["reps"]
        band = 2 * np.sqrt(0.95 * 0.05 / reps)
        ax.axhspan(
            0.95 - band, 0.95 + band, color="grey", alpha=0.2, lw=0, label="nominal 0.95 ± 2 SE"
        )
        ax.axhline(0.95, color="k", lw=0.8)
        for e in ESTIMATORS:
            cover = np.mean(np.abs(sim["debiased"][e] - PSI) <= Z95 * sim["se"][e], axis=0)
            ax.plot(lams, cover, lw=1.2, label=e.upper())
        ax.set(
            xlabel=r"ridge penalty $\lambda$",
            ylabel="coverage",
            title=f"{split} splits ({reps} reps)",
            ylim=(0.8, 1.0),
        )
        ax.legend(frameon=False, fontsize=8, loc="lower right")
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
