"""Uni-LoRA: the d at which it reaches LoRA r = 8's accuracy (within the claim's margin) as the
base's width and the task's intrinsic dimension (rank k of the shift of every weight) vary, on
the task of ``paper_checks.adapters.unilora`` (``parity_cells``; at quick the claim's width 64
and d grid only, its runs shared through the memo; d up to D and the widths at full); beside
the paper's fraction d / LoRA's count = 23K / 786K (Table 1). Cells where LoRA does not beat
the head trained alone by 2 paired SE are drawn hollow (ungated: nothing there for an adapter
to match)."""

import matplotlib.pyplot as plt
import numpy as np
from tqdm import tqdm

from paper_checks.adapters.unilora import (
    MARGIN,
    PAPER_FRACTION,
    PARITY_SIZES,
    paired_mean_se,
    parity_cells,
)

ID = "adapters.unilora_parity"
TITLE = "Uni-LoRA: the d for parity with LoRA r = 8 against width and the task's rank k"
MARKERS = ("o", "s", "^", "D", "v")


def make(scale: str = "quick", seed: int = 0):
    z = PARITY_SIZES[scale]
    ks = tuple(z.ks)
    cells = {
        w: parity_cells(w, ks, z.seeds, z.steps, seed, z.ratio, z.upto)
        for w in tqdm(z.widths, desc="Uni-LoRA parity", leave=False, disable=None)
    }
    colors = {w: f"C{i}" for i, w in enumerate(z.widths)}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
    for w, byk in cells.items():
        for j, (k, c) in enumerate(byk.items()):
            gap = [paired_mean_se(acc, c["acc_lora"]) for acc in c["acc_uni"]]
            mean, se = np.array(gap).T
            a1.errorbar(
                c["dims"],
                mean,
                yerr=2 * se,
                color=colors[w],
                marker=MARKERS[j % len(MARKERS)],
                ls=("-", "--", ":", "-.")[j % 4],
                ms=4,
                capsize=2,
                mfc=colors[w] if c["gated"] else "none",
                label=f"width {w}, k = {k}" + ("" if c["gated"] else " (ungated)"),
            )
        a1.axvline(PAPER_FRACTION * c["lora_count"], color=colors[w], ls=":", lw=1)
    a1.plot([], [], "k:", lw=1, label="paper's d = 2.9 % of LoRA's count (per width)")
    a1.axhspan(-MARGIN, 0.0, color="0.85", zorder=0, label=f"within the margin {MARGIN:g}")
    a1.axhline(0.0, color="k", lw=0.8)
    a1.set_xscale("log")
    a1.set_xlabel(
        "Uni-LoRA's d (r = 4; "
        + (f"the claim's d, up to {z.upto}, at this scale)" if z.upto else "last point d = D)")
    )
    a1.set_ylabel("test acc., Uni-LoRA - LoRA r = 8 (paired mean +- 2 SE)")
    a1.set_title(f"{z.seeds} seeds, {z.steps} steps, lrs chosen on validation", fontsize=9)
    a1.legend(frameon=False, fontsize=7, ncol=2)
    for w, byk in cells.items():
        for rule, mk, lab in (("d_parity", "o", "mean"), ("d_noninferior", "^", "mean - 2 SE")):
            ks_ok = [k for k, c in byk.items() if c[rule] > 0]
            frac = [byk[k][rule] / byk[k]["lora_count"] for k in ks_ok]
            gated = [byk[k]["gated"] for k in ks_ok]
            a2.plot(ks_ok, frac, color=colors[w], ls="-" if rule == "d_parity" else "--", lw=1)
            for k, f, g in zip(ks_ok, frac, gated, strict=True):
                a2.plot([k], [f], mk, color=colors[w], mfc=colors[w] if g else "none", ms=7)
            none = [k for k, c in byk.items() if c[rule] <= 0]
            a2.plot(none, [1.0] * len(none), "x", color=colors[w], ms=7)
            a2.plot(
                [],
                [],
                mk,
                color=colors[w],
                ls="-" if rule == "d_parity" else "--",
                label=f"width {w}: {lab} within {MARGIN:g}",
            )
    a2.axhline(PAPER_FRACTION, color="k", ls=":", lw=1, label="paper: 23K / 786K = 2.9 %")
    a2.axhline(0.5, color="0.5", ls="-.", lw=1, label="d = D (Uni-LoRA's whole r = 4 space)")
    a2.set_yscale("log")
    a2.set_xticks(ks)
    a2.set_xlabel("rank k of the shift of every weight (the task's intrinsic-dimension knob)")
    a2.set_ylabel("parity d / LoRA r = 8's parameter count")
    fracs = [
        c[r] / c["lora_count"]
        for b in cells.values()
        for c in b.values()
        for r in ("d_parity", "d_noninferior")
        if c[r] > 0
    ]
    a2.set_ylim(min(fracs + [PAPER_FRACTION]) / 5, 1.2)  # room below for the legend
    a2.set_title(
        "smallest grid d within the margin of LoRA (x at 1: none; hollow: ungated)", fontsize=9
    )
    a2.legend(frameon=False, fontsize=7, loc="lower right", ncol=2)
    fig.suptitle(TITLE, fontsize=9)
    return fig
