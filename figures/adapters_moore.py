"""MoORE vs LoRA: forgetting of the original task along the adaptation, and conflict between new
tasks trained jointly (claims adapters.moore_forgetting and adapters.moore_conflict)."""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from paper_checks.adapters.moore import (
    METHODS,
    SIZES,
    conflict,
    forgetting_at_matched_fit,
    moore_runs,
)

ID = "adapters.moore"
TITLE = "MoORE vs LoRA on a pretrained MLP: oblivion (original task) and conflict (joint tasks)"
COLORS = {"lora": "C0", "moore": "C3", "lora_task": "C2"}
NAMES = {"lora": "LoRA", "moore": "MoORE", "lora_task": "task-conditioned LoRA"}


def make(scale: str = "quick", seed: int = 0):
    z = SIZES[scale]
    r = moore_runs(z.tasks, z.seeds, z.n, z.steps, z.checkpoints, z.lrs, seed, z.ablation)
    f = forgetting_at_matched_fit(r)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6), layout="constrained")
    for i, m in enumerate(METHODS):
        new, orig, c = r[m]["new"].mean(axis=2), r[m]["orig"], COLORS[m]
        for s in range(len(new)):
            a1.plot(new[s], orig[s], color=c, lw=0.6, alpha=0.35)
        a1.plot(
            new.mean(0),
            orig.mean(0),
            "o-",
            color=c,
            ms=3,
            label=f"{NAMES[m]} (lr {r[m]['lr_joint']:g}), seed mean",
        )
        level = [max(r[k]["new"][s, -1].mean() for k in METHODS) for s in range(len(new))]
        a1.plot(
            level,
            f[:, i],
            "*",
            color=c,
            ms=11,
            mec="k",
            label=f"{NAMES[m]} at matched fit: {f[:, i].mean():.2f}",
        )
    a1.axhline(1.0, color="k", ls=":", lw=1, label="base model (no forgetting)")
    a1.invert_xaxis()
    a1.set_xlabel("new tasks: test loss / base's (mean over tasks), training goes left")
    a1.set_ylabel("original task: test loss / base's")
    a1.set_title("oblivion along training (paper: MoORE below LoRA)", fontsize=9)
    a1.legend(frameon=False, fontsize=7)
    every = (*METHODS, "lora_task")
    lo = min(min(r[m]["single"].min(), r[m]["new"][:, -1].min()) for m in every)
    hi = max(max(r[m]["single"].max(), r[m]["new"][:, -1].max()) for m in every)
    for m in every:
        cf = conflict(r, m)
        a2.loglog(
            r[m]["single"].ravel(),
            r[m]["new"][:, -1].ravel(),
            "o",
            color=COLORS[m],
            label=f"{NAMES[m]}: mean log(joint / single) = {cf.mean():.2f} "
            f"+- {cf.std(ddof=1) / np.sqrt(len(cf)):.2f}",
        )
    a2.plot([lo, hi], [lo, hi], "k:", lw=1, label="joint = single (no conflict)")
    for axis in (a2.xaxis, a2.yaxis):
        axis.set_minor_formatter(NullFormatter())
    a2.set_xlabel("single-task training: test loss / base's")
    a2.set_ylabel(f"joint training on {r['tasks']} tasks: test loss / base's")
    a2.set_title(
        "conflict, each point a (seed, task) (paper: MoORE nearer the diagonal)", fontsize=9
    )
    a2.legend(frameon=False, fontsize=7)
    fig.suptitle(TITLE, fontsize=9)
    return fig
