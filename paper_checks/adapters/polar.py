"""PoLAR claims (Lion, Zhang, Li & He 2025, arXiv 2506.03133): the stable rank of the learned
update against LoRA's, and the convergence rate on a low-rank fitting problem.

What was read: the abstract and the official code (``kcc-lion/polar``); the paper's body (its
theorem, problem and initialisations) could not be reached with the look-up tools here (three
searches this session returned only the first screen of arXiv html v1/v2 and third-party
summaries), so the rate claim's problem is a reconstruction, marked as such.

``adapters.stable_rank`` (quick: 6 replicates, r = 8): paired ``sr_polar - sr_lora`` at matched
validation loss. Paper's effect: Fig. 1's gap 5.49 - 1.06 at r = 32, as a share of the rank, at
r = 8 (1.11). Reproduced: 0.83 +- 0.23 at seed 0 (sr 2.1 vs 2.9), every replicate's gap
positive.

``adapters.polar_convergence`` (quick: 6 targets, budget 10,000 iterations; full 20, 20,000):
iterations to a relative objective of 1e-10 on ``1/2 ||Delta W - M||^2`` (M rank 4, adapters
rank 8: over-parameterised), LoRA by GD from small random factors (entries N(0, 1e-6), the
regime in which over-parameterisation slows GD on ``BA``: Xiong, Ding & Du, ICLR 2024) against
PoLAR's landing iteration. LoRA from PEFT's ``B = 0`` start reaches 1e-10 in about 77 iterations,
PoLAR in about 280: that start is outside the slowdown the theorem is about and is reported as
context, not judged. From the small start LoRA stalls near 1.3e-9 and never reaches the level
within the budget (censored at the budget, so the ratio is a lower bound: log10 about 1.55 at
quick). Paper's effect (the abstract: "exponentially faster"): read as at least 100x at this
level (log10 ratio 2); the rule asks for 10x (log10 > 1 + 2 SE).
Both LoRA starts run in one compiled program (the same shapes; issue 48: 3 -> 2 compilations,
the same numbers at seed 0).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
import nn.adapters as ad
from nn import riemannian as rm
from paper_checks import Measurement, at_most, claim, measure, memo, paired_gap, patch, sizes, wrap
from paper_checks.adapters._base import stack_trees, xent

POLAR = "Lion, Zhang, Li & He 2025 (PoLAR, arXiv 2506.03133)"


def _flip_attraction(f):
    """The landing field with its attraction term ``lam X (X^T X - I)`` of the wrong sign."""

    def flipped(x, g, lam):
        eye = jnp.eye(x.shape[-1], dtype=x.dtype)
        return f(x, g, lam) - 2.0 * lam * x @ (jnp.swapaxes(x, -1, -2) @ x - eye)

    return flipped


# ------------------------------------------------------------------ stable rank at matched fit
SR_D, SR_H, SR_C = 32, 64, 16
SR_R, SR_ALPHA = 8, 32.0  # r in the grid {4, 8, 16, 32}; lora_alpha = 32 (train_and_eval.sh)
SR_PAPER = (5.49 - 1.06) * SR_R / 32  # Fig. 1's gap at r = 32 as a share of the rank, at r = 8
SR_STIEFEL = "qr"  # a QR retraction keeps X, Y on Stiefel (landing under Adam left it: below)
SR_LRS = (3e-3, 1e-2, 3e-2, 1e-1, 3e-1)  # one grid for both (the scripts: 4e-4 LoRA, 4e-3 PoLAR)
SR_BATCH, SR_EPOCHS, SR_WARMUP, SR_CHECKPOINTS = 128, 5, 0.03, 10
SR_SIZES = sizes(
    smoke=dict(seeds=2, n_train=1024, n_val=512),
    quick=dict(seeds=6, n_train=8192, n_val=2048),
    full=dict(seeds=12, n_train=32768, n_val=4096),
)


def _sr_data(seed, seeds, n_train, n_val):
    """Base model and per-replicate data: a 32-64-64-16 ReLU MLP whose 64 x 64 hidden weight is
    moved by ``U diag(s) V^T``, ``s_i ~ i^{-1/2}`` over all 64 directions at 3x the weight's
    Frobenius norm (the needed update has a decaying full-rank spectrum); labels its argmax."""
    rng = np.random.default_rng([seed, 31])
    base = nn.MLP(
        SR_D, SR_C, SR_H, 2, activation=jax.nn.relu, key=jax.random.key(int(rng.integers(2**31)))
    )
    w = [np.asarray(lin.weight) for lin in base.layers]
    b = [np.asarray(lin.bias) for lin in base.layers]
    spec = np.arange(1, SR_H + 1.0) ** -0.5
    spec = 3.0 * np.linalg.norm(w[1]) * spec / np.linalg.norm(spec)
    xs, ys = [], []
    for _ in range(seeds):
        u = np.linalg.qr(rng.standard_normal((SR_H, SR_H)))[0]
        v = np.linalg.qr(rng.standard_normal((SR_H, SR_H)))[0]
        ws = [w[0], w[1] + (u * spec) @ v.T, w[2]]
        x = rng.standard_normal((n_train + n_val, SR_D))
        h = x
        for i in range(3):
            h = h @ ws[i].T + b[i]
            h = np.maximum(h, 0) if i < 2 else h
        xs.append(x)
        ys.append(h.argmax(-1))
    steps = SR_EPOCHS * n_train // SR_BATCH
    idx = np.stack(
        [
            np.concatenate([rng.permutation(n_train) for _ in range(SR_EPOCHS)]).reshape(
                steps, SR_BATCH
            )
            for _ in range(seeds)
        ]
    )
    return base, np.stack(xs), np.stack(ys), idx, float(np.sum(spec**2) / spec[0] ** 2)


def _sr_runner(method, n_train, steps):
    """Jitted ``(tr, fr, lrs, idx, x, y) -> (val loss, sr, feasibility)`` at ``SR_CHECKPOINTS + 1``
    points, over (replicate, lr); AdamW (weight decay 0, the HF default) with cosine decay and 3 %
    warmup; PoLAR's X, Y retracted to the manifold after each step
    (:func:`nn.adapters.polar_optimizer` with ``stiefel=SR_STIEFEL``). With the official landing
    field (lambda 1) instead, both methods chose lr 3e-2 and PoLAR ended at ||X^T X - I||_F =
    0.24, off the manifold, where ``sr(Delta W) != sr(Theta)``."""
    every = steps // SR_CHECKPOINTS

    def run(tr, fr, lr, idx, x, y):
        shape = optax.warmup_cosine_decay_schedule(
            0.0, 1.0, max(1, round(SR_WARMUP * steps)), steps
        )

        def sched(t):  # the peak lr is traced (vmapped), so it scales a unit-peak schedule
            return lr * shape(t)

        opt = (
            ad.polar_optimizer(optax.adamw(sched, weight_decay=0.0), stiefel=SR_STIEFEL)
            if method == "polar"
            else optax.adamw(sched, weight_decay=0.0)
        )
        xv, yv = x[n_train:], y[n_train:]

        def probe(t):
            m = nn.combine(t, fr)
            dw = next(iter(ad.delta_weights(m).values()))
            feas = 0.0
            if method == "polar":
                q = next(iter(m.layers().values()))
                feas = jnp.maximum(rm.feasibility(q.X), rm.feasibility(q.Y))
            return jnp.mean(xent(m(xv), yv)), ad.stable_rank(dw), feas

        def loss(m, i):
            return jnp.mean(xent(m(x[i]), y[i]))

        def chunk(c, ii):
            t, st, _ = nn.fit(loss, opt, c[0], ii, frozen=fr, opt_state=c[1])
            return (t, st), probe(t)

        ii = idx[: every * SR_CHECKPOINTS].reshape(SR_CHECKPOINTS, every, -1)
        _, curve = jax.lax.scan(chunk, (tr, opt.init(tr)), ii)
        return curve

    over_lr = jax.vmap(run, in_axes=(None, None, 0, None, None, None))
    return eqx.filter_jit(jax.vmap(over_lr, in_axes=(0, None, None, 0, 0, 0)))


def at_level(fit, value, level):
    """``value`` where the decreasing-ish curve ``fit`` first reaches ``level``, linearly
    interpolated between checkpoints (the last point if never reached)."""
    below = np.flatnonzero(fit <= level)
    if not len(below):
        return float(value[-1])
    c = int(below[0])
    if c == 0:
        return float(value[0])
    w = (fit[c - 1] - level) / (fit[c - 1] - fit[c])
    return float(value[c - 1] + w * (value[c] - value[c - 1]))


@memo
def sr_runs(seeds: int, n_train: int, n_val: int, seed: int = 0) -> dict:
    """LoRA and PoLAR (r = 8, alpha = 32) on the 64 x 64 hidden layer over ``SR_LRS``: per
    method the curves (replicate, lr, checkpoint) of validation loss, ``sr(Delta W)`` and PoLAR's
    distance to the manifold, the lr chosen (best mean final validation loss), and per replicate
    ``sr`` at the validation loss both methods reach (the larger of their finals)."""
    with jax.enable_x64(True):
        base, x, y, idx, target_sr = _sr_data(seed, seeds, n_train, n_val)
        steps = idx.shape[1]
        out = {"target_sr": target_sr, "steps": steps, "lrs": SR_LRS}
        for method in ("lora", "polar"):
            models = [
                ad.inject(
                    base, method, targets="layers.1", key=jax.random.key(s), r=SR_R, alpha=SR_ALPHA
                )
                for s in range(seeds)
            ]
            fr = nn.split(models[0])[1]  # the frozen base is shared by the replicates
            tr = stack_trees([nn.split(m)[0] for m in models])
            loss, sr, feas = map(
                np.asarray,
                _sr_runner(method, n_train, steps)(
                    tr, fr, jnp.asarray(SR_LRS), jnp.asarray(idx), jnp.asarray(x), jnp.asarray(y)
                ),
            )
            final = np.where(np.isfinite(loss[..., -1]), loss[..., -1], np.inf).mean(0)
            best = int(np.argmin(final))
            out[method] = {
                "loss": loss[:, best],
                "sr": sr[:, best],
                "feas": feas[:, best],
                "lr": SR_LRS[best],
                "final_loss_by_lr": final,
            }
        level = np.maximum(out["lora"]["loss"][:, -1], out["polar"]["loss"][:, -1])
        for method in ("lora", "polar"):
            r = out[method]
            r["sr_matched"] = np.array(
                [at_level(r["loss"][s], r["sr"][s], level[s]) for s in range(seeds)]
            )
        return out


@claim(
    "adapters.stable_rank",
    paper=POLAR,
    statement="LoRA's learned update has a low stable rank, well below PoLAR's at equal rank.",
    where="Sec. 2, Fig. 1 (sr = 1.06 LoRA vs 5.49 PoLAR, Llama-2-7B, r = 32)",
    sizes=SR_SIZES,
    mutants=[
        patch(
            "nn.riemannian.RETRACTIONS",
            {**rm.RETRACTIONS, "qr": lambda x, v: x + v},
            "QR retraction dropped (a plain Euclidean step on X, Y)",
            name="no_retraction",
        )
    ],
)
def _check_stable_rank(size, seed) -> Measurement:
    r = sr_runs(size.seeds, size.n_train, size.n_val, seed)
    lo, po = r["lora"], r["polar"]
    return measure(
        paired_gap(
            po["sr_matched"],
            lo["sr_matched"],
            n_se=2,
            direction="greater",
            name="sr_polar - sr_lora (matched fit)",
            paper=SR_PAPER,
        ),
        at_most(float(np.max(po["feas"])), 0.1, name="PoLAR max ||X^T X - I||_F"),
        extra={
            "sr_lora": lo["sr_matched"].mean(),
            "sr_polar": po["sr_matched"].mean(),
            "sr_lora_final": lo["sr"][:, -1].mean(),
            "sr_polar_final": po["sr"][:, -1].mean(),
            "val_loss_lora": lo["loss"][:, -1].mean(),
            "val_loss_polar": po["loss"][:, -1].mean(),
            "lr_lora": lo["lr"],
            "lr_polar": po["lr"],
        },
        detail=f"r = {SR_R}, alpha = {SR_ALPHA:g} on the 64x64 hidden layer of a 16-class ReLU "
        f"MLP, new task = full-rank shift with spectrum i^-1/2 (target sr "
        f"{r['target_sr']:.1f}); AdamW (wd 0), batch {SR_BATCH}, {SR_EPOCHS} epochs of "
        f"{size.n_train} = {r['steps']} steps, cosine + 3% warmup; both lrs the best of "
        f"{SR_LRS} by validation loss; PoLAR's X, Y by Adam + QR retraction; sr compared "
        f"where both reach the same validation loss; {size.seeds} seeds, paired",
    )


# ------------------------------------------------------------------ convergence rate
RATE_M, RATE_N, RATE_RSTAR, RATE_R = 32, 32, 4, 8
RATE_ETAS = (0.05, 0.1, 0.2, 0.4)
RATE_LEVEL = 1e-10
RATE_SIZES = sizes(
    smoke=dict(instances=2, steps=300),
    quick=dict(instances=6, steps=10000),
    full=dict(instances=20, steps=20000),
)
RATE_PAPER = 2.0  # log10 of the iteration ratio the paper's "exponentially faster" implies here


def _rate_problem(seed, instances):
    """Targets ``M`` (32 x 32, rank 4, singular values 1, .8, .6, .5 on Haar subspaces)."""
    rng = np.random.default_rng([seed, 41])
    out = []
    for _ in range(instances):
        u = np.linalg.qr(rng.standard_normal((RATE_M, RATE_RSTAR)))[0]
        v = np.linalg.qr(rng.standard_normal((RATE_N, RATE_RSTAR)))[0]
        out.append((u * np.array([1.0, 0.8, 0.6, 0.5])) @ v.T)
    return np.stack(out), rng


def _rate_runner(method, steps):
    """Jitted ``(tr, fr, etas, M) -> relative objective (replicate, eta, step)``: GD (LoRA) or
    PoLAR's landing iteration (SGD on the landing field for X, Y; GD for Theta)."""

    def run(tr, fr, eta, target):
        opt = (
            ad.polar_optimizer(optax.sgd(eta), stiefel="landing", lam=1.0)
            if method == "polar"
            else optax.sgd(eta)
        )

        def loss(m, _):
            dw = next(iter(ad.delta_weights(m).values()))
            return 0.5 * jnp.sum((dw - target) ** 2)

        _, _, ls = nn.fit(loss, opt, tr, frozen=fr, length=steps)
        return ls / (0.5 * jnp.sum(target**2))

    over = jax.vmap(run, in_axes=(None, None, 0, None))
    return eqx.filter_jit(jax.vmap(over, in_axes=(0, None, None, 0)))


def _iters_to(curves, level):
    """First iteration (1-based) at or below ``level`` per curve (the budget if never)."""
    hit = curves <= level
    return np.where(hit.any(-1), hit.argmax(-1) + 1, curves.shape[-1])


@memo
def polar_rate_runs(instances: int, steps: int, seed: int = 0) -> dict:
    """Relative objective curves of LoRA (PEFT init; and small random factors) and PoLAR on
    ``1/2 ||Delta W - M||_F^2`` over ``RATE_ETAS``, and the iterations to ``RATE_LEVEL`` at each
    method's best step size."""
    with jax.enable_x64(True):
        target, rng = _rate_problem(seed, instances)
        lin = nn.Linear(RATE_N, RATE_M, key=jax.random.key(0))
        lin = eqx.tree_at(lambda m: m.weight, lin, jnp.zeros((RATE_M, RATE_N)))
        keys = [jax.random.key(int(rng.integers(2**31))) for _ in range(instances)]
        out = {"steps": steps, "etas": RATE_ETAS}
        runners = {}  # LoRA's two inits share one compiled program (same shapes)
        for name, method in (("lora", "lora"), ("lora_small", "lora"), ("polar", "polar")):
            models = [ad.inject(lin, method, key=k, r=RATE_R, alpha=float(RATE_R)) for k in keys]
            halves = [nn.split(m) for m in models]
            if name == "lora_small":  # both factors small and random (Xiong, Ding & Du 2024)
                halves = [
                    (
                        jax.tree.map(
                            lambda a, k=k: (
                                1e-3
                                * jax.random.normal(jax.random.fold_in(k, a.size), a.shape, a.dtype)
                            ),
                            h[0],
                        ),
                        h[1],
                    )
                    for h, k in zip(halves, keys, strict=True)
                ]
            tr = stack_trees([h[0] for h in halves])
            if method not in runners:
                runners[method] = _rate_runner(method, steps)
            curves = np.asarray(
                runners[method](tr, halves[0][1], jnp.asarray(RATE_ETAS), jnp.asarray(target))
            )
            curves = np.where(np.isfinite(curves), curves, np.inf)
            iters = _iters_to(curves, RATE_LEVEL)  # (instance, eta)
            final = np.log10(np.maximum(curves[..., -1], 1e-300)).mean(0)
            best = int(np.lexsort((final, iters.mean(0)))[0])  # ties (censored): lowest end
            out[name] = {"curves": curves[:, best], "iters": iters[:, best], "eta": RATE_ETAS[best]}
        return out


@claim(
    "adapters.polar_convergence",
    paper=POLAR,
    statement="On a canonical low-rank adaptation problem PoLAR converges exponentially "
    "faster than LoRA from the small random initialisation of the over-parameterised regime "
    "[problem reconstructed: the theorem could not be read].",
    where="Abstract ('exponentially faster convergence rate on a canonical low-rank "
    "adaptation problem'); the theorem itself not read",
    sizes=RATE_SIZES,
    mutants=[
        wrap(
            "nn.riemannian.landing_field",
            _flip_attraction,
            "landing attraction of the wrong sign",
            name="landing_sign",
        )
    ],
)
def _check_polar_rate(size, seed) -> Measurement:
    r = polar_rate_runs(size.instances, size.steps, seed)
    ts, tp = np.log10(r["lora_small"]["iters"]), np.log10(r["polar"]["iters"])
    censored = float(np.mean(r["lora_small"]["iters"] >= size.steps))
    return measure(
        paired_gap(
            ts,
            tp,
            n_se=2,
            margin=1.0,
            direction="greater",
            name="log10(iters LoRA small init / iters PoLAR)",
            paper=RATE_PAPER,
        ),
        extra={
            "iters_polar": r["polar"]["iters"].mean(),
            "iters_lora_small_init": r["lora_small"]["iters"].mean(),
            "lora_small_init_censored_fraction": censored,
            "lora_small_init_final_objective": float(
                np.exp(np.log(r["lora_small"]["curves"][:, -1]).mean())
            ),
            "context: iters_lora_peft_init (B = 0)": r["lora"]["iters"].mean(),
            "eta_polar": r["polar"]["eta"],
            "eta_lora_small_init": r["lora_small"]["eta"],
            "eta_lora_peft_init": r["lora"]["eta"],
        },
        detail=f"1/2||dW - M||^2, M {RATE_M}x{RATE_N} of rank {RATE_RSTAR}, r = {RATE_R} "
        f"(over-parameterised); LoRA by GD from small random factors (N(0, 1e-6) entries, the "
        f"regime of the slowdown), PoLAR by its landing iteration (lambda 1) from orthogonal "
        f"X, Y and Theta = 0; each method's step the best of {RATE_ETAS}; iterations to "
        f"relative objective {RATE_LEVEL:g} (budget {size.steps}; a run that never gets "
        f"there counts as the budget, so the ratio is a lower bound); pass if LoRA needs 10x "
        f"more, paired over {size.instances} targets. LoRA from PEFT's init (B = 0) reported "
        f"as context (outside the theorem's regime)",
    )
