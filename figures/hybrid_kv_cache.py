"""Decode state of the published hybrids relative to their GQA base against context length: the MLA
cache alone (the headline 3.9 % / 2 % / 2.73 %, flat) and with the Mamba2 state the headline leaves
out, with the break-even context (Mamba2 state = MLA cache) marked; exact (theory.kv_cache)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.hybrid import PUBLISHED
from theory.kv_cache import ZEBRA, break_even_context, kv_fraction, state_fraction

ID = "hybrid.kv_cache_fraction"
TITLE = "KV cache and total decode state of the Zebra-Llama hybrids"


def make(scale: str = "quick", seed: int = 0):
    T = np.unique(np.logspace(8, 17, 60, base=2).astype(int))
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (name, cfg) in enumerate(ZEBRA.items()):
        tot = [100 * state_fraction(cfg, int(t)) for t in T]
        ax.plot(T, tot, "-", color=f"C{i}", label=f"{name}: MLA cache + Mamba2 state")
        ax.axhline(
            100 * kv_fraction(cfg),
            color=f"C{i}",
            ls="--",
            lw=1,
            label=f"{name}: MLA cache only (paper {PUBLISHED[name][0]} %)",
        )
        be = break_even_context(cfg)
        ax.plot([be], [100 * state_fraction(cfg, int(round(be)))], "o", color=f"C{i}")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="context length T (tokens)",
        ylabel="decode state / GQA KV cache (%)",
    )
    ax.legend(frameon=False, fontsize=7)
    ax.set_title(f"{TITLE}\n(dots: break-even context where Mamba2 state = MLA cache)", fontsize=9)
    fig.tight_layout()
    return fig
