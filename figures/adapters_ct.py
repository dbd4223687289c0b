"""Curvature Tuning: probe accuracy against beta (validation and test), and the measured
sup |phi_beta - ReLU| beside its bound (1 - beta)[c/(beta e) + (1 - c) ln 2]."""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import nn.adapters as ad
from paper_checks.adapters.ct import ct_runs

ID = "adapters.ct_vs_probe"
TITLE = "Steering Curvature Tuning on a pretrained ReLU MLP"


def make(scale: str = "quick"):
    r = ct_runs(scale)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.plot(r["betas"], r["val"], "o-", ms=3, label="validation")
    a1.plot(r["betas"], r["test"], "s-", ms=3, label="test")
    a1.axhline(r["test"][-1], color="grey", ls="--", lw=1, label="linear probe (beta = 1)")
    a1.axvline(r["betas"][r["best"]], color="C3", lw=1, label="beta chosen on validation")
    a1.set_xlabel("beta")
    a1.set_ylabel("probe accuracy")
    a1.legend(frameon=False, fontsize=8)
    x = jnp.linspace(-20.0, 20.0, 40001)
    betas = np.linspace(0.5, 0.99, 25)
    for c, col in ((0.2, "C0"), (0.5, "C1"), (0.9, "C2")):
        gap = [float(jnp.max(jnp.abs(ad.ctu(x, b, c) - jax.nn.relu(x)))) for b in betas]
        a2.plot(betas, gap, "o", color=col, ms=3, label=f"measured sup gap, c = {c}")
        a2.plot(betas, [ad.ct_gap_bound(b, c) for b in betas], "-", color=col, lw=1,
                label=f"bound, c = {c}")
    a2.set_yscale("log")
    a2.set_xlabel("beta")
    a2.set_ylabel("sup |phi - ReLU|")
    a2.legend(frameon=False, fontsize=7)
    fig.suptitle(TITLE, fontsize=9)
    return fig
