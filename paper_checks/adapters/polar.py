"""PoLAR claims (Lion, Zhang, Li & He 2025, arXiv 2506.03133): the stable rank of the learned
update against LoRA's, and the convergence rate on the canonical low-rank fitting problem."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
import nn.adapters as ad
from nn import riemannian as rm
from paper_checks._registry import Measurement, claim
from paper_checks._stats import mean_se
from paper_checks.adapters._base import stack_trees, train_loop, xent

POLAR = "Lion, Zhang, Li & He 2025 (PoLAR, arXiv 2506.03133)"


# stable rank after a finetuning budget, with the official code's optimiser settings
SR_D, SR_H, SR_C = 32, 64, 16
SR_R, SR_ALPHA = 8, 32.0  # r in the grid {4, 8, 16, 32}; lora_alpha = 32 (train_and_eval.sh)
SR_LR = {"lora": 4e-4, "polar": 4e-3}  # README / train_and_eval.sh: LoRA 4e-4, PoLAR 4e-3
SR_REG_LAMBDA = 5e-3  # reg_lambda of train_and_eval.sh, in the code's landing convention
SR_BATCH, SR_EPOCHS, SR_WARMUP = 128, 5, 0.03  # batch 128, 5 epochs, cosine, warmup_ratio 0.03


def _minibatch_xent(m, i, x, y):
    return jnp.mean(xent(m(x[i]), y[i]))


def _cosine_warmup(lr, steps):
    """HF ``lr_scheduler_type="cosine"`` with ``warmup_ratio``: linear 0 -> lr, cosine -> 0."""
    return optax.warmup_cosine_decay_schedule(0.0, lr, max(1, round(SR_WARMUP * steps)), steps)


@functools.cache
def sr_runs(scale: str = "quick"):
    """LoRA vs PoLAR at r = 8 with the official code's optimiser settings, then ``sr(Delta W)``.

    Protocol read off ``kcc-lion/polar`` (``scripts/train_and_eval.sh``,
    ``finetune_commonsense.py``, ``callbacks/landing_callback.py``,
    ``stable_rank/analyze_sr.py``): AdamW with weight decay 0 (HF default) for both methods,
    PoLAR's Stiefel factors getting the landing field in place of their gradient; lr 4e-4
    (LoRA) and 4e-3 (PoLAR); ``lora_alpha = 32`` (scale ``alpha / r``); ``reg_lambda = 5e-3``;
    batch 128, 5 epochs, cosine schedule with warmup ratio 0.03; LoRA with PEFT's default init
    (Kaiming-uniform ``A``, ``B = 0``), PoLAR with orthogonal ``X, Y`` and ``Theta = 0``; the
    stable rank of ``Delta W`` (the scaled ``get_delta_weight``) after training. The code's
    landing field is ``(G X^T - X G^T) X + lam X (X^T X - I)``, twice
    :func:`nn.riemannian.landing_field` with ``lam / 2``; Adam's step is invariant to a
    positive rescaling of its input (up to ``eps``), so ``landing(lam = reg_lambda / 2)`` is the
    code's optimiser. Not reproduced: LoRA dropout 0.05, fp16, and adapters on every
    projection (here one 64 x 64 matrix, as the single ``down_proj`` of Fig. 1).

    Base: a 32-64-64-16 ReLU MLP (the 'pretrained' model, solving its original 16-class task).
    New task: the classes of the same network with its 64 x 64 hidden weight moved by a
    full-rank shift ``U diag(s) V^T`` with ``s_i ~ i^{-1/2}`` (the needed update has a decaying
    spectrum over all 64 directions), scaled to 3x the Frobenius norm of the hidden weight.
    Cross-entropy on 32768 labelled inputs (about Social-IQA's 33k training examples, the
    dataset of Fig. 1), so that 5 epochs at batch 128 are 1280 steps, the paper's budget; the
    scales differ only in the number of seeds (4 quick, 12 full), vmapped in one compilation.
    """
    with jax.enable_x64(True):
        n_seeds = 4 if scale == "quick" else 12
        n_train = 32768
        steps = SR_EPOCHS * n_train // SR_BATCH
        base = nn.MLP(SR_D, SR_C, SR_H, 2, activation=jax.nn.relu, key=jax.random.key(100))
        w1 = np.asarray(base.layers[1].weight)
        spec = np.arange(1, SR_H + 1.0) ** -0.5
        spec = 3.0 * np.linalg.norm(w1) * spec / np.linalg.norm(spec)
        xs, ys, xts, yts, idxs = [], [], [], [], []
        for s in range(n_seeds):
            rng = np.random.default_rng(200 + s)
            u = np.linalg.qr(rng.standard_normal((SR_H, SR_H)))[0]
            v = np.linalg.qr(rng.standard_normal((SR_H, SR_H)))[0]
            t2 = eqx.tree_at(lambda m: m.layers[1].weight, base, jnp.asarray(w1 + u * spec @ v.T))
            xs.append(jax.random.normal(jax.random.key(300 + s), (n_train, SR_D)))
            ys.append(jnp.argmax(t2(xs[-1]), -1))
            xts.append(jax.random.normal(jax.random.key(400 + s), (4096, SR_D)))
            yts.append(jnp.argmax(t2(xts[-1]), -1))
            # 5 epochs of shuffled minibatches (each epoch a permutation, as the HF Trainer)
            idxs.append(jnp.concatenate([
                jax.random.permutation(jax.random.fold_in(jax.random.key(500 + s), e), n_train)
                for e in range(SR_EPOCHS)]).reshape(steps, SR_BATCH))
        x, y, idx = jnp.stack(xs), jnp.stack(ys), jnp.stack(idxs)
        opts = {"lora": optax.adamw(_cosine_warmup(SR_LR["lora"], steps), weight_decay=0.0),
                "polar": ad.polar_optimizer(_cosine_warmup(SR_LR["polar"], steps),
                                            stiefel="landing", lam=SR_REG_LAMBDA / 2)}
        out = {"steps": steps, "target_sr": float(np.sum(spec**2) / spec[0] ** 2)}
        for name, opt in opts.items():
            models = [ad.inject(base, name, targets="layers.1", key=jax.random.key(s), r=SR_R,
                                alpha=SR_ALPHA) for s in range(n_seeds)]
            fr = nn.split(models[0])[1]  # the frozen half (the base) is shared by the seeds
            tr = stack_trees([nn.split(m)[0] for m in models])
            go = eqx.filter_vmap(train_loop(_minibatch_xent, opt), in_axes=(0, None, 0, 0, 0))
            tr, ls = go(tr, fr, idx, x, y)
            runs = [nn.combine(jax.tree.map(lambda a, i=i: a[i], tr), fr)
                    for i in range(n_seeds)]
            dws = [list(ad.delta_weights(m).values())[0] for m in runs]
            res = {"sr": [float(ad.stable_rank(d)) for d in dws],
                   "acc": [float(jnp.mean(jnp.argmax(m(xt), -1) == yt))
                           for m, xt, yt in zip(runs, xts, yts, strict=True)],
                   "curve": np.asarray(ls[0])}
            if name == "polar":
                layers = [list(m.layers().values())[0] for m in runs]
                res["feas"] = [max(float(rm.feasibility(q.X)), float(rm.feasibility(q.Y)))
                               for q in layers]
                res["sr_theta"] = [float(ad.stable_rank(q.Theta)) for q in layers]
            out[name] = res
        return out


@claim("adapters.stable_rank", paper=POLAR,
       statement="LoRA's learned update has a low stable rank, well below PoLAR's at equal rank.",
       where="Sec. 2, Fig. 1 (sr = 1.06 LoRA vs 5.49 PoLAR, Llama-2-7B, r = 32)")
def _check_stable_rank(scale: str) -> Measurement:
    runs = sr_runs(scale)
    diff = np.asarray(runs["polar"]["sr"]) - np.asarray(runs["lora"]["sr"])
    mu, se = mean_se(diff)
    return Measurement(
        measured={"sr_lora": mean_se(runs["lora"]["sr"])[0],
                  "sr_polar": mean_se(runs["polar"]["sr"])[0],
                  "sr_polar - sr_lora": mu, "acc_lora": float(np.mean(runs["lora"]["acc"])),
                  "acc_polar": float(np.mean(runs["polar"]["acc"])),
                  "sr_theta_polar": float(np.mean(runs["polar"]["sr_theta"])),
                  "feasibility_polar": float(np.mean(runs["polar"]["feas"]))},
        expected={"sr_polar - sr_lora": "> 2 SE (paper: 5.49 - 1.06 = 4.43 at r = 32)"},
        tolerance={"2 SE of the paired difference": 2 * se},
        passed=bool(mu > 2 * se),
        detail=f"r = {SR_R}, alpha = {SR_ALPHA:g} on the 64x64 hidden layer of a 16-class ReLU "
               f"MLP, new task = full-rank shift with spectrum i^-1/2 (target sr "
               f"{runs['target_sr']:.1f}); official code's protocol: AdamW (wd 0), lr LoRA 4e-4 / "
               f"PoLAR 4e-3 (landing, reg_lambda 5e-3), batch 128, 5 epochs = {runs['steps']} "
               f"steps, cosine + 3% warmup; {len(diff)} seeds; paired sr gap {mu:.3g} +- {se:.2g}. "
               f"With reg_lambda = 5e-3 under Adam, X and Y leave the manifold (||X^T X - I||_F "
               f"~ {np.mean(runs['polar']['feas']):.1f}), so sr(dW) "
               f"{np.mean(runs['polar']['sr']):.2f} < sr(Theta) "
               f"{np.mean(runs['polar']['sr_theta']):.2f}",
    )


# PoLAR's rate (matrix)
@functools.cache
def polar_rate_runs(scale: str = "quick"):
    """GD on LoRA's ``1/2||BA - M||^2`` vs Riemannian GD on PoLAR's ``1/2||X Theta Y^T - M||^2``.

    A reconstruction: the paper's abstract says PoLAR "yields an exponentially faster
    convergence rate on a canonical low-rank adaptation problem", but its theorem (the problem,
    the rank of the target against r, the initialisation, the step sizes) could not be read: the
    stored copies of arXiv 2506.03133 v1/v2 hold only the first screen of the page, and no other
    stored source states it. ``M`` (32 x 32) has rank 4 and the adapters rank r = 8
    (over-parameterised), the setting in which GD on ``BA`` from a small random initialisation
    of both factors slows to a sublinear rate (Xiong, Ding & Du 2024). LoRA is also run from its
    own (PEFT) initialisation, ``A`` Kaiming-uniform and ``B = 0``, for which GD converges
    linearly here (reported beside the verdict, which stays on the small-random run).
    """
    with jax.enable_x64(True):
        m = n = 32
        rstar, r = 4, 8
        steps = 3000 if scale == "quick" else 20000
        rng = np.random.default_rng(0)
        u = np.linalg.qr(rng.standard_normal((m, rstar)))[0]
        v = np.linalg.qr(rng.standard_normal((n, rstar)))[0]
        target = jnp.asarray(u @ np.diag([1.0, 0.8, 0.6, 0.5]) @ v.T)
        eta = 0.2
        f0 = 0.5 * float(jnp.sum(target**2))

        def lora_loss(p):
            return 0.5 * jnp.sum((p["B"] @ p["A"] - target) ** 2)

        # small random init of both factors (with B = 0 the excess rank is never excited and GD
        # is linear too; the over-parameterised slowdown needs it, Xiong, Ding & Du 2024)
        p0 = {"A": jnp.asarray(1e-3 * rng.standard_normal((r, n))),
              "B": jnp.asarray(1e-3 * rng.standard_normal((m, r)))}
        opt = optax.sgd(eta)

        def run(loss, p, opt):
            @jax.jit
            def go(p):
                def step(c, _):
                    p, st = c
                    val, g = jax.value_and_grad(loss)(p)
                    upd, st = opt.update(g, st, p)
                    return (optax.apply_updates(p, upd), st), val

                return jax.lax.scan(step, (p, opt.init(p)), None, length=steps)

            (p, _), ls = go(p)
            return p, np.asarray(ls)

        _, lora = run(lora_loss, p0, opt)
        p_peft = {"A": jnp.asarray(rng.uniform(-1, 1, (r, n)) / np.sqrt(n)),
                  "B": jnp.zeros((m, r))}
        _, lora_peft = run(lora_loss, p_peft, opt)

        def polar_loss(p):
            return 0.5 * jnp.sum((p["X"] @ p["T"] @ p["Y"].T - target) ** 2)

        q0 = {"X": rm.random_stiefel(m, r, key=jax.random.key(1)),
              "Y": rm.random_stiefel(n, r, key=jax.random.key(2)), "T": jnp.zeros((r, r))}
        popt = optax.partition(
            {"st": optax.chain(optax.sgd(eta), rm.stiefel_retraction("qr")), "eu": optax.sgd(eta)},
            {"X": "st", "Y": "st", "T": "eu"})
        qf, polar = run(polar_loss, q0, popt)
        return {"lora": lora / f0, "polar": polar / f0, "lora_peft": lora_peft / f0,
                "steps": steps,
                "feas": float(max(rm.feasibility(qf["X"]), rm.feasibility(qf["Y"])))}


def _first_below(curve, level):
    idx = np.nonzero(np.asarray(curve) <= level)[0]
    return int(idx[0]) + 1 if len(idx) else None


@claim("adapters.polar_convergence", paper=POLAR,
       statement="On the canonical low-rank adaptation problem PoLAR converges exponentially "
                 "faster than LoRA [statement reconstructed from the abstract: the theorem text "
                 "could not be read].",
       where="Abstract ('exponentially faster convergence rate on a canonical low-rank "
             "adaptation problem'); the theorem itself not read")
def _check_polar_rate(scale: str) -> Measurement:
    res = polar_rate_runs(scale)
    level = 1e-12
    tp = _first_below(res["polar"], level)
    tl = _first_below(res["lora"], level)
    tpeft = _first_below(res["lora_peft"], level)
    # PoLAR (linear rate) reaches the level; LoRA (sublinear when over-parameterised) needs more
    # than ten times as many iterations (or never gets there within the budget).
    passed = tp is not None and (tl is None or tl > 10 * tp)
    return Measurement(
        measured={"polar_iters_to_1e-12": tp, "lora_iters_to_1e-12": tl if tl else -1,
                  "lora_final": float(res["lora"][-1]),
                  "lora_peft_init_iters_to_1e-12": tpeft if tpeft else -1},
        expected={"lora_iters / polar_iters": "> 10"},
        tolerance={"level": level},
        passed=bool(passed),
        detail=f"M 32x32 rank 4, r = 8, step 0.2, {res['steps']} steps, relative objective "
               f"(-1 = not reached); PoLAR feasibility {res['feas']:.1e}. LoRA from small random "
               f"A, B (the verdict); from its own init (B = 0) GD is linear and reaches the "
               f"level in {tpeft} iterations: the reconstruction's gap rests on the init",
    )
