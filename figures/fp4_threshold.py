"""The sqrt(3) threshold during training (paper Fig. 5 analogue): gradient-to-noise ratio per step
with the threshold line, and the excess loss of float32, FP4-gradient and switched runs."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.fp4 import regression_threshold
from theory.fp4 import SQRT3

ID = "fp4.threshold"
TITLE = "FP4 gradients: the sqrt(3) threshold and the gain of switching precision"


def _smooth(x, w=10):
    return np.convolve(x, np.ones(w) / w, mode="valid")


def make(scale: str = "quick"):
    r = regression_threshold(scale)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    fp4, sw = r["fp4"], r["switch"]
    t = np.arange(len(fp4.losses))
    a1.semilogy(t, fp4.ratios, color="C1", alpha=0.35, lw=0.8, label=r"$\hat\rho_t$ (FP4 run)")
    a1.semilogy(t[9:], _smooth(fp4.ratios), color="C1", label="10-step mean")
    a1.axhline(SQRT3, color="k", ls="--", label=r"threshold $\sqrt{3}$ (theory)")
    if fp4.crossing_step is not None:
        a1.axvline(
            fp4.crossing_step, color="grey", ls=":", label=f"crossing (step {fp4.crossing_step})"
        )
    a1.set(xlabel="step", ylabel=r"$\|\nabla L\| / \|g_q - \nabla L\|$")
    for name, run, c in [
        ("float32", r["fp32"], "C0"),
        ("FP4 backward (NVFP4, SR)", fp4, "C1"),
        ("switch to high precision at crossing", sw, "C2"),
    ]:
        a2.semilogy(t, np.maximum(run.losses - r["lmin"], 1e-16), color=c, label=name)
    if sw.switch_step is not None:
        a2.axvline(sw.switch_step, color="grey", ls=":")
    a2.set(xlabel="step", ylabel="excess training loss $L - L_{min}$")
    for a in (a1, a2):
        a.legend(frameon=False, fontsize=8)
    fig.suptitle(
        f"{TITLE}\nnoisy linear regression n={r['n']}, d={r['d']}, exact forward, GD lr 0.05"
    )
    fig.tight_layout()
    return fig
