"""Quality against KV cache as MLA layers are added: the toy hybrid's KL to its teacher after ILD
(every placement, and the selection rule's, mean ±2 SE over replicates) against its exact cache
fraction, beside the paper's README rows (LM-Harness average against KV size)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.hybrid import PAPER_TRADEOFF, PLACE_SIZES, placements, rule_kl, toy_config
from theory.kv_cache import kv_fraction

ID = "hybrid.cache_tradeoff"
TITLE = "KV cache against quality as MLA layers are added"


def make(scale: str = "quick", seed: int = 0):
    size = PLACE_SIZES[scale]
    r = placements(size.teacher_steps, size.ild_steps, size.reps, seed)
    L = r["L"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.6, 4.0))
    for p, v in r["kl"].items():
        ax.plot(100 * kv_fraction(toy_config(len(p))), v.mean(), ".", color="0.7", ms=6)
    frac = [100 * kv_fraction(toy_config(n)) for n in range(L + 1)]
    kl = np.stack([rule_kl(r, n, False)[0] for n in range(L + 1)])
    se = kl.std(1, ddof=1) / np.sqrt(kl.shape[1])
    ax.errorbar(frac, kl.mean(1), yerr=2 * se, fmt="o-", color="C0", capsize=3, label="rule")
    for n, (f, k) in enumerate(zip(frac, kl.mean(1), strict=True)):
        ax.annotate(f"{n} MLA", (f, k), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.plot([], [], ".", color="0.7", label="every placement")
    ax.set(xlabel="KV cache / GQA teacher (%)", ylabel="KL(teacher || student), nats/token")
    ax.legend(frameon=False, fontsize=8)
    ax.set_title(f"toy: 4 layers, after ILD, {size.reps} replicates", fontsize=9)
    for i, (name, rows) in enumerate(PAPER_TRADEOFF.items()):
        kv, avg = np.array(rows).T
        bx.plot(kv[:2], avg[:2], "o-", color=f"C{i}", label=f"{name} hybrids")
        bx.plot(kv[2], avg[2], "s", color=f"C{i}", mfc="none", label=f"{name} all-MLA")
    bx.set(xlabel="KV cache / base (%)", ylabel="LM-Harness average")
    bx.legend(frameon=False, fontsize=7, ncol=2)
    bx.set_title("paper (official README tables)", fontsize=9)
    fig.suptitle(TITLE, fontsize=10)
    fig.tight_layout()
    return fig
