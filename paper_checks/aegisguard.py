"""AegisGuard claims: which LoRA adapters to shield in a TEE against model stealing (Wang et al.,
NeurIPS 2025, OpenReview i99ZhFw6GN; no code is public: the mechanism is reconstructed from
digests of the paper, ``docs/papers/aegisguard.md``, every open choice an option of
:mod:`dynamics.aegisguard`).

Setting (variant V2 of ``docs/papers/aegisguard.md``): a public random residual MLP
(``n_blocks + 2`` linear maps, one
LoRA adapter each), a private task planted on 3 layers, two victims per replicate -- (a) plain
LoRA and (b) RSM-trained (AegisGuard) -- and the TEESlice label-only attack (Sec. 4) run on every
one of the ``2^L`` shielded sets with common random numbers, so every ranking at every budget is a
lookup and "random" is the exact mean over all subsets of that size. Replicates share nothing but
the sizes; rules pair them (SE over replicates). Models, inputs and adapters are float32
(``planted_task``'s default) inside the claims' float64 JAX setting.

Verdicts (issue 44; quick: 16 replicates, L = 8 adapters, 64 label-only queries):

- ``aegisguard.black_box_level``: leakage of RSM's top half, paper's effect 0 (surrogate at the
  black-box accuracy, 39.1 % vs 38.9 %). Measured about 0.2: the paper's
  value passes the rule (<= 0.1 + 2 SE) with power ~1, so the fair test is powered and the
  paper's statement does not survive it at this size (0.23 +- 0.04 at seed 0; RSM reaches 0.1
  only at 6 of 8 adapters, the oracle at 4): recorded ``not reproduced``.
- ``aegisguard.ranking``: RSM below random at equal budget (paper's effect: RSM at black-box
  level, so random - black box) holds; precision at ``|S*|`` about 0.43 against 0.8 (paper's
  effect: the sensitive layers first, precision 1; power ~1): recorded ``not reproduced``.
  Seed 0: random - RSM 0.052 +- 0.017 (k = 2), 0.034 +- 0.015 (k = 4); precision 0.42.
- ``aegisguard.cost``: redesigned. Memory, latency, accuracy and leakage are judged at one
  configuration, RSM's top quarter + SAC (30 %), where the memory claim is made; the former
  check passed 4x memory there while that configuration's leakage was 0.52. Latency no longer
  rests on an assumed share ``f = 0.6``: the TEE path the configuration leaves is bounded for
  any hardware (:func:`theory.aegisguard.path_fraction`) and ``f`` is derived from the paper's
  own LLaMA-7B numbers (:func:`paper_tee_share`, ``f = 0.927``). Seed 0: memory 5.2x, the path
  left at most 1/4 (the transitions), speed-up 3.3x (1.8x had ``f`` been 0.6), accuracy drop
  0.01 points; leakage at that configuration 0.52 +- 0.06, far above black-box level with power ~1
  to see the paper's ~0: recorded ``not reproduced``. Mutant ``no_pruning`` (SAC ratio 0),
  checked on this design at seed 0 (issue 44: a non-reproduced claim's mutant must move a
  measured value > 3 SE): memory ratio 5.21 +- 0.17 -> 4.47 (4.4 SE; it would still pass the
  4x bound), speed-up 3.28 -> 3.23, accuracy drop 0.0001 -> -0.008, leakage 0.52 -> 0.50:
  caught (``moved``), by the memory ratio alone. Measured with ``_cost`` itself, the victims'
  ``2^L`` attack tables, which ``cost`` does not read, skipped.
- ``aegisguard.feature_leakage``: exact least-squares identity, two-valued.

Time (issue 46): :func:`replicate` is a :func:`memo`, so the 16 replicates that
``black_box_level``, ``ranking``, ``cost`` and the figure all declare are trained and attacked
once per run, not once per claim (the numbers are the same). The SAC victim is attacked only at
the three shielded sets ``cost`` reads (none, RSM's top quarter, all: :func:`_table_at`), not at
all ``2^L``: a third of the area's attacks were computed and never read.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import spearmanr

from dynamics.aegisguard import attack as A
from dynamics.aegisguard import bandit as RL
from dynamics.aegisguard import baselines as BL
from dynamics.aegisguard import pruning as P
from dynamics.aegisguard import victim as V
from paper_checks import (
    Measurement,
    Replicates,
    at_least,
    at_most,
    claim,
    measure,
    memo,
    paired_gap,
    patch,
    record,
    run_replicates,
    sizes,
    wrap,
)
from theory import aegisguard as C

PAPER = "Wang et al. 2025 (AegisGuard, NeurIPS 2025, OpenReview i99ZhFw6GN)"
RANKINGS = ("rsm", "magnitude", "probe", "shallow", "deep")
GROUP = 4  # output units per pruning group ("head")
SAC_RATIO = 0.3  # the ablation's "Shield-LoRA + SAC (30%)"
#: the paper's LLaMA-7B numbers (digest; docs/papers/aegisguard.md, A2-A3): TEE memory with every
#: adapter shielded and with AegisGuard (MB), and AegisGuard's end-to-end speed-up over the former
PAPER_MEMORY_MB = (224.4, 54.96)
PAPER_SPEEDUP = 3.33

SIZES = sizes(
    smoke=dict(reps=2, n_blocks=2, n_train=256, n_test=256, steps=40, queries=32, epochs=4,
               sac_steps=40, probe_batch=64, draws=4),
    quick=dict(reps=16, n_blocks=6, n_train=2048, n_test=2048, steps=400, queries=64, epochs=30,
               sac_steps=100, probe_batch=128, draws=32),
    full=dict(reps=16, n_blocks=6, n_train=4096, n_test=4096, steps=1500, queries=128,
              epochs=30, sac_steps=300, probe_batch=256, draws=32),
)  # fmt: skip


def run_args(size):
    return tuple(size[k] for k in SIZES["smoke"] if k != "scale")


def budgets(n_layers):
    """The shielded budgets compared: a quarter and a half of the adapters."""
    return max(1, n_layers // 4), n_layers // 2


# tiny models: XLA's backend optimisations cost more compile time than they save at run time,
# except in the attack table (2^L attacks of ``epochs`` passes each), where they run 2.4x faster
# (measured at quick under load: 61 s against 147 s per 16-replicate table, ~20 s more compile)
_JIT = dict(
    static_argnames="cfg",
    compiler_options={
        "xla_backend_optimization_level": 0,
        "xla_llvm_disable_expensive_passes": True,
    },
)
_JIT_HEAVY = dict(static_argnames="cfg")


def _setup(key, cfg):
    n_blocks, n_train, n_test = cfg[:3]
    kt, km = jax.random.split(key)
    task = V.planted_task(key=kt, n_blocks=n_blocks, n_train=n_train, n_test=n_test)
    return task, V.adapted_model(task.backbone, key=km)


@functools.partial(jax.jit, **_JIT)
@functools.partial(jax.vmap, in_axes=(0, None))
def _victims(key, cfg):
    """Both victims of one replicate, their rankings and accuracies."""
    steps, probe_batch, draws = cfg[3], cfg[7], cfg[8]
    task, m = _setup(key, cfg)
    kv, kr, kp, kq = jax.random.split(jax.random.fold_in(key, 1), 4)
    Xp, yp = task.X_train[:probe_batch], task.y_train[:probe_batch]
    Aa, Ba = V.train_victim(m, task.X_train, task.y_train, steps=steps, key=kv)
    Ab, Bb, s, trained = RL.rsm_train(m, task.X_train, task.y_train, steps=steps, key=kr)
    out = dict(planted=task.planted, trained=trained, rsm_b=s, Aa=Aa, Ba=Ba, Ab=Ab, Bb=Bb)
    for v, (As, Bs) in (("a", (Aa, Ba)), ("b", (Ab, Bb))):
        out[f"acc_{v}"] = V.accuracy(m, As, Bs, task.X_test, task.y_test)
        out[f"magnitude_{v}"] = BL.magnitude_scores(m, As, Bs)
        out[f"probe_{v}"] = BL.probe_scores(m, As, Bs, Xp, yp, draws=draws, key=kq)
    out["rsm_a"] = RL.rsm_posthoc(m, Aa, Ba, task.X_train, task.y_train, rounds=max(1, steps // 20),
                                  key=kp)  # fmt: skip
    return out


def _attacked(key, As, Bs, cfg, masks):
    """Surrogate test accuracy for each shielded set of ``masks`` (common random numbers: the
    attack of a set depends on the set and the replicate's key alone)."""
    queries, epochs = cfg[4], cfg[5]
    task, m = _setup(key, cfg)
    Xq = task.X_train[:queries]
    yq = A.query_labels(m, As, Bs, Xq)
    ka = jax.random.fold_in(key, 2)

    def one(mask):
        view = A.expose(m, As, Bs, mask)
        sur = A.attack(view, Xq, yq, epochs=epochs, key=ka)
        return V.accuracy(view.model, *sur, task.X_test, task.y_test)

    return jax.vmap(one)(masks)


@functools.partial(jax.jit, **_JIT_HEAVY)
@functools.partial(jax.vmap, in_axes=(0, 0, 0, None))
def _table(key, As, Bs, cfg):
    """Surrogate test accuracy for every shielded set (common random numbers)."""
    return _attacked(key, As, Bs, cfg, jnp.asarray(A.subset_masks(cfg[0] + 2)))


@functools.partial(jax.jit, **_JIT)
@functools.partial(jax.vmap, in_axes=(0, 0, 0, None, 0))
def _table_at(key, As, Bs, cfg, masks):
    """:func:`_table`'s entries at the replicate's shielded sets ``masks`` only."""
    return _attacked(key, As, Bs, cfg, masks)


@functools.partial(jax.jit, **_JIT)
@functools.partial(jax.vmap, in_axes=(0, 0, 0, 0, None))
def _sac(key, As, Bs, s, cfg):
    """SAC on the RSM victim's top quarter: pruned factors, kept widths, accuracy."""
    task, m = _setup(key, cfg)
    shield = BL.top_k(s, budgets(cfg[0] + 2)[0])
    Ac, Bc, keep = P.sac_prune(m, As, Bs, task.X_train, task.y_train, shield, s,
                               ratio=cfg[9], group=GROUP, steps=cfg[6],
                               key=jax.random.fold_in(key, 3))  # fmt: skip
    kept = jnp.stack([GROUP * jnp.sum(k) for k in keep])
    acc = V.accuracy(m, Ac, Bc, task.X_test, task.y_test)
    return dict(Ac=Ac, Bc=Bc, kept_out=kept, shield_sac=shield, acc_sac=acc)


@memo
def replicate(n_blocks, n_train, n_test, steps, queries, epochs, sac_steps, probe_batch, draws,
              seed, i):  # fmt: skip
    """Replicate ``i``: its victims, rankings and attack tables (numpy, leading axis 1).

    A :func:`memo`: every AegisGuard claim declares the same replicates, and in one process each
    claim's declared plan is computed before its check (``compute_plan``), so without the memo
    the three claims that read them trained and attacked every victim three times (the quick
    run's ``ranking`` and ``cost`` spent about 50 s each redoing ``black_box_level``'s work)."""
    cfg = (n_blocks, n_train, n_test, steps, queries, epochs, sac_steps, probe_batch, draws,
           SAC_RATIO)  # fmt: skip
    keys = jax.random.fold_in(jax.random.key(seed), i)[None]
    out = _victims(keys, cfg)
    sac = _sac(keys, out["Ab"], out["Bb"], out["rsm_b"], cfg)
    out |= sac
    out["table_a"] = _table(keys, out["Aa"], out["Ba"], cfg)
    out["table_b"] = _table(keys, out["Ab"], out["Bb"], cfg)
    # the SAC victim is read at three sets only (``cost``): none, RSM's top quarter, all shielded
    L = cfg[0] + 2
    ends = np.zeros((3, L), bool)
    ends[2] = True
    masks = jnp.asarray(ends)[None].at[:, 1].set(sac["shield_sac"])
    out["ends_sac"] = _table_at(keys, sac["Ac"], sac["Bc"], cfg, masks)
    drop = ("Aa", "Ba", "Ab", "Bb", "Ac", "Bc")
    return {k: np.asarray(v) for k, v in out.items() if k not in drop}


def _replicates_of(reps, *args) -> Replicates:
    """The ``reps`` replicates of :func:`replicate` with ``args`` (sizes, then the seed)."""
    return Replicates(replicate, args, reps, label="AegisGuard replicates")


def plan(size, seed) -> list[Replicates]:
    """The claims' replicates: one task each on a cluster, shared by every AegisGuard claim."""
    return [_replicates_of(*run_args(size), seed)]


@memo
def run(reps, n_blocks, n_train, n_test, steps, queries, epochs, sac_steps, probe_batch, draws,
        seed):  # fmt: skip
    """Every replicate's victims, rankings and attack tables (numpy, replicates first)."""
    args = (n_blocks, n_train, n_test, steps, queries, epochs, sac_steps, probe_batch, draws)
    res = run_replicates(_replicates_of(reps, *args, seed))
    return {k: np.concatenate([r[k] for r in res]) for k in res[0]}


def selected_accuracy(r, ranking, victim, k):
    """Per replicate, the attack accuracy when the top-``k`` of ``ranking`` is shielded."""
    table = r[f"table_{victim}"]
    L = int(round(np.log2(table.shape[1])))
    if ranking == "random":
        return BL.random_expected(table, k)
    if ranking == "oracle":
        return BL.oracle(table, k)
    if ranking in ("shallow", "deep"):
        mask = np.asarray(BL.top_k(BL.depth_scores(L, ranking), k))
        return table[:, A.subset_index(mask)]
    key = f"{ranking}_{victim}"
    tops = [np.asarray(BL.top_k(sc, k)) for sc in r[key]]
    return np.array([t[A.subset_index(m)] for t, m in zip(table, tops, strict=True)])


def _ends(r, victim="b"):
    t = r["ends_sac"] if victim == "sac" else r[f"table_{victim}"]
    return t[:, -1], t[:, 0]  # black box (all shielded), white box (none)


def _lambda(acc, bb, wb):
    return (acc - bb) / (wb - bb)


def _above_black_box(acc, bb):
    """The paper's gap of ``acc`` over RSM, which it puts at black-box level (A1): ``acc - bb``
    averaged; None (a two-valued rule) where that is not positive, the paper's effect then being
    no gap, which no ``> 0`` rule can test."""
    gap = float(np.mean(acc - bb))
    return gap if gap > 0 else None


def _se(x):
    x = np.asarray(x, np.float64)
    return float(x.std(ddof=1) / np.sqrt(x.size))


@claim(
    "aegisguard.black_box_level",
    paper=PAPER,
    statement="Shielding the adapters AegisGuard's RSM ranks highest, at half the adapters, "
    "leaves the label-only model-stealing surrogate at black-box level: normalised leakage "
    "(acc - acc_bb)/(acc_wb - acc_bb) <= 0.1 (at 2 SE), while the white-box surrogate beats the "
    "black-box one by more than 5 SE.",
    where="abstract ('black-box level MS resilience', ~39% vs 38.9%); "
    "docs/papers/aegisguard.md A1, Q1/Q3; paper's effect: leakage 0 (the surrogate at "
    "black-box accuracy)",
    sizes=SIZES,
    replicates=plan,
    recorded=record(
        quick="not reproduced",
        reason="RSM's top half leaves leakage 0.19-0.24 (SE 0.03-0.04 over 16 replicates, "
        "seeds 0-2) against the black-box level <= 0.1 that the paper's ~0 passes with power "
        "~1: partial shielding by this ranking leaks (docs/papers/aegisguard.md: RSM's probe is "
        "magnitude-like in expectation, not what a label-only attacker needs).",
    ),
    mutants=[
        wrap(
            "dynamics.aegisguard.bandit._reward",
            lambda f: lambda dL, sel, variant: f(-dL, sel, variant),
            "the probe's loss change enters the reward with the wrong sign",
            name="probe_sign",
        )
    ],
)
def _black_box_level(size, seed) -> Measurement:
    r = run(*run_args(size), seed)
    L = r["table_b"].shape[1].bit_length() - 1
    k = budgets(L)[1]
    bb, wb = _ends(r)
    lam = _lambda(selected_accuracy(r, "rsm", "b", k), bb, wb)
    smallest = {}
    for name in (*RANKINGS, "random", "oracle"):
        ok = [
            kk
            for kk in range(L + 1)
            if np.mean(_lambda(selected_accuracy(r, name, "b", kk), bb, wb)) <= 0.1
        ]
        smallest[f"smallest k with mean leakage <= 0.1: {name}"] = ok[0]
    return measure(
        at_most(
            float(np.mean(lam)),
            0.1,
            tol=2 * _se(lam),
            name=f"leakage of RSM top-{k}",
            paper=0.0,
            se=_se(lam),
            replicates=lam.size,
        ),
        paired_gap(wb, bb, n_se=5.0, name="acc white box - black box"),
        extra={
            "surrogate acc RSM / black box / white box": [
                float(np.mean(selected_accuracy(r, "rsm", "b", k))),
                float(bb.mean()),
                float(wb.mean()),
            ],
            "victim acc plain / RSM-trained": [float(r["acc_a"].mean()), float(r["acc_b"].mean())],
            **smallest,
        },  # fmt: skip
        detail=f"{size.reps} replicates, L = {L} adapters, budget k = {k}, {size.queries} "
        f"label-only queries; paper: surrogate 39.1% vs black-box 38.9% (digest)",
    )


@claim(
    "aegisguard.ranking",
    paper=PAPER,
    statement="At equal shielded budget (a quarter and a half of the adapters), the RSM ranking "
    "leaves the attacker a lower surrogate accuracy than random selection (paired over "
    "replicates at 2 SE), and on the planted task it finds the planted layers (precision at "
    "|S*| >= 0.8; random 3/8). Magnitude and the one-shot probe are reported beside it.",
    where="docs/papers/aegisguard.md A5 (random control worse than RSM), Q2 (pass criteria "
    "fixed before running: both rules; magnitude and probe recorded, not required); paper's "
    "effect: RSM's top-k at black-box level (A1), so random - RSM = random - black box, and "
    "the sensitive layers ranked first (precision 1)",
    sizes=SIZES,
    replicates=plan,
    recorded=record(
        quick="not reproduced",
        reason="RSM beats random at both budgets, but its top 3 hold 0.42-0.44 of the planted "
        "layers (seeds 0-2; random 3/8) against the required 0.8, which the paper's effect (1) "
        "passes with power ~1 at the measured SE: the bandit does not find the sensitive layers.",
    ),
    mutants=[
        wrap(
            "dynamics.aegisguard.bandit._score_update",
            lambda f: lambda s, r, sel, mu: f(s, -r, sel, mu),
            "score update descends the reward (sign slip): the least sensitive layers are shielded",
            name="reward_sign",
        )
    ],
)
def _ranking(size, seed) -> Measurement:
    r = run(*run_args(size), seed)
    L = r["table_b"].shape[1].bit_length() - 1
    rules, extra = [], {}
    bb, _ = _ends(r)
    for k in budgets(L):
        rsm, rand = selected_accuracy(r, "rsm", "b", k), selected_accuracy(r, "random", "b", k)
        rules.append(
            paired_gap(
                rand,
                rsm,
                n_se=2.0,
                name=f"k={k}: acc random - acc RSM",
                paper=_above_black_box(rand, bb),
            )
        )
        for base in ("magnitude", "probe"):  # Q2: recorded, not required
            gap = selected_accuracy(r, base, "b", k) - rsm
            se = float(np.std(gap, ddof=1) / np.sqrt(gap.size))
            extra[f"k={k}: acc {base} - acc RSM (mean, SE)"] = [float(gap.mean()), se]
        extra[f"k={k} mean surrogate acc (victim b)"] = {
            n: float(np.mean(selected_accuracy(r, n, "b", k)))
            for n in (*RANKINGS, "random", "oracle")
        }
        extra[f"k={k} mean surrogate acc (victim a, RSM post hoc)"] = {
            n: float(np.mean(selected_accuracy(r, n, "a", k)))
            for n in (*RANKINGS, "random", "oracle")
        }
    top = r["planted"].sum(1)[0]
    prec = [np.mean(np.asarray(BL.top_k(s, top)) & p) * L / top for s, p in
            zip(r["rsm_b"], r["planted"], strict=True)]  # fmt: skip
    rho = [  # a constant score vector has no rank correlation: counted as 0
        spearmanr(s, m).statistic if np.ptp(s) > 0 and np.ptp(m) > 0 else 0.0
        for s, m in zip(r["rsm_b"], r["magnitude_b"], strict=True)
    ]
    extra["Spearman(RSM scores, magnitude)"] = float(np.mean(rho))
    extra["rounds trained per layer (mean)"] = r["trained"].mean(0).tolist()
    rules.append(
        at_least(
            float(np.mean(prec)),
            0.8,
            name="precision@|S*| of RSM (random 3/8)",
            paper=1.0,
            se=_se(prec),
            replicates=len(prec),
        )
    )
    return measure(
        *rules,
        extra=extra,
        detail=f"victim (b) RSM-trained; random = exact mean over all C(L, k) subsets; "
        f"{size.reps} replicates; E[probe] ~ ||X||^2 ||B||^2 (derived here, G2): magnitude-like",
    )


def sac_costs(r):
    """Per replicate: TEE memory ratio of RSM top quarter + SAC against shielding every adapter,
    and the largest fraction of the full-shield TEE path's time it leaves for any hardware
    (:func:`theory.aegisguard.path_fraction`; exact integers from :mod:`theory.aegisguard`)."""
    L = r["table_b"].shape[1].bit_length() - 1
    # (out, in) of the planted task's layers (planted_task defaults: d_in 16, width 32, 8 classes)
    shapes = [(32, 16), *[(32, 32)] * (L - 2), (8, 32)]
    full = C.shielded_cost(shapes, [True] * L, 4)
    mem, path = [], []
    for sh, kept in zip(r["shield_sac"], r["kept_out"], strict=True):
        part = C.shielded_cost(shapes, [bool(x) for x in sh], 4,
                               kept_out=[int(x) for x in kept])  # fmt: skip
        mem.append(full.param_bytes / part.param_bytes)
        path.append(C.path_fraction(part, full))
    return np.asarray(mem), np.asarray(path), shapes


def paper_tee_share() -> float:
    """The share ``f`` of full-shield latency on the TEE path that the paper's LLaMA-7B numbers
    imply (derived here): its q/v adapters all have one shape and rank, so the TEE path's bytes
    and FLOPs keep the fraction of TEE memory kept, ``c = 54.96 / 224.4`` (module formulas of
    :mod:`theory.aegisguard`; the transitions keep at least that, so ``f`` is at least), and a
    3.33x speed-up at that ``c`` needs ``f = (1 - 1/3.33) / (1 - c)``
    (:func:`theory.aegisguard.tee_share`). The equal fractions are checked exactly in
    ``tests/theory/test_aegisguard.py``."""
    full, kept = PAPER_MEMORY_MB
    return C.tee_share(PAPER_SPEEDUP, kept / full)


@claim(
    "aegisguard.cost",
    paper=PAPER,
    statement="One configuration, RSM's top quarter of the adapters shielded and compressed by "
    "SAC (30% of their output groups), cuts TEE memory by at least 4x against shielding every "
    "adapter, end-to-end latency by at least 2x (at the TEE-path share of latency the paper's "
    "LLaMA-7B numbers imply), loses at most 1 point of victim accuracy, and keeps the label-only "
    "surrogate at black-box level (normalised leakage <= 0.1 at 2 SE).",
    where="abstract ('cutting TEE memory usage by 4x', 'reducing latency by 2-3x', 'no accuracy "
    "loss', 'black-box level MS resilience'); docs/papers/aegisguard.md A1-A4, Q5; paper's "
    "effects: memory 224.4 / 54.96 MB = 4.08x, 3.33x on LLaMA-7B, -0.12 points, leakage ~0",
    sizes=SIZES,
    replicates=plan,
    recorded=record(
        quick="not reproduced",
        reason="the configuration that cuts TEE memory 4x (RSM's top quarter + SAC) leaves the "
        "surrogate far above black-box level (leakage 0.52-0.55, SE 0.03-0.06 over 16 replicates, "
        "seeds 0-2; the paper's ~0 passes with power ~1); memory (4.9-5.2x), latency (3.3x at the "
        "paper's f = 0.93; 1.8x at f = 0.6) and accuracy (drop 0.01-0.1 points) hold.",
    ),
    mutants=[
        patch(
            "paper_checks.aegisguard.SAC_RATIO",
            0.0,
            "SAC never prunes (ratio 0)",
            name="no_pruning",
        )
    ],
)
def _cost(size, seed) -> Measurement:
    r = run(*run_args(size), seed)
    mem, path, shapes = sac_costs(r)
    f = paper_tee_share()
    speed = np.array([C.amdahl_speedup(f, c) for c in path])
    drop = r["acc_b"] - r["acc_sac"]
    bb, wb = _ends(r, "sac")
    lam = _lambda(r["ends_sac"][:, 1], bb, wb)
    full, kept = PAPER_MEMORY_MB
    return measure(
        at_least(
            float(mem.mean()),
            4.0,
            name="TEE memory ratio (full / AegisGuard)",
            paper=full / kept,
            se=_se(mem),
            replicates=mem.size,
        ),
        at_least(
            float(speed.mean()),
            2.0,
            name=f"latency speed-up (f = {f:.3f})",
            paper=PAPER_SPEEDUP,
            se=_se(speed),
            replicates=speed.size,
        ),
        at_most(
            float(drop.mean()),
            0.01,
            tol=2 * _se(drop),
            name="victim accuracy drop by SAC",
            paper=0.0012,
            se=_se(drop),
            replicates=drop.size,
        ),
        at_most(
            float(lam.mean()),
            0.1,
            tol=2 * _se(lam),
            name="leakage of the same configuration",
            paper=0.0,
            se=_se(lam),
            replicates=lam.size,
        ),
        extra={
            "TEE-path time fraction left c (upper bound, any hardware)": float(path.mean()),
            "speed-up at f = 0.6 (the digest's 'communication over 60%')": float(
                np.mean([C.amdahl_speedup(0.6, c) for c in path])
            ),
            "kept outputs per layer (replicate 0)": r["kept_out"][0].tolist(),
            "paper: memory 224.4 MB / 54.96 MB, latency 3.33x LLaMA-7B, 2.16x ViT-B": [4.08, 3.33],
        },
        detail=f"layers (out, in) {shapes}, rank 4, fp32; RSM top {budgets(len(shapes))[0]} of "
        f"{len(shapes)} + SAC; f = (1 - 1/3.33) / (1 - 54.96/224.4) from the paper's LLaMA-7B "
        f"numbers; {size.reps} replicates",
    )


@claim(
    "aegisguard.feature_leakage",
    paper=PAPER,
    statement="Caveat (out of the paper's scope): a shielded adapter whose inputs and outputs "
    "cross to the host is recovered exactly by least squares from d_in generic queries "
    "(relative error < 1e-8), and not from d_in - 1.",
    where="docs/papers/aegisguard.md (feature leakage out of the paper's scope), G1, Q7",
    sizes=SIZES,
    mutants=[
        wrap(
            "dynamics.aegisguard.attack.recover_adapter",
            lambda f: lambda X, Y: f(X[:-1], Y[:-1]),
            "the last query is dropped (off by one)",
            name="one_query_short",
        )
    ],
)
def _feature_leakage(size, seed) -> Measurement:
    rng = np.random.default_rng(seed)
    errs_full, errs_short = [], []
    for d_in, d_out, r in ((16, 32, 4), (32, 32, 4), (32, 8, 4)):
        dW = rng.standard_normal((d_out, r)) @ rng.standard_normal((r, d_in)) / r
        X = rng.standard_normal((d_in, d_in))
        Y = X @ dW.T
        for errs, n in ((errs_full, d_in), (errs_short, d_in - 1)):
            W = A.recover_adapter(X[:n], Y[:n])
            errs.append(float(np.linalg.norm(W - dW) / np.linalg.norm(dW)))
    return measure(
        at_most(max(errs_full), 1e-8, name="relative error, n = d_in"),
        at_least(min(errs_short), 1e-3, name="relative error, n = d_in - 1"),
        detail="rank-4 updates on (16->32), (32->32), (32->8) maps; generic Gaussian queries",
    )
