"""Multi-step prediction of E[cos(2 pi X_t) | X_0 = x] for the noisy logistic map: learned LoRA
model vs the exact rank-k compression vs the exact conditional expectation."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.koopman import HORIZONS, LOGISTIC, forecasts

ID = "koopman.forecast"
TITLE = "Multi-step prediction, noisy logistic map"


def _args(size):
    return size.n_train, size.steps, size.n_test, size.seeds, size.lr


def make(scale: str = "quick", seed: int = 0):
    sim = forecasts(*_args(LOGISTIC[scale]), seed)
    learned = sim["learned"].mean(0)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    x0 = sim["x0"]
    for j, t in enumerate((1, 2)):
        ax1.plot(x0, sim["exact"][t - 1], "-", color=f"C{j}", label=f"exact, t={t}")
        ax1.plot(x0, learned[t - 1], "--", color=f"C{j}", label=f"LoRA, t={t}")
        ax1.plot(x0, sim["rank_k"][t - 1], ":", color=f"C{j}", label=f"exact rank-k, t={t}")
    ax1.set(xlabel=r"$x_0$", ylabel=r"$E[\cos 2\pi X_t \mid X_0=x_0]$")
    ax1.legend(frameon=False, fontsize=8)
    rmse = lambda a: np.sqrt(np.mean((a - sim["exact"]) ** 2, 1))  # noqa: E731
    ax2.semilogy(HORIZONS, rmse(learned), "o-", label="learned LoRA (mean of replicates)")
    ax2.semilogy(HORIZONS, rmse(sim["rank_k"]), "s--", label="exact rank-k compression (theory)")
    ax2.semilogy(HORIZONS, sim["exact"].std(1), "k:", label="constant forecast (no information)")
    ax2.set(xlabel="horizon t", ylabel="RMSE vs exact conditional expectation")
    ax2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
