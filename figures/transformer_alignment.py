"""Condensation: alignment of the W_V columns with the data direction v, the fractions of neurons
satisfying Assumption 1, and the energy against its blow-up bound (Chen & Luo 2025, Thm 1-2,
Fig. 2a). The effective dynamics (theory) is started from the same normalised weights as the
full model, whose columns are drawn against rescaled time tbar = eps ||S|| t / (n s)."""

import jax
import matplotlib.pyplot as plt
import numpy as np

import dynamics.transformer as dt
from paper_checks.transformer import SIZES, TASK, loss_curves, task
from theory import transformer as th

ID = "transformer.condensation"
TITLE = "Condensation of W_V onto v and blow-up of the cubic energy"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    X, y = task(seed)
    v = th.condensation_direction(X, y)
    sim = loss_curves(size.eps, size.paths, seed)
    eps, _, path = sim["paths"][-1]
    w0 = dt.SmallInitTransformer.init(TASK["d"], 1.0, key=jax.random.key(seed)).numpy()
    r = dt.effective_flow(w0["W_V"], w0["W1"], w0["W2"], v, stop_norm=1e6)
    cos_eff = np.abs(np.array([th.column_alignment(W, v) for W in r.W_V]))
    frac = np.array(
        [th.condition_fractions(u, a, b) for u, a, b in zip(r.u, r.W1, r.W2, strict=True)]
    )
    tbar = path.t * th.time_rescaling(X, y, eps)
    keep = tbar <= r.stop_time
    cos_full = np.abs(np.array([th.column_alignment(W, v) for W in path.weights["W_V"][keep]]))

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(13, 3.8))
    for k in range(cos_eff.shape[1]):
        ax1.plot(
            r.t,
            cos_eff[:, k],
            color="C0",
            lw=1,
            alpha=0.8,
            label="effective dynamics (theory)" if k == 0 else None,
        )
        ax1.plot(
            tbar[keep],
            cos_full[:, k],
            "o",
            color="C3",
            ms=2.5,
            label=rf"full model, $\varepsilon$={eps:g}" if k == 0 else None,
        )
    ax1.set(xlabel=r"rescaled time $\bar t$", ylabel=r"$|\cos(W_V[:,k], v)|$", ylim=(0, 1.02))
    ax2.plot(r.t, frac[:, 0], color="C1", label=r"$|A_1|/d$")
    ax2.plot(r.t, frac[:, 1], color="C2", label=r"$|A_2|/d^2$")
    ax2.set(
        xlabel=r"rescaled time $\bar t$", ylabel="fraction satisfying Assumption 1", ylim=(0, 1.05)
    )
    E = r.E
    pos = E > 0
    ax3.plot(r.t[pos], E[pos] ** (-1 / 3), color="C0", label=r"$E(\bar t)^{-1/3}$ (solver)")
    if E[0] > 0:
        tt = np.linspace(0, th.blowup_time_bound(E[0]), 50)
        ax3.plot(tt, E[0] ** (-1 / 3) - tt, "k--", label=r"bound $E(0)^{-1/3}-\bar t$")
    ax3.axvline(r.blowup_upper, color="grey", ls=":", label=r"detected $T^*$")
    ax3.set(xlabel=r"rescaled time $\bar t$", ylabel=r"$E^{-1/3}$", ylim=(0, None))
    for ax in (ax1, ax2, ax3):
        ax.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
