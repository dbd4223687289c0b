"""Stable rank of the learned update for LoRA and PoLAR (r = 8, alpha = 32, AdamW, one
learning-rate grid for both chosen on validation, PoLAR by Adam + QR retraction) along training
against the validation loss, with the matched-fit comparison of the claim, the paper's Fig. 1
values (sr 1.06 LoRA vs 5.49 PoLAR, Llama-2-7B, r = 32), and PoLAR's distance to the manifold."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.adapters.polar import SR_SIZES, sr_runs

ID = "adapters.stable_rank"
TITLE = "Stable rank of dW against fit (paper Fig. 1: 1.06 LoRA vs 5.49 PoLAR)"
PAPER = {"lora": 1.06, "polar": 5.49}
COLORS = {"lora": "C0", "polar": "C3"}


def make(scale: str = "quick", seed: int = 0):
    z = SR_SIZES[scale]
    r = sr_runs(z.seeds, z.n_train, z.n_val, seed)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    level = np.maximum(r["lora"]["loss"][:, -1], r["polar"]["loss"][:, -1])
    for k, col in COLORS.items():
        q = r[k]
        for s in range(len(q["loss"])):
            a1.plot(q["loss"][s], q["sr"][s], "-", color=col, lw=0.6, alpha=0.4)
        a1.plot(
            level,
            q["sr_matched"],
            "*",
            color=col,
            mec="k",
            ms=10,
            label=f"{k} (lr {q['lr']:g}) at matched fit: {q['sr_matched'].mean():.2f}",
        )
        a1.axhline(PAPER[k], color=col, ls=":", lw=1, label=f"{k}: paper Fig. 1 (r = 32)")
    a1.axhline(r["target_sr"], color="grey", ls="--", lw=1, label="sr of the needed shift")
    a1.invert_xaxis()
    a1.set_xlabel("validation cross-entropy (training goes right)")
    a1.set_ylabel("stable rank ||dW||_F^2 / ||dW||_2^2")
    a1.legend(frameon=False, fontsize=7)
    steps = np.linspace(
        r["steps"] / len(r["polar"]["feas"][0]), r["steps"], len(r["polar"]["feas"][0])
    )
    for s, f in enumerate(r["polar"]["feas"]):
        a2.semilogy(steps, f, color="C3", lw=0.8, label="PoLAR, per seed" if s == 0 else None)
    a2.axhline(0.1, color="k", ls="--", lw=1, label="the claim's feasibility bound")
    a2.set_xlabel("step (minibatch 128)")
    a2.set_ylabel("max(||X^T X - I||_F, ||Y^T Y - I||_F)")
    a2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE, fontsize=9)
    return fig
