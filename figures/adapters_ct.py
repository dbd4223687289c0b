"""Curvature Tuning: probe accuracy against beta (validation and test), and the measured
sup |phi_beta - ReLU| beside its bound (1 - beta)[c/(beta e) + (1 - c) ln 2]."""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import nn.adapters as ad
from paper_checks.adapters.ct import SIZES, ct_runs

ID = "adapters.ct_vs_probe"
TITLE = "Steering Curvature Tuning on a pretrained ReLU MLP"


def make(scale: str = "quick", seed: int = 0):
    z = SIZES[scale]
    r = ct_runs(z.n, z.tasks, z.pre_n, z.pre_steps, seed)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    k = len(r["val"])
    for key, mk in (("val", "o-"), ("test", "s-")):
        v = r[key] - r[key][:, -1:]  # gain over the probe, per task
        a1.errorbar(
            r["betas"],
            v.mean(0),
            yerr=2 * v.std(0, ddof=1) / np.sqrt(k),
            fmt=mk,
            ms=3,
            capsize=2,
            label=f"{'validation' if key == 'val' else 'test'} (mean +- 2 SE)",
        )
    a1.axhline(0.0, color="grey", ls="--", lw=1, label="linear probe (beta = 1)")
    for b in r["betas"][r["best"]]:
        a1.axvline(b, color="C3", lw=0.5, alpha=0.4)
    a1.axvspan(0.70, 0.99, color="grey", alpha=0.15, label="the paper's grid 0.70..0.99")
    a1.legend(frameon=False, fontsize=8)
    a1.set_xlabel(f"beta (red: chosen per task on validation, {k} tasks)")
    a1.set_ylabel("accuracy gain over the linear probe")
    a1.legend(frameon=False, fontsize=8)
    x = jnp.linspace(-20.0, 20.0, 40001)
    betas = np.linspace(0.5, 0.99, 25)
    for c, col in ((0.2, "C0"), (0.5, "C1"), (0.9, "C2")):
        gap = [float(jnp.max(jnp.abs(ad.ctu(x, b, c) - jax.nn.relu(x)))) for b in betas]
        a2.plot(betas, gap, "o", color=col, ms=3, label=f"measured sup gap, c = {c}")
        a2.plot(
            betas,
            [ad.ct_gap_bound(b, c) for b in betas],
            "-",
            color=col,
            lw=1,
            label=f"bound, c = {c}",
        )
    a2.set_yscale("log")
    a2.set_xlabel("beta")
    a2.set_ylabel("sup |phi - ReLU|")
    a2.legend(frameon=False, fontsize=7)
    fig.suptitle(TITLE, fontsize=9)
    return fig
