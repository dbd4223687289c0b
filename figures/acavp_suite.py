"""ACAVP against the padding prompt, EVP and a linear probe on the digits suite: test accuracy
per target task (mean and paired-seed SE), with the frozen model's zero-shot accuracy and chance
as references."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.acavp import SIZES, plan, run, run_args, suite, suite_specs

ID = "acavp.suite"
TITLE = "ACAVP: visual prompts and a linear probe on a frozen digits CNN"
METHODS = ("lp", "pad", "evp", "acavp")
LABELS = {"lp": "linear probe", "pad": "padding prompt", "evp": "EVP", "acavp": "ACAVP"}


def replicates(scale: str, seed: int = 0):
    """The suite runs the claims declare (on a cluster the figure reads their tasks)."""
    return plan(suite_specs(METHODS))(SIZES[scale], seed)


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    s = suite(size, seed, METHODS)
    tasks = list(size.tasks)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    w = 0.8 / len(METHODS)
    x = np.arange(len(tasks))
    for i, m in enumerate(METHODS):
        acc = np.array([100 * s[m][t].test for t in tasks])  # (tasks, seeds)
        se = acc.std(axis=1, ddof=1) / np.sqrt(acc.shape[1])
        ax.bar(x + (i - 1.5) * w, acc.mean(axis=1), w, yerr=se, label=LABELS[m], color=f"C{i}")
    zs = [100 * run("zs", t, *run_args(size), seed).test[0] for t in tasks]
    ax.plot(x, zs, "k_", ms=22, mew=2, label="frozen model (zero-shot)")
    ax.axhline(10, color="grey", ls=":", lw=1, label="chance")
    ax.set(xticks=x, xticklabels=tasks, ylabel="test accuracy (%)", xlabel="target task",
           ylim=(0, 100))  # fmt: skip
    ax.legend(frameon=False, fontsize=7, ncol=2)
    ax.set_title(f"{TITLE}\n({size.seeds} seeds, {size.steps} steps, seed {seed})", fontsize=9)
    fig.tight_layout()
    return fig
