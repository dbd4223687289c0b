"""Randomized Kaczmarz over a sweep of condition numbers (exact worst start, sqrt(T)-normalised,
beside the bound D^2/sqrt(T) at constant 1) and continual linear regression (exact with
replacement, Monte Carlo ±2 SE without) beside 13/sqrt(k) (Attia et al. 2025, as restated by
Tsipory et al. 2025)."""

import matplotlib.pyplot as plt
import numpy as np

import theory.sgd as ts
from paper_checks.sgd import SIZES, continual_simulation, kaczmarz_simulation

ID = "sgd.continual"
TITLE = "Kaczmarz and continual linear regression under random orderings"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    kz = kaczmarz_simulation(size.kz_dim, size.kz_kappas, size.kz_T, seed)
    cl = continual_simulation(size.cont_dim, size.cont_tasks, size.cont_k, size.cont_paths, seed)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    T = kz["T"]
    for c, kappa in enumerate(kz["kappa"]):
        ax1.loglog(
            T, kz["worst"][kappa], "-", color=f"C{c}", label=rf"worst start, $\kappa$={kappa:g}"
        )
        ax1.loglog(T, kz["risk"][kappa], "--", color=f"C{c}", lw=0.8)
    ax1.loglog(T, ts.noiseless_bound(T, 1.0, 1.0), "k:", label=r"$D^2/\sqrt{T}$ (constant 1)")
    ax1.plot([], [], "k--", lw=0.8, label=r"from $x_0 = 0$")
    ax1.set(
        xlabel="T (row projections)",
        ylabel=r"$E\,\|Ax_T-b\|^2/(2\|A\|_F^2\,\|x_0-x_\star\|^2)$",
        ylim=(1e-8, 3),
    )
    ax1.legend(frameon=False, fontsize=7)
    for c, (name, w) in enumerate(cl["with"].items()):
        ax2.loglog(
            w.k,
            w.loss,
            "-",
            color=f"C{c}",
            lw=1.5 if c == 0 else 0.8,
            label=f"{name}, with replacement (exact)",
        )
    for name, wo in cl["without"].items():
        ax2.errorbar(
            wo.k,
            wo.loss,
            yerr=2 * wo.loss_se,
            fmt="o",
            ms=3,
            capsize=2,
            color="C0",
            label=f"{name}, without replacement (MC)",
        )
    k = cl["k"]
    ax2.loglog(k, ts.continual_loss_bound(k), "k:", label=r"$13/\sqrt{k}$")
    ax2.loglog(k, 1 / (np.e * k), "k--", lw=0.8, label=r"$1/(ek)$")
    ax2.set(
        xlabel="k (tasks learnt)",
        ylabel=r"$E\,\mathcal{L}(w_k)$, normalised by "
        r"$\|w_\star\|^2R^2$",
        ylim=(1e-7, 30),
    )
    ax2.legend(frameon=False, fontsize=7)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
