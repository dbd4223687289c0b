"""D2SA claims: test-time adaptation of an MRI reconstruction U-Net under five distribution shifts
(Zhang et al., NeurIPS 2025, arXiv 2503.20815; mechanism from the official code,
``docs/papers/d2sa.md``).

Setting (``docs/papers/d2sa.md#small-scale-experiment``): single-coil ellipsoid patients
(:func:`dynamics.mri.cohort`), a
U-Net pre-trained on the source (brain family, T1 contrast, no bias field, R = 4 random columns)
and frozen, then per target patient: B0 (no adaptation), B1 (single-shot test-time training per
slice, Darestani et al. 2022) and D2SA (stage 1 per patient + stage 2 per slice), all with the
relative-l1 self-supervised loss and the same self-validation early stopping. Reconstructions
are scored by PSNR on the reference's intensity scale (and by HFEN for over-smoothing).
The paper's body could not be read: no number from its tables is a target here; the rules are
the pass criteria of ``docs/papers/d2sa.md#pass-criteria``.

The paper's effects (issue 44), registered as stated assumptions since only directions could be
read: a PSNR gain of adaptation of 1 dB (:data:`PAPER_GAIN`), D2SA not worse than B1 (0 dB),
HFEN 2 % lower with the flux (:data:`PAPER_HFEN`).

Design (issue 46): every claim adapts the same ``sources`` source U-Nets (:func:`sources`: 4 at
``quick``, pre-trained once per run and shared as ``needs`` units), ``patients`` (1) patient x
``slices`` (4) per source and shift, and pairs per-source means over the sources: a gain moves
with the source network far more than its slice SE says (one network per seed made the verdicts
depend on the seed: the mask-shift gain was +1.36 +- 0.22 dB at seed 1, -0.24 +- 0.55 at seed
2), so the source is the replicate. The runs are shared: ``ssl_agnostic``'s DC row and
``no_oversmoothing``'s flux arm are ``adaptation_helps``' runs of the SSL shift. Before: one
source per seed for the shift claims (16 slices each), 12 patients per framework for
``ssl_agnostic`` and 4 more sources (2 patients each) for ``no_oversmoothing``: 5
pre-trainings and 64 adaptation runs, 342 CPU-s for the area; now 4 (shared, ``patient_gain``
on the first) and 32 (plus 4 D2SA-only, through the same compiled loop as the flux runs).
Per claim, at ``quick`` (24x24 phantoms):

- ``adaptation_helps``: 10 paired gaps (5 shifts x B1/D2SA) above 0.1 dB + 3 SE over 4 sources.
  Every per-source gain is positive at seed 0 (0.6 to 9.7 dB) but the sources differ (mask
  shift B1 gain 0.6 to 4.5 dB: SE 0.93 dB), so the mask rows fail and the registered 1 dB effect
  has power 0.02-0.2 per row: recorded ``inconclusive`` (the row gives the sources needed, about
  60 for the registered effect); inconclusive at seeds 0, 1 and 2 (the mask rows fail at each,
  the scanner rows too at seed 2), where one source per seed gave reproduced at seed 1 only.
  ``full`` adapts 32 sources (SE about 0.33 dB on the mask shift from the quick spread: the
  measured gains of about 2 dB pass there).
- ``efficiency``: D2SA's steps over B1's, a bound of the claim (at most half; two-valued), with
  its SE over slices reported (:func:`paper_checks._stats.ratio_se`): 0.91-1.00 over seeds 0-2
  (SE 0.05), recorded ``not reproduced`` (one stopping rule for both cannot stop either method
  before 30 iterations per slice). ``no_early_stop`` at seed 0: every slice runs its 150
  iterations, the ratio moves 0.91 +- 0.05 -> 1.03 (B1 12,000 steps against 3,739): caught
  (moved, issue 44 item 5).
- ``ssl_agnostic``: per-source D2SA - B0 and D2SA - B1 for each framework (16 slices each, 48
  before, on one source); reproduced at seed 0 with wide margins (D2SA - B1 +1.3 to +2.2 dB, SE
  0.1-0.6). It also requires the SSDU and N2N runs to differ from DC's slice by slice; the
  mutant ``all_dc`` (every framework silently on the DC masks) makes them identical (caught).
  ``stage2_lr`` (two decades too high) drives D2SA below B0 and B1 by 4-10 dB, but with SEs
  over 4 sources of 1.2-1.6 dB the rows fail with low power: ``inconclusive`` at seed 0, not
  ``not reproduced``, so it is not caught at quick (it was with 48 slices on one source).
  Blocking does not power it either (measured, issue 44): with the source a block and the SE
  of the mean over 4 x 4 slices from the within-source spread, the mutant's slices end
  anywhere from -6 to +18 dB PSNR (within-source sd 3-5 dB), so the blocked SE is 0.8-1.3 dB
  against at most 0.23 dB for power 0.8 on a D2SA - B0 row (0.11 on D2SA - B1): 175-450
  slices per framework, beyond quick and about full's 256. The mutant is judged at its own
  spread; it moves the D2SA - B0 rows by 12-32 clean SEs (2.25 +- 0.34 -> -8.8 dB on SSDU),
  which item 5's rule counts only for a claim that does not reproduce; for this reproduced
  claim the mutant stays uncaught at quick and ``reproduce --mutants`` reports it (issue 44).
- ``no_oversmoothing``: HFEN identity - flux paired over the 4 sources (1 patient each; 2
  before), SE about 0.0016 on HFEN near 0.30, so the 2 % effect (about 0.006) has power 0.95;
  it measures -0.0013 +- 0.0016 at seed 0: recorded ``not reproduced`` (also at seed 1,
  +0.0012 +- 0.0013; ``inconclusive`` at seed 2, -0.0003 +- 0.0029, power 0.79: the verdict
  still depends on the seed at the power boundary). The identity-block
  runs skip B1 (only their D2SA is read). The zero-initialised adapters hardly move in stage 2,
  so a bug that only changes the flux (the conductance dropped, or K four decades too small:
  -0.0002 +- 0.0011) leaves the gap within 1 SE, an equivalent mutant of this finding (issue
  44); ``no_warm_start`` (the adapters' zero initialisation lost) is what the claim can see:
  at seed 0 it moves the gap to +0.076 +- 0.011 (the rule then passes: caught).
- ``patient_gain``: stage 1 on 11 scanner-shift patients of the first shared source network
  (no pre-training of its own: about 15 CPU-s less). 11 is where the Fisher-z rule has power
  0.8 for the registered rho = 0.8 (0.85; 0.65 with the 8 patients before), so a mutant that
  kills the correlation is a powered failure: ``no_gamma`` (rho NaN) turns it ``not
  reproduced`` at seed 0 (caught; with 8 patients it only turned ``inconclusive``, which is why
  the claim ran on a source of its own). Reproduced at seeds 0-2 (z = atanh rho 1.88, 1.47,
  1.12 against the bound 0.73), where 8 patients on the seed's own network were
  ``inconclusive`` (z 0.52 at seed 0).

Compiles (issue 46): the adaptation loop traces its learning rate and INR weight (one program
for the three frameworks) and the source pre-training's step compiles once for every source.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.stats import spearmanr

from _core.streams import stream_key, substream_seed
from dynamics.mri import SHIFTS, cohort
from dynamics.mri import tta as T
from dynamics.mri.metrics import hfen, psnr, psnr_normalized, ssim
from paper_checks import (
    Measurement,
    at_least,
    at_most,
    claim,
    computed,
    holds,
    measure,
    memo,
    paired_gap,
    patch,
    record,
    shared,
    sizes,
    unit,
    wrap,
)
from paper_checks._stats import ratio_se

PAPER = "Zhang et al. 2025 (D2SA, NeurIPS 2025, arXiv 2503.20815)"
SSL_SHIFT = "anatomy"  # the shift of the released experiment (knee -> brain in the code)
# "Helps" means a gain beyond 0.1 dB (a tenth of the smallest PSNR step reported in MRI tables),
# not merely a significant one: a method that barely moves (learning rate 1e-7) gains a few
# thousandths of a dB with a tiny paired SE.
MIN_GAIN = 0.1
#: The paper's effect for a PSNR gain of adaptation over the frozen network (dB). The paper's
#: tables could not be read (docs/papers/d2sa.md Sec. 4: direction only), so its "improves
#: performance" is registered at 1 dB, an assumption stated here and in each rule: the order of
#: the gains this setting's five-seed benchmark measures on its smallest shifts (1.1-1.6 dB on
#: acceleration and mask, ``benchmarks/d2sa.py --full``).
PAPER_GAIN = 1.0
#: The paper's effect for "prevents over-smoothing": HFEN of the identity block above the flux's
#: by 2 % of its value (assumption, stated: a difference the eye sees in an error map).
PAPER_HFEN = 0.02
#: The paper's effect for "patient-specific mean and variance adjustment": the FiLM scale tracks
#: the patient's scanner gain with a Spearman rho of 0.8 (assumption, stated: a strong monotone
#: association; the paper gives no number).
PAPER_RHO = 0.8
STAGE1_BATCH = 2  # D2SA's stage-1 mini-batch of slices (the code's; tta.d2sa's default)

SIZES = sizes(
    smoke=dict(
        shape=16,
        channels=4,
        n_source=4,
        pretrain=20,
        sources=2,
        patients=1,
        slices=2,
        iters=12,
        window=2,
        epochs=2,
        gain_patients=7,  # the Fisher-z rule can pass at rho = 0.8 from n = 7 on
    ),
    quick=dict(
        shape=24,
        channels=8,
        n_source=24,
        pretrain=600,
        sources=4,
        patients=1,
        slices=4,
        iters=150,
        window=10,
        epochs=10,
        gain_patients=11,  # power 0.8 for the registered rho = 0.8 (Fisher z, bound 2 SE)
    ),
    full=dict(
        shape=32,
        channels=8,
        n_source=48,
        pretrain=600,
        sources=32,
        patients=1,
        slices=8,
        iters=300,
        window=10,
        epochs=10,
        gain_patients=12,
    ),
)  # fmt: skip  (full: 32 source U-Nets, 256 slices per shift; docstring)


def _net_args(size):
    return size.shape, size.channels, size.n_source, size.pretrain


def _run_args(size, patients=None):
    patients = size.patients if patients is None else patients
    return (*_net_args(size), patients, size.slices, size.iters, size.window, size.epochs)


@memo
def pretrained(shape, channels, n_source, steps, seed):
    """The source U-Net (frozen afterwards): ``n_source`` patients x 4 slices, ``steps`` Adam
    steps of the supervised L1 loss (``tta.pretrain``)."""
    src = cohort("source", n_source, 4, (shape, shape), key=stream_key(seed, 1))
    unet, _ = T.pretrain(src, channels=channels, steps=steps, key=stream_key(seed, 2))
    return unet


def _scores(rec, ref):
    a, r = np.abs(np.asarray(rec)).astype(np.float64), np.abs(np.asarray(ref)).astype(np.float64)
    return dict(psnr=psnr(a, r), npsnr=psnr_normalized(a, r), ssim=ssim(a, r), hfen=hfen(a, r))


def iterations_to_gain(b1, d2sa, charge, frac=0.95):
    """Per-slice optimiser iterations until the training-input PSNR curve first reaches ``frac``
    of its final gain (R6 of ``docs/papers/d2sa.md#pass-criteria``; reported, not judged): B1
    from its own start; D2SA from the frozen network's PSNR (B1's first point, the same slice)
    plus ``charge`` (stage 1's slice passes per slice), since its curve starts after stage 1.
    A curve that ends without gain counts its whole length. ``b1``, ``d2sa`` ``(S, T)`` with
    NaN after each slice stopped; returns the two ``(S,)`` counts (derived here)."""

    def first(curve, base):
        c = curve[np.isfinite(curve)]
        hit = np.flatnonzero(c >= base + frac * (c[-1] - base))
        return hit[0] if c[-1] > base else c.size

    base = b1[:, 0]
    it_b1 = np.array([first(c, b) for c, b in zip(b1, base, strict=True)])
    it_d = np.array([first(c, b) for c, b in zip(d2sa, base, strict=True)]) + charge
    return it_b1, it_d


def r6_iterations(run):
    """:func:`iterations_to_gain` of every slice of a :func:`run_shift` result, B1's and D2SA's
    (pooled over its patients), D2SA charged stage 1's slice passes per slice."""
    c = run["curves"]
    patients, slices = len(c["b1"]), c["b1"][0].shape[0]
    charge = run["steps"]["d2sa_stage1"] / patients * STAGE1_BATCH / slices
    its = [iterations_to_gain(a, b, charge) for a, b in zip(c["b1"], c["d2sa"], strict=True)]
    return tuple(np.concatenate([i[j] for i in its]) for j in (0, 1))


@memo
def run_shift(shift, ssl, shape, channels, n_source, steps, patients, slices, iters, window,
              epochs, seed, nonlinearity="perona_malik", b1=True):  # fmt: skip
    """B0, B1 and D2SA on ``patients`` target patients of ``shift``: per-slice scores (PSNR on
    the reference's scale, normalised PSNR, SSIM, HFEN), optimiser steps and wall time. With
    ``b1`` False single-shot TTT is not run (its entries are NaN and 0): a run read for D2SA
    alone (``no_oversmoothing``'s identity block) spends nothing on it; every other number is
    the same, since each method draws from its own key."""
    unet = shared(pretrained, shape, channels, n_source, steps, seed)
    data = cohort(shift, patients, slices, (shape, shape), key=stream_key(seed, 3))
    out = {m: {k: [] for k in ("psnr", "npsnr", "ssim", "hfen")} for m in ("b0", "b1", "d2sa")}
    st = {"b1": 0, "d2sa": 0, "d2sa_stage1": 0}
    secs = {"b1": 0.0, "d2sa": 0.0}
    curves = {"b1": [], "d2sa": []}
    per_slice = {"b1": [], "d2sa": []}  # D2SA's stage-1 steps shared evenly by the slices
    for p in range(patients):
        y, m, ref = data.kspace[p] * data.mask[p], data.mask[p], data.target[p]
        kp = stream_key(seed, 4, p)
        recs = {"b0": T.no_adaptation(unet, y, m)}
        t0 = time.perf_counter()
        if b1:
            b = T.single_shot(unet, y, m, ref, ssl=ssl, max_iters=iters, window=window, key=kp)
        else:
            nan = np.full((slices, 0), np.nan)
            b = T.Adapted(None, np.zeros(slices, int), 0, nan, nan, None)
        t1 = time.perf_counter()
        d = T.d2sa(unet, y, m, ref, ssl=ssl, epochs=epochs, batch=STAGE1_BATCH, max_iters=iters,
                   window=window, nonlinearity=nonlinearity, key=kp)  # fmt: skip
        t2 = time.perf_counter()
        recs |= {"b1": b.recon, "d2sa": d.recon}
        secs["b1"] += t1 - t0
        secs["d2sa"] += t2 - t1
        st["b1"] += int(b.steps.sum())
        st["d2sa"] += int(d.stage1 + d.steps.sum())
        st["d2sa_stage1"] += int(d.stage1)
        per_slice["b1"].append(np.asarray(b.steps, float))
        per_slice["d2sa"].append(np.asarray(d.steps, float) + int(d.stage1) / slices)
        curves["b1"].append(b.psnr)
        curves["d2sa"].append(d.psnr)
        for k, rec in recs.items():
            scores = _scores(rec, ref) if rec is not None else dict.fromkeys(out[k], np.nan)
            for name, v in scores.items():
                out[k][name].append(np.broadcast_to(v, (slices,)))
    res = {k: {n: np.concatenate(v) for n, v in d.items()} for k, d in out.items()}
    per_slice = {k: np.concatenate(v) for k, v in per_slice.items()}
    return dict(
        scores=res, steps=st, slice_steps=per_slice, seconds=secs, curves=curves, gain=data.gain
    )


@memo
def run_gain(shape, channels, n_source, steps, patients, slices, epochs, seed, src):
    """Stage 1 only on ``patients`` scanner-shift patients (drawn with ``seed``) of the source
    network of seed ``src``: injected gain and mean FiLM scale."""
    unet = shared(pretrained, shape, channels, n_source, steps, src)
    data = cohort("scanner", patients, slices, (shape, shape), key=stream_key(seed, 5))
    gam = []
    for p in range(patients):
        y, m = data.kspace[p] * data.mask[p], data.mask[p]
        kp = stream_key(seed, 6, p)
        d = T.d2sa(unet, y, m, data.target[p], epochs=epochs, stage2=False, key=kp)
        gam.append(float(np.mean(d.gamma)))
    return dict(gain=np.asarray(data.gain), gamma=np.asarray(gam))


def sources(size, seed):
    """The seeds of the ``size.sources`` source U-Nets every claim of ``seed`` adapts (seeds
    ``substream_seed(seed, 10_000 + j)``, apart from every claim seed's). A gain of adaptation
    moves with the source network more than its slice SE says (one network per claim seed: the
    mask shift's D2SA gain +1.36 +- 0.22 dB at seed 1, -0.24 +- 0.55 at seed 2; the HFEN gap
    -0.0005 +- 0.0015 to +0.0056 +- 0.0014), so the claims pool per-source means over several
    networks, and every claim reads the same ones (pre-trained once per run)."""
    return [substream_seed(seed, 10_000 + j) for j in range(size.sources)]


def _gain_spec(size, seed):
    src = sources(size, seed)[0]
    return (*_net_args(size), size.gain_patients, size.slices, size.epochs, seed, src)


def gain_at(size, seed):
    """:func:`run_gain` at ``size`` on the first of :func:`sources` (pre-trained once per run
    for every claim), computed or read from the cluster's task."""
    return computed(run_gain, *_gain_spec(size, seed))


def _source(size, src):
    """The unit of the source U-Net of seed ``src`` (one of :func:`sources`)."""
    return unit(pretrained, *_net_args(size), src)


def gain_plan(size, seed):
    spec = _gain_spec(size, seed)
    return [unit(run_gain, *spec, needs=[_source(size, spec[-1])])]


def _spec(size, src, shift, ssl="dc", nonlinearity="perona_malik", b1=True):
    return (shift, ssl, *_run_args(size), src, nonlinearity, b1)


def _units(size, seed, shift, ssl="dc", nonlinearity="perona_malik", b1=True):
    return [
        unit(run_shift, *_spec(size, src, shift, ssl, nonlinearity, b1), needs=[_source(size, src)])
        for src in sources(size, seed)
    ]


def shift_runs(size, seed, shift, ssl="dc", nonlinearity="perona_malik", b1=True):
    """:func:`run_shift` of ``shift`` on every source network of ``seed`` (a list, one run per
    source), computed or read from the cluster's tasks."""
    return [
        computed(run_shift, *_spec(size, src, shift, ssl, nonlinearity, b1))
        for src in sources(size, seed)
    ]


def pooled(runs):
    """The runs of :func:`shift_runs` as one run: per-slice scores, per-slice steps and curves
    concatenated, step counts and seconds summed."""
    cat = np.concatenate
    return dict(
        scores={m: {k: cat([r["scores"][m][k] for r in runs]) for k in runs[0]["scores"][m]}
                for m in runs[0]["scores"]},
        steps={k: sum(r["steps"][k] for r in runs) for k in runs[0]["steps"]},
        slice_steps={k: cat([r["slice_steps"][k] for r in runs]) for k in runs[0]["slice_steps"]},
        seconds={k: float(sum(r["seconds"][k] for r in runs)) for k in runs[0]["seconds"]},
        curves={k: [c for r in runs for c in r["curves"][k]] for k in runs[0]["curves"]},
        gain=cat([r["gain"] for r in runs]),
    )  # fmt: skip


def per_source(runs, method, score="psnr"):
    """Per-source mean of ``score`` of ``method`` (``(sources,)``): what the claims pair."""
    return np.array([float(np.mean(r["scores"][method][score])) for r in runs])


def shift_at(size, seed, shift):
    """:func:`run_shift` of ``shift`` at ``size`` (DC loss, Perona-Malik flux) pooled over the
    source networks (:func:`pooled`)."""
    return pooled(shift_runs(size, seed, shift))


def plan(size, seed):
    """The ``replicates`` of the claims that read every shift: each shift's :func:`run_shift` on
    each source network a unit, shared between them (and, for the SSL shift, with
    ``ssl_agnostic``'s DC row and ``no_oversmoothing``'s flux arm)."""
    return [u for s in SHIFTS for u in _units(size, seed, s)]


@claim(
    "d2sa.adaptation_helps",
    paper=PAPER,
    statement="On every one of the five shifts (anatomy, scanner, contrast, acceleration, mask), "
    "test-time adaptation (single-shot TTT and D2SA) raises PSNR over the frozen source network.",
    where="abstract; docs/papers/d2sa.md D5, pass criterion R1; paper's effect: a gain "
    "(registered at 1 dB, PAPER_GAIN: the tables could not be read)",
    sizes=SIZES,
    replicates=plan,
    recorded=record(
        quick="inconclusive",
        reason="4 source U-Nets (4 slices each) per shift: every per-source gain is positive at "
        "seed 0 (0.6 to 9.7 dB), but the gain moves with the source (mask shift B1: 0.6 to 4.5 "
        "dB, SE over sources 0.93 dB), so the mask rows fail 0.1 dB + 3 SE and the registered "
        "1 dB effect has power 0.02-0.2 (about 60 sources for 0.8); full adapts 32 sources "
        "(SE about 0.33 dB from the quick spread, where the measured gains of about 2 dB pass).",
    ),
    mutants=[
        patch(
            "dynamics.mri.tta.LR_SINGLE_SHOT",
            1e-7,
            "single-shot TTT learning rate 1e-7 instead of 1e-3 (a units slip)",
            name="b1_lr",
        )
    ],
)
def _adaptation_helps(size, seed) -> Measurement:
    rules, gains = [], {}
    for shift in SHIFTS:
        runs = shift_runs(size, seed, shift)
        b0 = per_source(runs, "b0")
        for m, label in (("d2sa", "D2SA"), ("b1", "B1")):
            a = per_source(runs, m)
            rules.append(
                paired_gap(
                    a, b0, n_se=3.0, margin=MIN_GAIN, name=f"{shift}: {label} - B0",
                    paper=PAPER_GAIN,
                )
            )  # fmt: skip
            gains[f"{shift} {label} - B0 per source (dB)"] = (a - b0).tolist()
    n = size.patients * size.slices
    return measure(
        *rules,
        extra=gains,
        detail=f"PSNR on the reference's scale, per-source means ({size.patients} patient(s) x "
        f"{n // size.patients} slices each) paired over {size.sources} source U-Nets, "
        f"{size.shape}x{size.shape} images, seed {seed}; > {MIN_GAIN} dB + 3 SE; paper's effect "
        f"registered at {PAPER_GAIN:g} dB",
    )


@claim(
    "d2sa.efficiency",
    paper=PAPER,
    statement="D2SA reaches single-shot TTT's PSNR (within 0.3 dB) with at most half of its "
    "optimiser steps (stage-1 steps plus per-slice stage-2 iterations, both early-stopped by the "
    "same self-validation rule).",
    where="abstract ('accelerates convergence'); docs/papers/d2sa.md D1/D5, criterion R2",
    sizes=SIZES,
    replicates=plan,
    recorded=record(
        quick="not reproduced",
        reason="with one self-validation stopping rule for both, D2SA's optimiser steps are "
        "0.95-1.14 of single-shot TTT's (SE of the ratio over slices a few hundredths), not at "
        "most half: the rule cannot stop either method before 30 iterations per slice, and "
        "stage 1 adds 10 slice passes per slice (R6, reported: about 0.8x to 95 % of the gain).",
    ),
    mutants=[
        wrap(
            "dynamics.mri.tta._should_stop",
            lambda f: lambda errs, t, w: f(errs, t, w) & (t < 0),
            "self-validation early stopping never fires",
            name="no_early_stop",
        )
    ],
)
def _efficiency(size, seed) -> Measurement:
    runs = [shift_at(size, seed, s) for s in SHIFTS]  # pooled over the source networks
    b1 = sum(r["steps"]["b1"] for r in runs)
    d = sum(r["steps"]["d2sa"] for r in runs)
    s1 = sum(r["steps"]["d2sa_stage1"] for r in runs)
    pd = np.concatenate([r["scores"]["d2sa"]["psnr"] for r in runs])
    pb = np.concatenate([r["scores"]["b1"]["psnr"] for r in runs])
    secs = {k: float(sum(r["seconds"][k] for r in runs)) for k in ("b1", "d2sa")}
    its = {shift: r6_iterations(r) for shift, r in zip(SHIFTS, runs, strict=True)}
    its["all"] = tuple(np.concatenate([v[j] for v in its.values()]) for j in (0, 1))
    to_gain = {k: [float(np.median(a)), float(np.median(b))] for k, (a, b) in its.items()}
    return measure(
        at_most(d / b1, 0.5, name="D2SA steps / B1 steps"),
        paired_gap(pd, pb, n_se=2.0, margin=-0.3, name="PSNR D2SA - B1 (dB)", paper=0.0),
        extra={
            "D2SA steps / B1 steps, SE over slices": ratio_se(
                *(np.concatenate([r["slice_steps"][k] for r in runs]) for k in ("d2sa", "b1"))
            )[1],
            "B1 steps": b1,
            "D2SA steps": d,
            "D2SA stage-1 steps": s1,
            "seconds": secs,
            "iterations to 95 % of the final gain, median B1 / D2SA (R6; reported)": to_gain,
        },
        detail=f"all five shifts and {size.sources} source U-Nets pooled ({pd.size} slices), "
        f"windows {size.window} for both, at most {size.iters} iterations per slice, seed {seed}; "
        "non-inferiority at 2 SE (paper: D2SA >= B1, registered as 0 dB); the step ratio is the "
        "claim's bound (two-valued); R6 on the training-input PSNR curves, D2SA charged stage "
        "1's slice passes per slice",
    )


@claim(
    "d2sa.ssl_agnostic",
    paper=PAPER,
    statement="D2SA works with each self-supervised framework (data fidelity, SSDU, N2N "
    "resubsampling): it beats no adaptation and is not worse than single-shot TTT with the same "
    "loss by more than 0.3 dB.",
    where="abstract; docs/papers/d2sa.md D4, criterion R3",
    sizes=SIZES,
    replicates=lambda size, seed: [u for ssl in T.SSL for u in _units(size, seed, SSL_SHIFT, ssl)],
    mutants=[
        patch(
            "dynamics.mri.tta.LR_STAGE2",
            0.1,
            "stage-2 learning rate 1e-1 instead of 1e-3 (two decades off)",
            name="stage2_lr",
        ),
        wrap(
            "dynamics.mri.tta.ssl_masks",
            lambda f: lambda mask, n, ssl, **kw: f(mask, n, "dc", **kw),
            "every framework silently runs the data-consistency loss (its masks)",
            name="all_dc",
        ),
    ],
)
def _ssl_agnostic(size, seed) -> Measurement:
    rules, extra, psnr = [], {}, {}
    for ssl in T.SSL:
        runs = shift_runs(size, seed, SSL_SHIFT, ssl)
        d, b1, b0 = (per_source(runs, m) for m in ("d2sa", "b1", "b0"))
        s = pooled(runs)["scores"]
        psnr[ssl] = np.concatenate([s["b1"]["psnr"], s["d2sa"]["psnr"]])
        rules.append(
            paired_gap(d, b0, n_se=3.0, margin=MIN_GAIN, name=f"{ssl}: D2SA - B0", paper=PAPER_GAIN)
        )
        rules.append(paired_gap(d, b1, n_se=2.0, margin=-0.3, name=f"{ssl}: D2SA - B1", paper=0.0))
        extra[f"{ssl} PSNR B0/B1/D2SA"] = [float(np.mean(v)) for v in (b0, b1, d)]
    # three frameworks, three losses: their adapted PSNRs (B1's and D2SA's, slice by slice) must
    # differ from the data-consistency run's, else the rows repeat one framework (the all_dc bug)
    differ = {ssl: float(np.max(np.abs(psnr[ssl] - psnr["dc"]))) for ssl in T.SSL[1:]}
    rules.append(
        holds(
            min(differ.values()) > 1e-6,
            name="frameworks differ from DC",
            rule="max |PSNR(framework) - PSNR(dc)| over adapted slices > 1e-6 dB, SSDU and N2N",
            measured=differ,
        )
    )
    n = size.patients * size.slices
    return measure(
        *rules,
        extra=extra,
        detail=f"{SSL_SHIFT} shift, per-source means ({n} slices each) paired over "
        f"{size.sources} source U-Nets, seed {seed}; the DC row is adaptation_helps' run of the "
        f"shift; paper's effects: D2SA - B0 registered at {PAPER_GAIN:g} dB, D2SA - B1 at 0 "
        "(not worse)",
    )


@claim(
    "d2sa.no_oversmoothing",
    paper=PAPER,
    statement="The stage-2 diffusion block with the Perona-Malik flux keeps more high-frequency "
    "detail (lower HFEN) than the same block with an identity non-linearity, and D2SA is not "
    "smoother than single-shot TTT.",
    where="abstract ('prevents over-smoothing'); docs/papers/d2sa.md D3, criterion R4; paper's "
    "effect registered as HFEN 2 % lower with the flux (PAPER_HFEN; a direction in the paper)",
    sizes=SIZES,
    recorded=record(
        quick="not reproduced",
        reason="over 4 source U-Nets (1 patient x 4 slices each) the Perona-Malik flux does not "
        "lower HFEN against the identity block (seed 0: gap -0.0013 +- 0.0016 on HFEN near "
        "0.30; before issue 46, 2 patients per source: -0.0008 +- 0.0012, and -0.0003 to "
        "+0.0015 over seeds 0-2 with 6 sources), while a 2 % effect (about 0.006) would pass "
        "with power 0.95.",
    ),
    replicates=lambda size, seed: [
        *_units(size, seed, SSL_SHIFT),
        *_units(size, seed, SSL_SHIFT, nonlinearity="identity", b1=False),
    ],
    # No mutant that only changes the flux (issue 44): the conductance dropped (flux c(g) g -> g)
    # turns the flux arm into the identity arm, the claim's own ablation, and K four decades too
    # small (the flux killed) moved the gap -0.0013 +- 0.0016 to -0.0002 at seed 0. What the
    # claim finds (not reproduced) is that the zero-initialised adapters' non-linearity does not
    # matter here, so such bugs are equivalent mutants of this measurement, not tests of it.
    mutants=[
        wrap(
            "dynamics.mri.tta.with_diffusion",
            lambda f: lambda model, **kw: f(model, **(kw | {"zero_init": False})),
            "the adapters' output conv keeps its default initialisation (zero_init ignored): "
            "stage 2 starts from a perturbed network, not the stage-1 one",
            name="no_warm_start",
        ),
    ],
)
def _no_oversmoothing(size, seed) -> Measurement:
    flux = shift_runs(size, seed, SSL_SHIFT)
    ident = shift_runs(size, seed, SSL_SHIFT, nonlinearity="identity", b1=False)
    h_flux, h_b1 = (per_source(flux, m, "hfen") for m in ("d2sa", "b1"))
    h_id = per_source(ident, "d2sa", "hfen")
    diff = h_flux - h_b1
    se = float(diff.std(ddof=1) / np.sqrt(diff.size))
    return measure(
        paired_gap(
            h_id,
            h_flux,
            n_se=2.0,
            name="HFEN identity - flux",
            paper=PAPER_HFEN * float(np.mean(h_id)),
        ),  # fmt: skip
        at_most(float(diff.mean()), 0.0, tol=se, name="HFEN D2SA - B1"),
        extra={
            "HFEN flux/identity/B1": [float(np.mean(v)) for v in (h_flux, h_id, h_b1)],
            "HFEN identity - flux per source": (h_id - h_flux).tolist(),
        },
        detail=f"{SSL_SHIFT} shift, {size.sources} source U-Nets, each adapted on "
        f"{size.patients} patient(s) x {size.slices} slices (per-source means paired over "
        f"sources; the flux arm is adaptation_helps' run of the shift), seed {seed}; "
        "HFEN = |LoG(x - ref)|/|LoG ref|, sigma 1.5; second rule allows 1 SE",
    )


@claim(
    "d2sa.patient_gain",
    paper=PAPER,
    statement="Stage 1's FiLM scale captures the injected per-patient scanner gain: the "
    "patient's mean gamma rank-correlates with the gain (Spearman rho > 0 at 2 SE, Fisher z).",
    where="abstract ('patient-specific mean and variance adjustment'); docs/papers/d2sa.md D2, "
    "criterion R5",
    sizes=SIZES,
    mutants=[
        wrap(
            "dynamics.mri.tta.FilmINR.__call__",
            lambda f: (
                lambda self, z, shape: (lambda r: (r[0] * 0 + 1, r[1], r[2]))(f(self, z, shape))
            ),
            "FiLM scale gamma dropped (shift beta only)",
            name="no_gamma",
        )
    ],
    replicates=gain_plan,
)
def _patient_gain(size, seed) -> Measurement:
    r = gain_at(size, seed)
    g = r["gamma"]
    rho = float(spearmanr(r["gain"], g).statistic) if np.ptp(g) > 0 else float("nan")
    # Fisher z of a Spearman rho over n pairs: SE sqrt(1.06 / (n - 3)) (Fieller, Hartley &
    # Pearson 1957); the earlier rule, rho > 0.5 over 8 patients, was a coin flip either way
    se = math.sqrt(1.06 / (len(g) - 3))
    z = math.atanh(min(max(rho, -0.999999), 0.999999)) if np.isfinite(rho) else float("nan")
    return measure(
        at_least(
            z,
            2 * se,
            name="atanh(Spearman rho)",
            paper=math.atanh(PAPER_RHO),
            se=se,
        ),
        extra={"Spearman rho": rho, "gain": r["gain"], "mean gamma": g},
        detail=f"scanner shift, {size.gain_patients} patients x {size.slices} slices, stage 1 "
        f"({size.epochs} epochs, the U-Net trainable as in the code), seed {seed}; paper's "
        f"effect registered at rho = {PAPER_RHO}",
    )
