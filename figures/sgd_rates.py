"""Worst case of last-iterate SGD over the rare-curvature family (exact recursion, left) and Monte
Carlo squared hinge (±2 SE, right) against T for beta*eta in {0.5, 1, 1.5, 1.9}, beside the bias
bound of Attia et al. 2025 (Thm 1, constant 1): the worst case decays like 1/T (derived here), no
slower than the bound's T^-(1 - beta*eta/2). The family's worst case depends on beta*eta only
through beta*eta*(2 - beta*eta): the curves for 0.5 and 1.5 coincide."""

import matplotlib.pyplot as plt
import numpy as np

import theory.sgd as ts
from paper_checks.sgd import BETA_ETAS, SIZES, hinge_simulation, rare_curvature_worst

ID = "sgd.rates"
TITLE = "Last-iterate SGD: worst-case excess risk against T and the bound"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    wc = rare_curvature_worst(size.T_max)
    hg = hinge_simulation(size.hinge_T, size.hinge_paths, seed)
    T, hinge = wc["T"], hg["inst"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for c, be in enumerate(BETA_ETAS):
        col = f"C{c}"
        ax1.loglog(T, wc["risk"][be], "-", color=col, label=rf"worst case, $\beta\eta$={be}")
        ax1.loglog(T, ts.bias_term(T, be, 1.0, 1.0), ":", color=col)
        mc = hg["mc"][be]
        ax2.errorbar(
            mc.T,
            mc.mean,
            yerr=2 * mc.se,
            fmt="o",
            ms=3,
            color=col,
            capsize=2,
            label=rf"$\beta\eta$={be}",
        )
        ax2.loglog(
            mc.T, ts.bias_term(mc.T, be / hinge.beta, hinge.beta, hinge.dist2), ":", color=col
        )
    ax1.loglog(
        T,
        1 / (2 * np.e * T),
        "k--",
        lw=0.8,
        label=r"$1/(2e\,\eta(2-\beta\eta)T)$ "
        r"at $\beta\eta$=1",
    )
    ax1.plot([], [], "k:", label="bound, constant 1")
    ax1.set(xlabel="T (SGD steps)", ylabel=r"$\max_p\,E\,F(w_T) - F_\star$ (rare curvature)")
    ax2.plot([], [], "k:", label="bound, constant 1")
    ax2.set(xlabel="T (SGD steps)", ylabel=r"$E\,F(w_T) - F_\star$ (squared hinge, MC)")
    for ax in (ax1, ax2):
        ax.legend(frameon=False, fontsize=7)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
