"""Variance of the debiased ridge ECC estimators against lambda: Monte Carlo (points) beside the
derived asymptotic variance V/m (line); prediction-optimal lambda (blue dashed, Lemma F.2) and
variance-optimal lambda of the theory curve (red dashed)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.ecc import SIZES, simulate_paper, theory_curves
from theory.ecc import ESTIMATORS

ID = "ecc.variance"
TITLE = "Variance of debiased ridge ECC estimators (fold size 500, p = 250)"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    fig, axes = plt.subplots(2, 3, figsize=(11, 6.5), sharex=True)
    for r, split in enumerate((2, 3)):
        sim = simulate_paper(split, 250, size.reps, seed)
        theo = theory_curves(sim)
        lams, reps = sim["lams"], sim["reps"]
        for c, e in enumerate(ESTIMATORS):
            ax = axes[r, c]
            v = sim["debiased"][e].var(0, ddof=1)
            band = 2 * v * np.sqrt(2 / (reps - 1))
            ax.plot(lams, v, ".", color="C0", ms=3, label=f"MC variance ({reps} reps)")
            ax.fill_between(
                lams, v - band, v + band, color="C0", alpha=0.15, lw=0, label="MC ±2 SE"
            )
            ax.plot(lams, theo["var"][e], "k-", lw=1.2, label="asymptotic V/m (derived)")
            i = int(np.nanargmin(np.where(np.isfinite(theo["var"][e]), theo["var"][e], np.inf)))
            ax.axvline(lams[i], color="r", ls="--", lw=1, label=f"variance-optimal {lams[i]:.2f}")
            ax.axvline(
                sim["gamma"], color="b", ls="--", lw=1, label=f"prediction-optimal {sim['gamma']:g}"
            )
            top = np.nanpercentile(theo["var"][e], 90) * 1.5
            ax.set_ylim(0, min(top, 1.0 if split == 2 else top))
            ax.set_title(f"{e.upper()}, {split} splits", fontsize=9)
            ax.legend(frameon=False, fontsize=7)
            if r == 1:
                ax.set_xlabel(r"ridge penalty $\lambda$")
            if c == 0:
                ax.set_ylabel(r"Var($\tilde\psi$)")
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
