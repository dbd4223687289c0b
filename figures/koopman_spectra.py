"""Learned vs exact Koopman singular values / eigenvalues: noisy logistic map (LoRA and the
baselines, same encoder and budget, each at its tuned learning rate) and the 1-D Langevin
system (Prinz potential)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.koopman import (
    GRID_SCALE,
    K_LOGISTIC,
    LANGEVIN,
    LOGISTIC,
    langevin_fits,
    logistic_fits,
    tuned_errors,
)

ID = "koopman.spectra"
TITLE = "Koopman singular values: learned (CCA read-out) vs exact"


def _args(size):
    return size.n_train, size.steps, size.n_test, size.seeds


def make(scale: str = "quick", seed: int = 0):
    size = LOGISTIC[scale]
    sim = logistic_fits(*_args(size), size.lr, seed)
    tuned = tuned_errors(
        *_args(size), size.lr_grid, size.tune, tuple(GRID_SCALE.items()), size.lr, seed
    )  # memoised by koopman.lora_vs_baselines
    L = sim["system"]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(13, 3.8))
    i = np.arange(1, K_LOGISTIC)
    ax1.plot(np.arange(0, 12), L.singular_values(12), "k_", ms=18, mew=2, label="exact")
    for j, (loss, full) in enumerate(tuned["svals"].items()):
        if full is None:  # diverged at every rate of its grid
            continue
        sv = full[:, 1:]
        err = 2 * sv.std(0, ddof=1) / np.sqrt(len(sv))
        ax1.errorbar(
            i + 0.12 * (j - 1.5),
            sv.mean(0),
            yerr=err,
            fmt="o",
            color=f"C{j}",
            label=f"{loss}, lr {tuned['best'][loss]:g} (mean, 2 SE)",
        )
    ax1.set(
        xlabel="mode i",
        ylabel=r"singular value $s_i$",
        title=f"noisy logistic map (N=20), k={K_LOGISTIC}",
    )
    ax1.legend(frameon=False, fontsize=8)
    lam = L.eigenvalues(9)
    t = np.linspace(0, 2 * np.pi, 200)
    ax2.plot(np.cos(t) * 0.3, np.sin(t) * 0.3, color="0.85", lw=0.8)
    ax2.plot(lam.real, lam.imag, "kx", ms=8, label="exact eigenvalues")
    ro = sim["fits"]["lora"][0][1]
    ax2.plot(
        ro.eigenvalues.real,
        ro.eigenvalues.imag,
        "o",
        mfc="none",
        color="C0",
        label="LoRA rank 5 (replicate 0)",
    )
    ax2.set(
        xlabel="Re",
        ylabel="Im",
        title="logistic-map eigenvalues",
        xlim=(-0.55, 1.1),
        ylim=(-0.4, 0.4),
    )
    ax2.legend(frameon=False, fontsize=8)
    lg = langevin_fits(*_args(LANGEVIN[scale]), seed)
    p, rl = lg["system"], lg["readouts"][0]
    ax3.plot(np.arange(8), p.singular_values(8), "k_", ms=18, mew=2, label=r"exact $e^{\tau\mu_i}$")
    ax3.plot(
        np.arange(4),
        np.sort(rl.eigenvalues.real)[::-1],
        "o",
        color="C0",
        label="LoRA-seq eigenvalues",
    )
    ax3.plot(
        np.arange(4) + 0.15,
        rl.singular_values,
        "s",
        mfc="none",
        color="C1",
        label="LoRA-seq singular values",
    )
    ax3.set(xlabel="mode i", ylabel="value", title=r"Langevin (Prinz), $\tau=0.1$")
    ax3.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
