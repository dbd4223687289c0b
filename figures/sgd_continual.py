"""Randomized Kaczmarz and continual linear regression: exact Kaczmarz residual beside D^2/sqrt(T);
continual-learning loss with (exact) and without (Monte Carlo ±2 SE) replacement and forgetting,
beside 13/sqrt(k) (Attia et al. 2025, as restated by Tsipory et al. 2025)."""

import matplotlib.pyplot as plt

import theory.sgd as ts
from paper_checks.sgd import kaczmarz_continual_simulation

ID = "sgd.continual"
TITLE = "Kaczmarz and continual linear regression under random orderings"


def make(scale: str = "quick"):
    sim = kaczmarz_continual_simulation(scale)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    Tk = sim["Tk"]
    ax1.loglog(Tk, sim["kz_risk"], "-", label="randomized Kaczmarz (exact)")
    ax1.loglog(Tk, ts.noiseless_bound(Tk, 1.0, sim["kz"].dist2), "k:",
               label=r"$D^2/\sqrt{T}$ (Thm 1, $\beta\eta=1$, constant 1)")
    ax1.set(xlabel="T (row projections)", ylabel=r"$E\,\|Ax_T-b\|^2/(2\|A\|_F^2)$")
    ax1.legend(frameon=False, fontsize=8)
    w, wo = sim["with"], sim["without"]
    ax2.loglog(w.k, w.loss, "-", label="loss, with replacement (exact)")
    ax2.errorbar(wo.k, wo.loss, yerr=2 * wo.loss_se, fmt="o", ms=3, capsize=2,
                 label="loss, without replacement (MC)")
    m = wo.k >= 2                     # at k = 1 nothing is forgotten yet (exactly 0)
    ax2.errorbar(wo.k[m], wo.forgetting[m], yerr=2 * wo.forgetting_se[m], fmt="s", ms=3,
                 capsize=2, label="forgetting, without replacement (MC)")
    ax2.loglog(w.k, ts.continual_loss_bound(w.k), "k:", label=r"$13/\sqrt{k}$")
    ax2.loglog(w.k, ts.evron2025_rate(w.k), "k--", lw=0.8,
               label=r"$k^{-1/4}$ (Evron et al. 2025, constant 1)")
    ax2.set(xlabel="k (tasks learnt)", ylabel=r"normalised loss $\mathcal{L}(w_k)$",
            ylim=(1e-8, None))
    ax2.legend(frameon=False, fontsize=7)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
