"""TFB: reliability diagram of the trained LoRA and its training-free Bayesianization, and the
sigma bisection history."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.adapters.tfb import tfb_runs

ID = "adapters.tfb_calibration"
TITLE = "TFB on an overconfident LoRA (4 classes, 96 labels)"


def make(scale: str = "quick"):
    r = tfb_runs(scale)
    y = r["labels"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    edges = np.linspace(0, 1, 11)
    for k, col in (("lora", "C0"), ("tfb", "C3")):
        p = r[k]["probs"]
        conf, corr = p.max(1), p.argmax(1) == y
        which = np.clip(np.digitize(conf, edges[1:-1]), 0, 9)
        xs = [conf[which == b].mean() for b in range(10) if (which == b).any()]
        ys = [corr[which == b].mean() for b in range(10) if (which == b).any()]
        a1.plot(xs, ys, "o-", color=col,
                label=f"{k}: ECE {r[k]['ece']:.3f}, NLL {r[k]['nll'].mean():.3f}")
    a1.plot([0, 1], [0, 1], "k:", lw=1, label="perfect calibration")
    a1.set_xlabel("confidence")
    a1.set_ylabel("accuracy")
    a1.legend(frameon=False, fontsize=8)
    s = r["search"]
    a2.plot(s.sigmas, s.metrics, "o", color="C3", label="bisection evaluations")
    a2.axhline(s.tol, color="k", ls="--", lw=1, label="tolerance")
    a2.axvline(s.sigma, color="C2", lw=1, label=f"chosen sigma = {s.sigma:.4g}")
    a2.set_xscale("log")
    a2.set_xlabel("sigma")
    a2.set_ylabel("relative anchor-NLL change")
    a2.legend(frameon=False, fontsize=8)
    fig.suptitle(TITLE, fontsize=9)
    return fig
