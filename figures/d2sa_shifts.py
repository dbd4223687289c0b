"""D2SA under the five shifts: PSNR on the reference's scale of no adaptation (B0), single-shot
TTT (B1) and D2SA per shift (mean, bars +-2 SE over slices, pooled over the source U-Nets), and
the optimiser steps each adaptive method spent (D2SA split into stage 1 and stage 2)."""

import matplotlib.pyplot as plt
import numpy as np

from dynamics.mri import SHIFTS
from paper_checks.d2sa import SIZES, plan, shift_at

ID = "d2sa.efficiency"
TITLE = "D2SA and single-shot TTT under five MRI distribution shifts"


def replicates(scale: str, seed: int = 0):
    """Every shift's run, as the claims declare them (on a cluster the figure reads their tasks)."""
    return plan(SIZES[scale], seed)


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    runs = [shift_at(size, seed, s) for s in SHIFTS]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    x = np.arange(len(SHIFTS))
    for j, (m, label) in enumerate((("b0", "B0 no adaptation"), ("b1", "B1 single-shot TTT"),
                                    ("d2sa", "D2SA"))):  # fmt: skip
        v = [r["scores"][m]["psnr"] for r in runs]
        mean = [a.mean() for a in v]
        se = [a.std(ddof=1) / np.sqrt(a.size) for a in v]
        ax1.errorbar(x + 0.15 * (j - 1), mean, yerr=2 * np.asarray(se), fmt="o", capsize=3,
                     label=label)  # fmt: skip
    ax1.set(xticks=x, xticklabels=SHIFTS, ylabel="PSNR (dB, reference scale)")
    ax1.legend(frameon=False, fontsize=8)
    b1 = [r["steps"]["b1"] for r in runs]
    s1 = [r["steps"]["d2sa_stage1"] for r in runs]
    s2 = [r["steps"]["d2sa"] - r["steps"]["d2sa_stage1"] for r in runs]
    ax2.bar(x - 0.2, b1, 0.4, label="B1")
    ax2.bar(x + 0.2, s1, 0.4, label="D2SA stage 1")
    ax2.bar(x + 0.2, s2, 0.4, bottom=s1, label="D2SA stage 2")
    ax2.plot(x, 0.5 * np.asarray(b1), "k_", ms=14, label="half of B1 (claim)")
    ax2.set(xticks=x, xticklabels=SHIFTS, ylabel="optimiser steps (all slices)")
    ax2.legend(frameon=False, fontsize=8)
    n = size.sources * size.patients * size.slices
    fig.suptitle(f"{TITLE} ({n} slices per shift, {size.shape}x{size.shape}, seed {seed})")
    fig.tight_layout()
    return fig
