"""Ravan claim (Raje, Askin, Jhunjhunwala & Joshi 2025, arXiv 2506.05568): federated fine-tuning
under client heterogeneity, Ravan against LoRA-FedAvg at a matched upload.

Read: the abstract (clients upload ``s_i H_i``; LoRA-based methods degrade under data and
computational heterogeneity; Ravan "improves test accuracy by 2-8 %" over PEFT baselines). The
algorithm (bases ``B_i, A_i`` frozen and shared through a seed, ``H_i = 0``, ``s_i = 1``, server
``H_i <- sum_c p_c s_i^c H_i^c``, ``s_i <- 1``) is :mod:`nn.adapters._ravan`'s, from
third-party sources; the method section itself could not be read.

Design (one compiled program: seeds x learning rates vmapped, rounds scanned, clients vmapped):
the student MLP of :func:`._base.pretrained` is adapted to a new 4-class task (its teacher's
hidden weight moved by a rank-4 shift of size 2; labels the argmax) by ``C = 8`` clients whose
training data are label-skewed: each client's class proportions are ``Dirichlet(0.3 * 4 * p)``
with ``p`` the task's class frequencies (Hsu, Qi & Brown 2019), so that the clients together
hold the task's distribution (an IID split is run beside it). Both hidden layers are adapted,
nothing else is trained; uploads are matched: LoRA r = 2 (224 numbers, FedAvg of ``A`` and
``B`` separately, :func:`nn.adapters.fedavg`) against Ravan with 2 heads of rank 7 (200
numbers, orthogonal bases, :func:`nn.adapters.ravan_aggregate`). Each round every client runs
``K`` full-batch SGD steps on its data from the broadcast model; the server aggregates. Each
replicate is its own task, and each method's learning rate is tuned on it as a practitioner
would: the best of one grid by that replicate's validation loss (heterogeneous split); test
accuracy and loss on a test set of the task after the last round, paired over replicates.
Reported beside: the base model's accuracy, and each method's aggregation error (how far the
server's update is from the mean of the clients' updates, averaged over rounds): 0 for Ravan
up to round-off (1e-7 in float32); for LoRA's factor averaging about 0.01 at quick.

Redesign (issue 44). The earlier design drew every client's proportions from ``Dirichlet(0.3)``
around uniform classes, so the clients together over-represented the task's rare classes;
with 20 rounds of 5 local steps both methods ended at 42 %, below the base model's accuracy
(about 0.5), and LoRA's factor averaging was close to exact. Now the clients together hold the
task's distribution and quick runs 40 rounds of 10 local steps: both methods learn (0.63 and
0.61 against 0.54 for the base in a 4-seed probe; IID 0.67 and 0.65), and the local drift makes
FedAvg of LoRA's factors inexact (aggregation error above). Paper's effect: the abstract's
"2-8 %" (test accuracy over PEFT baselines), taken at its midpoint, 0.05 accuracy.

Verdict at quick (32 replicates, seeds 0-2): Ravan trails LoRA, -0.003 +- 0.010, -0.022 +-
0.012 and -0.033 +- 0.008 (power 0.98-1.0 to see +0.05 at 2 SE): not reproduced, as recorded;
with IID clients it trailed by about as much (float64, before the cut below). At this size
Ravan's frozen random bases cost more than its exact aggregation gains. With one learning
rate per method chosen on the mean validation loss over replicates (the design before),
Ravan's choice 0.1 was erratic on a few tasks (accuracy 0.26 where 0.3 gave 0.67), the
gap's SE tripled at seed 0 (0.033, power 0.31) and the verdict followed the seed; tuning per
replicate removes that.

Budget (issue 46): the runs are float32 (an argmax accuracy is not precision-limited) and the
IID split, reported and not judged, runs at full only: 32 replicates x 4 lrs x 2 methods, one
compiled program per method, about 45 CPU-s at quick against about 135 before. The float64
results of the same draws were -0.036 +- 0.015, -0.029 +- 0.014 and -0.019 +- 0.005: single
replicates at the larger lrs move by tenths of accuracy with the round-off (SGD at 0.1-1.0
is close to its edge on some tasks), so the gap moves by up to 2 SE with the precision while
the verdict does not (power >= 0.98 at every seed in both).
Twenty replicates were tried for the budget (issue 48, seeds 0-1): the gap's SE is heavy-tailed
(a few tasks where Ravan's lr choice fails), 0.027 and 0.015 (Ravan - LoRA -0.047 and about
-0.02), power 0.43 and 0.75, so quick turned ``inconclusive``; it keeps 32.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import nn
import nn.adapters as ad
from paper_checks import Measurement, claim, measure, memo, paired_gap, record, sizes, wrap
from paper_checks.adapters._base import (
    D_IN,
    D_OUT,
    WIDTH,
    cast_floats,
    np_mlp,
    pretrained,
    stack_trees,
    xent,
)

RAVAN = "Raje, Askin, Jhunjhunwala & Joshi 2025 (Ravan, arXiv 2506.05568)"
TARGETS = ["layers.0", "layers.1"]
CONFIG = {"lora": dict(r=2, alpha=4.0), "ravan": dict(r=7, heads=2, init="orthogonal")}
CLIENTS, DIRICHLET = 8, 0.3
LRS = (0.03, 0.1, 0.3, 1.0)  # brackets both methods' choices (3.0 diverged for both)
PAPER = 0.05  # the abstract's "2-8 %" (accuracy points), its midpoint
SIZES = sizes(
    smoke=dict(seeds=2, n_client=32, rounds=4, local=3, n_test=512, iid=False),
    quick=dict(seeds=32, n_client=64, rounds=40, local=10, n_test=2048, iid=False),
    full=dict(seeds=24, n_client=256, rounds=100, local=10, n_test=8192, iid=True),
)  # iid: also run the IID split (reported, not judged; it doubles the work)


def _split_data(teacher, rng, n_client, n_test):
    """One replicate: the shifted task's client data, heterogeneous and IID ``(2, C, n, .)``,
    and a balanced validation and test set."""
    u = np.linalg.qr(rng.standard_normal((WIDTH, 4)))[0]
    v = np.linalg.qr(rng.standard_normal((WIDTH, 4)))[0]
    w1 = np.asarray(teacher.layers[1].weight) + 2.0 * (u * np.linspace(1.0, 0.5, 4)) @ v.T
    pool = rng.standard_normal((20 * CLIENTS * n_client, D_IN))
    y = np.argmax(np_mlp(teacher, pool, {1: w1}), -1)
    by_class = [np.flatnonzero(y == k) for k in range(D_OUT)]
    prior = np.array([len(c) for c in by_class]) / len(y)  # the task's class frequencies
    present = prior > 0  # a class the task never labels: p = 0
    het = []
    for p in rng.dirichlet(DIRICHLET * D_OUT * np.where(present, prior, 1.0), CLIENTS):
        p = np.where(present, p, 0.0)
        k = rng.choice(D_OUT, n_client, p=p / p.sum())
        het.append(np.concatenate([rng.choice(by_class[c], (k == c).sum()) for c in range(D_OUT)]))
    iid = rng.choice(len(y), (CLIENTS, n_client))
    idx = np.stack([np.stack(het), iid])
    xe = rng.standard_normal((2 * n_test, D_IN))
    ye = np.argmax(np_mlp(teacher, xe, {1: w1}), -1)
    return (pool[idx], y[idx]), (xe[:n_test], ye[:n_test]), (xe[n_test:], ye[n_test:])


def aggregation_error(clients, agg):
    """``||Delta W(agg) - mean_c Delta W(client c)||_F / ||mean_c Delta W(client c)||_F`` over
    the adapted layers stacked: how far the server's model is from FedAvg of the updates (0
    for Ravan's exact aggregation; for LoRA's factor averaging it grows with client drift)."""
    per = [ad.delta_weights(c) for c in clients]
    got = ad.delta_weights(agg)
    num = den = 0.0
    for k, w in got.items():
        mean = sum(p[k] for p in per) / len(per)
        num = num + jnp.sum((w - mean) ** 2)
        den = den + jnp.sum(mean**2)
    return jnp.sqrt(num / jnp.maximum(den, 1e-300))


def _aggregate(method, clients):
    """The server step (uniform client weights), traced inside the round."""
    return ad.ravan_aggregate(clients) if method == "ravan" else ad.fedavg(clients)


def _runner(method, rounds, local):
    """Jitted ``(tr, fr, lrs, data) -> (val loss, test acc, test loss)`` over (replicate, lr)."""

    def run(tr, fr, lr, d):
        (xc, yc), (xv, yv), (xt, yt) = d

        def local_sgd(t, x, y):
            def step(t, _):
                g = eqx.filter_grad(lambda p: jnp.mean(xent(nn.combine(p, fr)(x), y)))(t)
                return jax.tree.map(lambda a, b: a - lr * b, t, g), None

            return jax.lax.scan(step, t, None, length=local)[0]

        def rnd(t, _):
            ts = jax.vmap(local_sgd, in_axes=(None, 0, 0))(t, xc, yc)
            clients = [
                nn.combine(jax.tree.map(lambda a, c=c: a[c], ts), fr) for c in range(CLIENTS)
            ]
            agg = _aggregate(method, clients)
            return nn.split(agg)[0], aggregation_error(clients, agg)

        t, err = jax.lax.scan(rnd, tr, None, length=rounds)
        m = nn.combine(t, fr)
        lt = m(xt)
        return (
            jnp.mean(xent(m(xv), yv)),
            jnp.mean(jnp.argmax(lt, -1) == yt),
            jnp.mean(xent(lt, yt)),
            err.mean(),
        )

    over_lr = jax.vmap(run, in_axes=(None, None, 0, None))
    return eqx.filter_jit(jax.vmap(over_lr, in_axes=(0, 0, None, 0)))


@memo
def federated_runs(
    seeds: int,
    n_client: int,
    rounds: int,
    local: int,
    n_test: int,
    seed: int = 0,
    iid: bool = True,
) -> dict:
    """Per method: validation loss, test accuracy and test loss ``(replicate, split, lr)`` (split
    0 heterogeneous, 1 IID if ``iid``), the lr chosen (best validation loss of the replicate,
    heterogeneous split) and the results there ``(replicate, split)``. The federated runs are
    float32 (an argmax accuracy is not precision-limited; it halves the time); the pretrained
    student is the float64 one the other adapter claims share, cast."""
    splits = 2 if iid else 1
    teacher, student, _ = pretrained(256, 800, seed)
    with jax.enable_x64(False):
        student = cast_floats(student, np.float32)
        rng = np.random.default_rng([seed, 21])
        reps = [_split_data(teacher, rng, n_client, n_test) for _ in range(seeds)]
        keys = [int(rng.integers(2**31)) for _ in range(seeds)]
        (xc, yc), (xv, yv), (xt, yt) = (
            tuple(np.stack([r[j][i] for r in reps]) for i in (0, 1)) for j in range(3)
        )
        xc, yc = xc[:, :splits].astype(np.float32), yc[:, :splits]
        xv, xt = xv.astype(np.float32), xt.astype(np.float32)

        # replicate axis = (seed, split): the split is a data axis of one replicate
        def per_split(a):
            return jnp.asarray(a.reshape(-1, *a.shape[2:]))

        def twice(a):
            return jnp.asarray(np.repeat(a, splits, axis=0))

        data = ((per_split(xc), per_split(yc)), (twice(xv), twice(yv)), (twice(xt), twice(yt)))
        out = {
            "lrs": LRS,
            "acc_base": np.array(
                [np.mean(np_mlp(student, x).argmax(-1) == y) for x, y in zip(xt, yt, strict=True)]
            ),
        }
        for method, cfg in CONFIG.items():
            models = [
                ad.inject(student, method, targets=TARGETS, key=jax.random.key(k), **cfg)
                for k in keys
                for _ in range(splits)
            ]
            halves = [nn.split(m) for m in models]
            tr, fr = (stack_trees([h[i] for h in halves]) for i in (0, 1))
            val, acc, loss, err = (
                np.asarray(a).reshape(seeds, splits, len(LRS))
                for a in _runner(method, rounds, local)(tr, fr, jnp.asarray(LRS), data)
            )
            # each replicate is its own task: tuned on its own validation set (heterogeneous)
            best = np.where(np.isfinite(val), val, np.inf)[:, 0].argmin(-1)
            pick = (np.arange(seeds), slice(None), best)
            out[method] = {
                "val": val,
                "acc_all": acc,
                "loss_all": loss,
                "lr": np.asarray(LRS)[best],
                "acc": acc[pick],
                "loss": loss[pick],
                "agg_error": err[pick],
                "upload": nn.count_params(models[0]),
            }
        return out


def _lr_counts(lrs) -> dict:
    """How often each learning rate of the grid was chosen over the replicates."""
    return {f"{lr:g}": int(np.sum(lrs == lr)) for lr in LRS if np.any(lrs == lr)}


def _server_keeps_first(f):
    return lambda clients, *a, **k: f(clients[:1], *a, **k)


@claim(
    "adapters.ravan_federated",
    paper=RAVAN,
    statement="Under client heterogeneity Ravan (exact aggregation of s_i H_i over shared "
    "frozen bases) reaches a higher test accuracy than LoRA-FedAvg at a matched "
    "upload.",
    where="Abstract ('improves test accuracy by 2-8 %' over PEFT baselines); the experiments "
    "section could not be read",
    sizes=SIZES,
    recorded=record(
        quick="not reproduced",
        reason="both methods learn the task (LoRA 0.60-0.77, Ravan 0.58-0.73, base 0.47-0.67) "
        "and LoRA's factor averaging is inexact, but Ravan at a matched upload trails LoRA with "
        "heterogeneous clients (-0.003 +- 0.010, -0.022 +- 0.012, -0.033 +- 0.008 at seeds "
        "0-2; power 0.98-1.0 to see +0.05) and as much with IID clients (full): its frozen "
        "random bases cost more than exact aggregation gains here",
    ),
    mutants=[
        wrap(
            "nn.adapters.ravan_aggregate",
            _server_keeps_first,
            "Ravan's server keeps one client's update instead of the average",
            name="server_one_client",
        )
    ],
)
def _check_ravan(size, seed) -> Measurement:
    r = federated_runs(
        size.seeds, size.n_client, size.rounds, size.local, size.n_test, seed, size.iid
    )
    lo, ra = r["lora"], r["ravan"]
    iid = ra["acc"][:, 1] - lo["acc"][:, 1] if size.iid else None
    return measure(
        paired_gap(
            ra["acc"][:, 0],
            lo["acc"][:, 0],
            n_se=2,
            direction="greater",
            name="acc_ravan - acc_lora (heterogeneous)",
            paper=PAPER,
        ),
        extra={
            "acc_base": float(r["acc_base"].mean()),
            "aggregation error LoRA (het, mean over rounds)": float(lo["agg_error"][:, 0].mean()),
            "aggregation error Ravan (het)": float(ra["agg_error"][:, 0].mean()),
            "acc_lora_het": lo["acc"][:, 0].mean(),
            "acc_ravan_het": ra["acc"][:, 0].mean(),
            "loss_lora_het": lo["loss"][:, 0].mean(),
            "loss_ravan_het": ra["loss"][:, 0].mean(),
            **({"acc_ravan - acc_lora (IID)": float(iid.mean())} if iid is not None else {}),
            "lr_lora (per replicate)": _lr_counts(lo["lr"]),
            "lr_ravan (per replicate)": _lr_counts(ra["lr"]),
            "upload_lora": lo["upload"],
            "upload_ravan": ra["upload"],
        },
        detail=f"{CLIENTS} clients, Dirichlet({DIRICHLET} x 4 x the task's class frequencies) "
        f"label skew, {size.n_client} samples each, {size.rounds} rounds x {size.local} local "
        f"SGD steps; paper's effect +{PAPER:g} (midpoint of the abstract's 2-8 %); LoRA r = 2 "
        f"({lo['upload']} numbers) vs Ravan 2 heads x rank 7 ({ra['upload']}); lr best of "
        f"{LRS} on each replicate's validation loss per method; {size.seeds} seeds, paired",
    )
