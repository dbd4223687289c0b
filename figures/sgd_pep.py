"""Worst case over finite sums (PEP SDP; beta = D^2 = 1) of the last-iterate excess risk against
T: n = 2 functions (SGD) beside the bias bound of Attia et al. 2025 (Thm 1, constant 1), and
n = 1 (gradient descent) beside its known tight worst case."""

import matplotlib.pyplot as plt
import numpy as np

import theory.sgd as ts
from paper_checks.sgd import SIZES, gd_worst_case, pep_simulation

ID = "sgd.pep"
TITLE = "PEP worst case of last-iterate SGD beside the bound"


def make(scale: str = "quick", seed: int = 0):
    sim = pep_simulation(SIZES[scale].pep_T)
    T = sim["T"]
    Tf = np.linspace(1, T.max(), 100)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for c, be in enumerate(sim["sgd"]):
        ax.plot(T, sim["sgd"][be], "o-", color=f"C{c}", label=rf"SGD (n=2), $\beta\eta$={be}")
        ax.plot(T, sim["gd"][be], "s", ms=4, mfc="none", color=f"C{c}")
        ax.plot(Tf, gd_worst_case(Tf, be), "-", lw=0.6, color=f"C{c}")
        ax.plot(Tf, ts.bias_term(Tf, be, 1.0, 1.0), ":", color=f"C{c}")
    ax.plot([], [], "ks", ms=4, mfc="none", label="GD (n=1) PEP")
    ax.plot([], [], "k-", lw=0.6, label="GD tight worst case")
    ax.plot([], [], "k:", label="bias bound, constant 1")
    ax.set(xlabel="T", ylabel=r"worst-case $E\,F(w_T)-F_\star$", xscale="log", yscale="log")
    ax.legend(frameon=False, fontsize=7)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
