"""Uni-LoRA claim (Li et al. 2025, arXiv 2506.00799): LoRA's classification accuracy with one
shared vector of a few percent of LoRA's parameters.

What was read. The arXiv page (abstract, Sec. 1); the results tables only through a
third-party transcription (papernotes, "Uni-LoRA: One Vector is All You Need"), marked [3rd]; the
official code ``KaiyangLi1992/Uni-LoRA`` (README, ``NLU/unilora/unilora.py``, the GLUE scripts
``NLU/NLU/scripts_unilora_qv/*.sh``, whose hyperparameters are the paper's Table 8 per the README):

* Sec. 3: the LoRA factors of all adapted matrices, flattened, form ``theta_D in R^D``,
  ``D = sum_l r (m_l + n_l)``; Uni-LoRA trains one ``theta_d in R^d``, ``theta_D = P theta_d``,
  ``P`` fixed, random, one nonzero per row, ``1/sqrt(n_j)`` in column ``j``: ``P^T P = I_d``
  (Theorem 1, isometry). Group assignment: each row's column is drawn uniformly at random [3rd],
  and so does the code behind the paper's GLUE numbers (``torch.randint`` in ``unilora.py``);
  the later PEFT refactor balances the group sizes, as ``nn.adapters`` does. Here
  ``D / d = 17``, so the two differ only in the spread of the ``n_j``.
* Table 1 [3rd] (GLUE, RoBERTa-large): LoRA 786K parameters (r = 8 on query and value of the 24
  layers) average 87.8; Uni-LoRA 23K (r = 4, d = 23,040, one vector for all 48 matrices)
  average 88.3; per task Uni-LoRA - LoRA from -0.2 (QNLI, STS-B) to +1.4 (RTE) points. So
  ``d / LoRA's count = 23,040 / 786,432 = 2.9 %`` and ``d / D = 23,040 / 393,216 = 5.9 %``.
  Table 2 [3rd] (Gemma-7B, no head): 0.52M vs 200M parameters, GSM8K +0.7, MATH -2.3 points.
* Protocol (scripts): AdamW, weight decay 0.1, linear schedule with 6 % warmup, batch 32;
  the classification head is trained with its own lr (swept per task) and not counted; the
  vector's lr is 5e-3 for every task. How the LoRA row's lr was chosen is not in what could be
  read here, so both methods' lrs are chosen by one rule (below).
* Premise (Sec. 1, after Li et al. 2018 and Aghajanyan et al. 2021): finetuning has a low
  intrinsic dimension, so a random subspace with ``d << D`` holds a good solution.

The measurement mirrors Table 1's conditions at a size that runs on 2 cores:

* Base: a 32-64-64-64-64-8 ReLU MLP pretrained here with cross-entropy on an 8-class synthetic
  task (labels: the argmax of a random He-scaled teacher, standardised so classes balance).
* New task, one per seed: the classes of the base with every one of its 5 weights moved by a
  rank-1 shift ``SHIFT * ||W||_2 u v^T`` (random unit u, v), an update spread over all layers
  (the base keeps about 72 % accuracy). 4096 training, 1024 validation, 4096 test inputs.
* The head (last layer) trained in every run and not counted; adapters on the 4 other layers:
  LoRA r = 8, alpha = 16 (Hu et al.'s RoBERTa-large setting; 3840 parameters) and Uni-LoRA
  r = 4, ``d = round(2.93 % x 3840) = 112`` (``d / D = 5.8 %``), the paper's two ratios. Same
  budget: 500 AdamW steps (weight decay 0.1, 6 % warmup, linear decay), batch 32, the same
  data and minibatches per seed.
* Learning rates, one rule for every method and size: the head's lr is the best (mean
  validation accuracy) of the grid ``LR_GRID`` for the head trained alone; each adapter's lr is
  the best of the same grid with that head lr. Test accuracy at the chosen lr is reported.
* Pass rule (non-inferiority): with ``Delta`` the per-seed paired difference of test accuracy,
  Uni-LoRA - LoRA (same base and data, so also the difference of gains),
  ``mean(Delta) - 2 SE >= -MARGIN``, ``MARGIN`` = 1 accuracy point, between the paper's worst
  GLUE deficit (0.2) and its MATH deficit (2.3).

Design history. The shared single-layer MSE design (d = 64 against a ~240-dimensional update
to be fitted exactly) was dropped as unfaithful (regression, one matrix, no sharing). A first
version of this design adapted all 5 layers with no trained head (the Table 2 protocol at Table
1's fraction: LoRA 4416, Uni-LoRA d = 129, 500 steps, batch 64): Uni-LoRA - LoRA = -7.6 +- 0.5
points (5 seeds). It was changed after that result for fidelity to Table 1, whose counts and
ratios the claim uses and whose protocol trains the head in both methods.

Parity d against width and intrinsic dimension (``parity_cells``, figure
``adapters.unilora_parity``; not judged: the paper states parity at one fraction on GLUE, not
a law in d). The same protocol at hidden widths 32, 64, 128 and shift ranks k = 1, 2, 4
(rank-k shift of every weight at the rank-1 shift's Frobenius norm; k is the knob on the
update's intrinsic dimension), d over ``28 * 2^j`` up to Uni-LoRA's D (r = 4: half LoRA r = 8's
count); a cell counts only if LoRA beats the head alone by 2 paired SE. Measured at full (8
seeds, 500 steps, seed 0; quick draws only the claim's width 64 at k = 1 with the claim's 6
seeds and its d grid 28, 112, 448, all of them the claim's runs, so the figure adds no run there
(issues 46, 48); the grid up to D and the width trend are full-scale figures):

    width  k  head   LoRA r=8  LoRA - head (+- SE)  parity d  d / LoRA's count  d / D
     32    1  0.760  0.905     +14.4 +- 1.9 pts     448       21.9 %            43.8 %
     32    2  0.764  0.890     +12.5 +- 1.2         448       21.9 %            43.8 %
     32    4  0.777  0.887     +11.0 +- 1.4         896       43.8 %            87.5 %
     64    1  0.814  0.905      +9.2 +- 1.0         448       11.7 %            23.3 %
     64    2  0.813  0.888      +7.5 +- 0.5         448       11.7 %            23.3 %
     64    4  0.810  0.873      +6.3 +- 0.7         448       11.7 %            23.3 %
    128    1  0.850  0.888      +3.8 +- 0.5         448        6.0 %            12.1 %
    128    2  0.836  0.862      +2.6 +- 0.5         448        6.0 %            12.1 %
    128    4  0.830  0.859      +2.9 +- 0.5         896       12.1 %            24.1 %

(parity d: the smallest grid d with mean(Uni-LoRA - LoRA) within MARGIN; with the claim's rule,
mean - 2 SE, it is 448 to 1792.) Every cell is gated. The parity d stays at 448 to 896 (the
grid's factor-2 resolution) as the width quadruples, so its fraction of LoRA's count falls with
the width (22 %, 12 %, 6 % at k = 1) but stays above the paper's 2.9 % at every width measured;
at the grid d nearest that fraction (56, 112, 224) Uni-LoRA trails LoRA by about 10.5, 5.0, 1.5
points at k = 1. This agrees with the paper's premise in that the needed d does not grow with
D; the shift rank k moved it at most one grid step (896 at k = 4 for widths 32 and 128), so
the rank of the shift is not the dimension the adapters meet within this budget.

Tried for issue 44 (not adopted; the redesign stays open): the same claim at hidden width 256,
where the paper's fraction is d = 428 of 14,592, near the parity d above (quick, 6 seeds, lr
grid extended to 3e-4 since LoRA chose the grid's lowest lr there). Uni-LoRA - LoRA = -0.25 +-
0.19, -0.34 +- 0.14 and -0.51 +- 0.28 points at seeds 0-2, but at width 256 the same rank-1
shift leaves a task the head alone nearly solves: LoRA beats it by 2.8 +- 0.7, 1.6 +- 0.2 and
0.43 +- 0.28 points, so at seed 2 the gate fails and the verdict follows the seed (reproduced,
reproduced, not reproduced; about 45-50 CPU-s per seed). A fair version must keep the task's
need for adaptation as the width grows (e.g. a shift scaled with the width) before it is
judged there.
With the shift scaled with the width (issue 48; rank k = width / 64 = 4, each direction at the
rank-1 shift's size, ``SHIFT = 2`` at ``k = 4``) the task keeps needing adaptation at width 256
(base 0.66-0.70, LoRA beats the head alone by 7.7 +- 0.9, 5.9 +- 0.4 and 6.6 +- 0.7 points at
seeds 0-2) and Uni-LoRA at the paper's 2.9 % (d = 428) trails LoRA by 2.7 +- 0.4, 2.2 +- 0.2
and 2.5 +- 0.1 points: not reproduced at every seed (probe: 6 seeds, 500 steps, lr grid with
3e-4, d = 428 only). Not adopted: about 56 CPU-s per run for one d against about 25 for this
claim, beyond the area's quick share; it is the design for a larger budget.

Float32 (the accuracy of an argmax is not precision-limited; it halves the time).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
import nn.adapters as ad
from _core.streams import stream_key, substream_seed
from paper_checks import Measurement, claim, measure, memo, paired_gap, record, sizes, wrap
from paper_checks._stats import mean_se
from paper_checks.adapters._base import stack_trees, xent

UNILORA = "Li et al. 2025 (Uni-LoRA, arXiv 2506.00799)"

D_IN, WIDTH, DEPTH, N_CLASSES = 32, 64, 4, 8
SHIFT = 1.0
PAPER_FRACTION = 23_040 / 786_432  # Table 1, RoBERTa-large: Uni-LoRA's d over LoRA's count
MARGIN = 0.01
LR_GRID = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
N_TRAIN, N_VAL, N_TEST, BATCH, STEPS = 4096, 1024, 4096, 32, 500
TARGETS = [f"layers.{i}" for i in range(DEPTH)]  # all but the head (layers.4), trained fully
SHAPES = tuple(zip([WIDTH] * DEPTH, [D_IN] + [WIDTH] * (DEPTH - 1), strict=True))
LORA_RANKS = (0, 1, 2, 8)  # r = 0: the head alone
UNI_R = 4
UNI_D = round(PAPER_FRACTION * ad.num_params("lora", SHAPES, r=max(LORA_RANKS)))  # 112
UNI_DIMS = (UNI_D // 4, UNI_D, 4 * UNI_D)
SIZES = {"lora": LORA_RANKS, "unilora": UNI_DIMS, "vera": (WIDTH,)}  # VeRA: r = the width


SIZES_TABLE = sizes(
    smoke=dict(seeds=2, steps=40),
    quick=dict(seeds=6, steps=STEPS),
    full=dict(seeds=16, steps=STEPS),
)


def shapes(width: int = WIDTH) -> tuple[tuple[int, int], ...]:
    """The (out, in) shapes of the 4 adapted layers of the base of hidden ``width``."""
    return tuple(zip([width] * DEPTH, [D_IN] + [width] * (DEPTH - 1), strict=True))


@memo
def base_classifier(seed: int = 0, width: int = WIDTH):
    """The base: a ReLU MLP of hidden ``width`` pretrained with cross-entropy on fresh inputs
    labelled by a random He-scaled teacher of the same width (logits standardised, so the 8
    classes balance); float32."""
    steps = 500
    opt = optax.adam(optax.cosine_decay_schedule(3e-3, steps))

    @jax.jit
    def pretrain(key):
        kt, kz, kb, ks = jax.random.split(key, 4)
        teacher = nn.MLP(D_IN, N_CLASSES, width, DEPTH, activation=jax.nn.relu, key=kt)
        teacher = jax.tree.map(lambda a: a * 6**0.5 if a.ndim == 2 else a, teacher)  # He
        z = teacher(jax.random.normal(kz, (8192, D_IN)))
        mu, sd = z.mean(0), z.std(0)

        def loss(m, k):
            x = jax.random.normal(k, (256, D_IN))
            y = jnp.argmax((teacher(x) - mu) / sd, -1)
            return jnp.mean(xent(m(x), y))

        m = nn.MLP(D_IN, N_CLASSES, width, DEPTH, activation=jax.nn.relu, key=kb)
        m, _, _ = nn.fit(loss, opt, m, jax.random.split(ks, steps))
        return m

    with jax.enable_x64(False):
        return pretrain(jax.random.key(seed))


def _rank_k_direction(rng, shape, k: int):
    """``sum_i u_i v_i^T / sqrt(k)`` over ``k`` pairs of random unit vectors, drawn in the order
    u_1, v_1, u_2, v_2, ... (``k = 1``: the rank-1 direction of the claim, draw for draw)."""
    terms = []
    for _ in range(k):
        u, v = rng.standard_normal(shape[0]), rng.standard_normal(shape[1])
        terms.append(np.outer(u / np.linalg.norm(u), v / np.linalg.norm(v)))
    return sum(terms) / np.sqrt(k)


@memo
def shifted_tasks(seeds: int, steps: int, seed: int = 0, width: int = WIDTH, k: int = 1):
    """Per seed: train / validation / test inputs and labels of the shifted task (the base of
    hidden ``width`` with weight ``l`` moved by ``SHIFT * ||W_l||_2 sum_i u_i v_i^T / sqrt(k)``,
    a rank-``k`` shift of the rank-1 shift's Frobenius norm; ``k`` is the knob on the task's
    intrinsic dimension), stacked on a leading seed axis, the minibatch indices, and the base's
    test accuracy on the task."""
    base = base_classifier(seed, width)
    n = seeds
    shifts = []
    for lin in base.layers:
        w = np.asarray(lin.weight)
        rows = []
        for s in range(n):
            rng = np.random.default_rng([seed, 1000 + s, len(shifts)])
            rows.append(_rank_k_direction(rng, w.shape, k))
        shifts.append(np.float32(SHIFT * np.linalg.norm(w, 2)) * np.stack(rows, dtype=np.float32))
    with jax.enable_x64(False):

        @jax.jit
        @jax.vmap
        def make(delta, key):
            task = eqx.tree_at(
                lambda m: [lin.weight for lin in m.layers],
                base,
                [lin.weight + dw for lin, dw in zip(base.layers, delta, strict=True)],
            )
            kx = jax.random.split(key, 4)
            xs = [
                jax.random.normal(k, (m, D_IN))
                for k, m in zip(kx, (N_TRAIN, N_VAL, N_TEST), strict=False)
            ]
            ys = [jnp.argmax(task(x), -1) for x in xs]
            base_acc = jnp.mean(jnp.argmax(base(xs[2]), -1) == ys[2])
            batches = jax.random.randint(kx[3], (steps, BATCH), 0, N_TRAIN)
            return xs, ys, base_acc, batches

        keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(
            stream_key(seed, 2000), jnp.arange(n)
        )
        (x, xv, xt), (y, yv, yt), base_acc, batches = make(shifts, keys)
        return {
            "train": (x, y),
            "val": (xv, yv),
            "test": (xt, yt),
            "batches": batches,
            "base_acc": np.asarray(base_acc),
        }


def _schedule(lr, steps):
    """Linear warmup over 6 % of the ``steps``, then linear decay to 0 (the paper's scripts)."""
    warm = max(1, int(0.06 * steps))
    return optax.join_schedules(
        [optax.linear_schedule(0.0, lr, warm), optax.linear_schedule(lr, 0.0, steps - warm)], [warm]
    )


def _head_labels(tr):
    """ "head" at the classification head's weight and bias, "adapter" at every other leaf."""
    labels = jax.tree.map(lambda _: "adapter", tr)
    return eqx.tree_at(
        lambda t: (t.model.layers[-1].weight, t.model.layers[-1].bias), labels, ("head", "head")
    )


def _fit(tr, fr, lr, head_lr, batches, x, y, xv, yv, xt, yt):
    """AdamW (weight decay 0.1; peak lr ``lr`` on the adapter, ``head_lr`` on the head) on the
    minibatch cross-entropy; validation and test accuracy after the budget."""
    opt = optax.multi_transform(
        {
            "adapter": optax.adamw(_schedule(lr, len(batches)), weight_decay=0.1),
            "head": optax.adamw(_schedule(head_lr, len(batches)), weight_decay=0.1),
        },
        _head_labels,
    )

    tr, _, _ = nn.fit(lambda m, i: jnp.mean(xent(m(x[i]), y[i])), opt, tr, batches, frozen=fr)
    m = nn.combine(tr, fr)
    return (jnp.mean(jnp.argmax(m(xv), -1) == yv), jnp.mean(jnp.argmax(m(xt), -1) == yt))


# runs x (lr, head_lr) pairs, the head lr per run (in the sweep it depends on the run's task);
# one compilation per method and width (its sizes share shapes, _adapted)
_fit_runs = eqx.filter_jit(
    jax.vmap(
        jax.vmap(_fit, in_axes=(None, None, 0, 0) + (None,) * 7),
        in_axes=(0, 0, None, 0) + (0,) * 7,
    )
)


def lora_rank(adapted, r: int):
    """A LoRA-adapted model with the rows of every ``A`` beyond ``r`` zeroed. With ``B = 0``
    (LoRA's init) those rows and ``B``'s matching columns get zero gradients and stay 0 under
    AdamW, so the model trains exactly as rank-``r`` LoRA with the same ``alpha / r`` scale
    (derived here; ``tests/paper_checks/test_adapters_unilora.py``); ``r = 0`` leaves LoRA inert."""
    layers = adapted.layers().values()
    return eqx.tree_at(
        lambda m: [la.A for la in m.layers().values()],
        adapted,
        [la.A.at[r:].set(0.0) for la in layers],
    )


def pad_theta(adapted, d: int):
    """A Uni-LoRA-adapted model with its vector zero-padded to length ``d``: the padding is never
    indexed, gets zero gradients and stays 0, so the model trains exactly as before (derived
    here; ``tests/paper_checks/test_adapters_unilora.py``)."""
    th = adapted.shared["theta"]
    return eqx.tree_at(lambda m: m.shared["theta"], adapted, jnp.pad(th, (0, d - th.shape[0])))


def _adapted(
    method: str, size: int, seed: int, base_seed: int = 0, width: int = WIDTH, pad: int = 0
):
    """The base of hidden ``width`` with ``method`` of ``size`` (LoRA's r, Uni-LoRA's d, VeRA's
    r) on its 4 inner layers and the head trainable, in the array shapes of the method's largest
    size so that all sizes share one compilation: rank-r LoRA as rank ``max(LORA_RANKS)`` LoRA
    through :func:`lora_rank` (alpha = 2 r; r = 0 is the head alone), Uni-LoRA's vector padded
    to ``pad`` (default ``max(UNI_DIMS)``) by :func:`pad_theta`."""
    base, key = base_classifier(base_seed, width), jax.random.key(seed)
    kw = dict(targets=TARGETS, key=key, train="layers.4.*")
    if method == "lora":
        rmax = max(LORA_RANKS)
        return lora_rank(ad.inject(base, "lora", r=rmax, alpha=2.0 * rmax, **kw), size)
    if method == "unilora":
        return pad_theta(
            ad.inject(base, "unilora", r=UNI_R, d=size, seed=seed, **kw), pad or max(UNI_DIMS)
        )
    return ad.inject(base, "vera", r=size, **kw)


def _stacked(method: str, size: int, n: int, seed: int = 0):
    """Trainable and frozen halves of the ``n`` seeds' models, arrays stacked on a leading
    axis, in the pytree structure of the method's largest size at seed 0 (the structures differ
    only in static metadata, sizes and seeds, that does not enter the forward pass)."""
    ref = nn.split(_adapted(method, max(SIZES[method]), 0, seed))
    parts = [nn.split(_adapted(method, size, substream_seed(seed, s), seed)) for s in range(n)]
    return tuple(stack_trees([p[h] for p in parts], like=ref[h]) for h in (0, 1))


@memo
def method_runs(method: str, size: int, seeds: int, steps: int, seed: int = 0):
    """Validation and test accuracy (seed, lr) of ``method`` ("lora", "unilora", "vera") of
    ``size`` over the grid; the adapter lr chosen on mean validation accuracy (for LoRA r = 0,
    the head alone, the head lr), the test accuracy there, and the head lr used (the head-only
    choice for every adapter)."""
    if method not in SIZES or size not in SIZES[method]:
        raise ValueError(f"`method`, `size` must be one of {SIZES}; got {method!r}, {size!r}.")
    task = shifted_tasks(seeds, steps, seed)
    grid = np.asarray(LR_GRID, np.float32)
    head_only = method == "lora" and size == 0
    head_lr = (
        grid if head_only else np.full_like(grid, method_runs("lora", 0, seeds, steps, seed)["lr"])
    )
    with jax.enable_x64(False):
        tr, fr = _stacked(method, size, seeds, seed)
        per_run = np.broadcast_to(head_lr, (seeds, len(grid)))
        val, test = _fit_runs(
            tr, fr, grid, per_run, task["batches"], *task["train"], *task["val"], *task["test"]
        )
        val, test = np.asarray(val), np.asarray(test)
    best = int(val.mean(0).argmax())
    head_only_run = size == 0  # r = 0: the head alone trains, no adapter parameters
    count = size if method == "unilora" or head_only_run else ad.num_params(method, SHAPES, r=size)
    return {
        "count": count,
        "val": val,
        "test": test,
        "lr": LR_GRID[best],
        "head_lr": float(head_lr[best]),
        "acc": test[:, best],
    }


# ------------------------------------------------------------- parity d against width and k
PARITY_SIZES = sizes(
    smoke=dict(widths=(WIDTH,), ks=(1,), seeds=2, steps=40, ratio=4, upto=max(UNI_DIMS)),
    quick=dict(widths=(WIDTH,), ks=(1,), seeds=6, steps=STEPS, ratio=4, upto=max(UNI_DIMS)),
    full=dict(widths=(32, 64, 128), ks=(1, 2, 4), seeds=8, steps=STEPS, ratio=2, upto=0),
)  # quick and smoke k = 1 only: k moved the parity d by at most one grid step (full table);
# ratio: the d grid's step, 4 at quick (28, 112, 448; full keeps 2); upto: the largest d drawn
# (0: up to D). Quick and smoke draw the claim's width with the claim's seeds up to the claim's
# largest d, so every run is the claim's, read from its memo (issue 46: two widths of their own
# cost about 57 CPU-s; issue 48: d = 1792 and D, a compilation and about 10 CPU-s more); the
# grid up to D and the trend with width are drawn at full


def uni_dims(width: int, ratio: int = 2) -> tuple[int, ...]:
    """The parity sweep's d grid at ``width``: ``28 * ratio^j`` below Uni-LoRA's ``D`` (r = 4,
    half LoRA r = 8's count, the largest d with a nonempty group per column), then ``D``."""
    big = ad.num_params("lora", shapes(width), r=UNI_R)
    return tuple(28 * ratio**j for j in range(32) if 28 * ratio**j < big) + (big,)


def paired_mean_se(a, b) -> tuple[float, float]:
    """Mean and standard error (:func:`paper_checks._stats.mean_se`) of ``a - b``."""
    return mean_se(np.asarray(a, float) - np.asarray(b, float))


def parity_d(dims, uni_acc, lora_acc, margin: float = MARGIN, n_se: float = 0.0) -> int:
    """The smallest ``d`` of ``dims`` whose paired accuracy gap to LoRA satisfies
    ``mean(uni - lora) - n_se SE >= -margin`` (rows of ``uni_acc`` match ``dims``, columns are
    seeds paired with ``lora_acc``); -1 if none does. ``n_se = 0``: the claim's ``d_parity``."""
    for d, acc in zip(dims, uni_acc, strict=True):
        mean, se = paired_mean_se(acc, lora_acc)
        if mean - n_se * se >= -margin:
            return int(d)
    return -1


def lora_beats_head(lora_acc, head_acc, n_se: float = 2.0) -> bool:
    """The gate: LoRA's paired gain over the head trained alone exceeds ``n_se`` SE."""
    mean, se = paired_mean_se(lora_acc, head_acc)
    return bool(mean - n_se * se > 0)


def _sweep_fit(method, configs, width, tasks, seeds, seed, head_lr):
    """Validation and test accuracy (config, seed, lr) of ``method`` at each ``(task index,
    size)`` of ``configs``, all configs and seeds stacked on one axis (one compilation per
    method and width); ``head_lr`` (config, lr)."""
    pad = uni_dims(width)[-1]
    big = max(LORA_RANKS) if method == "lora" else pad
    ref = nn.split(_adapted(method, big, 0, seed, width, pad))
    parts = [
        nn.split(_adapted(method, size, substream_seed(seed, s), seed, width, pad))
        for _, size in configs
        for s in range(seeds)
    ]
    tr, fr = (stack_trees([p[h] for p in parts], like=ref[h]) for h in (0, 1))
    ti = np.repeat([t for t, _ in configs], seeds)
    si = np.tile(np.arange(seeds), len(configs))

    def pick(get):
        return jnp.stack([get(tasks[t])[s] for t, s in zip(ti, si, strict=True)])

    data = [pick(lambda t: t["batches"])] + [
        pick(lambda t, h=h, i=i: t[h][i]) for h in ("train", "val", "test") for i in (0, 1)
    ]
    hl = np.repeat(np.asarray(head_lr, np.float32), seeds, axis=0)
    grid = np.asarray(LR_GRID, np.float32)
    with jax.enable_x64(False):
        val, test = _fit_runs(tr, fr, grid, hl, *data)
    shape = (len(configs), seeds, len(LR_GRID))
    return np.asarray(val).reshape(shape), np.asarray(test).reshape(shape)


@memo
def parity_cells(
    width: int, ks: tuple, seeds: int, steps: int, seed: int = 0, ratio: int = 2, upto: int = 0
):
    """Per shift rank ``k`` of ``ks`` at hidden ``width``: head-only, LoRA r = 8 and Uni-LoRA
    (d over :func:`uni_dims`, step ``ratio``, those ``<= upto`` unless ``upto`` is 0) test
    accuracies (seed,), each at its lr chosen as in
    :func:`method_runs` (head lr from the head alone, then each adapter's lr with it), the gate
    (:func:`lora_beats_head`) and the parity d (:func:`parity_d`: mean within ``MARGIN``, and
    the claim's rule, mean - 2 SE), with LoRA's count and Uni-LoRA's D."""

    def shared(k):  # the claim's task and runs: read from its memo (method_runs)
        return width == WIDTH and k == 1

    tasks = [
        shifted_tasks(seeds, steps, seed)
        if shared(k)
        else shifted_tasks(seeds, steps, seed, width, k)
        for k in ks
    ]
    grid = np.asarray(LR_GRID, np.float32)
    dims = tuple(d for d in uni_dims(width, ratio) if not upto or d <= upto)
    rmax = max(LORA_RANKS)
    lora_count = ad.num_params("lora", shapes(width), r=rmax)
    own = [t for t, k in enumerate(ks) if not shared(k)]

    def best(val, test):  # (config, seed, lr) -> chosen lr index and test acc per config
        i = val.mean(1).argmax(-1)
        return i, test[np.arange(len(i)), :, i]

    def claims(method, size):  # chosen lr index and test acc (seed,) of the claim's run
        r = method_runs(method, size, seeds, steps, seed)
        return LR_GRID.index(r["lr"]), r["acc"]

    ih, head, il, lora = {}, {}, {}, {}
    for t in set(range(len(ks))) - set(own):
        ih[t], head[t] = claims("lora", 0)
        il[t], lora[t] = claims("lora", rmax)
    if own:
        val, test = _sweep_fit(
            "lora", [(t, 0) for t in own], width, tasks, seeds, seed, [grid] * len(own)
        )
        for t, i, acc in zip(own, *best(val, test), strict=True):
            ih[t], head[t] = i, acc
        val, test = _sweep_fit(
            "lora",
            [(t, rmax) for t in own],
            width,
            tasks,
            seeds,
            seed,
            [np.full_like(grid, LR_GRID[ih[t]]) for t in own],
        )
        for t, i, acc in zip(own, *best(val, test), strict=True):
            il[t], lora[t] = i, acc
    iu, uni = [], []
    for t, k in enumerate(ks):  # one task per call (same shapes, one compilation): less memory
        from_claim = {d: claims("unilora", d) for d in dims if shared(k) and d in UNI_DIMS}
        cfg = [(t, d) for d in dims if d not in from_claim]
        head_lr = [np.full_like(grid, LR_GRID[ih[t]])] * len(cfg)
        fresh = {}
        if cfg:
            i, acc = best(*_sweep_fit("unilora", cfg, width, tasks, seeds, seed, head_lr))
            fresh = {d: (ii, a) for (_, d), ii, a in zip(cfg, i, acc, strict=True)}
        runs = [from_claim[d] if d in from_claim else fresh[d] for d in dims]
        iu.append([i for i, _ in runs])
        uni.append(np.stack([acc for _, acc in runs]))
    out = {}
    for t, k in enumerate(ks):
        gain, gain_se = paired_mean_se(lora[t], head[t])
        dp = parity_d(dims, uni[t], lora[t])
        dn = parity_d(dims, uni[t], lora[t], n_se=2.0)
        out[k] = {
            "dims": dims,
            "lora_count": lora_count,
            "D": uni_dims(width)[-1],
            "acc_base": float(tasks[t]["base_acc"].mean()),
            "acc_head": head[t],
            "acc_lora": lora[t],
            "acc_uni": uni[t],
            "lr_head": LR_GRID[ih[t]],
            "lr_lora": LR_GRID[il[t]],
            "lr_uni": [LR_GRID[i] for i in iu[t]],
            "gain_lora_over_head": (gain, gain_se),
            "gated": lora_beats_head(lora[t], head[t]),
            "d_parity": dp,
            "d_noninferior": dn,
        }
    return out


def _quarter_columns(f):
    """Projection bug: every coordinate indexed into the first quarter of the vector."""
    return lambda D, d, seed=0: (lambda iv: (iv[0] % max(1, d // 4), iv[1]))(f(D, d, seed))


@claim(
    "adapters.unilora_accuracy",
    paper=UNILORA,
    statement="Uni-LoRA matches LoRA's accuracy with one shared vector of a few percent of "
    "LoRA's parameters.",
    where="Table 1 (GLUE, RoBERTa-large: 23K vs 786K parameters, 88.3 vs 87.8); Tables 2-3",
    sizes=SIZES_TABLE,
    mutants=[
        wrap(
            "nn.adapters.isometric_projection",
            _quarter_columns,
            "projection index folded into a quarter of the vector's columns",
            name="quarter_columns",
        )
    ],
    recorded=record(
        quick="not reproduced",
        reason="judged where the paper's ratio does not mean what it means in the paper: at this "
        "base's width the paper's 2.9 % of LoRA's count (d = 112) trails LoRA by 3.6-4.9 points "
        "(SE 0.3-0.9, seeds 0-2) and parity needs d = 448 (11.7 %); at a base about 256 wide "
        "2.9 % is near that parity d, at about 4x this claim's cost: the fair redesign is open "
        "(issue 44)",
    ),
)
def _check_unilora(size, seed) -> Measurement:
    runs = {
        (m, k): method_runs(m, k, size.seeds, size.steps, seed)
        for m, k in [("lora", 0), ("lora", max(LORA_RANKS))] + [("unilora", d) for d in UNI_DIMS]
    }
    lora, head, uni = runs["lora", max(LORA_RANKS)], runs["lora", 0], runs["unilora", UNI_D]
    base = shifted_tasks(size.seeds, size.steps, seed)["base_acc"]
    d_parity = parity_d(UNI_DIMS, [runs["unilora", d]["acc"] for d in UNI_DIMS], lora["acc"])
    frac = uni["count"] / lora["count"]
    return measure(
        paired_gap(
            lora["acc"],
            head["acc"],
            n_se=2,
            name="acc_lora - acc_head_only (gate: LoRA must beat the head alone)",
        ),
        paired_gap(
            uni["acc"],
            lora["acc"],
            n_se=2,
            margin=-MARGIN,
            direction="greater",
            name=f"acc_unilora(d={UNI_D}) - acc_lora",
        ),
        extra={
            "acc_base": float(base.mean()),
            "acc_head_only": head["acc"].mean(),
            "acc_lora": lora["acc"].mean(),
            **{f"acc_unilora(d={d})": runs["unilora", d]["acc"].mean() for d in UNI_DIMS},
            "d_parity (smallest grid d within the margin; -1: none)": d_parity,
            "param_fraction": frac,
            "paper_fraction": PAPER_FRACTION,
            "lr_lora": lora["lr"],
            "lr_unilora": uni["lr"],
            "lr_head": head["lr"],
        },
        detail=f"8-class ReLU MLP pretrained here, new task = rank-1 shift of all 5 weights; head "
        f"trained in all, adapters on the other 4 layers: LoRA r = 8 ({lora['count']} "
        f"params) vs Uni-LoRA r = {UNI_R}, d in {UNI_DIMS} (the paper's fraction "
        f"{PAPER_FRACTION:.1%} is d = {UNI_D}); lrs best of one grid on validation, "
        f"{size.steps} AdamW steps, {size.seeds} seeds paired; non-inferiority margin "
        f"{MARGIN}; the parity d against width and shift rank: figure "
        f"adapters.unilora_parity (module docstring)",
    )
