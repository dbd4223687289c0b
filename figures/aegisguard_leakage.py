"""AegisGuard: the label-only surrogate's test accuracy against the number of shielded adapters,
per ranking (RSM-trained victim), between the black-box and white-box ends; the exhaustive
oracle is the lowest any ranking can reach. The right panel gives the exact TEE memory ratio of
shielding the top-k (no SAC) against shielding every adapter, from the cost model, beside the
paper's 4x."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.aegisguard import RANKINGS, SIZES, plan, run, run_args, selected_accuracy
from theory import aegisguard as C

ID = "aegisguard.leakage"
TITLE = "AegisGuard: surrogate accuracy vs shielded budget, per ranking"


def replicates(scale: str, seed: int = 0):
    """The AegisGuard claims' replicates (on a cluster the figure reads their tasks)."""
    return plan(SIZES[scale], seed)


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    r = run(*run_args(size), seed)
    L = r["table_b"].shape[1].bit_length() - 1
    ks = np.arange(L + 1)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(9.0, 3.8), width_ratios=(2, 1))
    for i, name in enumerate((*RANKINGS, "random", "oracle")):
        acc = np.array([selected_accuracy(r, name, "b", int(k)) for k in ks])
        m, se = acc.mean(1), acc.std(1, ddof=1) / np.sqrt(acc.shape[1])
        style = dict(color="k", ls="--") if name == "oracle" else dict(color=f"C{i}")
        ax.errorbar(ks, m, yerr=se, marker="o", ms=3, capsize=2, label=name, **style)
    bb, wb = r["table_b"][:, -1].mean(), r["table_b"][:, 0].mean()
    ax.axhline(bb, color="grey", lw=1, ls=":", label="black box (all shielded)")
    ax.axhline(wb, color="grey", lw=1, ls="-.", label="white box (none)")
    ax.set(xlabel="shielded adapters k", ylabel="surrogate test accuracy", xticks=ks)
    ax.legend(frameon=False, fontsize=7, ncol=2)
    shapes = [(32, 16), *[(32, 32)] * (L - 2), (8, 32)]
    full = C.shielded_cost(shapes, [True] * L, 4).param_bytes
    mags = r["magnitude_b"]
    for name, scores in (("RSM", r["rsm_b"]), ("magnitude", mags)):
        ratio = []
        for k in ks[1:]:
            per = []
            for s in scores:
                top = np.argsort(-s, kind="stable")[:k]
                part = C.shielded_cost(shapes, [i in top for i in range(L)], 4).param_bytes
                per.append(full / part)
            ratio.append(np.mean(per))
        ax2.plot(ks[1:], ratio, marker="o", ms=3, label=name)
    ax2.axhline(4.0, color="k", lw=1, ls=":", label="paper: 4x")
    ax2.set(xlabel="shielded adapters k", ylabel="TEE memory ratio (all / top-k)", xticks=ks[1:])
    ax2.legend(frameon=False, fontsize=7)
    fig.suptitle(f"{TITLE}\n({size.reps} replicates, {size.queries} queries, seed {seed})",
                 fontsize=9)  # fmt: skip
    fig.tight_layout()
    return fig
