"""Uni-LoRA: test accuracy against the number of trainable adapter parameters on the shifted
8-class task of ``paper_checks.adapters.unilora`` (LoRA at several ranks, Uni-LoRA at several d,
VeRA r = width at full scale; the pretrained base and the head trained alone as lines), with the
paper's fraction d / LoRA = 23K / 786K (Table 1) marked; and the validation accuracy over the
shared learning-rate grid behind the claim's two lr choices."""

import matplotlib.pyplot as plt
import numpy as np
from tqdm import tqdm

from paper_checks.adapters.unilora import (
    LORA_RANKS,
    LR_GRID,
    MARGIN,
    PAPER_FRACTION,
    SIZES,
    SIZES_TABLE,
    UNI_D,
    method_runs,
    shifted_tasks,
)

ID = "adapters.unilora"
TITLE = "Uni-LoRA vs LoRA (and VeRA at full scale): accuracy against trainable parameters"

STYLE = {"lora": ("C0", "o", "r"), "unilora": ("C3", "s", "d"), "vera": ("C2", "^", "r")}


def make(scale: str = "quick", seed: int = 0):
    z = SIZES_TABLE[scale]
    methods = ["lora", "unilora"] + (["vera"] if scale == "full" else [])  # VeRA: a compile
    # the claim's runs (shared through the memo), VeRA at full scale only
    jobs = [("lora", 0), ("lora", max(LORA_RANKS))] + [
        (k, n) for k in methods[1:] for n in SIZES[k]
    ]
    done = {
        j: method_runs(*j, z.seeds, z.steps, seed)
        for j in tqdm(jobs, desc="Uni-LoRA figure", leave=False, disable=None)
    }
    head = done["lora", 0]  # LoRA r = 0: the head alone
    sizes = {k: [n for n in SIZES[k] if n and (k, n) in done] for k in methods}
    runs = {k: [done[k, n] for n in sizes[k]] for k in methods}
    base = shifted_tasks(z.seeds, z.steps, seed)["base_acc"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 5))
    for k in methods:
        col, mk, sym = STYLE[k]
        counts = [r["count"] for r in runs[k]]
        acc = np.stack([r["acc"] for r in runs[k]])  # (size, seed)
        se = acc.std(1, ddof=1) / np.sqrt(acc.shape[1])
        a1.errorbar(counts, acc.mean(1), yerr=2 * se, color=col, marker=mk, capsize=3, label=k)
        for c, m, n in zip(counts, acc.mean(1), sizes[k], strict=True):
            a1.annotate(
                f"{sym}={n}",
                (c, m),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
                color=col,
            )
    lora8 = runs["lora"][-1]
    a1.axvline(
        PAPER_FRACTION * lora8["count"],
        color="k",
        ls=":",
        lw=1,
        label=f"paper's d / LoRA count = {PAPER_FRACTION:.1%} (23K / 786K)",
    )
    a1.errorbar(
        [PAPER_FRACTION * lora8["count"]],
        [lora8["acc"].mean() + 0.005],
        yerr=[[MARGIN], [0]],
        fmt="*",
        ms=11,
        color="k",
        capsize=3,
        label="paper (Table 1): Uni-LoRA = LoRA r=8 + 0.5 pt; bar: margin",
    )
    a1.axhline(base.mean(), color="gray", ls="--", lw=1, label="pretrained base")
    a1.axhline(head["acc"].mean(), color="k", ls="-.", lw=1, label="head trained alone")
    a1.set_xscale("log")
    a1.set_xlabel("trainable adapter parameters (head trained in all, not counted)")
    a1.set_ylabel("test accuracy (mean +- 2 SE over seeds)")
    a1.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    for k, r, lab in (
        ("lora", runs["lora"][-1], f"LoRA r = {max(LORA_RANKS)}"),
        ("unilora", runs["unilora"][SIZES["unilora"].index(UNI_D)], f"Uni-LoRA d = {UNI_D}"),
    ):
        col, mk, _ = STYLE[k]
        v = r["val"].mean(0)
        a2.plot(LR_GRID, v, color=col, marker=mk, label=lab)
        a2.plot([r["lr"]], [v.max()], "*", ms=12, color=col)
    a2.set_xscale("log")
    a2.plot(LR_GRID, head["val"].mean(0), color="k", ls="-.", label="head alone (its lr)")
    a2.set_xlabel("peak adapter lr (shared grid; star = chosen on validation)")
    a2.set_ylabel("validation accuracy (mean over seeds)")
    a2.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3)
    fig.suptitle(TITLE, fontsize=9)
    return fig
