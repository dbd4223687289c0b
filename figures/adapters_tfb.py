"""TFB: reliability diagram of the trained LoRA and its training-free Bayesianization, and the
sigma bisection history."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.adapters.tfb import SIZES, tfb_runs

ID = "adapters.tfb_calibration"
TITLE = "TFB and temperature scaling on an overfitted LoRA (4 classes)"


def make(scale: str = "quick", seed: int = 0):
    z = SIZES[scale]
    r = tfb_runs(z.seeds, z.n_train, z.n_val, z.n_test, z.steps, seed)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    k = len(r["ece_lora"])
    for m, col in (("lora", "C0"), ("tfb", "C3"), ("ts", "C2")):
        a1.scatter(r[f"nll_{m}"], r[f"ece_{m}"], color=col, s=12, alpha=0.6)
        a1.errorbar(
            r[f"nll_{m}"].mean(),
            r[f"ece_{m}"].mean(),
            xerr=2 * r[f"nll_{m}"].std(ddof=1) / np.sqrt(k),
            yerr=2 * r[f"ece_{m}"].std(ddof=1) / np.sqrt(k),
            fmt="o",
            color=col,
            mec="k",
            capsize=3,
            label={"lora": "LoRA (MLE)", "tfb": "TFB", "ts": "temperature scaling"}[m],
        )
    a1.set_xlabel("test NLL")
    a1.set_ylabel("test ECE (15 bins)")
    a1.set_title(f"{k} seeds; bars: mean +- 2 SE", fontsize=9)
    a1.legend(frameon=False, fontsize=8)
    s = r["search"]
    a2.plot(s.sigmas, s.metrics, "o", color="C3", label="bisection evaluations (seed 0)")
    a2.axhline(s.tol, color="k", ls="--", lw=1, label="tolerance (1 % flips)")
    a2.axvline(s.sigma, color="C2", lw=1, label=f"chosen sigma = {s.sigma:.4g}")
    a2.set_xscale("log")
    a2.set_xlabel("sigma")
    a2.set_ylabel("fraction of anchor predictions flipped")
    a2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE, fontsize=9)
    return fig
