"""Federated fine-tuning, LoRA-FedAvg vs Ravan at a matched upload: test accuracy per replicate
with label-skewed (heterogeneous) clients (and IID ones at full scale), and the validation
loss over the shared learning-rate grid from which each replicate's rate is chosen."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.adapters.ravan import SIZES, federated_runs

ID = "adapters.ravan_federated"
TITLE = "LoRA-FedAvg vs Ravan under client heterogeneity (8 clients)"


def make(scale: str = "quick", seed: int = 0):
    z = SIZES[scale]
    r = federated_runs(z.seeds, z.n_client, z.rounds, z.local, z.n_test, seed, z.iid)
    splits = r["lora"]["acc"].shape[1]  # heterogeneous, and IID where the scale runs it
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for j in range(splits):
        for i, (k, col) in enumerate((("lora", "C0"), ("ravan", "C3"))):
            acc = r[k]["acc"][:, j]
            x = 2 * j + i
            a1.scatter(np.full(len(acc), x), acc, color=col, s=10, alpha=0.5)
            a1.errorbar(
                x + 0.15,
                acc.mean(),
                yerr=2 * acc.std(ddof=1) / np.sqrt(len(acc)),
                fmt="o",
                color=col,
                mec="k",
                capsize=3,
                label=f"{k} (lr tuned per replicate)" if j == 0 else None,
            )
    a1.set_xticks([0.5, 2.5][:splits], ["Dirichlet(0.3) label skew", "IID"][:splits])
    a1.set_ylabel("test accuracy after the last round (mean +- 2 SE)")
    a1.legend(frameon=False, fontsize=8)
    for k, col in (("lora", "C0"), ("ravan", "C3")):
        a2.plot(r["lrs"], r[k]["val"][:, 0].mean(0), "o-", color=col, label=f"{k}, heterogeneous")
        if splits > 1:
            a2.plot(r["lrs"], r[k]["val"][:, 1].mean(0), "s--", color=col, label=f"{k}, IID")
    a2.set_xscale("log")
    a2.set_xlabel("client SGD learning rate (one grid for both methods)")
    a2.set_yscale("log")
    a2.set_ylabel("validation loss (mean over seeds)")
    a2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE, fontsize=9)
    return fig
