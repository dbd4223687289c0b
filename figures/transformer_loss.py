"""Loss plateau then drop of the small-init Transformer for several eps (Chen & Luo 2025, Fig. 1),
with the escape times predicted by the effective dynamics (Prop. 1, Eqs. 6-7)."""

import matplotlib.pyplot as plt

from paper_checks.transformer import SIZES, loss_curves
from theory.transformer import stable_rank

ID = "transformer.loss_plateau"
TITLE = "Small-init Transformer: plateau, condensation, then key-query growth"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    sim = loss_curves(size.eps, size.paths, seed)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (eps, tp, p) in enumerate(sim["paths"]):
        c = f"C{i}"
        t = p.t[1:]
        ax1.semilogx(t, p.loss[1:], color=c, label=rf"$\varepsilon$={eps:g}")
        ax1.axvline(tp, color=c, ls=":", lw=1)
        ax2.semilogx(
            t, stable_rank(p.weights["W_V"][1:]), color=c, label=rf"$W_V$, $\varepsilon$={eps:g}"
        )
        ax2.semilogx(
            t,
            stable_rank(p.weights["W_Q"][1:]),
            color=c,
            ls="--",
            label=rf"$W_Q$, $\varepsilon$={eps:g}",
        )
    ax1.plot([], [], "k:", label="predicted escape (theory)")
    ax1.set(xlabel="gradient-flow time t", ylabel="exponential loss")
    ax2.axhline(1.0, color="grey", lw=0.8)
    ax2.set(
        xlabel="gradient-flow time t",
        ylabel="stable rank $\\|W\\|_F^2/\\|W\\|_2^2$",
        ylim=(0.9, None),
    )
    ax1.legend(frameon=False, fontsize=8)
    ax2.legend(frameon=False, fontsize=7, ncol=2)
    fig.suptitle(TITLE + f" (n, s, d = 64, 4, 8; {len(sim['paths'])} eps)")
    fig.tight_layout()
    return fig
