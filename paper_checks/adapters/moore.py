"""MoORE claims (Yuan, Zheng, Wang, Liu & Xu 2025, arXiv 2506.14436): resistance to oblivion of
the original task and to conflict among new tasks trained jointly.

What was read. The stored arXiv pages (html v3, v4, v5) gave the abstract and the opening of the
introduction only; the body (sections, tables) was not readable here, so no table number or
proposition number is cited. The abstract states: the weight ``W = U diag(sigma) V^T`` becomes a
mixture of orthogonal rank-one experts ``u_j v_j^T`` whose singular values a learnable router
adjusts by task and sample, with a learnable orthogonal transform on the right singular vectors;
"MoORE guarantees the experts' orthogonality and maintains the column space of the original
weight matrix. These two properties make the adapted model resistant to the conflicts among the
new tasks and the oblivion of its original tasks, respectively", and experiments show it
"outperforms existing multi-task adaptation methods consistently". The official code
(``DaShenZi721/MoORE``) fixes the protocol used here: ``moe_peft_svdmoe.json`` (one adapter
trained jointly on the nine CSR-MTL tasks, every linear of the blocks adapted -- q, k, v, o,
gate, up, down, not the head --, r = 8, lora_alpha = 16, one lr 3e-4 for the run),
``moe_peft/tasks/qa_tasks.py`` (each task's samples carry their own task id) and
``train_increment.py`` (conflict: the same task trained jointly with more and more other tasks).
Oblivion is the adapted model's performance on tasks of the original model that were not in the
adaptation, against the original model's.

Design (task, methods, metrics and pass rules fixed from that protocol before this design's
verdicts were seen):

* original model: the small ReLU MLP pretrained here on a teacher (``_base.pretrained``), inputs
  ``x ~ N(0, I)``; its task is the *original task*;
* ``K`` new tasks (3 quick, 4 full): task ``k`` has its own input domain ``x ~ N(mu_k, I)``,
  ``||mu_k|| = 2`` (tasks are told apart by their inputs, as prompts are) and the teacher's hidden
  weight moved by a rank-4 perturbation of size 2 (the form of ``_base.shifted_task``); ``n``
  training and ``n`` validation samples per task (128 quick, 512 full), 512 test samples;
* adapted: ``layers.0`` (32 x 16, so ``col(W0)`` is a proper subspace) and ``layers.1`` (every
  linear but the read-out, as the paper's targets leave out the LM head); MoORE with ``r = 8``
  reflections, 8 gate experts, task dimension 4 (the official 64 makes MoORE's count exceed
  what a LoRA of rank <= 16 can match on the 32 x 16 layer), task ids ``1..K`` for the new tasks
  and id 0 reserved for the original task with a *null* (zero, never trained) embedding -- with a
  random one it lay in the span of the trained embeddings and routed like them; LoRA with
  the rank whose trainable count is nearest MoORE's and ``alpha = 2 r`` (the config's 16 / 8);
  for the conflict claim also a *task-conditioned* LoRA (MTL-LoRA-style: ``Delta W_t = s B
  diag(1 + g_t) A`` with a trained ``g_t in R^r`` per task and layer, ``g = 0`` at init; the
  original task's ``g_0`` is never trained), its rank again matched to MoORE's count;
* one joint run on all ``K`` tasks (mean of the task MSEs, full batch, Adam) and one single-task
  run per task, the same number of steps (200 quick, 600 full), seeds 12 quick, 24 full (all in
  one ``vmap``-ed compilation per method); the learning rate of every method and mode is the
  best of one grid (quick ``3e-4 .. 1e-2``, full ``1e-4 .. 3e-2``, steps of about 3; both hold
  the paper's 3e-4) by the mean validation loss ratio over seeds and tasks;
* oblivion: the original task's test loss / the base model's, compared at matched adaptation:
  per seed, at the mean new-task loss ratio both methods reach (the larger of their final
  values), interpolated along the checkpointed training curve; pass if the paired gap LoRA -
  MoORE exceeds 2 SE. Reported, not judged, at full only (``ablation``; quick ran it until
  issue 46's budget, a fourth method's runs and compilation for a number no rule reads):
  MoORE's ablation with ``U`` trainable (so ``col(W0)`` is not kept; same lr grid, joint runs
  only) against MoORE at the level both reach, the mechanism the abstract names: it forgets
  more by only 0.070 +- 0.033, 0.054 +- 0.067 and 0.15 +- 0.09 (quick, seeds 0-2, when it ran
  there; as a rule it flipped with the seed),
  against LoRA - MoORE 0.76 +- 0.11, 0.79 +- 0.07 and 0.48 +- 0.09 (seeds 0-2, float32
  runs). No MoORE bug tried fails
  the claim (quick, seed 0, LoRA - MoORE): ``U`` trainable 0.41, every frozen field trainable
  0.35, the task route removed 0.25, a random task-0 embedding 0.44, Householder steps without
  the factor 2 (``R`` not ``I`` at init) 0.15, ``sigma**2`` in the router 0.35, the original
  task evaluated with task 1's id 0.46. At this size MoORE's advantage does not come from
  ``col(W0)`` but from its router: with the router's weights frozen (only the rotation ``R``
  trains, the declared mutant) MoORE forgets *more* than LoRA, -0.21 +- 0.04. The bugs above
  are equivalent mutants for this statement (MoORE with them still forgets less than LoRA),
  so they are recorded here and not declared;
* conflict: per task, ``log(test loss joint / test loss single-task)``, averaged over tasks;
  pass if the paired gaps LoRA - MoORE and task-conditioned LoRA - MoORE both exceed 2 SE (the
  second fails as measured: a task id that scales LoRA's rank components removes more of the
  conflict than MoORE's routing does).

The learning-rate grids are wide enough that every method's and mode's choice lies inside them
(the detail string prints the oblivion gap at every grid lr). What still adapts the original
task's map is the task-independent part of MoORE (the Householder ``R`` and the sample router
``W_up W_gate x``): keeping ``col(W0)`` does not stop the map changing inside it.

Paper's effects (the abstract gives no number): registered as relative effects, MoORE avoiding
half of the baseline's loss (``PAPER_SHARE``): half of LoRA's forgetting (``orig_ratio_lora -
1``), half of each baseline's conflict.

``adapters.moore_forgetting`` is strict about the mechanism the paper credits: besides the gap
(0.76 +- 0.11, 0.79 +- 0.07, 0.48 +- 0.09 at quick, seeds 0-2), the trained MoORE's layer-0
effective weight must stay in ``col(W0)`` (:func:`column_space_residual`, ``U0`` from numpy's SVD
of the base weight; 1e-15 in float64). With ``U`` trainable (mutant ``u_trainable``) the
residual is about 0.3 and the claim fails, while its gap alone would still pass (0.43 +- 0.14 at
smoke).

Float32 runs (issue 46): the adapters are built from the float64 student (MoORE's SVD in
float64) and trained in float32, a loss ratio is not precision-limited; the column-space
residual is evaluated in float64 on the trained parameters with the float64 frozen half
(``U``, ``sigma``, ``V`` as the layer keeps them), so its 1e-9 tolerance is unchanged and a
trained ``U`` still leaves ``col(W0)``. At seed 0 float32 moved the judged gaps by less than
0.01 (forgetting 0.751 -> 0.756, conflict against the task-conditioned LoRA 0.027 -> 0.029) and
no chosen lr; with it and MoORE's reflections applied as one matrix (``nn.adapters``) the
shared runs went from about 87 to 50 CPU-s.

``adapters.moore_conflict`` is a fair test the paper does not survive at this size: MoORE's
conflict is far below LoRA's (+0.25 +- 0.03, +0.24 +- 0.02, +0.16 +- 0.02 at seeds 0-2) but not
below the task-conditioned LoRA's by 2 SE (+0.029 +- 0.025, -0.005 +- 0.024, +0.009 +- 0.026).
Half of that baseline's conflict (about 0.06) is seen with power 0.72 at seed 0's SE with 12
seeds, so quick records ``inconclusive`` (about 15-25 seeds would give 0.8; the quick budget
does not hold them); full's 24 seeds and 4 tasks give an SE near 0.016, power about 0.95. Six
seeds at quick were tried for the budget (issue 46): the SE barely moved (0.024 at seed 0) and
the conflict verdict became ``not reproduced`` at power 0.81, on the edge of 0.8, so it would
follow the seed; quick keeps 12. Dropping the ablation at quick left every judged number as it
was (the same programs on the same draws).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
import nn.adapters as ad
from _core.streams import substream_seed
from paper_checks import (
    Measurement,
    at_most,
    claim,
    measure,
    memo,
    paired_gap,
    patch,
    record,
    sizes,
    wrap,
)
from paper_checks._stats import mean_se
from paper_checks.adapters._base import (
    D_IN,
    WIDTH,
    cast_floats,
    np_mlp,
    pretrained,
    stack_trees,
)

MOORE = "Yuan, Zheng, Wang, Liu & Xu 2025 (MoORE, arXiv 2506.14436)"

TARGETS = ("layers.0", "layers.1")
MOORE_CONFIG = {"r": 8, "num_experts": 8, "task_dim": 4}
NULL_TASK = True  # the original task (id 0) gets a zero (null) task embedding
METHODS = ("lora", "moore")
BASELINES = ("lora", "lora_task")
PAPER_SHARE = 0.5  # the paper's effect, as a share of the baseline's loss (module docstring)
F32, F64 = jnp.float32, jnp.float64
COL_TOL = 1e-9  # round-off of a float64 residual; a U that moved leaves col(W0) by far more
# ablation: also run MoORE with U trainable (reported, not judged; a fourth method's runs)
SIZES = sizes(
    smoke=dict(tasks=2, seeds=2, n=64, steps=40, checkpoints=4, lrs=(1e-3, 1e-2), ablation=False),
    quick=dict(
        tasks=3,
        seeds=12,
        n=128,
        steps=200,
        checkpoints=20,
        lrs=(3e-4, 1e-3, 3e-3, 1e-2),
        ablation=False,
    ),
    full=dict(
        tasks=4,
        seeds=24,
        n=512,
        steps=600,
        checkpoints=30,
        lrs=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
        ablation=True,
    ),
)


class TaskLoRA(eqx.Module):
    """Task-conditioned LoRA on the ``TARGETS`` of an ``nn.MLP`` (an MTL-LoRA-style baseline):
    ``W0 x + s B diag(1 + g_t) A x`` with ``A`` Kaiming-uniform, ``B = 0``, ``g = 0`` (so the
    update is zero at init, as LoRA's); ``g_t`` a trained vector per task and layer."""

    A: list
    B: list
    G: list
    scale: float = eqx.field(static=True)

    @staticmethod
    def build(base, r, num_tasks, *, key):
        a, b, g = [], [], []
        for i, t in enumerate(TARGETS):
            lin = base.layers[int(t[-1])]
            n, m = lin.in_features, lin.out_features
            lim = 1.0 / np.sqrt(n)
            a.append(
                jax.random.uniform(jax.random.fold_in(key, i), (r, n), minval=-lim, maxval=lim)
            )
            b.append(jnp.zeros((m, r)))
            g.append(jnp.zeros((num_tasks, r)))
        return TaskLoRA(a, b, g, 2.0)

    @staticmethod
    def num_params(shapes, r, num_tasks):
        return sum(r * (m + n) + num_tasks * r for m, n in shapes)

    def __call__(self, base, x, task):
        h, idx = x, {int(t[-1]): j for j, t in enumerate(TARGETS)}
        for i, lin in enumerate(base.layers):
            y = lin(h)
            if i in idx:
                j = idx[i]
                y = y + self.scale * ((h @ self.A[j].T) * (1.0 + self.G[j][task])) @ self.B[j].T
            h = base.activation(y) if i < len(base.layers) - 1 else base.final_activation(y)
        return h


def _tasks(teacher, k, seed, n, n_test=512):
    """``k`` new tasks (train, val, test), each ``(k, n, ...)``, and the original task's test set
    (numpy, float64).

    Task ``j``: inputs ``N(mu_j, I)`` with ``||mu_j|| = 2``; targets of the teacher whose hidden
    weight is moved by ``2 U diag(1 .. 0.5) V^T`` (rank 4)."""
    rng = np.random.default_rng([91, seed])
    w1 = np.asarray(teacher.layers[1].weight)
    sets = {"train": ([], []), "val": ([], []), "test": ([], [])}
    for _ in range(k):
        u = np.linalg.qr(rng.standard_normal((WIDTH, 4)))[0]
        v = np.linalg.qr(rng.standard_normal((WIDTH, 4)))[0]
        w = {1: w1 + 2.0 * u @ np.diag(np.linspace(1.0, 0.5, 4)) @ v.T}
        mu = rng.standard_normal(D_IN)
        mu *= 2.0 / np.linalg.norm(mu)
        for name, size in (("train", n), ("val", n), ("test", n_test)):
            x = mu + rng.standard_normal((size, D_IN))
            sets[name][0].append(x)
            sets[name][1].append(np_mlp(teacher, x, w))
    out = {name: (np.stack(xs), np.stack(ys)) for name, (xs, ys) in sets.items()}
    xo = rng.standard_normal((n_test, D_IN))
    out["orig"] = (xo, np_mlp(teacher, xo))
    return out


def _call(method):
    """``f(tr, fr, x, task)``: MoORE routes by the task id, the task-conditioned LoRA scales its
    rank components by task, LoRA has no task input."""
    if method in ("moore", "moore_u"):
        return lambda t, fr, x, task: nn.combine(t, fr)(x, task=task)
    if method == "lora_task":
        return lambda t, fr, x, task: t(fr, x, task)
    return lambda t, fr, x, task: nn.combine(t, fr)(x)


def _shapes(student):
    return [
        (student.layers[int(t[-1])].out_features, student.layers[int(t[-1])].in_features)
        for t in TARGETS
    ]


def _moore_u(tree):
    """The ``U`` leaves of every MoORE layer in ``tree`` (a model or a mask over one)."""
    layers = jax.tree.leaves(tree, is_leaf=lambda q: isinstance(q, ad.MoORELinear))
    return [q.U for q in layers if isinstance(q, ad.MoORELinear)]


def _adapter(method, student, seed, num_tasks):
    """``(trainable, frozen)`` halves of ``method`` on the student (seed ``seed``)."""
    key = jax.random.key(seed)
    if method == "moore":
        a = ad.inject(
            student, "moore", targets=TARGETS, key=key, num_tasks=num_tasks, **MOORE_CONFIG
        )
        if NULL_TASK:
            layers = list(a.layers().values())
            a = eqx.tree_at(
                lambda m: [q.task_embed for q in m.layers().values()],
                a,
                [q.task_embed.at[0].set(0.0) for q in layers],
            )
        return nn.split(a)
    if method == "moore_u":  # the ablation: MoORE with U trainable (col(W0) not kept)
        a = nn.combine(*_adapter("moore", student, seed, num_tasks))
        mask = nn.trainable_mask(a)
        mask = eqx.tree_at(_moore_u, mask, replace=[True] * len(_moore_u(mask)))
        return nn.split(a, mask)
    if method == "lora_task":
        return TaskLoRA.build(
            student, task_lora_rank(student, num_tasks), num_tasks, key=key
        ), student
    r = lora_rank(student, num_tasks)
    return nn.split(ad.inject(student, "lora", targets=TARGETS, key=key, r=r, alpha=2.0 * r))


def moore_count(student, num_tasks) -> int:
    return ad.num_params("moore", _shapes(student), num_tasks=num_tasks, **MOORE_CONFIG)


def task_lora_rank(student, num_tasks) -> int:
    """The task-conditioned LoRA rank whose count is nearest MoORE's on ``TARGETS``."""
    per_rank = sum(m + n + num_tasks for m, n in _shapes(student))
    return int(round(moore_count(student, num_tasks) / per_rank))


def lora_rank(student, num_tasks) -> int:
    """The LoRA rank whose trainable count ``r sum(m + n)`` is nearest MoORE's on ``TARGETS``."""
    return int(round(moore_count(student, num_tasks) / sum(m + n for m, n in _shapes(student))))


def _runner(method, steps, checkpoints):
    """Jitted ``run(tr, fr, lrs, data) -> ((new, orig), val, trained)``: full-batch Adam on the
    mean of the task MSEs for ``steps``, with the test losses of the tasks in ``data`` (their ids
    in ``data["ids"]``) and of the original task (id 0) at ``checkpoints + 1`` evenly spaced
    points, the final validation losses and the trained half. Data and learning rates are
    arguments, so one compilation serves every run (axis 0 of ``tr`` and ``data``) and learning
    rate (axis 0 of ``lrs``)."""
    call = _call(method)
    every = steps // checkpoints

    def run(tr, fr, lr, d):
        opt = optax.adam(lr)

        def task_losses(t, x, y):
            pred = jax.vmap(lambda xx, i: call(t, fr, xx, i))(x, d["ids"])
            return jnp.mean((pred - y) ** 2, axis=(1, 2))

        def evaluate(t):
            xo, yo = d["orig"]
            return task_losses(t, *d["test"]), jnp.mean((call(t, fr, xo, 0) - yo) ** 2)

        def loss(t, _):  # ``call`` combines with ``fr`` itself
            return jnp.mean(task_losses(t, *d["train"]))

        def chunk(c, _):
            t, st, _ = nn.fit(loss, opt, c[0], opt_state=c[1], length=every)
            return (t, st), evaluate(t)

        (t, _), curve = jax.lax.scan(chunk, (tr, opt.init(tr)), None, length=checkpoints)
        curve = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), evaluate(tr), curve)
        return curve, task_losses(t, *d["val"]), t

    over_lr = eqx.filter_vmap(run, in_axes=(None, None, 0, None))
    return eqx.filter_jit(eqx.filter_vmap(over_lr, in_axes=(0, None, None, 0)))


@memo
def moore_runs(
    tasks: int,
    seeds: int,
    n: int,
    steps: int,
    checkpoints: int,
    lrs: tuple,
    seed: int = 0,
    ablation: bool = True,
):
    """Joint and single-task adaptation of the pretrained MLP by LoRA and MoORE (module docstring).

    Returns per method: ``new`` and ``orig``, the joint run's test loss ratios (to the base
    model's) of the new tasks and of the original task over the checkpoints, ``(seeds, C + 1,
    K)`` and ``(seeds, C + 1)``; ``single``, the single-task runs' final test ratios ``(seeds,
    K)``; the learning rates chosen and the trainable count; and the checkpoints' steps. With
    ``ablation``, also MoORE with ``U`` trainable ("moore_u", joint runs only)."""
    k, n_seeds = tasks, seeds
    z = {"n": n, "steps": steps, "checkpoints": checkpoints, "lrs": lrs}
    teacher, student, _ = pretrained(256, 800, seed)
    sets = [_tasks(teacher, k, substream_seed(seed, s), z["n"]) for s in range(n_seeds)]
    joint = {key: tuple(np.stack([t[key][i] for t in sets]) for i in (0, 1)) for key in sets[0]}
    joint["ids"] = np.tile(np.arange(1, k + 1), (n_seeds, 1))
    # single-task run (s, j): task j of seed s alone, with its own id
    single = {
        key: jax.tree.map(lambda a: a.reshape(-1, 1, *a.shape[2:]), v)
        for key, v in joint.items()
        if key != "orig"
    }
    single["orig"] = jax.tree.map(lambda a: np.repeat(a, k, axis=0), joint["orig"])

    def base_loss(x, y):  # the float64 student, in numpy
        return ((np_mlp(student, x) - y) ** 2).mean(axis=(-2, -1))

    base_test, base_val = base_loss(*joint["test"]), base_loss(*joint["val"])  # (S, K)
    base_orig = base_loss(*joint["orig"])  # (S,)
    out = {"steps": np.linspace(0, z["steps"], z["checkpoints"] + 1), "tasks": k, "lrs": z["lrs"]}
    with jax.enable_x64(False):  # the runs in float32 (module docstring)
        lrs = jnp.asarray(z["lrs"], jnp.float32)
        joint32, single32 = (
            cast_floats(jax.tree.map(jnp.asarray, d), F32) for d in (joint, single)
        )
    for method in (*METHODS, "lora_task") + (("moore_u",) if ablation else ()):
        with jax.enable_x64(True):  # built from the float64 student (MoORE's SVD in float64)
            halves = [
                _adapter(method, student, substream_seed(seed, s), k + 1) for s in range(n_seeds)
            ]
            fr64 = halves[0][1]
            tr = stack_trees([h[0] for h in halves])  # seed-specific init
        with jax.enable_x64(False):
            tr, fr = cast_floats(tr, F32), cast_floats(fr64, F32)
            run = _runner(method, z["steps"], z["checkpoints"])
            (new, orig), val, trained = run(tr, fr, lrs, joint32)
            new, orig, val = (np.asarray(a, np.float64) for a in (new, orig, val))
        lj, vj = _best_lr(val / base_val[:, None])
        out[method] = {
            "lr_joint": z["lrs"][lj],
            "new": new[:, lj] / base_test[:, None],
            "orig": orig[:, lj] / base_orig[:, None],
            "params": sum(a.size for a in jax.tree.leaves(halves[0][0])),
            "val_joint": vj,
            "new_all": new / base_test[:, None, None],
            "orig_all": orig / base_orig[:, None, None],
        }
        if method == "moore":  # the trained parameters with the float64 frozen half
            with jax.enable_x64(True):
                trained = cast_floats(jax.tree.map(lambda a, j=lj: a[:, j], trained), F64)
                out[method]["col_residual"] = column_space_residual(trained, fr64, student, joint)
        if method == "moore_u":  # the forgetting ablation needs no single-task runs
            continue
        with jax.enable_x64(False):
            tr1 = jax.tree.map(lambda a: jnp.asarray(np.repeat(np.asarray(a), k, axis=0)), tr)
            (new1, _), val1, _ = run(tr1, fr, lrs, single32)
            new1, val1 = np.asarray(new1, np.float64), np.asarray(val1, np.float64)
        # (S K, L, C + 1, 1) -> (S, L, K) at the last checkpoint
        new1 = new1[:, :, -1, 0].reshape(n_seeds, k, -1).transpose(0, 2, 1)
        val1 = val1[..., 0].reshape(n_seeds, k, -1).transpose(0, 2, 1)
        l1, v1 = _best_lr(val1 / base_val[:, None])
        out[method] |= {
            "lr_single": z["lrs"][l1],
            "single": new1[:, l1] / base_test,
            "val_single": v1,
        }
    return out


@eqx.filter_jit
def _residuals(tr, fr, x, ids, u0):
    """Per seed (axis 0 of ``tr``, ``x``, ``ids``): the largest over the inputs ``x`` (with task
    ``ids``) of ``||(I - U0 U0^T) W_eff(x, t)||_F / ||W_eff(x, t)||_F`` of MoORE's layer 0."""

    def per_seed(t, xs, ts):
        q = nn.combine(t, fr).layers()[TARGETS[0]]

        def one(xx, task):
            w = q.effective_weight(xx, task)
            norm = jnp.linalg.norm(w)  # 0 when the router closes every gate: nothing outside
            out = jnp.linalg.norm(w - u0 @ (u0.T @ w))
            return jnp.where(norm > 0, out / jnp.where(norm > 0, norm, 1.0), 0.0)

        return jax.vmap(one)(xs, ts).max()

    return jax.vmap(per_seed)(tr, x, ids)


def column_space_residual(trained, fr, student, joint, per_task: int = 16) -> np.ndarray:
    """Per seed: how far the trained MoORE's effective weight of layer 0 (32 x 16, so ``col(W0)``
    is a proper subspace) leaves ``col(W0)``, the largest relative residual over ``per_task``
    test inputs of each new task and the original task (id 0); ``U0`` from numpy's SVD of the
    student's weight, not from the layer. The paper's guarantee (abstract) makes it 0 up to
    round-off."""
    w0 = np.asarray(student.layers[int(TARGETS[0][-1])].weight)
    u0 = jnp.asarray(np.linalg.svd(w0, full_matrices=False)[0])
    x = np.asarray(joint["test"][0])  # (S, K, n, D)
    s, k = x.shape[:2]
    xs = x[:, :, :per_task].reshape(s, k * per_task, -1)
    xo = np.asarray(joint["orig"][0])[:, :per_task]
    ids = np.concatenate(
        [np.repeat(np.asarray(joint["ids"]), per_task, axis=1), np.zeros((s, per_task), int)], 1
    )
    xs = jnp.asarray(np.concatenate([xs, xo], 1))
    return np.asarray(_residuals(trained, fr, xs, jnp.asarray(ids), u0))


def _best_lr(val_ratio):
    """Index of the grid lr with the smallest mean (over seeds and tasks) validation ratio (a
    diverged run counts as infinite), and those means."""
    v = np.where(np.isfinite(val_ratio), val_ratio, np.inf).mean(axis=(0, 2))
    return int(np.argmin(v)), v


def matched_forgetting(new, orig, level):
    """The original-task ratio where the mean new-task ratio first reaches ``level``, linearly
    interpolated between checkpoints (``new (C + 1, K)``, ``orig (C + 1,)``)."""
    m = new.mean(axis=1)
    c = int(np.argmax(m <= level))
    if c == 0:
        return float(orig[0])
    w = (m[c - 1] - level) / (m[c - 1] - m[c])
    return float(orig[c - 1] + w * (orig[c] - orig[c - 1]))


def forgetting_at_matched_fit(r, methods=METHODS):
    """Per seed: the ``methods``' original-task ratios (default LoRA, MoORE) at the new-task
    ratio all of them reach."""
    out = []
    for s in range(r[methods[0]]["new"].shape[0]):
        level = max(r[m]["new"][s, -1].mean() for m in methods)
        out.append([matched_forgetting(r[m]["new"][s], r[m]["orig"][s], level) for m in methods])
    return np.asarray(out)


def forgetting_gap_by_lr(r):
    """Paired gap (mean, SE) of the matched-fit forgetting, LoRA at its chosen lr minus MoORE at
    each grid lr: how much the verdict depends on MoORE's learning rate."""
    out = {}
    for j, lr in enumerate(r["lrs"]):
        rj = {
            **r,
            "moore": {"new": r["moore"]["new_all"][:, j], "orig": r["moore"]["orig_all"][:, j]},
        }
        f = forgetting_at_matched_fit(rj)
        out[lr] = mean_se(f[:, 0] - f[:, 1])
    return out


def conflict(r, method):
    """Per seed: mean over tasks of ``log(joint loss / single-task loss)`` at the end."""
    return np.log(r[method]["new"][:, -1] / r[method]["single"]).mean(axis=1)


def _run(size, seed):
    return moore_runs(
        size.tasks,
        size.seeds,
        size.n,
        size.steps,
        size.checkpoints,
        size.lrs,
        seed,
        size.ablation,
    )


def _moore_route_off(f):
    """MoORE's task route dropped: the router ignores the task id (a wiring bug)."""
    return lambda self, x, task: f(self, x, 0)


@claim(
    "adapters.moore_forgetting",
    paper=MOORE,
    statement="After multi-task adaptation, MoORE forgets the original task less than LoRA "
    "(the paper credits its keeping the column space of W0); compared at matched fit of the "
    "new tasks.",
    where="Abstract (oblivion resistance); protocol of the official code (joint adapter on "
    "all tasks, every block linear adapted); paper body not readable here",
    sizes=SIZES,
    mutants=[
        patch(
            "nn.adapters._moore.MoORELinear.frozen",
            ("U", "sigma", "V", "bias", "w_gate", "w_up", "w_task", "task_embed"),
            "MoORE's router weights frozen (only the Householder rotation trains)",
            name="router_frozen",
        ),
        patch(
            "nn.adapters._moore.MoORELinear.frozen",
            ("sigma", "V", "bias"),
            "MoORE's U trainable: col(W0) no longer kept (the mechanism the paper credits)",
            name="u_trainable",
        ),
    ],
)
def _check_forgetting(size, seed) -> Measurement:
    r = _run(size, seed)
    f = forgetting_at_matched_fit(r)
    ablation = {}
    if "moore_u" in r:
        fu = forgetting_at_matched_fit(r, ("moore_u", "moore"))
        ablation = {
            "not judged: ablation (U trained) - MoORE": mean_se(fu[:, 0] - fu[:, 1]),
            "lr_moore_U_trained": r["moore_u"]["lr_joint"],
        }
    by_lr = forgetting_gap_by_lr(r)
    level = np.mean([max(r[m]["new"][s, -1].mean() for m in METHODS) for s in range(f.shape[0])])
    paper = PAPER_SHARE * float(f[:, 0].mean() - 1.0)
    return measure(
        paired_gap(
            f[:, 0], f[:, 1], n_se=2, name="orig_ratio_lora - orig_ratio_moore", paper=paper
        ),
        at_most(
            float(r["moore"]["col_residual"].max()),
            COL_TOL,
            name="MoORE max ||(I - P_col(W0)) W_eff||_F / ||W_eff||_F (layer 0, trained)",
        ),
        extra={
            "orig_ratio_lora": f[:, 0].mean(),
            "orig_ratio_moore": f[:, 1].mean(),
            **ablation,
            "matched_new_ratio": float(level),
            "orig_ratio_lora_end": r["lora"]["orig"][:, -1].mean(),
            "orig_ratio_moore_end": r["moore"]["orig"][:, -1].mean(),
            "lr_lora": r["lora"]["lr_joint"],
            "lr_moore": r["moore"]["lr_joint"],
            "params_lora": r["lora"]["params"],
            "params_moore": r["moore"]["params"],
        },
        detail=f"{r['tasks']} new tasks trained jointly, {len(f)} seeds; original-task loss / "
        f"base's at the new-task ratio both reach; paper's effect (no number in the abstract): "
        f"MoORE avoids {PAPER_SHARE:.0%} of LoRA's forgetting; the trained MoORE's layer-0 "
        f"weight must stay in col(W0) (the mechanism the paper credits); task_dim "
        f"{MOORE_CONFIG['task_dim']}, null embedding for the original task; lr grid "
        f"{', '.join(f'{v:g}' for v in r['lrs'])}; "
        f"gap with MoORE at each grid lr: "
        + ", ".join(f"{lr:g}: {m:.2g} +- {e:.1g}" for lr, (m, e) in by_lr.items()),
    )


@claim(
    "adapters.moore_conflict",
    paper=MOORE,
    statement="Trained jointly on several new tasks, MoORE loses less per-task performance "
    "against single-task training than LoRA and than a task-conditioned LoRA "
    "(orthogonal rank-one experts routed by task and sample).",
    where="Abstract (conflict resistance; 'outperforms existing multi-task adaptation "
    "methods'); official code train_increment.py; paper body not readable here",
    sizes=SIZES,
    recorded=record(
        quick="inconclusive",
        reason="a fair test (matched counts, tuned lrs, a task-conditioned LoRA baseline) in "
        "which MoORE's conflict is not below the task-conditioned LoRA's by 2 SE (+0.029 "
        "+- 0.025, -0.005 +- 0.024, +0.009 +- 0.026 at seeds 0-2, float32 runs), while 12 "
        "seeds give power < 0.8 to see half that baseline's conflict (~0.06); full (24 seeds) "
        "powers it",
    ),
    mutants=[
        wrap(
            "nn.adapters.MoORELinear.gates",
            _moore_route_off,
            "MoORE's router ignores the task id",
            name="no_task_route",
        )
    ],
)
def _check_conflict(size, seed) -> Measurement:
    r = _run(size, seed)
    cl, ct, cm = conflict(r, "lora"), conflict(r, "lora_task"), conflict(r, "moore")
    return measure(
        paired_gap(
            cl,
            cm,
            n_se=2,
            name="conflict_lora - conflict_moore",
            paper=PAPER_SHARE * float(cl.mean()),
        ),
        paired_gap(
            ct,
            cm,
            n_se=2,
            name="conflict_task_lora - conflict_moore",
            paper=PAPER_SHARE * float(ct.mean()),
        ),
        extra={
            "conflict_lora": cl.mean(),
            "conflict_task_lora": ct.mean(),
            "conflict_moore": cm.mean(),
            "params": {m: r[m]["params"] for m in ("lora", "lora_task", "moore")},
        },
        detail=f"conflict = mean over {r['tasks']} tasks of log(test loss joint / single-task), "
        f"{len(cl)} seeds, paired; paper's effect (no number in the abstract): MoORE avoids "
        f"{PAPER_SHARE:.0%} of each baseline's conflict; lr joint/single LoRA "
        f"{r['lora']['lr_joint']:g}/"
        f"{r['lora']['lr_single']:g}, task-LoRA {r['lora_task']['lr_joint']:g}/"
        f"{r['lora_task']['lr_single']:g}, MoORE {r['moore']['lr_joint']:g}/"
        f"{r['moore']['lr_single']:g}",
    )
