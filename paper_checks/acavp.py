"""ACAVP claims: affine, colour and additive visual prompting of a frozen classifier (Enomoto,
NeurIPS 2025, arXiv 2510.07823; mechanism from the official code ``s-enmt/ACAVP``,
``docs/papers/acavp.md``).

Setting (``docs/papers/acavp.md#small-scale-experiment``): a small CNN pre-trained on scikit-learn
digits rendered on a
32x32 canvas and frozen; a suite of target tasks (:data:`dynamics.acavp.TASKS`): shifts inside
ACAVP's reachable set (geometry, tint), outside it (a smaller digit, a coloured background) and a
label permutation that a linear probe solves for free. Every method (padding prompt, EVP, ACAVP,
linear probe) trains its own parameters with Adam for the same steps, its learning rate chosen
on a validation split from the same grid; gains are paired over seeds (each seed its own prompt
initialisation, minibatches, augmentation draws and, in the low-data regime, training subset);
``overfitting_grows`` and ``robustness`` pool independent source CNNs and task draws, since
their verdicts followed the frozen source more than the prompt seeds.
The paper's body could not be read: no table value is a target; the only number, "up to 12
points" for TrivialAugment, is reported beside the measured largest gain.

**The paper's effects** (issue 44: a failing rule says ``not reproduced`` only with the power to
see them). Where the paper gives no number, the effect registered is the smallest its wording
asserts at this size, and the rule's text prints the power to see it:

- ``beats_additive_vp``: "state of the art among VP methods", 1 point on the suite average over
  each additive prompt (:data:`PAPER_SOTA_GAIN`).
- ``vs_linear_probe``: "surpasses linear probing in average accuracy", 2.2 points, EVP's own
  margin over the probe (arXiv 2212.10556), which ACAVP claims to exceed. Redesigned: the suite
  had a label permutation that the official frequency label map undoes and a shift outside the
  prompt's reach; ACAVP now runs with that map (``label_map="frequency"``) on the tasks within
  reach (quick: geo, both, perm), and the others are reported as negative controls.
- ``augmentation_helps``: "up to 12 points" is the largest over 12 datasets; each method's
  average gain is registered at a quarter of it, 3 points. Redesigned: TrivialAugment's 10 px
  translation is stated at 224 px and is scaled to the canvas (1.4 px, not 31 % of the width),
  and the low-data runs train twice the suite's steps (``ta_steps``), long enough for the
  un-augmented prompt to fit its 50 images.
- ``overfitting_grows``: 2 points of train-test gap per 10 px of frame.
- ``robustness``: "superior robustness", made strict: the probe's relative drop minus ACAVP's
  above 0 by 2 SE (it was non-inferiority at 1 SE), 1 point registered. Quick, 8 sources:
  1.78 +- 0.93 (seed 0), -0.27 +- 1.00 (seed 1), 1.46 +- 1.03 (seed 2) points, inconclusive
  (power 0.18; about 56 sources for 0.8 at this SE), so full runs 64 (``robust_sources``).
  ``affine_does_nothing`` (the affine matrix the identity, only the colour gain acting; issue
  44) is declared and caught as a mutant of a claim that does not reproduce: at quick, seed 0,
  it moves the gap from 1.78 +- 0.93 to 4.75 +- 1.33 points (3.2 SE) and flips the rule, in
  the direction that makes ACAVP look more robust: without the shrink the prompt keeps the
  source's geometry and drops less under the shifts. Tried and not kept: the tasks within
  reach with the frequency map (as ``vs_linear_probe``) gave -1.82 +- 1.16 and the mutant
  moved it by 0.15 SE (the per-pixel gain reaches what the shrink does on these digits).
- ``inference_overhead``: redesigned: a prompt's cost over a 15k-parameter toy CNN's is the
  wrong quantity, so the prompt is costed at the paper's 224 px against the paper's backbones
  (CLIP ViT-B/32, ResNet-50) by layer-by-layer counts (:func:`vit_macs`,
  :func:`resnet50_macs`), its time against the least time those FLOPs take at this CPU's matmul
  rate; bounds, two-valued. An exact rule makes it strict: each added image costs one bilinear
  warp plus elementwise work (XLA's count, 1.09 warps), which the ``redundant_warps`` mutant
  (8 warps) fails.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import spearmanr

from _core.streams import substream_seed
from dynamics import acavp as A
from paper_checks import (
    Measurement,
    at_most,
    claim,
    computed,
    holds,
    measure,
    memo,
    paired_gap,
    record,
    shared,
    sizes,
    unit,
    within,
    wrap,
)

PAPER = "Enomoto 2025 (ACAVP, NeurIPS 2025, arXiv 2510.07823)"
VP = ("pad", "evp", "acavp")
SUITE = ("lp", *VP)
PAPER_TA_GAIN = 12.0  # percentage points, "up to" (abstract)
# The paper's effects where its body (tables) could not be read (docs/papers/acavp.md): the smallest
# effect its wording asserts at this size, in the rule's units (module docstring says why each).
PAPER_SOTA_GAIN = 1.0  # points on the suite average over the best additive prompt
PAPER_LP_GAIN = 2.2  # points: EVP's own margin over linear probing (arXiv 2212.10556, abstract)
PAPER_TA_AVG_GAIN = PAPER_TA_GAIN / 4  # points per method: a quarter of the largest
PAPER_OVERFIT_SLOPE = 2.0  # points of train-test gap per 10 px of frame
PAPER_ROBUST_GAIN = 1.0  # points of relative drop, probe - ACAVP

SIZES = sizes(
    smoke=dict(pretrain=60, steps=8, batch=8, seeds=2, lrs=(0.03,), tasks=("geo", "perm"),
               reach=("geo", "perm"), ta_tasks=("geo",), ta_steps=8, n_low=3, widths=(2, 8),
               sources=2, robust_sources=2, source_seeds=2, bench_batch=2),
    quick=dict(pretrain=800, steps=80, batch=16, seeds=4, lrs=(0.01, 0.1),
               tasks=("geo", "perm", "colour_bg"), reach=("geo", "both", "perm"),
               ta_tasks=("both",), ta_steps=160, n_low=5, widths=(2, 4, 8, 12), sources=8,
               robust_sources=8, source_seeds=4, bench_batch=8),
    full=dict(pretrain=1500, steps=300, batch=32, seeds=8, lrs=(0.01, 0.03, 0.1),
              tasks=tuple(A.TASKS), reach=("geo", "colour", "both", "perm"),
              ta_tasks=("geo", "colour", "both", "colour_bg"), ta_steps=600, n_low=10,
              widths=(2, 4, 8, 12), sources=8, robust_sources=64, source_seeds=8,
              bench_batch=8),
)  # fmt: skip
# quick: 4 prompt seeds on the suite and TrivialAugment runs (8 until this revision, when
# overfitting_grows and robustness still read them; they now pool the 8 sources): at seeds 0-2
# the suite's gaps stay 9-29 SE from zero (ACAVP - EVP 12.5 +- 0.8, 9.5 +- 1.0, 17.6 +- 0.6
# points; README) and every TrivialAugment gain is negative, and the runs now share the
# 8-replica compiled programs of the source runs.


@memo
def source_model(steps, seed):
    """The frozen source CNN of ``seed`` and its source test accuracy."""
    return A.pretrain(seed, steps=steps, lr=3e-3)


@memo
def _task(name, seed):
    return A.target_task(name, seed)


@memo
def run(method, task, pretrain, steps, batch, seeds, lrs, seed, n_low=None, augment=False,
        width=4, label_map="first_k", shifted=True):  # fmt: skip
    """One method on one task (all seeds and learning rates of the grid): an AdaptResult
    (``shifted=False``: without the shifted test sets, for a claim that never reads them)."""
    cnn, _ = shared(source_model, pretrain, seed)
    kw = dict(width=width) if method == "pad" else {}
    return A.adapt(cnn, method, _task(task, seed), seeds=seeds, lrs=lrs, steps=steps, batch=batch,
                   n_per_class=n_low, augment=augment, seed=seed, label_map=label_map,
                   shifted=shifted, **kw)  # fmt: skip


def run_args(size):
    return size.pretrain, size.steps, size.batch, size.seeds, tuple(size.lrs)


def suite_specs(methods):
    return lambda size, seed: [(m, t, *run_args(size), seed) for m in methods for t in size.tasks]


def _ta_args(size):
    """Run arguments of the low-data TrivialAugment runs: ``ta_steps`` steps, long enough for
    augmentation to regularise (the un-augmented prompt fits its 10 n_low images)."""
    return size.pretrain, size.ta_steps, size.batch, size.seeds, tuple(size.lrs)


def _ta_specs(size, seed):
    return [
        (m, t, *_ta_args(size), seed, size.n_low, aug)
        for m in VP
        for aug in (True, False)
        for t in size.ta_tasks
    ]


def _flm_specs(size, seed):
    """ACAVP with EVP's frequency label map (the official ``--evp_output_mapping``) on the tasks
    within the prompt's reach."""
    return [("acavp", t, *run_args(size), seed, None, False, 4, "frequency") for t in size.reach]


def _vs_lp_specs(size, seed):
    """The suite's probe and ACAVP runs (the controls), the probe on every task within reach and
    ACAVP with the frequency map there."""
    probe = [("lp", t, *run_args(size), seed) for t in size.reach if t not in size.tasks]
    return suite_specs(("lp", "acavp"))(size, seed) + probe + _flm_specs(size, seed)


def _source_args(size, j, seed):
    """Run arguments on the ``j``-th of ``sources`` independent settings: its own source CNN,
    task draws and subsets (run seed ``substream_seed(seed, j)``), ``source_seeds`` prompt seeds."""
    return (size.pretrain, size.steps, size.batch, size.source_seeds, tuple(size.lrs),
            substream_seed(seed, j))  # fmt: skip


_NO_SHIFT = ("first_k", False)  # run's label_map and shifted: the first-k map, no shifted sets


def _width_specs(size, seed):
    """The padding prompt per frame width in the low-data regime, on each source setting
    (scored without the shifted test sets: only the train-test gap is read)."""
    return [
        ("pad", size.ta_tasks[0], *_source_args(size, j, seed), size.n_low, False, w, *_NO_SHIFT)
        for j in range(size.sources)
        for w in size.widths
    ]


def _robust_specs(size, seed):
    """The linear probe and ACAVP on the size's tasks (full data), on each of ``robust_sources``
    source settings (the first ``sources`` shared with :func:`_width_specs`)."""
    return [
        (m, t, *_source_args(size, j, seed))
        for j in range(size.robust_sources)
        for m in ("lp", "acavp")
        for t in size.tasks
    ]


def plan(specs):
    """A claim's ``replicates``: each run of ``specs`` a unit, shared with the other claims,
    that needs its source CNN (pre-trained once for all the runs on it)."""
    return lambda size, seed: [
        unit(run, *spec, needs=[unit(source_model, spec[2], spec[7])])  # (pretrain, run seed)
        for spec in specs(size, seed)
    ]


def suite(size, seed, methods=SUITE):
    """Full-data runs of ``methods`` on the size's tasks: ``{method: {task: AdaptResult}}``."""
    return {m: {t: computed(run, m, t, *run_args(size), seed) for t in size.tasks} for m in methods}


def _avg(res, field="test"):
    """Per-seed suite average (percent) of a ``{task: AdaptResult}``."""
    return 100.0 * np.mean([getattr(r, field) for r in res.values()], axis=0)


def _per_task(res):
    return {t: round(float(100 * r.test.mean()), 1) for t, r in res.items()}


def _frozen(*results):
    return all(r.frozen_identical for res in results for r in res.values())


@claim(
    "acavp.beats_additive_vp",
    paper=PAPER,
    statement="Among visual-prompting methods, ACAVP (affine + colour + additive) has the highest "
    "average accuracy over the task suite: above the padding prompt (Bahng et al.) and EVP, "
    "paired over seeds.",
    where="abstract ('state-of-the-art among VP methods'); docs/papers/acavp.md A5, criterion P3",
    sizes=SIZES,
    replicates=plan(suite_specs(VP)),
    mutants=[
        wrap(
            "nn.acavp.ACAVPPrompt.params",
            lambda f: lambda self: (*jax.lax.stop_gradient(f(self)[:5]), f(self)[5]),
            "affine and colour parameters detached from the graph (a stray stop_gradient): only "
            "the additive prompt learns, on the fixed initial shrink",
            name="only_additive_learns",
        )
    ],
)
def _beats_additive_vp(size, seed) -> Measurement:
    s = suite(size, seed, VP)
    acc = {m: _avg(s[m]) for m in VP}
    return measure(
        paired_gap(
            acc["acavp"],
            acc["pad"],
            n_se=2.0,
            name="ACAVP - padding prompt (points)",
            paper=PAPER_SOTA_GAIN,
        ),
        paired_gap(
            acc["acavp"], acc["evp"], n_se=2.0, name="ACAVP - EVP (points)", paper=PAPER_SOTA_GAIN
        ),  # fmt: skip
        holds(
            _frozen(*s.values()),
            name="backbone bit-identical",
            rule="every adapted model's backbone equals the pre-trained one bit for bit",
        ),
        extra={f"{m} per task (%)": _per_task(s[m]) for m in VP}
        | {"suite mean (%)": {m: float(acc[m].mean()) for m in VP}},
        detail=f"tasks {', '.join(size.tasks)}; {size.seeds} seeds, {size.steps} Adam steps, "
        f"batch {size.batch}, lr grid {tuple(size.lrs)} per method and task; seed {seed}",
    )


@claim(
    "acavp.vs_linear_probe",
    paper=PAPER,
    statement="ACAVP, with the official frequency label mapping, surpasses linear probing in "
    "average accuracy over the tasks within the prompt's reach (geometry, tint, a label "
    "permutation, which the frequency map undoes); tasks outside it are reported as negative "
    "controls.",
    where="abstract ('surpasses linear probing in average accuracy'); official code "
    "--evp_output_mapping (docs/papers/acavp.md); docs/papers/acavp.md A6, criterion P4",
    sizes=SIZES,
    replicates=plan(_vs_lp_specs),
    mutants=[
        wrap(
            "nn.acavp.acavp_transform",
            lambda f: (
                lambda x, theta, scale, shear, translate, gain, additive, **kw: f(
                    x, theta, scale, shear, translate, 1.0, additive, **kw
                )
            ),
            "colour gain computed but never applied",
            name="no_colour_gain",
        ),
        wrap(
            "nn.acavp.frequency_label_map",
            lambda f: lambda source_pred, target, n_target, n_source: np.arange(n_target),
            "the frequency map computed but the first-k map used",
            name="first_k_instead",
        ),
    ],
)
def _vs_linear_probe(size, seed) -> Measurement:
    s = suite(size, seed, ("lp", "acavp"))
    specs = zip(size.reach, _flm_specs(size, seed), strict=True)
    flm = {t: computed(run, *spec) for t, spec in specs}
    lp = {t: computed(run, "lp", t, *run_args(size), seed) for t in size.reach}
    a, b = _avg(flm), _avg(lp)
    controls = [t for t in size.tasks if t not in size.reach]
    return measure(
        paired_gap(a, b, n_se=2.0, name="ACAVP - linear probe (points)", paper=PAPER_LP_GAIN),
        extra={
            "ACAVP (frequency map) per task (%)": _per_task(flm),
            "LP per task (%)": _per_task(lp),
            "negative controls, ACAVP (first-k) / LP (%)": {
                t: [round(float(100 * s[m][t].test.mean()), 1) for m in ("acavp", "lp")]
                for t in controls
            },
            "mean ACAVP / LP (%)": [float(a.mean()), float(b.mean())],
        },
        detail=f"tasks {', '.join(size.reach)} (controls outside the prompt's reach: "
        f"{', '.join(controls) or 'none'}); {size.seeds} seeds, same steps and lr grid; paper's "
        f"effect {PAPER_LP_GAIN} points (EVP's margin over LP); seed {seed}",
    )


@claim(
    "acavp.augmentation_helps",
    paper=PAPER,
    statement="In the low-data regime TrivialAugment (standard space, its translation scaled to "
    "the canvas as 10 px are to the paper's 224) raises the average accuracy of every "
    "visual-prompting method (padding prompt, EVP, ACAVP); the largest per-task gain is reported "
    "beside the paper's 'up to 12 points'.",
    where="abstract ('TrivialAugment ... up to 12 percentage points'); docs/papers/acavp.md A4, P6",
    sizes=SIZES,
    replicates=plan(_ta_specs),
    recorded=record(
        quick="not reproduced",
        reason="quick, seed 0: with the translation scaled to the canvas and 160 steps, "
        "TrivialAugment still lowers every VP method's low-data accuracy, each rule failing "
        "with power 0.84-1.00 to see a 3-point gain",
    ),
    mutants=[
        wrap(
            "dynamics.acavp.pipeline.trivial_augment",
            lambda f: lambda images, key, **kw: images,
            "augmented batch computed but the un-augmented one trained on",
            name="augmentation_dropped",
        )
    ],
)
def _augmentation_helps(size, seed) -> Measurement:
    rules, gains, best = [], {}, (-np.inf, "")
    for m in VP:
        on, off = (
            {t: computed(run, m, t, *_ta_args(size), seed, size.n_low, aug) for t in size.ta_tasks}
            for aug in (True, False)
        )
        rules.append(
            paired_gap(
                _avg(on),
                _avg(off),
                n_se=2.0,
                name=f"{m}: TA - no TA (points)",
                paper=PAPER_TA_AVG_GAIN,
            )  # fmt: skip
        )
        for t in size.ta_tasks:
            g = float(100 * (on[t].test.mean() - off[t].test.mean()))
            gains[f"{m} {t}"] = round(g, 1)
            best = max(best, (g, f"{m} {t}"))
    return measure(
        *rules,
        extra={
            "gain per method and task (points)": gains,
            "largest gain (points) vs paper's 'up to'": [best[0], PAPER_TA_GAIN],
            "largest gain at": best[1],
        },  # fmt: skip
        detail=f"{size.n_low} training images per class (each seed its own subset), tasks "
        f"{', '.join(size.ta_tasks)}, {size.ta_steps} Adam steps; TrivialAugment's translation "
        f"scaled to the canvas ({10 * 32 / A.TA_SIDE:.2f} px); {size.seeds} seeds; paper's "
        f"effect {PAPER_TA_AVG_GAIN:g} points per method; seed {seed}",
    )


@claim(
    "acavp.overfitting_grows",
    paper=PAPER,
    statement="Additive prompts overfit more as they grow: in the low-data regime the padding "
    "prompt's train-test accuracy gap grows with the frame width (least-squares slope over the "
    "widths, positive by 2 SE over independent source models and task draws).",
    where="abstract ('overfitting when prompt parameters increase'); docs/papers/acavp.md A1/A2, "
    "P5",
    sizes=SIZES,
    replicates=plan(_width_specs),
    mutants=[
        wrap(
            "nn.acavp.frame_mask",
            lambda f: lambda shape, width: f(shape, 2),
            "frame width ignored (always 2 px)",
            name="width_ignored",
        )
    ],
)
def _overfitting_grows(size, seed) -> Measurement:
    res = [computed(run, *spec) for spec in _width_specs(size, seed)]  # sources x widths
    shape = (size.sources, len(size.widths))
    # each source's mean train-test gap and test accuracy over its replicates, per width
    gap = np.reshape([100.0 * np.mean(r.train - r.test) for r in res], shape)
    test = np.reshape([100.0 * np.mean(r.test) for r in res], shape).mean(axis=0)
    slope = np.polyfit(np.asarray(size.widths, float), gap.T, 1)[0] * 10.0  # points per 10 px
    means = gap.mean(axis=0)
    rho = float(spearmanr(size.widths, means).statistic) if np.ptp(means) > 0 else 0.0
    return measure(
        paired_gap(
            slope,
            np.zeros_like(slope),
            n_se=2.0,
            name="slope of the train-test gap (points per 10 px of frame)",
            paper=PAPER_OVERFIT_SLOPE,
        ),  # fmt: skip
        extra={
            "train-test gap per width (points)": dict(
                zip(map(str, size.widths), map(float, means), strict=True)
            ),
            "test accuracy per width (%)": dict(
                zip(map(str, size.widths), map(float, test), strict=True)
            ),
            "slope per source (points per 10 px)": [round(float(v), 2) for v in slope],
            "Spearman(width, gap)": rho,
        },
        detail=f"task {size.ta_tasks[0]}, {size.n_low} images per class, no augmentation; "
        f"{size.sources} source CNNs and task draws x {size.source_seeds} prompt seeds, SE "
        f"over the sources; seed {seed}",
    )


def _drop(res):
    """Per-seed relative drop (percent) of the suite-average accuracy under each shift, averaged
    over the shifts: ``1 - mean_tasks(acc_shift) / mean_tasks(acc_clean)``."""
    clean = np.mean([r.test for r in res.values()], axis=0)
    shifted = [np.mean([r.shifted[s] for r in res.values()], axis=0) for s in A.SHIFTS]
    return 100.0 * np.mean([1.0 - v / np.maximum(clean, 1e-9) for v in shifted], axis=0)


@claim(
    "acavp.robustness",
    paper=PAPER,
    statement="ACAVP is more robust to shifted test sets (pixel noise, darkening, extra "
    "translation; never trained on) than linear probing: its relative accuracy drop is smaller "
    "than the probe's by more than 2 SE over independent source models and task draws.",
    where="abstract ('superior robustness to distribution shifts'); docs/papers/acavp.md A7, "
    "criterion P7 (made strict: superior, not non-inferior)",
    sizes=SIZES,
    replicates=plan(_robust_specs),
    recorded=record(
        quick="inconclusive",
        reason="quick, seed 0: drop LP - drop ACAVP 1.78 +- 0.93 points over 8 sources (1.9 "
        "SE; power 0.18): a 1-point effect needs about 56 sources for power 0.8 at this SE, "
        "more than quick's share; full runs 64 (robust_sources)",
    ),
    mutants=[
        wrap(
            "nn.acavp.warp_affine",
            lambda f: (
                lambda x, matrix, order=1, inverse=False: f(
                    x, matrix, order=order, inverse=not inverse
                )
            ),
            "the prompt's warp applies the inverse map (a shrink to 0.73 becomes a zoom by 1.37)",
            name="inverted_warp",
        ),
        wrap(
            "nn.acavp.affine_matrix",
            lambda f: lambda theta, scale, shear, translate, **kw: jnp.eye(3),
            "the affine stage does nothing (its matrix the identity: no shrink, so no prompt "
            "region; only the colour gain acts)",
            name="affine_does_nothing",
        ),
    ],
)
def _robustness(size, seed) -> Measurement:
    res = [computed(run, *spec) for spec in _robust_specs(size, seed)]  # sources x methods x tasks
    per = len(size.tasks)
    # each source's drop per method, averaged over its prompt seeds
    drops = np.reshape(
        [_drop(dict(enumerate(res[i : i + per]))).mean() for i in range(0, len(res), per)],
        (size.robust_sources, 2),
    )
    return measure(
        paired_gap(
            drops[:, 0],
            drops[:, 1],
            n_se=2.0,
            name="drop LP - drop ACAVP (points)",
            paper=PAPER_ROBUST_GAIN,
        ),  # fmt: skip
        extra={
            "relative drop per method (%)": dict(
                zip(("lp", "acavp"), map(float, drops.mean(axis=0)), strict=True)
            ),
            "drop LP - drop ACAVP per source (points)": [
                round(float(v), 2) for v in drops[:, 0] - drops[:, 1]
            ],
        },
        detail=f"tasks {', '.join(size.tasks)}, shifts {', '.join(A.SHIFTS)}; "
        f"{size.robust_sources} source CNNs and task draws x {size.source_seeds} prompt seeds, "
        f"SE over the sources; paper's effect {PAPER_ROBUST_GAIN:g} point; seed {seed}",
    )


def _flops(f, *args):
    cost = jax.jit(f).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    return float(cost.get("flops", np.nan))


def _seconds(f, *args, repeats=20):
    g = jax.jit(f)
    jax.block_until_ready(g(*args))
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(repeats):
            out = g(*args)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / repeats)
    return best


def resnet50_macs(side: int = 224, n_classes: int = 1000) -> int:
    """Multiply-accumulates of ResNet-50 (He et al. 2016, Table 1; torchvision's v1.5, stride in
    the 3x3 convolution) on one ``side`` x ``side`` RGB image: convolutions and the classifier
    (derived here by counting each layer, ``out_pixels x k^2 x c_in x c_out``; 4.089e9 at 224,
    torchvision's published 4.09 GFLOPS, checked in ``tests/paper_checks/test_acavp.py``)."""
    res = side // 2
    macs = res * res * 7 * 7 * 3 * 64  # stem, stride 2
    res, cin = res // 2, 64  # max pool, stride 2
    for blocks, mid, out, stride in ((3, 64, 256, 1), (4, 128, 512, 2), (6, 256, 1024, 2),
                                     (3, 512, 2048, 2)):  # fmt: skip
        for b in range(blocks):
            ro = res // (stride if b == 0 else 1)
            macs += res * res * cin * mid + ro * ro * 9 * mid * mid + ro * ro * mid * out
            macs += ro * ro * cin * out if b == 0 else 0  # projection shortcut
            cin, res = out, ro
    return macs + 2048 * n_classes


def vit_macs(side: int = 224, patch: int = 32, d: int = 768, layers: int = 12, mlp: int = 3072,
             out: int = 512) -> int:  # fmt: skip
    """Multiply-accumulates of a ViT image encoder (Dosovitskiy et al. 2021; CLIP ViT-B/32 by
    default, Radford et al. 2021) on one image: patch embedding, per layer the QKV, score,
    value, output and MLP products on ``n = (side/patch)^2 + 1`` tokens, and the output
    projection (derived here; 4.409e9 at 224, timm's published 4.41 GMACs for ViT-B/32,
    checked in ``tests/paper_checks/test_acavp.py``)."""
    n = (side // patch) ** 2 + 1
    per_layer = 4 * n * d * d + 2 * n * n * d + 2 * n * d * mlp
    return (n - 1) * 3 * patch * patch * d + layers * per_layer + d * out


#: the paper's backbones (docs/papers/acavp.md: CLIP ViT-B/32, and ResNet-50 of the code's
#: torchvision models), FLOPs per 224 px image (two per multiply-accumulate, as XLA counts a
#: product)
BACKBONES = {"CLIP ViT-B/32": 2 * vit_macs(), "ResNet-50": 2 * resnet50_macs()}
SIDE = 224


def _reference_warp(x, sx, sy):
    """One bilinear resampling of every channel image of ``x`` on one grid (the unit the
    prompt's cost is counted in): ``jax.scipy.ndimage.map_coordinates`` as
    :func:`nn.acavp.warp_affine` calls it."""
    h, w = x.shape[-2:]

    def one(img):
        return jax.scipy.ndimage.map_coordinates(img, [sy, sx], order=1, mode="constant", cval=0.0)

    return jax.vmap(one)(x.reshape(-1, h, w))


@memo
def overhead(batch, seed):
    """XLA-counted FLOPs of ACAVP's prompt at the paper's 224 px, in absolute terms and per
    added image (batch ``2 batch`` less ``batch``) against a bilinear resampling's per added
    image (the sampling grid and weights shared by the batch in both); its best-of-3 wall
    time; and this CPU's dense float32 matmul rate (best of 3), at which the backbones' exact
    counts give the least time they can take."""
    prompt = A.build("acavp", _shape_only_backbone(), key=jax.random.key(seed),
                     shape=(3, SIDE, SIDE)).prompt  # fmt: skip
    x = jax.random.uniform(jax.random.key(seed + 1), (batch, 3, SIDE, SIDE), jnp.float32)
    p_flat, p_def = jax.tree.flatten(prompt)

    def prompt_fn(x):
        return jax.tree.unflatten(p_def, p_flat)(x)

    yy, xx = jnp.meshgrid(*(jnp.arange(SIDE, dtype=jnp.float32),) * 2, indexing="ij")
    sx, sy = 0.9 * xx, 0.9 * yy
    warp = _flops(_reference_warp, x[:2], sx, sy) - _flops(_reference_warp, x[:1], sx, sy)
    twice = _flops(prompt_fn, jnp.concatenate([x, x]))
    m = jax.random.normal(jax.random.key(seed + 2), (1024, 1024), jnp.float32)
    mm = _seconds(lambda a: a @ a, m, repeats=5)
    flops = _flops(prompt_fn, x)
    return dict(flops=flops, per_image=(twice - flops) / batch, warp=warp,
                seconds=_seconds(prompt_fn, x), matmul_rate=2 * 1024**3 / mm)  # fmt: skip


def _shape_only_backbone():
    """A SmallCNN for :func:`dynamics.acavp.build` (the prompt does not read it)."""
    from nn.acavp import SmallCNN

    return SmallCNN((2,), key=jax.random.key(0))


@claim(
    "acavp.inference_overhead",
    paper=PAPER,
    statement="ACAVP adds little inference cost to the paper's backbones: at 224 px its prompt's "
    "FLOPs are under 5 % of CLIP ViT-B/32's and ResNet-50's, and its wall time under 10 % of "
    "the least time their FLOPs take at this CPU's matmul rate; and each image costs what the "
    "mechanism needs, one bilinear warp plus elementwise work under a quarter of one (the "
    "mask's warp is shared by the batch).",
    where="abstract ('minimal inference overhead'); docs/papers/acavp.md A8, criterion P8, "
    "Sec. 3 (backbones)",
    sizes=SIZES,
    mutants=[
        wrap(
            "nn.acavp.warp_affine",
            lambda f: (
                lambda x, matrix, **kw: f(jnp.repeat(x, 8, axis=-3), matrix, **kw)[
                    ..., : x.shape[-3], :, :
                ]
            ),
            "every channel warped eight times (a broadcast slip)",
            name="redundant_warps",
        )
    ],
)
def _inference_overhead(size, seed) -> Measurement:
    o = overhead(size.bench_batch, seed)
    b = size.bench_batch
    fr = {k: o["flops"] / (b * v) for k, v in BACKBONES.items()}
    tr = {k: o["seconds"] / (b * v / o["matmul_rate"]) for k, v in BACKBONES.items()}
    return measure(
        at_most(fr, 0.05, name="FLOPs prompt / backbone"),
        at_most(tr, 0.10, name="time prompt / least backbone time"),
        within(o["per_image"] / o["warp"], 1.25, 0.25, name="prompt FLOPs per image in warps"),
        extra={
            "prompt FLOPs per image": o["flops"] / b,
            "backbone FLOPs per image (exact counts)": BACKBONES,
            "prompt seconds per image": o["seconds"] / b,
            "matmul rate (FLOP/s)": o["matmul_rate"],
        },
        detail=f"{SIDE} px, batch {b}; XLA cost analysis for the prompt, layer-by-layer counts "
        "for the backbones; best-of-3 wall time on this CPU, the backbones' least time being "
        f"their FLOPs at the float32 1024^3 matmul rate (so the time ratio is an upper bound); "
        f"seed {seed}",
    )
