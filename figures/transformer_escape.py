"""Escape time of the full model against eps on log-log axes, beside the effective-dynamics
prediction t = tbar_esc n s / (eps ||S||) (Chen & Luo 2025, Prop. 1, Eq. 6; slope -1)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.transformer import SIZES, escape_sweep

ID = "transformer.escape_time"
TITLE = "Stage-1 escape time scales as 1/eps"


def make(scale: str = "quick", seed: int = 0):
    sw = escape_sweep(SIZES[scale].eps, "gaussian", seed)
    eps = sw["eps"]
    slope = np.polyfit(np.log(eps), np.log(sw["t_escape"]), 1)[0]
    grid = np.geomspace(eps.min() / 1.5, eps.max() * 1.5, 50)
    C = sw["t_predicted"][-1] * eps[-1]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax1.loglog(grid, C / grid, "k-", label="effective dynamics (theory), slope $-1$")
    ax1.loglog(eps, sw["t_escape"], "o", color="C0", label=f"full model, fitted slope {slope:.3f}")
    ax1.set(xlabel=r"initialisation scale $\varepsilon$", ylabel=r"escape time ($\|W_V\|_F$ ×10)")
    ax2.loglog(
        eps,
        np.abs(sw["t_escape"] / sw["t_predicted"] - 1),
        "o-",
        color="C1",
        label=r"$|t_{esc}/t_{pred} - 1|$",
    )
    ax2.loglog(eps, 2 * sw["delta"], "k:", lw=0.8, label=r"tolerance $2\delta$ (softmax order)")
    ax2.loglog(eps, sw["wq"], "s", color="C2", label=r"$\|\Delta W_Q\|/\|W_Q\|$ at escape")
    ax2.loglog(
        eps,
        sw["wq_pred"],
        "k--",
        lw=0.8,
        label=r"$\|\int F\,dt\,W_K\|/\|W_Q\|$ (theory, $\propto\varepsilon^2$)",
    )
    ax2.set(xlabel=r"$\varepsilon$", ylabel="deviation / relative change")
    for ax in (ax1, ax2):
        ax.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
