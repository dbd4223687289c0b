"""D2SA benchmark: the five shifts by several seeds (issue 19), the design of the ``d2sa.*`` claims
repeated over seeds, each seed with its own source U-Net, patients, masks and initialisations.

Per shift and seed: B0 (frozen source network), B1 (single-shot TTT) and D2SA on the claims'
quick design (24 x 24 phantoms, 4 patients x 4 slices, DC loss, window 10, at most 150
iterations; ``paper_checks.d2sa.run_shift``, the same function and sizes the claims run). The
table gives, over seeds (mean and SE of the per-seed slice means): PSNR gains on the
reference's intensity scale, D2SA - B1, the step ratio of the ``d2sa.efficiency`` rule, the
median iterations to 95 % of the final gain (R6 of docs/papers/d2sa.md) and the wall-time ratio D2SA
/ B1, both methods timed in the same run. ``--quick``: 3 seeds with one patient per shift;
``--full``: 5 seeds with the claims' 4 patients. Run: ``python benchmarks/d2sa.py [--quick |
--full] [--json PATH]``.
"""

from __future__ import annotations

import numpy as np
from _harness import run

from _core.runtime import float64
from dynamics.mri import SHIFTS
from paper_checks.d2sa import SIZES, r6_iterations, run_shift


def _row(r):
    """One shift at one seed: mean gains (dB), step and time ratios, R6 medians."""
    s = r["scores"]
    gain = {k: float(np.mean(s[m]["psnr"] - s[b]["psnr"]))
            for k, (m, b) in {"B1-B0": ("b1", "b0"), "D2SA-B0": ("d2sa", "b0"),
                              "D2SA-B1": ("d2sa", "b1")}.items()}  # fmt: skip
    it_b1, it_d = r6_iterations(r)
    return gain | {
        "steps D2SA/B1": r["steps"]["d2sa"] / r["steps"]["b1"],
        "R6 B1": float(np.median(it_b1)),
        "R6 D2SA": float(np.median(it_d)),
        "time D2SA/B1": r["seconds"]["d2sa"] / r["seconds"]["b1"],
    }


def bench(scale: str, args) -> dict:
    q = SIZES["quick"]
    seeds, patients = (5, q.patients) if scale == "full" else (3, 1)
    rows = {shift: [] for shift in SHIFTS}
    with float64():  # the claims' context, so the numbers are the claims' at the same seed
        for seed in range(seeds):
            for shift in SHIFTS:
                r = run_shift(shift, "dc", q.shape, q.channels, q.n_source, q.pretrain, patients,
                              q.slices, q.iters, q.window, q.epochs, seed)  # fmt: skip
                rows[shift].append(_row(r))
            print(f"seed {seed} done", flush=True)
    keys = list(rows[SHIFTS[0]][0])
    print(f"\nD2SA at the claims' quick design, {seeds} seeds x {patients} patients x {q.slices} "
          "slices per shift: mean +- SE over seeds")  # fmt: skip
    print(f"{'shift':<13}" + "".join(f"{k:>17}" for k in keys))
    out = {}
    for shift, per_seed in rows.items():
        v = np.array([[row[k] for k in keys] for row in per_seed])
        mean, se = v.mean(0), v.std(0, ddof=1) / np.sqrt(len(v))
        print(
            f"{shift:<13}"
            + "".join(f"{m:>10.2f} +-{s:>4.2f}" for m, s in zip(mean, se, strict=True))
        )
        out[shift] = {k: {"mean": float(m), "se": float(s), "per_seed": v[:, j].tolist()}
                      for j, (k, m, s) in enumerate(zip(keys, mean, se, strict=True))}  # fmt: skip
    return {"seeds": seeds, "patients": patients, "slices": q.slices, "shifts": out}


if __name__ == "__main__":
    run(bench, __doc__, quick="3 seeds x 1 patient per shift", full="5 seeds x 4 patients")
