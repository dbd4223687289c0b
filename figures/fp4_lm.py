"""A small Transformer LM trained in float32 and fully quantised in NVFP4 / MXFP4 (paper Figs. 1-2
and 6a analogues): training curves (mean over seeds) and held-out losses per seed."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.fp4 import LM_SIZES, lm_runs

ID = "fp4.lm_nvfp4_vs_mxfp4"
TITLE = "FP4 fully quantised training of a small Transformer LM"


def make(scale: str = "quick", seed: int = 0):
    s = LM_SIZES[scale]
    r = lm_runs(s.V, s.D, s.L, s.T, s.B, s.steps, s.seeds, seed)
    runs = r["runs"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1.2, 1]})
    w = max(1, r["steps"] // 20)
    for i, (name, v) in enumerate(runs.items()):
        sm = np.convolve(v["losses"], np.ones(w) / w, mode="valid")
        a1.plot(np.arange(len(sm)) + w - 1, sm, color=f"C{i}", label=name)
    a1.axhline(r["entropy"], color="k", ls="--", label="entropy rate (loss floor, theory)")
    a1.set(xlabel="step", ylabel=f"training loss (nats, {w}-step mean over {r['seeds']} seeds)")
    a1.legend(frameon=False, fontsize=7)
    names = list(runs)
    for i, n in enumerate(names):
        f = np.asarray(runs[n]["final"])
        a2.scatter(np.arange(len(f)), f, color=f"C{i}", label=n)
        a2.plot(np.arange(len(f)), f, color=f"C{i}", lw=0.6)
    a2.axhline(r["entropy"], color="k", ls="--", label="entropy rate")
    a2.set(
        xlabel="seed (same init and data in every format: paired)",
        ylabel="held-out loss (nats, own forward)",
    )
    a2.legend(frameon=False, fontsize=7)
    fig.suptitle(f"{TITLE} (synthetic Markov corpus, {r['steps']} Adam steps)")
    fig.tight_layout()
    return fig
