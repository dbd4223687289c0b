"""Bias of naive and debiased ridge ECC estimators against lambda (the paper's exp1 figures):
Monte Carlo means (naive black, debiased blue, ±2 SE bands) beside the theoretical naive bias
(red)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.ecc import PSI, SIZES, simulate_paper, theory_curves
from theory.ecc import ESTIMATORS

ID = "ecc.bias"
TITLE = "Bias of naive and debiased ridge ECC estimators (fold size 500)"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    rows = [(s, p) for s in (2, 3) for p in (250, 1000)]
    fig, axes = plt.subplots(len(rows), 3, figsize=(11, 10), sharex=True)
    for r, (split, p) in enumerate(rows):
        sim = simulate_paper(split, p, size.reps if p == 250 else size.reps_wide, seed)
        theo = theory_curves(sim)
        lams, reps = sim["lams"], sim["reps"]
        for c, e in enumerate(ESTIMATORS):
            ax = axes[r, c]
            for key, col, lab in (
                ("naive", "k", "naive (MC)"),
                ("debiased", "C0", "debiased (MC)"),
            ):
                x = sim[key][e] - PSI
                mu, se = x.mean(0), x.std(0, ddof=1) / np.sqrt(reps)
                ax.plot(lams, mu, color=col, lw=1.2, label=lab)
                ax.fill_between(lams, mu - 2 * se, mu + 2 * se, color=col, alpha=0.2, lw=0)
            ax.plot(lams, theo["bias"][e], "r--", lw=1.2, label="naive bias (theory)")
            ax.axhline(0, color="grey", lw=0.6)
            ax.set_ylim(-0.7 if split == 2 else -1, 0.7 if split == 2 else 1)
            ax.set_title(f"{e.upper()}, {split} splits, p={p} (gamma={sim['gamma']:g})", fontsize=9)
            if r == len(rows) - 1:
                ax.set_xlabel(r"ridge penalty $\lambda$")
            if c == 0:
                ax.set_ylabel("bias")
    axes[0, 0].legend(frameon=False, fontsize=8)
    fig.suptitle(f"{TITLE}; {sim['reps']}+ reps per panel, bands ±2 SE")
    fig.tight_layout()
    return fig
