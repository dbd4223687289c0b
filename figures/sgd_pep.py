"""Worst case over finite sums (PEP SDP, n = 2 beta-smooth convex functions with a common
minimiser, beta = D^2 = 1) of the last-iterate excess risk, beside the bias bound of Attia et al.
2025 (Thm 1, constant 1)."""

import matplotlib.pyplot as plt
import numpy as np

import theory.sgd as ts
from paper_checks.sgd import pep_simulation

ID = "sgd.pep"
TITLE = "PEP worst case of last-iterate SGD beside the bound"


def make(scale: str = "quick"):
    sim = pep_simulation(scale)
    T = sim["T"]
    Tf = np.linspace(1, T.max(), 100)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for c, (be, v) in enumerate(sim["worst"].items()):
        ax.plot(T, v, "o-", color=f"C{c}", label=rf"PEP worst case, $\beta\eta$={be}")
        ax.plot(Tf, ts.bias_term(Tf, be, 1.0, 1.0), ":", color=f"C{c}")
    ax.plot([], [], "k:", label="bias bound, constant 1")
    ax.set(xlabel="T", ylabel=r"worst-case $E\,F(w_T)-F_\star$", yscale="log")
    ax.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
