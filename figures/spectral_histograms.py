"""Eigenvalue histograms of Ŷ and of L_σ(Ŷ) (tanh optimum, planted submatrix) with the semicircle
and the free convolution μ_SC ⊞ Law(σ(g)) overlaid; arrows mark λ1 (Ma & Kunisky 2025, Fig. 2)."""

import matplotlib.pyplot as plt
import numpy as np

import spectral
from paper_checks.spectral import SIZES, TANH_PS
from spectral import sigmas
from theory.semicircle import semicircle_pdf

ID = "spectral.histograms"
TITLE = "Spectra of Y and of the nonlinear Laplacian L"
BETAS = (0.0, 0.9, 1.2)


def make(scale: str = "quick", seed: int = 0):
    n = SIZES[scale].hist_n
    s = sigmas.tanh(*TANH_PS)
    dens = spectral.bulk_density(s)
    grid = np.linspace(-3.2, 3.4, 800)
    fig, axes = plt.subplots(2, len(BETAS), figsize=(11, 5.6), sharex=True)
    for j, beta in enumerate(BETAS):
        inst = spectral.planted_submatrix(n, beta, rng=np.random.default_rng([seed, 11, j]))
        for i, (M, curve, label) in enumerate(
            (
                (inst.Y, semicircle_pdf(grid), "semicircle"),
                (
                    spectral.nonlinear_laplacian(inst.Y, s),
                    dens(grid),
                    r"$\mu_{SC}\boxplus\sigma(g)$",
                ),
            )
        ):
            w = np.linalg.eigvalsh(M)
            ax = axes[i, j]
            ax.hist(
                w,
                bins=120,
                range=(-3.2, 3.4),
                density=True,
                color=f"C{i}",
                alpha=0.5,
                label=f"eigenvalues, n={n}",
            )
            ax.plot(grid, curve, "k-", lw=1, label=label + " (theory)")
            ax.annotate(
                rf"$\lambda_1$={w[-1]:.3f}",
                xy=(w[-1], 0.0),
                xytext=(w[-1] - 0.3, 0.25),
                arrowprops=dict(arrowstyle="->", color="C3"),
                fontsize=8,
            )
            name = "Y" if i == 0 else "L"
            ax.set(
                title=rf"${name}$, $\beta$={inst.beta:.2f}", xlabel="eigenvalue", ylabel="density"
            )
            ax.legend(frameon=False, fontsize=7, loc="upper left")
    fig.suptitle(f"{TITLE} (tanh optimum; bulk edge of L: {dens.right:.4f})")
    fig.tight_layout()
    return fig
