"""Multi-step prediction of E[cos(2 pi X_t) | X_0 = x] for the noisy logistic map: learned LoRA
model vs the exact rank-k compression vs the exact conditional expectation."""

import matplotlib.pyplot as plt

from paper_checks.koopman import HORIZONS, forecasts

ID = "koopman.forecast"
TITLE = "Multi-step prediction, noisy logistic map"


def make(scale: str = "quick"):
    sim = forecasts(scale)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    x0 = sim["x0"]
    for j, t in enumerate((1, 2)):
        ax1.plot(x0, sim["exact"][t - 1], "-", color=f"C{j}", label=f"exact, t={t}")
        ax1.plot(x0, sim["learned"][t - 1], "--", color=f"C{j}", label=f"LoRA, t={t}")
    ax1.set(xlabel=r"$x_0$", ylabel=r"$E[\cos 2\pi X_t \mid X_0=x_0]$")
    ax1.legend(frameon=False, fontsize=8)
    ax2.plot(HORIZONS, sim["rmse_learned"], "o-", label="learned LoRA")
    ax2.plot(HORIZONS, sim["rmse_rank_k"], "s--", label="exact rank-k compression (theory)")
    ax2.set(xlabel="horizon t", ylabel="RMSE vs exact conditional expectation")
    ax2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
