"""Token rank collapse of a pure-attention stack at initialisation: log10 relative residual against
depth for vanilla attention and MHA (alpha' = 0.5, 0.8), simulation means (±2 SE) beside the
collapse laws of :mod:`theory.rank_collapse` (doubly exponential vs decrements growing by
-log10 alpha' per layer), extrapolated from depths 1, 2 (vanilla) and 3, 4 (MHA)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.mha import ALPHAS, COLLAPSE_SIZES, LAST, rank_collapse
from theory.rank_collapse import collapse_recursion_log10

ID = "mha.rank_collapse"
TITLE = "Token rank collapse with and without the Hopfield hidden state"


def make(scale: str = "quick", seed: int = 0):
    size = COLLAPSE_SIZES[scale]
    r = rank_collapse(size.seeds, size.depth, seed)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    depth = np.arange(size.depth + 1)
    for i, ap in enumerate(ALPHAS):
        lr = r["logres"][ap]
        m, se = lr.mean(0), lr.std(0, ddof=1) / np.sqrt(len(lr))
        label = "vanilla (alpha'=0)" if ap == 0 else f"MHA alpha'={ap}"
        ax.errorbar(
            depth,
            m,
            yerr=2 * se,
            fmt="o",
            color=f"C{i}",
            ms=4,
            capsize=2,
            label=f"{label}, simulation",
        )
        n0 = 1 if ap == 0 else 3  # MHA: anchored after the first layers' transient
        n = min(LAST[ap] + 2, size.depth)
        law = collapse_recursion_log10(m[n0], m[n0 + 1], n, ap, start=n0)
        keep = law > -16
        ax.plot(
            np.arange(n0, n + 1)[keep],
            law[keep],
            "-",
            color=f"C{i}",
            lw=1,
            label=f"{label}, derived law",
        )
    ax.axhline(-15.65, color="grey", ls=":", lw=0.8, label="float64 floor")
    ax.set(
        xlabel="depth n (pure attention, no skip/MLP/norm)",
        ylabel=r"$\log_{10}\,\|X_n - 1\bar x^\top\|_F / \|X_n\|_F$",
        ylim=(-17, 0.5),
    )
    ax.legend(frameon=False, fontsize=7, ncol=2)
    ax.set_title(f"{TITLE}\nT=16, d=32, 4 heads, {size.seeds} inits, bars ±2 SE", fontsize=9)
    fig.tight_layout()
    return fig
