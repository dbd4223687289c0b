"""Stage 2: normalised singular values and stable rank of W_Q and W_K in the full model beside the
closed-form key-query flow with F frozen at the start of stage 2 (Chen & Luo 2025, Prop. 3,
Thm 3); the limit has the rank of the top singular space of F (here 1)."""

import matplotlib.pyplot as plt

from paper_checks.transformer import SIZES, stage2_path
from theory.transformer import normalised_singular_values, stable_rank

ID = "transformer.rank_collapse"
TITLE = "Key-query rank collapse after condensation"


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    sim = stage2_path(size.rank_eps, size.rank_keys, seed)
    r, p = sim["result"], sim["path"]
    t = p.t
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, name, cf in ((axes[0], "W_Q", sim["Qc"]), (axes[1], "W_K", sim["Kc"])):
        ns, nc = normalised_singular_values(p.weights[name]), normalised_singular_values(cf)
        for k in range(1, 4):
            ax.semilogy(t, ns[:, k], color=f"C{k}", label=rf"$\sigma_{k + 1}/\sigma_1$ full model")
            ax.semilogy(
                t,
                nc[:, k],
                color=f"C{k}",
                ls="--",
                label="closed form, F frozen" if k == 1 else None,
            )
        ax.set(
            xlabel=r"time since start of stage 2", ylabel=f"normalised singular values of ${name}$"
        )
        ax.legend(frameon=False, fontsize=7)
    ax = axes[2]
    ax.plot(t, stable_rank(p.weights["W_Q"]), "C0", label=r"$W_Q$ full model")
    ax.plot(t, stable_rank(p.weights["W_K"]), "C1", label=r"$W_K$ full model")
    ax.plot(t, stable_rank(sim["Qc"]), "C0--", label=r"$W_Q$ closed form")
    ax.axhline(
        r.multiplicity,
        color="k",
        lw=0.8,
        ls=":",
        label=f"limit rank = multiplicity of $\\sigma_1(F)$ = {r.multiplicity}",
    )
    ax.axvline(r.t_end - r.t_start, color="grey", lw=0.8, ls=":")
    ax.set(xlabel=r"time since start of stage 2", ylabel="stable rank")
    ax.legend(frameon=False, fontsize=7)
    fig.suptitle(TITLE + rf" ($\varepsilon$={r.eps:g}; dotted: $\|W_Q\|$ grown x15)")
    fig.tight_layout()
    return fig
