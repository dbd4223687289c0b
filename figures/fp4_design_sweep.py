"""The FP4 design sweep (paper Figs. 1-3 analogues): block size x scale format x rounding per
operand; excess final held-out loss over float32 per configuration (paired over seeds), and the
training curves beside the noise floor."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.fp4 import SWEEP_SIZES, design_sweep

ID = "fp4.design_sweep"
TITLE = "FP4 design sweep: final held-out loss per configuration (fully quantised training)"


def make(scale: str = "quick", seed: int = 0):
    s = SWEEP_SIZES[scale]
    r = design_sweep(s.steps, s.seeds, s.batch, s.configs, seed)
    runs = r["runs"]
    names = list(runs)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1, 1.2]})
    ref = np.asarray(runs["NVFP4 (16, E4M3)"]["final"])
    q = [n for n in names if n != "NVFP4 (16, E4M3)"]
    d = [np.asarray(runs[n]["final"]) - ref for n in q]  # paired: same seeds, init and data
    mean = [x.mean() for x in d]
    se = [2 * x.std(ddof=1) / np.sqrt(len(x)) for x in d]
    a1.barh(range(len(q)), mean, xerr=se, color=[f"C{i % 10}" for i in range(1, len(q) + 1)])
    a1.set_yticks(range(len(q)), q, fontsize=7)
    a1.axvline(0.0, color="k", lw=0.8)
    a1.set(
        xlabel=f"final held-out loss - NVFP4 recipe's (paired; mean +- 2 SE, {r['seeds']} seeds)"
    )
    a1.invert_yaxis()
    for i, n in enumerate(names):
        a2.semilogy(runs[n]["losses"], color=f"C{i % 10}", lw=0.8, label=n)
    a2.set(xlabel="Adam step", ylabel="training loss (mean over seeds; floor 0: realizable)")
    a2.legend(frameon=False, fontsize=6)
    fig.suptitle(TITLE, fontsize=10)
    fig.tight_layout()
    return fig
