"""A small Transformer LM trained in float32 and fully quantised in NVFP4 / MXFP4 (paper Figs. 1-2
and 6a analogues): training curves, and the design sweep's held-out losses."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.fp4 import lm_runs

ID = "fp4.lm"
TITLE = "FP4 fully quantised training of a small Transformer LM"


def make(scale: str = "quick"):
    r = lm_runs(scale)
    runs = r["runs"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1.2, 1]})
    w = max(1, r["steps"] // 20)
    for i, (name, v) in enumerate(runs.items()):
        sm = np.convolve(v["losses"], np.ones(w) / w, mode="valid")
        a1.plot(np.arange(len(sm)) + w - 1, sm, color=f"C{i}", label=name)
    a1.axhline(r["entropy"], color="k", ls="--", label="entropy rate (loss floor, theory)")
    a1.set(xlabel="step", ylabel=f"training loss (nats, {w}-step mean)")
    a1.legend(frameon=False, fontsize=7)
    names = list(runs)
    vals = [runs[n]["heldout"] for n in names]
    ses = [2 * runs[n]["se"] for n in names]
    a2.barh(range(len(names)), vals, xerr=ses, color=[f"C{i}" for i in range(len(names))])
    a2.set_yticks(range(len(names)), names, fontsize=7)
    lo = min(vals) - 3 * max(ses)
    a2.set_xlim(min(lo, r["entropy"]) - 0.01, max(vals) + 3 * max(ses))
    a2.axvline(r["entropy"], color="k", ls="--")
    a2.set(xlabel="held-out loss (bars: ±2 SE over sequences)", title="design sweep (FQT recipe)")
    fig.suptitle(f"{TITLE} (synthetic Markov corpus, {r['steps']} Adam steps)")
    fig.tight_layout()
    return fig
