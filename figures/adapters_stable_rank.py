"""Stable rank of the learned update and test loss for LoRA, PoLAR and Uni-LoRA on shifted tasks
of a pretrained MLP (per seed), beside the bound 1 <= sr <= r."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.adapters import adapt_runs

ID = "adapters.stable_rank"
TITLE = "Adapting a pretrained MLP to rank-4 shifts (r = 8): stable rank and test loss"


def make(scale: str = "quick"):
    runs = adapt_runs(scale)
    names = list(runs)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for i, k in enumerate(names):
        sr = runs[k]["sr"]
        a1.scatter(np.full(len(sr), i), sr, color=f"C{i}", label=f"{k} ({runs[k]['count']} par.)")
        a1.errorbar(i + 0.15, np.mean(sr), yerr=2 * np.std(sr, ddof=1) / np.sqrt(len(sr)),
                    fmt="o", color="k", ms=4)
        te = runs[k]["test"]
        a2.scatter(np.full(len(te), i), te, color=f"C{i}")
        a2.errorbar(i + 0.15, np.mean(te), yerr=2 * np.std(te, ddof=1) / np.sqrt(len(te)),
                    fmt="o", color="k", ms=4)
    a1.axhline(8, color="grey", ls="--", lw=1, label="algebraic rank r = 8 (upper bound)")
    a1.axhline(4, color="grey", ls=":", lw=1, label="rank of the shift")
    a1.axhline(1, color="grey", ls="-", lw=0.6)
    a1.set_xticks(range(len(names)), names)
    a1.set_ylabel("stable rank of dW")
    a1.legend(frameon=False, fontsize=7)
    a2.axhline(1, color="grey", lw=0.8, label="pretrained model, no adaptation")
    a2.set_xticks(range(len(names)), names)
    a2.set_ylabel("test MSE / test MSE of the base")
    a2.legend(frameon=False, fontsize=7)
    fig.suptitle(f"{TITLE}; dots: seeds, bars: mean +- 2 SE", fontsize=9)
    return fig
