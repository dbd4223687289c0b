"""Stable rank of the learned update for LoRA and PoLAR (r = 8, alpha = 32, the official code's
optimiser settings: AdamW, lr 4e-4 vs 4e-3, landing reg_lambda 5e-3, 5 epochs, cosine) on a task
whose needed update has a decaying full-rank spectrum, beside the paper's Fig. 1 values (sr 1.06
LoRA vs 5.49 PoLAR, Llama-2-7B, r = 32), sr(Theta) of PoLAR's core, and the bounds."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.adapters.polar import sr_runs

ID = "adapters.stable_rank"
TITLE = "Stable rank of dW after the paper's finetuning budget (paper Fig. 1: 1.06 vs 5.49)"
PAPER = {"lora": 1.06, "polar": 5.49}


def make(scale: str = "quick"):
    runs = sr_runs(scale)
    names = ["lora", "polar"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for i, k in enumerate(names):
        sr = np.asarray(runs[k]["sr"])
        a1.scatter(np.full(len(sr), i), sr, color=f"C{i}", alpha=0.6,
                   label=f"{k}: measured (seeds)")
        a1.errorbar(i + 0.12, sr.mean(), yerr=2 * sr.std(ddof=1) / np.sqrt(len(sr)), fmt="o",
                    color="k", ms=4)
        a1.scatter([i - 0.12], [PAPER[k]], marker="*", s=120, color=f"C{i}",
                   edgecolor="k", label=f"{k}: paper Fig. 1 (r = 32)")
        a2.plot(np.arange(1, len(runs[k]["curve"]) + 1), runs[k]["curve"], color=f"C{i}",
                lw=0.8, label=k)
    th = np.asarray(runs["polar"]["sr_theta"])
    a1.scatter(np.full(len(th), 1.25), th, marker="x", color="C1",
               label="polar: sr(Theta) (= sr(dW) only on the manifold)")
    a1.axhline(8, color="grey", ls="--", lw=1, label="algebraic rank r = 8")
    a1.axhline(runs["target_sr"], color="grey", ls=":", lw=1, label="sr of the needed shift")
    a1.axhline(1, color="grey", ls="-", lw=0.6)
    a1.set_xticks(range(len(names)), names)
    a1.set_ylabel("stable rank ||dW||_F^2 / ||dW||_2^2")
    a1.legend(frameon=False, fontsize=7)
    a2.set_xlabel("step (minibatch 128)")
    a2.set_ylabel("training cross-entropy (seed 0)")
    a2.legend(frameon=False, fontsize=7)
    fig.suptitle(f"{TITLE}; bars: mean +- 2 SE", fontsize=9)
    return fig
