"""The sqrt(3) threshold during training (paper Fig. 5 analogue): measured gradient-to-noise ratio
per step beside the SR noise model and the threshold, and the squared error of the FP4-gradient and
switched runs beside noise-free GD and the noise model's prediction."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.fp4 import ETA, THRESHOLD_SIZES, threshold_runs
from theory.fp4 import SQRT3

ID = "fp4.threshold"
TITLE = "FP4 gradients: the sqrt(3) crossing, the stall, and switching precision"


def make(scale: str = "quick", seed: int = 0):
    s = THRESHOLD_SIZES[scale]
    r = threshold_runs(s.n, s.d, s.seeds, s.steps, seed)
    runs, pred = r["runs"], r["pred"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    t = np.arange(r["steps"])
    a1.semilogy(
        t,
        runs["fp4"]["ratio"][0],
        "o-",
        ms=3,
        color="C1",
        label=r"measured $\hat\rho_t$ (FP4 run, seed 0)",
    )
    a1.semilogy(t, r["pred_ratio"][0], "k-", lw=1, label="SR noise model (theory)")
    a1.axhline(SQRT3, color="k", ls="--", label=r"threshold $\sqrt{3}$ (theory)")
    a1.axvline(
        r["pred_cross"][0],
        color="grey",
        ls=":",
        label=f"predicted crossing (step {r['pred_cross'][0]})",
    )
    a1.set(xlabel="GD step", ylabel=r"$\|\nabla L\| / \|g_q - \nabla L\|$")
    a2.semilogy(
        np.arange(r["steps"] + 1), pred["noise-free"].mean(0), "k-", label="noise-free GD (theory)"
    )
    for i, nm in enumerate(["fp4", "3", "sqrt(3)", "1"]):
        lab = "FP4 throughout" if nm == "fp4" else f"switch at ratio {nm}"
        a2.semilogy(t, np.mean(runs[nm]["excess"], 0), color=f"C{i + 1}", label=f"{lab} (measured)")
        a2.semilogy(np.arange(r["steps"] + 1), pred[nm].mean(0), ":", color=f"C{i + 1}")
    a2.set(xlabel="GD step", ylabel=r"$|w_t - w^*|^2$ (mean over seeds; dotted: SR noise model)")
    for a in (a1, a2):
        a.legend(frameon=False, fontsize=7)
    fig.suptitle(
        f"{TITLE}\nleast squares with H = I, n={s.n}, d={s.d}, GD step {ETA}, "
        f"{r['seeds']} seeds, NVFP4 SR backward, exact forward",
        fontsize=9,
    )
    fig.tight_layout()
    return fig
