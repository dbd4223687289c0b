"""The sigma_star trade-off and the tuned-stepsize rate on noisy least squares (exact recursion):
left, risk against eta at fixed T beside Thm 1's bound (constant 1) and its minimiser; right,
risk at the tuned stepsize against T beside beta D^2 ln T / T + sigma_star D / sqrt(T)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.sgd import tradeoff_simulation

ID = "sgd.tradeoff"
TITLE = "Noise at the optimum: stepsize trade-off and tuned rate"


def make(scale: str = "quick"):
    sim = tradeoff_simulation(scale)
    beta = sim["inst"].beta
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.loglog(sim["etas"] * beta, sim["vs_eta"], "o-", ms=3, label="exact risk")
    ax1.loglog(sim["etas"] * beta, sim["bound"], "k:", label="Thm 1 bound, constants 1")
    ax1.axvline(sim["eta_opt"] * beta, color="grey", ls="--", lw=0.8,
                label="bound-minimising stepsize")
    ax1.set(xlabel=r"$\beta\eta$", ylabel=rf"$E\,F(w_T)-F_\star$ at T={sim['Tfix']}")
    ax1.legend(frameon=False, fontsize=8)
    ax2.loglog(sim["T"], sim["tuned"], "o-", ms=3, label="exact risk at tuned stepsize")
    ax2.loglog(sim["T"], sim["rate"], "k:", label=r"$\beta D^2\ln T/T + \sigma_\star D/\sqrt{T}$")
    ax2.loglog(sim["T"], sim["tuned"][-1] * np.sqrt(sim["T"][-1] / sim["T"]), "--", color="grey",
               lw=0.8, label=r"slope $-1/2$")
    ax2.set(xlabel="T", ylabel=r"$E\,F(w_T)-F_\star$")
    ax2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE + rf" ($\sigma_\star^2$={sim['inst'].sigma2_star:.3g})")
    fig.tight_layout()
    return fig
