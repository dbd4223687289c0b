"""Phase transition of the planted submatrix: top eigenvalue and squared overlap against β for
σ = 0 (PCA) and the tanh optimum, simulation (±2 SE) beside theory (Ma & Kunisky 2025, Sec. 5)."""

import matplotlib.pyplot as plt
import numpy as np

import spectral
from paper_checks.spectral import SIZES, TANH_PS, simulate_phase_transition
from spectral import sigmas

ID = "spectral.phase_transition"
TITLE = "Nonlinear Laplacian vs PCA on the planted submatrix"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    sims = {
        k: simulate_phase_transition(size.n, size.trials, size.betas, seed, k)
        for k in ("pca", "tanh")
    }
    sim = sims["tanh"]
    grid = np.linspace(0.0, sim["beta"].max(), 300)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(6.5, 6.5), sharex=True)
    for c, (key, s, name) in enumerate(
        (
            ("pca", sigmas.zero(), r"$\sigma=0$ (PCA)"),
            ("tanh", sigmas.tanh(*TANH_PS), r"tanh-optimal $\sigma$"),
        )
    ):
        th = np.array([spectral.outlier(s, b) for b in grid])
        r = sims[key]
        ax1.plot(grid, th[:, 0], color=f"C{c}", lw=1, label=f"{name}: theory")
        ax1.errorbar(
            sim["beta"],
            r["lam"],
            yerr=2 * r["lam_se"],
            fmt="o",
            ms=3,
            color=f"C{c}",
            label=f"{name}: simulation",
        )
        ax2.plot(grid, th[:, 1], color=f"C{c}", lw=1, label=f"{name}: theory")
        ax2.errorbar(
            sim["beta"],
            r["ov"],
            yerr=2 * r["ov_se"],
            fmt="o",
            ms=3,
            color=f"C{c}",
            label=f"{name}: simulation",
        )
    bstar = spectral.critical_threshold(sigmas.tanh(*TANH_PS))
    for ax in (ax1, ax2):
        ax.axvline(1.0, color="grey", ls="--", lw=0.8)
        ax.axvline(bstar, color="C1", ls="--", lw=0.8)
        ax.legend(frameon=False, fontsize=7)
    ax2.text(bstar, 0.9, rf" $\beta^*$={bstar:.3f}", color="C1", fontsize=8)
    ax1.set(ylabel=r"top eigenvalue $\lambda_1$")
    ax2.set(xlabel=r"signal strength $\beta = k/\sqrt{n}$", ylabel=r"$\langle v_1, x\rangle^2$")
    fig.suptitle(f"{TITLE} (n={sim['n']}, {sim['trials']} trials per β)")
    fig.tight_layout()
    return fig
