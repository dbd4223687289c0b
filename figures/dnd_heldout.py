"""Drag-and-Drop on held-out tasks: test MSE of the generated LoRA beside the training-LoRA
average, the mean adapter, the token centroid, wrong-task prompts and the full-shot oracle, for
the family whose inputs identify the task and for the negative control whose inputs do not."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.dnd import SIZES, run_at

ID = "dnd.heldout"
TITLE = "DnD: held-out test MSE of generated LoRAs and baselines"

BARS = (
    ("base", "base model"),
    ("train_avg", "training-LoRA avg."),
    ("mean_adapter", "mean adapter"),
    ("centroid", "token centroid"),
    ("wrong", "DnD, wrong-task prompts"),
    ("dnd", "DnD, own prompts"),
    ("full_shot", "full-shot LoRA (oracle)"),
)


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), sharey=True)
    for ax, ident, label in zip(
        axes, (True, False), ("inputs identify the task", "control: inputs N(0, I)"), strict=True
    ):
        h = run_at(size, seed, identifiable=ident)["held"]
        vals = [np.asarray(getattr(h, k)) for k, _ in BARS]
        means = [v.mean() for v in vals]
        ses = [v.std(ddof=1) / np.sqrt(v.size) for v in vals]
        colors = ["0.6"] * 4 + ["C3", "C0", "C2"]
        ax.bar(range(len(BARS)), means, yerr=ses, color=colors, capsize=3)
        ax.set_xticks(range(len(BARS)), [b for _, b in BARS], rotation=40, ha="right", fontsize=8)
        ax.set_title(f"{label} ({h.dnd.size} held-out tasks)", fontsize=9)
    axes[0].set_ylabel("test MSE on the held-out task (mean +- SE)")
    fig.suptitle(f"{TITLE} (seed {seed}, {scale})", fontsize=10)
    fig.tight_layout()
    return fig
