"""Claims of Hao et al., *MixPrompt: Efficient Mixed Prompting for Multimodal Semantic
Segmentation* (NeurIPS 2025, OpenReview jt9iMeQQvM), at CPU scale (``docs/papers/mixprompt.md``).

A small hierarchical RGB backbone (:class:`nn.mixprompt.Backbone`, channels (16, 32, 64), depths
(1, 1, 4)) is pretrained on an RGB-only source task and frozen; every method then trains on the
synthetic RGB-D target task of :mod:`dynamics.mixprompt` (16 x 16 scenes: near and far boxes
that look alike, camouflaged boxes, disks; depth through a noisy sensor with holes) with the same
steps, batch, AdamW weight decay and learning-rate grid, the rate chosen per method on
validation. Gains are in mIoU as a fraction (the paper's points / 100; :data:`PAPER_GAIN`).

- ``mixprompt.uses_depth``: MixPrompt is well above RGB-only (frozen and fine-tuned) and closes
  most of the gap to two-branch fusion. A premise of this setting (depth carries the task by
  construction), not a number of the paper: two-valued.
- ``mixprompt.vs_two_branch``: MixPrompt beats two-branch fusion at about half its parameters,
  with the backbone bit-identical after training. Redesigned (issue 44): the backbone is
  pretrained 2400 steps on 2048 source scenes (source-task test mIoU 0.84 at seed 0, against
  0.66 after the former 200 steps on 512, and 0.72-0.73 after 600-1200 steps on 512), and every
  method picks its rate from the grid (1e-3, 3e-3, 1e-2) on validation (one rate, 3e-3, before).
  Paper's effect: +2.7 points (mean of its RGB-D gains, NYU +4.3 and SUN +1.1), paired over 5
  seeds at quick.
- ``mixprompt.mixing_gain``, ``mixprompt.extractor_gain``, ``mixprompt.vs_dplnet``: the paper's
  gains of the mixing matrix (+0.8), of the pretrained extractor initialisation (+1.3) and over
  the DPLNet-style prompt (+1.9). Redesigned for power: each pair of runs shares its data,
  initialisation of the shared parts and batches (common random numbers), and is paired at every
  (seed, learning rate) of the grid, 15 pairs at quick, 48 at full, where the former design
  paired 5 (+0.4 +- 0.5 and +1.4 +- 0.9 points at quick, power about 0.3 to see the paper's
  gains). Where quick cannot resolve a gain, the row is inconclusive with the pairs it needs;
  full (16 seeds x 3 rates) has them. Every model is float32 (the backbone's dtype; float64
  before: 1.8-3x slower on CPU) and the three MixPrompt variants train as one compiled program
  (:func:`dynamics.mixprompt.adapt_group`; no mixing is ``Omega = I`` held at rate 0), which
  cut the area from 661 to 400 CPU-s at quick (issue 46). Measured at quick, seeds 0-1 (float32;
  seed 2 not yet re-run): mixing +0.06 +- 0.5, +0.6 +- 0.5 points (power 0.32, 0.32),
  extractor -1.6 +- 0.7, +0.4 +- 0.9 (power 0.42, 0.30), inconclusive; over DPLNet +0.8 +- 0.7
  (power 0.74, inconclusive) and +3.8 +- 0.7 (reproduced): seed-dependent. In float64 seeds 0-2 gave
  mixing +1.2, -0.4, +0.6, extractor +0.55, -0.4, +0.8 and over DPLNet +3.5, +2.9, +2.5
  (reproduced): with the float32 backbone (source mIoU 0.85) the DPLNet gap shrank below
  quick's power at seed 0. ``uses_depth`` reproduces. ``vs_two_branch``: -10.9 +- 1.3 and
  -1.4 +- 1.6 points at seeds 0-1, power 0.54 and 0.38, inconclusive (float64: -5.1, -9.4,
  -8.1, inconclusive at seeds 0-1 and not reproduced at seed 2, power 0.83): its 5 seeds sit
  near the power threshold, so the verdict at quick may follow the seed; about 10-15 seeds
  would settle it, at two to three times the area's time, and full (16) has them.
- ``mixprompt.mixing_identity``: the sub-space split / merge round trip is exact and the adapter
  with ``Omega = I`` is DPLNet's down-add-up (+ LayerNorm);
- ``mixprompt.param_formula``: the closed-form counts of :mod:`theory.mixprompt` equal the
  counted parameters, and at MiT-B5 scale give the paper's 5.7M / 5.5M / 5.4M (two-valued:
  exact counts).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import nn
from _core.streams import substream_seed
from dynamics import mixprompt as D
from nn import mixprompt as M
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
    within,
    wrap,
)
from theory import mixprompt as TM

PAPER = "Hao et al. 2025, MixPrompt (NeurIPS 2025, OpenReview jt9iMeQQvM)"

SIZES = sizes(
    smoke=dict(  # no optimiser step: only the evaluation compiles
        seeds=2,
        steps=0,
        batch=8,
        n_train=16,
        n_val=8,
        n_test=8,
        pre_n=16,
        pre_steps=0,
        lrs=(3e-3,),
    ),
    quick=dict(
        seeds=5,
        steps=200,
        batch=16,
        n_train=400,
        n_val=100,
        n_test=200,
        pre_n=2048,
        pre_steps=2400,
        lrs=(1e-3, 3e-3, 1e-2),
    ),
    full=dict(  # seeds: enough for the ablations' paper gains (the quick rows' `resolve`)
        seeds=16,
        steps=600,
        batch=16,
        n_train=1500,
        n_val=200,
        n_test=500,
        pre_n=4096,
        pre_steps=4800,
        lrs=(1e-3, 3e-3, 1e-2),
    ),
)
SIZE = 16  # image side
#: the paper's gains in this package's units (mIoU as a fraction): MixPrompt over two-branch
#: fusion on its RGB-D benchmarks (NYU +4.3 over CMX-B5, SUN +1.1; Table 1), their mean; the
#: mixing matrix on RGB (Table 3c, 60.1 vs 59.3), the pretrained extractor (Table 3a, 60.1 vs
#: 58.8) and over DPLNet (Table 1, NYU 61.2 vs 59.3)
PAPER_GAIN = dict(two_branch=0.027, mixing=0.008, extractor=0.013, dplnet=0.019)


@memo
def pretrained(pre_n: int, pre_steps: int, seed: int):
    """``(backbone, source mIoU)`` pretrained on the RGB-only source task."""
    return D.pretrain_backbone(size=SIZE, n_train=pre_n, steps=pre_steps, seed=seed)


@memo
def datasets(seeds: int, n_train: int, n_val: int, n_test: int, seed: int):
    return [
        D.target_data(n_train, n_val, n_test, SIZE, seed=substream_seed(seed, s))
        for s in range(seeds)
    ]


def _group(method: str) -> tuple:
    """The methods trained together with ``method`` (:data:`dynamics.mixprompt.GROUPS`: the
    MixPrompt variants share one compiled program), or ``(method,)``."""
    return next((g for g in D.GROUPS if method in g), (method,))


def run(method: str, size, seed: int) -> D.AdaptResult:
    """:func:`dynamics.mixprompt.adapt` of ``method`` at the claim ``size``: computed (memoised,
    with the methods of its group), or read from the cluster's task."""
    return computed(_run, _group(method), size.scale, seed)[method]


def plan(*methods):
    """A claim's ``replicates``: the run of each of ``methods``' groups a unit, shared with the
    others, that needs the pre-trained backbone (trained once for all the runs)."""
    groups = list(dict.fromkeys(_group(m) for m in methods))
    return lambda size, seed: [
        unit(_run, g, size.scale, seed, needs=[unit(pretrained, size.pre_n, size.pre_steps, seed)])
        for g in groups
    ]


@memo
def _run(methods: tuple, scale: str, seed: int) -> dict[str, D.AdaptResult]:
    size = SIZES[scale]
    bb, _ = shared(pretrained, size.pre_n, size.pre_steps, seed)
    data = datasets(size.seeds, size.n_train, size.n_val, size.n_test, seed)
    return D.adapt_group(
        methods, bb, data, lrs=tuple(size.lrs), steps=size.steps, batch=size.batch, seed=seed
    )


def _setting(size, seed):
    return (
        f"{SIZE}x{SIZE} scenes, {size.n_train} train / {size.n_test} test per seed, "
        f"{size.seeds} seeds (seed {seed}), {size.steps} AdamW steps, batch {size.batch}, "
        f"lr grid {tuple(size.lrs)}; backbone pretrained {size.pre_steps} steps"
    )


# ----------------------------------------------------------------------------- depth is used
@claim(
    "mixprompt.uses_depth",
    paper=PAPER,
    statement="Prompting the frozen RGB backbone with depth uses the depth: MixPrompt's mIoU is "
    "well above RGB-only (frozen and fine-tuned; by > 10 points) and closes >= 70 % of the gap "
    "between frozen RGB-only and two-branch fusion (depth is where the task's information is).",
    where="Abstract (multimodal prompting of a frozen RGB model); docs/papers/mixprompt.md Q1",
    sizes=SIZES,
    replicates=plan("rgb_frozen", "rgb_finetune", "two_branch", "mixprompt"),
    mutants=[
        patch(
            "nn.mixprompt.inject",
            lambda x, p: x,
            "the prompt is computed but never added to the RGB tokens",
            name="no_injection",
        ),
        wrap(
            "dynamics.mixprompt.sensor.depth_sensor",
            lambda f: lambda depth, **kw: f(np.full_like(depth, 0.9), **kw),
            "the sensor returns a flat plane instead of the scene depth",
            name="flat_depth",
        ),
    ],
)
def _uses_depth(size, seed) -> Measurement:
    r = {m: run(m, size, seed).test_at_lr for m in ("rgb_frozen", "rgb_finetune", "two_branch")}
    mp = run("mixprompt", size, seed).test_at_lr
    closure = (mp - r["rgb_frozen"]).mean() / (r["two_branch"] - r["rgb_frozen"]).mean()
    return measure(
        paired_gap(mp, r["rgb_frozen"], n_se=3, margin=0.10, name="MixPrompt - RGB frozen"),
        paired_gap(mp, r["rgb_finetune"], n_se=2, margin=0.10, name="MixPrompt - RGB fine-tuned"),
        at_least(closure, 0.7, name="share of the RGB-to-two-branch gap closed"),
        extra={"mIoU": {k: float(v.mean()) for k, v in {**r, "mixprompt": mp}.items()}},
        detail=_setting(size, seed) + "; test mIoU at the validation-chosen lr",
    )


# --------------------------------------------------------------------------- vs two-branch
@claim(
    "mixprompt.vs_two_branch",
    paper=PAPER,
    statement="MixPrompt beats two-branch fusion, each at its validation-chosen rate (paired over "
    "seeds, > 0 at 2 SE; the paper's +0.4 to +4.3 mIoU) with about half its parameters (total "
    "<= 0.6x, trainable <= 0.25x); only the prompting module and the head train (the backbone "
    "is bit-identical after adaptation).",
    where="Abstract (+4.3/+1.1/+0.4/+1.1 mIoU with ~half the parameters); Table 1 (87.2M vs "
    "CMX-B5 181.1M); docs/papers/mixprompt.md Q2, Q5; paper's effect +2.7 points (the mean of "
    "its RGB-D gains, NYU +4.3 and SUN +1.1)",
    sizes=SIZES,
    replicates=plan("mixprompt", "two_branch"),
    recorded=record(
        quick="inconclusive",
        reason="MixPrompt - two-branch -10.9 +- 1.3, -1.4 +- 1.6 points over 5 seeds at seeds "
        "0-1 (float32, backbone source mIoU 0.85): power 0.54, 0.38 to see the paper's +2.7 "
        "at 2 SE (about 10-15 seeds needed; full has 16). In float64 seeds 0-2 gave -5.1, "
        "-9.4, -8.1 with power 0.51, 0.65, 0.83 (not reproduced at seed 2): the verdict at "
        "quick can follow the seed's SE.",
    ),
    mutants=[
        patch(
            "nn.mixprompt.MixPrompt.trainable_mask",
            lambda self: jax.tree.map(eqx.is_inexact_array, self),
            "the backbone is left trainable (mask not applied)",
            name="backbone_trainable",
        ),
    ],
)
def _vs_two_branch(size, seed) -> Measurement:
    mp, tb = run("mixprompt", size, seed), run("two_branch", size, seed)
    bb, source = pretrained(size.pre_n, size.pre_steps, seed)
    d = mp.test_at_lr - tb.test_at_lr
    se = d.std(ddof=1) / np.sqrt(d.size)
    ref = jax.tree.leaves(bb)
    same = all(
        all(
            bool(jnp.array_equal(a[r], b))
            for a, b in zip(jax.tree.leaves(mp.model.backbone), ref, strict=True)
        )
        for r in range(len(mp.test) * len(mp.lrs))
    )
    return measure(
        paired_gap(
            mp.test_at_lr,
            tb.test_at_lr,
            n_se=2,
            name="MixPrompt - two-branch",
            paper=PAPER_GAIN["two_branch"],
        ),
        at_most(mp.total / tb.total, 0.6, name="total parameter ratio"),
        at_most(mp.trainable / tb.trainable, 0.25, name="trainable parameter ratio"),
        holds(same, name="backbone bit-identical", rule="every replica's backbone == pretrained"),
        extra={
            "mIoU": {
                "mixprompt": float(mp.test_at_lr.mean()),
                "two_branch": float(tb.test_at_lr.mean()),
            },
            "Q2 (not judged): mean + 2 SE >= 0": float(d.mean() + 2 * se),
            "backbone's source-task test mIoU": source,
            "lr chosen on validation": {
                "mixprompt": mp.lrs[mp.lr_index],
                "two_branch": tb.lrs[tb.lr_index],
            },
            "params": {
                "mixprompt": [mp.trainable, mp.total],
                "two_branch": [tb.trainable, tb.total],
            },
            "paper total ratio (NYU, 87.2M / 181.1M)": 87.2 / 181.1,
        },
        detail=_setting(size, seed),
    )


# ------------------------------------------------------------------------------- ablations
def _gain(other: str, size, seed, name: str, paper_gain: float) -> Measurement:
    """MixPrompt against ``other`` trained with the same recipe: paired per (seed, learning
    rate) of the grid, every pair one replicate (same data, initialisation of the shared parts
    and batches: common random numbers); the gain is averaged over the grid's recipes. The
    common random numbers make an ablation that changes nothing give identical runs, which a
    two-valued rule rejects."""
    mp, ot = run("mixprompt", size, seed), run(other, size, seed)
    return measure(
        paired_gap(mp.test.ravel(), ot.test.ravel(), n_se=2, name=name, paper=paper_gain),
        holds(  # an ablation that silently changes nothing gives identical runs (same CRN)
            bool(np.any(mp.test != ot.test)),
            name="the ablated model trains differently",
            rule="some (seed, lr) pair's test mIoU differs",
        ),
        extra={
            "mIoU at each lr (mean over seeds)": {
                "mixprompt": mp.test.mean(0).tolist(),
                other: ot.test.mean(0).tolist(),
            },
            "gain at the validation-chosen lr (mean over seeds)": float(
                (mp.test_at_lr - ot.test_at_lr).mean()
            ),
        },
        detail=_setting(size, seed) + f"; paired per seed and lr, {other} the ablated model",
    )


@claim(
    "mixprompt.mixing_gain",
    paper=PAPER,
    statement="Mixing across the low-rank sub-spaces helps: MixPrompt beats the same module "
    "without the mixing matrix (paired per seed and lr of the grid, > 0 at 2 SE; paper +0.8 mIoU).",
    where="Table 3c, mixing placement on MFNet: none 59.3, RGB 60.1; docs/papers/mixprompt.md Q4",
    sizes=SIZES,
    replicates=plan("mixprompt", "mixprompt_nomix"),
    recorded=record(
        quick="inconclusive",
        reason="+0.06 +- 0.5, +0.6 +- 0.5 points over 15 (seed, lr) pairs at seeds 0-1 "
        "(float32), power 0.32 "
        "to see the paper's +0.8 at 2 SE, about 53 pairs needed (full: 48; float64 seeds 0-2: "
        "+1.2, -0.4, +0.6, power 0.17-0.66).",
    ),
    mutants=[
        patch(
            "nn.mixprompt.mix_subspaces",
            lambda u, omega: u,
            "the mixing matrix is never applied",
            name="mixing_skipped",
        ),
    ],
)
def _mixing_gain(size, seed) -> Measurement:
    return _gain("mixprompt_nomix", size, seed, "MixPrompt - no mixing", PAPER_GAIN["mixing"])


@claim(
    "mixprompt.extractor_gain",
    paper=PAPER,
    statement="Initialising the auxiliary extractor from the pretrained backbone's early layers "
    "helps: MixPrompt beats the same module with a random extractor (paired per seed and lr, "
    "> 0 at 2 SE; paper: w/o extractor 58.8 vs 60.1).",
    where="Table 3a ablation on MFNet (w/o prompt extractor 58.8 vs 60.1); abstract; "
    "docs/papers/mixprompt.md Q4",
    sizes=SIZES,
    replicates=plan("mixprompt", "mixprompt_random"),
    recorded=record(
        quick="inconclusive",
        reason="-1.6 +- 0.7, +0.4 +- 0.9 points over 15 (seed, lr) pairs at seeds 0-1 "
        "(float32), power 0.42, 0.30 "
        "to see the paper's +1.3 at 2 SE, about 38 pairs needed (full: 48; float64 seeds 0-2: "
        "+0.55, -0.4, +0.8, power 0.62-0.72).",
    ),
    mutants=[
        wrap(
            "nn.mixprompt.mixprompt",
            lambda f: lambda *a, **k: f(*a, **{**k, "extractor": "random"}),
            "the pretrained weights are never copied into the extractor",
            name="extractor_not_copied",
        ),
    ],
)
def _extractor_gain(size, seed) -> Measurement:
    return _gain(
        "mixprompt_random", size, seed, "MixPrompt - random extractor", PAPER_GAIN["extractor"]
    )


@claim(
    "mixprompt.vs_dplnet",
    paper=PAPER,
    statement="MixPrompt beats the DPLNet-style prompt (fresh depth stem, one sub-space, no "
    "mixing, no prompt LayerNorm) at a similar parameter count (paired per seed and lr, > 0 at "
    "2 SE; paper NYU 61.2 vs 59.3).",
    where="Table 1 (NYU: DPLNet 59.3, 88.58M; MixPrompt 61.2, 87.2M); abstract; "
    "docs/papers/mixprompt.md Q3",
    sizes=SIZES,
    replicates=plan("mixprompt", "dplnet"),
    recorded=record(
        quick="inconclusive",
        reason="+0.8 +- 0.7 points over 15 (seed, lr) pairs at seed 0 (float32, backbone source "
        "mIoU 0.85), power 0.74 to see the paper's +1.9 at 2 SE, about 18 pairs needed (full: "
        "48). Seed-dependent at quick: seed 1 gives +3.8 +- 0.7, reproduced (a change against "
        "this record); in float64 it reproduced (+3.5, +2.9, +2.5 at seeds 0-2).",
    ),
    mutants=[
        patch(
            "nn.mixprompt.inject",
            lambda x, p: x,
            "the prompt is computed but never added to the RGB tokens",
            name="no_injection",
        ),
    ],
)
def _vs_dplnet(size, seed) -> Measurement:
    return _gain("dplnet", size, seed, "MixPrompt - DPLNet-style", PAPER_GAIN["dplnet"])


# --------------------------------------------------------------------------- exact identity
@memo
def identity_errors(seed: int) -> dict:
    """Round trip and ``Omega = I`` reduction errors (float32) on random inputs."""
    key = jax.random.key(seed)
    u = jax.random.normal(key, (5, 7, 16))
    trip = float(jnp.max(jnp.abs(M.merge_subspaces(M.split_subspaces(u, 4)) - u)))
    ada = M.MixedPromptAdapter(32, key=jax.random.fold_in(key, 1))
    ada = eqx.tree_at(lambda a: a.omega, ada, jnp.eye(4))
    h, e = jax.random.normal(jax.random.fold_in(key, 2), (2, 3, 4, 4, 32))
    plain = ada.norm(ada.up(ada.down_rgb(h) + ada.down_aux(e)))
    red = float(jnp.max(jnp.abs(ada(h, e) - plain)))
    perm = jax.random.normal(jax.random.fold_in(key, 3), (4, 4))
    one = M.mix_subspaces(u, perm)
    manual = jnp.concatenate(
        [sum(perm[k, j] * u[..., 4 * j : 4 * j + 4] for j in range(4)) for k in range(4)], -1
    )
    mix = float(jnp.max(jnp.abs(one - manual)))
    return dict(trip=trip, reduction=red, mix=mix)


@claim(
    "mixprompt.mixing_identity",
    paper=PAPER,
    statement="The sub-spaces are contiguous chunks: split then merge is the identity, mixing "
    "gives chunk k = sum_j Omega_kj chunk j, and with Omega = I the adapter is DPLNet's "
    "down-add-up followed by the prompt LayerNorm.",
    where="official code Mixprompt.py (ADA: chunk/stack/transpose/reshape); "
    "docs/papers/mixprompt.md Q6",
    mutants=[
        patch(
            "nn.mixprompt.merge_subspaces",
            lambda s: s.reshape((*s.shape[:-2], -1)),
            "merge without the transpose (channels scrambled)",
            name="merge_no_transpose",
        ),
    ],
)
def _identity(size, seed) -> Measurement:
    r = identity_errors(seed)
    return measure(
        at_most(r["trip"], 0.0, name="split/merge round trip |diff|"),
        at_most(r["mix"], 1e-5, name="mixing vs chunk sums |diff|"),
        at_most(r["reduction"], 1e-5, name="Omega = I vs down-add-up |diff|"),
        detail="float32, u (5, 7, 16) in 4 sub-spaces; ADA(32, r=4, n=4) on (2, 3, 4, 4, 32)",
    )


# ---------------------------------------------------------------------------- param formula
def _counts():
    bb = M.Backbone(key=jax.random.key(0))
    variants = {
        "mixprompt": dict(),
        "random": dict(extractor="random"),
        "nomix": dict(mix="none"),
        "dplnet": dict(extractor="embed", subspaces=1, mix="none", norm=False),
        "n2": dict(subspaces=2),
    }
    out = {}
    for name, kw in variants.items():
        counted = nn.count_params(M.mixprompt(bb, 4, key=jax.random.key(1), **kw))
        out[name] = (counted, TM.mixprompt_params((16, 32, 64), 4, **kw)["total"])
    return out


@claim(
    "mixprompt.param_formula",
    paper=PAPER,
    statement="The prompting module's trainable parameters follow the closed form (ADA: 0.75 C^2 "
    "+ 1.5 C + n^2 per stage, + prompt norms, patch embeds, extractor, head); at MiT-B5 scale it "
    "gives the paper's 5.7M (full), 5.5M (w/o extractor) and 5.4M (w/o mixed prompting).",
    where="Table 3 ablation (trainable 5.7M / 5.5M / 5.4M); docs/papers/mixprompt.md Q7",
    mutants=[
        wrap(
            "theory.mixprompt.ada_params",
            lambda f: lambda c, *a, **k: f(c, *a, **k) - c // 4,
            "one down-projection bias left out of the ADA count",
            name="ada_bias_missing",
        ),
    ],
)
def _params(size, seed) -> Measurement:
    counts = _counts()
    paper = TM.paper_trainable_params(41)
    rows = ("full", "without_extractor", "without_mixed_prompting")
    return measure(
        holds(
            all(a == b for a, b in counts.values()),
            name="closed form == counted",
            rule="theory.mixprompt.mixprompt_params == nn.count_params for 5 variants",
            measured={k: list(v) for k, v in counts.items()},
        ),
        within([paper[r] / 1e6 for r in rows], [5.7, 5.5, 5.4], 0.05, name="MiT-B5 counts (M)"),
        extra={"MiT-B5 parts": {k: paper[k] for k in paper if k not in rows}},
        detail="small model: channels (16, 32, 64), 4 classes; MiT-B5: NYU 41 classes; paper "
        "values rounded to 0.1M (tol 0.05M)",
    )
