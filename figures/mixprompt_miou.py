"""MixPrompt at CPU scale: test mIoU of every method (mean and paired-seed SE) and mIoU against
total parameters relative to two-branch fusion, beside the paper's parameter ratio."""

import matplotlib.pyplot as plt
import numpy as np

from dynamics.mixprompt import METHODS
from paper_checks.mixprompt import SIZES, plan, run

ID = "mixprompt.miou"
TITLE = "MixPrompt: depth prompting of a frozen RGB backbone vs baselines"
LABELS = {
    "rgb_frozen": "RGB frozen",
    "rgb_finetune": "RGB fine-tuned",
    "two_branch": "two-branch",
    "dplnet": "DPLNet-style",
    "mixprompt": "MixPrompt",
    "mixprompt_nomix": "no mixing",
    "mixprompt_random": "random extractor",
}


def replicates(scale: str, seed: int = 0):
    """Every method's run, as the claims declare them (on a cluster the figure reads them)."""
    return plan(*METHODS)(SIZES[scale], seed)


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    res = {m: run(m, size, seed) for m in METHODS}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.8))
    mean = np.array([res[m].test_at_lr.mean() for m in METHODS])
    se = np.array([res[m].test_at_lr.std(ddof=1) / np.sqrt(size.seeds) for m in METHODS])
    colours = ["C7", "C7", "C0", "C2", "C3", "C1", "C1"]
    ax.bar(range(len(METHODS)), mean, yerr=se, color=colours, capsize=3)
    ax.set_xticks(range(len(METHODS)), [LABELS[m] for m in METHODS], rotation=35, ha="right")
    ax.set(ylabel=f"test mIoU (mean +- SE, {size.seeds} seeds)", ylim=(0, 1))
    ref = res["two_branch"].total
    markers = ["o", "s", "o", "^", "D", "v", "P"]  # the variants sit close together: a legend,
    for m, c, mk in zip(METHODS, colours, markers, strict=True):  # not annotations
        bx.plot(res[m].total / ref, res[m].test_at_lr.mean(), mk, color=c, label=LABELS[m],
                markerfacecolor="none" if m == "rgb_frozen" else c)  # fmt: skip
    bx.axvline(87.2 / 181.1, color="k", ls=":", lw=1, label="paper: 87.2M / 181.1M (NYU)")
    bx.set(xlabel="total parameters / two-branch", ylabel="test mIoU", xlim=(0, 1.1))
    bx.legend(frameon=False, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(f"{TITLE}\n({scale}, seed {seed})", fontsize=9)
    fig.tight_layout()
    return fig
