"""Last-iterate excess risk against T (log-log) for beta*eta in {0.5, 1, 1.5, 1.9}: exact least
squares and Monte Carlo squared hinge (±2 SE) beside the bias bound of Attia et al. 2025 (Thm 1,
constant 1); right: fitted slopes against the bound's exponent -(1 - beta*eta/2)."""

import matplotlib.pyplot as plt
import numpy as np

import theory.sgd as ts
from paper_checks.sgd import BETA_ETAS, _slope, rates_simulation

ID = "sgd.rates"
TITLE = "Last-iterate SGD: excess risk against T and the bound's rate"


def make(scale: str = "quick"):
    sim = rates_simulation(scale)
    T, ls, hinge = sim["T"], sim["ls"], sim["hinge"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for c, be in enumerate(BETA_ETAS):
        col = f"C{c}"
        ax1.loglog(T, sim["exact"][be], "-", color=col, label=rf"least squares, $\beta\eta$={be}")
        ax1.loglog(T, ts.bias_term(T, be / ls.beta, ls.beta, ls.dist2), ":", color=col)
        mc = sim["mc"][be]
        ax1.errorbar(mc.T, mc.mean, yerr=2 * mc.se, fmt="o", ms=3, color=col, capsize=2)
        ax1.loglog(mc.T, ts.bias_term(mc.T, be / hinge.beta, hinge.beta, hinge.dist2), "--",
                   color=col, lw=0.8)
    ax1.plot([], [], "k:", label="bound (LS), constant 1")
    ax1.plot([], [], "ko", ms=3, label="squared hinge, MC ±2 SE")
    ax1.plot([], [], "k--", lw=0.8, label="bound (hinge)")
    ax1.set(xlabel="T (SGD steps)", ylabel=r"$E\,F(w_T) - F_\star$")
    ax1.legend(frameon=False, fontsize=7)
    grid = np.linspace(0.02, 1.98, 100)
    ax2.plot(grid, -(1 - grid / 2), "k-", label=r"bound: $-(1-\beta\eta/2)$")
    s_ls = [_slope(T, sim["exact"][be], 100, T.max()) for be in BETA_ETAS]
    s_h = [_slope(sim["mc"][be].T, sim["mc"][be].mean, 30, sim["mc"][be].T.max())
           for be in BETA_ETAS]
    ax2.plot(BETA_ETAS, s_ls, "s", color="C0", label="least squares (exact), T ≥ 100")
    ax2.plot(BETA_ETAS, s_h, "o", color="C3", label="squared hinge (MC), T ≥ 30")
    ax2.set(xlabel=r"$\beta\eta$", ylabel="fitted log-log slope")
    ax2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
