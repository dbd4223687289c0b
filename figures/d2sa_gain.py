"""Stage 1 of D2SA on the scanner shift: per-patient mean FiLM scale gamma against the injected
gain (the identity line gamma = gain is what a pure gain correction would give)."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.d2sa import SIZES, gain_at, gain_plan

ID = "d2sa.patient_gain"
TITLE = "D2SA stage 1: FiLM scale against the injected scanner gain"


def replicates(scale: str, seed: int = 0):
    """The claim's stage-1 run (on a cluster the figure reads its task)."""
    return gain_plan(SIZES[scale], seed)


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    r = gain_at(size, seed)
    fig, ax = plt.subplots(figsize=(4.8, 3.8))
    g = np.linspace(0.55, 1.65, 2)
    ax.plot(g, g, "k:", lw=1, label="gamma = gain")
    ax.plot(r["gain"], r["gamma"], "o", color="C1", label=f"{size.gain_patients} patients")
    ax.set(xlabel="injected gain", ylabel="mean FiLM scale gamma")
    ax.legend(frameon=False)
    ax.set_title(f"{TITLE}\n(seed {seed})", fontsize=9)
    fig.tight_layout()
    return fig
