"""The sigma_star trade-off and the tuned-stepsize rate (exact recursion): left, risk against
beta*eta at fixed T on the AR(1) instance (with and without initial distance; derived closed form
beside) and noisy least squares, each beside Thm 1's bound (constants 1); right, risk at the tuned
stepsize against T beside beta D^2 ln T / T + sigma_star D / sqrt(T) and the derived limit
sigma_star D / (4 sqrt T)."""

import matplotlib.pyplot as plt
import numpy as np

import theory.sgd as ts
from paper_checks.sgd import SIZES, tradeoff_simulation

ID = "sgd.tradeoff"
TITLE = "Noise at the optimum: stepsize trade-off and tuned rate"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    sim = tradeoff_simulation(size.tradeoff_T, size.tuned_T, seed)
    x, T, beta = sim["x"], sim["T_fix"], sim["beta_ar"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for c, (w0, inst) in enumerate(sim["ar"].items()):
        ax1.loglog(
            x,
            sim["vs_eta"][w0],
            "o",
            ms=4,
            color=f"C{c}",
            label=rf"AR(1), $|w_0-w_\star|$={w0:g} (exact)",
        )
        ax1.loglog(
            x,
            [ts.ar1_risk(T, be / beta, beta, sim["s2"], w0) for be in x],
            "-",
            color=f"C{c}",
            lw=0.8,
        )
        ax1.loglog(
            x,
            [ts.last_iterate_bound(T, be / beta, beta, inst.dist2, inst.sigma2_star) for be in x],
            ":",
            color=f"C{c}",
        )
    ls = sim["ls"]
    ax1.loglog(x, sim["ls_eta"], "s", ms=3, color="C2", label="noisy least squares (exact)")
    ax1.loglog(
        x,
        [ts.last_iterate_bound(T, be / ls.beta, ls.beta, ls.dist2, ls.sigma2_star) for be in x],
        ":",
        color="C2",
    )
    ax1.plot([], [], "k-", lw=0.8, label="AR(1) closed form")
    ax1.plot([], [], "k:", label="Thm 1 bound, constants 1")
    ax1.set(xlabel=r"$\beta\eta$", ylabel=rf"$E\,F(w_T)-F_\star$ at T={T}")
    ax1.legend(frameon=False, fontsize=7)
    Tg = sim["T"]
    sd = np.sqrt(ls.sigma2_star * ls.dist2)
    ax2.loglog(Tg, sim["tuned"], "o-", ms=3, label="exact risk at tuned stepsize")
    ax2.loglog(
        Tg,
        ts.tuned_rate(Tg, ls.beta, ls.dist2, ls.sigma2_star),
        "k:",
        label=r"$\beta D^2\ln T/T + \sigma_\star D/\sqrt{T}$",
    )
    ax2.loglog(
        Tg,
        sd / (4 * np.sqrt(Tg)),
        "--",
        color="grey",
        lw=0.8,
        label=r"$\sigma_\star D/(4\sqrt{T})$ (derived limit)",
    )
    ax2.set(xlabel="T", ylabel=r"$E\,F(w_T)-F_\star$")
    ax2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
