"""Koopman SVD by low-rank approximation: Jeong, Ryu, Yun & Wornell, NeurIPS 2025 (arXiv
2507.07222).

Claims on systems with exactly known answers (:mod:`dynamics.koopman`): learned vs exact singular
values and eigenvalues (noisy logistic map, N = 20; the paper's 1-D Langevin system, the Prinz
potential at gamma = beta = 1), LoRA vs VAMP-2 / DPNet (accuracy, and the bias of their minibatch
gradients as the batch size varies, on a finite chain where the population gradient is exact), and
multi-step prediction. Tolerances: canonical correlations from N pairs have standard error about
(1 - s^2) / sqrt(N); each tolerance is 4 standard errors plus a stated optimisation allowance.
"""

from __future__ import annotations

from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import roots_legendre

from dynamics.koopman import (
    FiniteChain,
    NoisyLogisticMap,
    PrinzLangevin,
    cca_readout,
    directed_hausdorff,
    dpnet_from_moments,
    fit_koopman,
    forecast_rmse,
    lora_loss,
    lora_population,
    relative_singular_value_errors,
    vamp2_from_moments,
)

from ._registry import Measurement, claim

PAPER = "Jeong, Ryu, Yun & Wornell 2025 (arXiv 2507.07222)"
OPT_ALLOWANCE = 0.01       # relative optimisation error allowed on top of 4 standard errors
# scale -> (training pairs, steps, test pairs)
LOGISTIC = {"quick": (50_000, 2500, 100_000), "full": (50_000, 31_000, 200_000)}
LANGEVIN = {"quick": (10_000, 1500, 10_000), "full": (100_000, 10_000, 100_000)}
BASELINES = ("lora", "vamp2", "dpnet", "dpnet_relaxed")
K_LOGISTIC = 5             # constant + 4 learned: the two close pairs 0.923/0.892, 0.696/0.657


def _tol(s, n):
    """4 standard errors (1 - s^2)/sqrt(n) of a canonical correlation, relative, + allowance."""
    s = np.asarray(s, float)
    return 4 * (1 - s**2) / np.sqrt(n) / s + OPT_ALLOWANCE


@cache
def logistic_fits(scale: str) -> dict:
    """Train LoRA (joint nesting) and the baselines on one logistic-map trajectory (paper's encoder:
    [sin 2 pi x, cos 2 pi x] -> MLP, separate f and g, Adam; lag 1); read out on a fresh one."""
    n_train, steps, n_test = LOGISTIC[scale]
    L = NoisyLogisticMap(N=20)
    tr = L.trajectory(n_train, rng=0)
    te = L.trajectory(n_test, rng=1)
    out = {"system": L, "test": te, "n_test": n_test, "steps": steps, "fits": {}}
    for loss in BASELINES:
        model = fit_koopman(tr[:-1], tr[1:], K_LOGISTIC, loss=loss, nesting="jnt",
                            embedding="fourier", width=64, depth=2, batch_size=256, steps=steps,
                            lr=2e-3, key=jax.random.key(0))
        out["fits"][loss] = (model, model.readout(te[:-1], te[1:]))
    return out


@cache
def langevin_fit(scale: str) -> dict:
    """Sequential-nesting LoRA on the Prinz-potential Langevin system (tau = 0.1, one encoder)."""
    n_train, steps, n_test = LANGEVIN[scale]
    p = PrinzLangevin(gamma=1.0, beta=1.0, tau=0.1, dt=2e-4)
    X, Y = p.pairs(n_train, rng=0)
    Xt, Yt = p.pairs(n_test, rng=1)
    model = fit_koopman(X, Y, 4, nesting="seq", width=64, depth=2, batch_size=512, steps=steps,
                        lr=2e-3, shared=True, key=jax.random.key(0))
    return {"system": p, "model": model, "readout": model.readout(Xt, Yt), "n_test": n_test}


@claim("koopman.logistic_singular_values", paper=PAPER,
       statement="Nested LoRA learns the ordered top singular values of the noisy logistic map's "
                 "Koopman operator (exact: 0.9232, 0.8923, 0.6964, 0.6573).",
       where="Sec. 3.1 (objective, nesting), Sec. 3.2.1 (CCA read-out), Sec. 5 (logistic map)")
def _logistic_svals(scale: str) -> Measurement:
    sim = logistic_fits(scale)
    L, ro = sim["system"], sim["fits"]["lora"][1]
    s = L.singular_values(K_LOGISTIC)
    err = relative_singular_value_errors(ro.singular_values, s)[1:]
    # the last learned mode is the least determined (close pair 0.696 / 0.657): allowance 8%
    tol = _tol(s[1:], sim["n_test"]) + np.r_[0, 0, 0, 0.07]
    return Measurement(measured=ro.singular_values[1:].round(5).tolist(),
                       expected=s[1:].round(5).tolist(),
                       tolerance=(tol * s[1:]).round(5).tolist(),
                       passed=bool(np.all(err <= tol)),
                       detail=f"relative errors {np.round(err, 4).tolist()}; "
                              f"{sim['steps']} steps, CCA on {sim['n_test']} fresh pairs")


@cache
def _population_logistic(k: int, n_nodes: int = 200) -> dict:
    """Population CCA read-out of the exact top-k singular functions (quadrature of the joint)."""
    L = NoisyLogisticMap(N=20)
    t, w = roots_legendre(n_nodes)
    x, w = (t + 1) / 2, w / 2
    W = ((w * L.invariant_density(x))[:, None] * L.transition_density(x[None, :], x[:, None])
         * w[None, :]).reshape(-1)
    phi, psi = L.left_singular_functions(x, k), L.right_singular_functions(x, k)
    fx, fy, gy = np.repeat(phi, x.size, 0), np.tile(phi, (x.size, 1)), np.tile(psi, (x.size, 1))
    ro = cca_readout(fx, gy, fy, weights=W)
    return {"readout": ro, "fy": fy, "gy": gy, "W": W, "x": x}


@claim("koopman.logistic_eigenvalues", paper=PAPER,
       statement="Eigenvalues of the Koopman matrix of the learned top singular subspace (CCA + "
                 "LoRA) match those of the exact rank-r compression of K.",
       where="Sec. 3.2.1 (Koopman matrix, eigen-analysis), Sec. 5 (logistic map)")
def _logistic_eigs(scale: str) -> Measurement:
    sim = logistic_fits(scale)
    L, ro = sim["system"], sim["fits"]["lora"][1]
    # r = 3: the block (1, 0.923, 0.892) is separated from s_3 = 0.696 by a wide gap, so its
    # compression is well determined; the rank-5 eigenvalues hinge on the close pair 0.696/0.657
    # and are reported in the detail only.
    r = 3
    lam = ro.truncated(r).eigenvalues
    pop = _population_logistic(K_LOGISTIC)["readout"]
    lam_pop = pop.truncated(r).eigenvalues
    dist = directed_hausdorff(lam, lam_pop)
    # allowance: eigenvalues of a 3 x 3 compression move by about the singular-value error of
    # its modes (<= 4 SE + 1%, ~0.01) times the eigenvector conditioning (<= ~3): 0.03
    tol = 0.03
    d_true = directed_hausdorff(lam, L.eigenvalues())
    d5 = directed_hausdorff(ro.eigenvalues, L.eigenvalues())
    d5_pop = directed_hausdorff(pop.eigenvalues, L.eigenvalues())
    return Measurement(measured=[[round(z.real, 4), round(z.imag, 4)] for z in lam],
                       expected=[[round(z.real, 4), round(z.imag, 4)] for z in lam_pop],
                       tolerance=tol, passed=bool(dist <= tol),
                       detail=f"d_H(learned rank-3 -> exact rank-3) = {dist:.4f}; d_H to the true "
                              f"spectrum: rank 3 {d_true:.4f} (population 0.3413), rank 5 "
                              f"{d5:.4f} (population {d5_pop:.4f})")


@claim("koopman.langevin_eigenvalues", paper=PAPER,
       statement="Sequential-nesting LoRA recovers the leading Koopman eigenvalues of the 1-D "
                 "overdamped Langevin system (Prinz potential; generator eigenvalues 0, -1.20, "
                 "-7.89, -15.36, i.e. exp(0.1 mu) = 0.887, 0.454, 0.215 at lag 0.1).",
       where="Sec. 5 (1-D Langevin), poster eigenvalue table")
def _langevin(scale: str) -> Measurement:
    sim = langevin_fit(scale)
    p, ro = sim["system"], sim["readout"]
    s = p.singular_values(4)[1:]
    lam = np.sort(ro.eigenvalues.real)[::-1][1:]
    err = np.abs(lam - s) / s
    tol = _tol(s, sim["n_test"])
    return Measurement(measured=lam.round(5).tolist(), expected=s.round(5).tolist(),
                       tolerance=(tol * s).round(5).tolist(), passed=bool(np.all(err <= tol)),
                       detail=f"singular values {np.round(ro.singular_values[1:], 4).tolist()}; "
                              f"relative eigenvalue errors {np.round(err, 4).tolist()}")


@claim("koopman.lora_vs_baselines", paper=PAPER,
       statement="With the same encoder, data and budget, LoRA learns the top singular values at "
                 "least as accurately as VAMP-2 and DPNet (plain and relaxed).",
       where="Sec. 5 (comparisons with VAMPnet and DPNet)")
def _baselines(scale: str) -> Measurement:
    sim = logistic_fits(scale)
    s = sim["system"].singular_values(K_LOGISTIC)
    err = {loss: float(np.mean(relative_singular_value_errors(ro.singular_values, s)[1:]))
           for loss, (_, ro) in sim["fits"].items()}
    slack = float(np.mean(_tol(s[1:], sim["n_test"]) - OPT_ALLOWANCE))   # 4 SE, no allowance
    worse = {b: err["lora"] - err[b] for b in BASELINES[1:]}
    return Measurement(measured={k: round(v, 5) for k, v in err.items()},
                       expected={"lora <= each baseline + 4 SE": round(slack, 5)},
                       tolerance=round(slack, 5),
                       passed=bool(all(v <= slack for v in worse.values())),
                       detail="mean relative error of s_1..s_4; " + ", ".join(
                           f"lora - {b} = {v:+.4f}" for b, v in worse.items()))


# ------------------------------------------------------------------ minibatch-gradient bias
BATCHES = {"quick": (4, 16, 64), "full": (4, 8, 16, 32, 64, 128)}
REPS = {"quick": 4000, "full": 50_000}
BIAS_LOSSES = ("lora (U-statistic)", "lora (plug-in)", "vamp2", "dpnet")


def _tabular_losses():
    """(population loss of (F, G), minibatch loss of (F[x], G[y])) for each compared loss."""
    def moments_pop(F, G, c):
        Mf = F.T @ (c["rho0"][:, None] * F)
        Mg = G.T @ (c["rho1"][:, None] * G)
        return Mf, Mg, F.T @ c["J"] @ G

    def moments_mb(f, g):
        B = f.shape[0]
        return f.T @ f / B, g.T @ g / B, f.T @ g / B

    return {
        "lora (U-statistic)": (lambda F, G, c: lora_population(F, G, c["P"], c["rho0"]),
                               lambda f, g: lora_loss(f, g, estimator="unbiased")),
        "lora (plug-in)": (lambda F, G, c: lora_population(F, G, c["P"], c["rho0"]),
                           lambda f, g: lora_loss(f, g, estimator="plugin")),
        "vamp2": (lambda F, G, c: vamp2_from_moments(*moments_pop(F, G, c)),
                  lambda f, g: vamp2_from_moments(*moments_mb(f, g))),
        "dpnet": (lambda F, G, c: dpnet_from_moments(*moments_pop(F, G, c)),
                  lambda f, g: dpnet_from_moments(*moments_mb(f, g))),
    }


@cache
def gradient_bias(scale: str) -> dict:
    """Bias of minibatch gradients w.r.t. tabular features on a 6-state chain, k = 3.

    The population gradient is exact (autodiff of the population loss). For each batch size B,
    ``REPS`` independent batches of B i.i.d. pairs give the mean minibatch gradient; with the
    covariance S of one batch gradient, ``||mean - g||^2 - tr(S)/R`` estimates ``||bias||^2``
    unbiasedly and ``z = that / (sqrt(2 tr S^2)/R)`` is its z-score under zero bias (derived here).
    Features: the exact top-3 singular functions plus N(0, 0.3^2) perturbations (fixed seed).
    """
    with jax.enable_x64(True):
        chain = FiniteChain.random(6, rng=7, concentration=0.5)
        rng = np.random.default_rng(0)
        st = np.arange(chain.n)
        F = chain.left_singular_functions(st, 3) + 0.3 * rng.standard_normal((chain.n, 3))
        G = chain.right_singular_functions(st, 3) + 0.3 * rng.standard_normal((chain.n, 3))
        F, G = jnp.asarray(F), jnp.asarray(G)
        c = {"P": jnp.asarray(chain.kernel), "rho0": jnp.asarray(chain.rho0),
             "rho1": jnp.asarray(chain.rho1), "J": jnp.asarray(chain.joint)}
        R = REPS[scale]
        out = {"B": np.array(BATCHES[scale]), "R": R}
        for name, (pop, mb) in _tabular_losses().items():
            g_pop = np.concatenate([np.ravel(a) for a in jax.grad(pop, (0, 1))(F, G, c)])
            grad_mb = jax.jit(jax.vmap(lambda x, y, mb=mb: jnp.concatenate(
                [jnp.ravel(a) for a in jax.grad(lambda F_, G_: mb(F_[x], G_[y]), (0, 1))(F, G)])))
            rel, z = [], []
            for B in BATCHES[scale]:
                x, y = chain.pairs(R * B, rng=np.random.default_rng([1, B]))
                gs = np.asarray(grad_mb(jnp.asarray(x.reshape(R, B)), jnp.asarray(y.reshape(R, B))))
                diff = gs.mean(0) - g_pop
                S = np.cov(gs, rowvar=False)
                b2 = diff @ diff - np.trace(S) / R
                z.append(b2 / (np.sqrt(2 * np.sum(S * S)) / R))
                rel.append(np.sqrt(max(b2, 0.0)) / np.linalg.norm(g_pop))
            out[name] = {"rel_bias": np.array(rel), "z": np.array(z)}
    return out


@claim("koopman.unbiased_gradients", paper=PAPER,
       statement="The LoRA objective has unbiased minibatch gradients (U-statistic), while the "
                 "minibatch gradients of VAMP-2 and DPNet are biased, the bias shrinking with the "
                 "batch size.",
       where="Abstract; Sec. 3.1 (unbiased gradient estimates), Sec. 1 (bias of VAMP/DPNet)")
def _bias(scale: str) -> Measurement:
    sim = gradient_bias(scale)
    zl = sim["lora (U-statistic)"]["z"]
    zb = {n: sim[n]["z"][0] for n in ("vamp2", "dpnet")}
    passed = bool(np.all(np.abs(zl) < 4) and all(v > 4 for v in zb.values()))
    return Measurement(
        measured={n: sim[n]["rel_bias"].round(4).tolist() for n in BIAS_LOSSES},
        expected={"lora (U-statistic)": 0.0, "vamp2, dpnet at B=4": "> 0 (z > 4)"},
        tolerance="|z| < 4 for LoRA at every B",
        passed=passed,
        detail=f"B = {sim['B'].tolist()}, {sim['R']} batches each; z-scores LoRA-U "
               f"{np.round(zl, 1).tolist()}, VAMP-2/DPNet at B=4: "
               f"{[round(float(v), 1) for v in zb.values()]}")


# ------------------------------------------------------------------ multi-step prediction
HORIZONS = (1, 2, 3, 4, 5)


def _h(x):
    return np.cos(2 * np.pi * x)


@cache
def forecasts(scale: str) -> dict:
    """Forecasts of E[cos(2 pi X_t) | X_0 = x] from the trained LoRA model and from the exact rank-k
    compression, against the exact conditional expectation (transfer-matrix formula)."""
    sim = logistic_fits(scale)
    L, te = sim["system"], sim["test"]
    model, ro = sim["fits"]["lora"]
    x0 = np.linspace(0.0, 1.0, 201)[:-1]
    dec = ro.decoder(model.g(te[1:]), _h(te[1:]))
    learned = ro.forecast(model.f(x0), dec, HORIZONS)[..., 0]
    pop = _population_logistic(K_LOGISTIC)
    pro = pop["readout"]
    pdec = (pop["gy"] @ pro.coef_g).T @ (pop["W"] * _h(np.tile(pop["x"], pop["x"].size)))[:, None]
    best = pro.forecast(L.left_singular_functions(x0, K_LOGISTIC), pdec, HORIZONS)[..., 0]
    exact = np.stack([L.conditional_expectation(_h, x0, t) for t in HORIZONS])
    return {"x0": x0, "learned": learned, "rank_k": best, "exact": exact,
            "rmse_learned": forecast_rmse(learned, exact),
            "rmse_rank_k": forecast_rmse(best, exact), "n_test": sim["n_test"]}


@claim("koopman.multistep_prediction", paper=PAPER,
       statement="Multi-step forecasts of observables from the learned singular functions match "
                 "those of the exact rank-k Koopman compression.",
       where="Sec. 3.2 (forward prediction), Sec. 5 (multi-step prediction)")
def _forecast(scale: str) -> Measurement:
    sim = forecasts(scale)
    diff = sim["rmse_learned"] - sim["rmse_rank_k"]
    # decoder E[psi~ h] from n_test pairs: s.e. ~ 1/sqrt(n); |phi~(x)| <= ~3 -> 4 SE allowance,
    # plus the propagated singular-value error (allowance 1% of |h| <= 1)
    tol = 4 * 3 / np.sqrt(sim["n_test"]) + OPT_ALLOWANCE
    return Measurement(measured=sim["rmse_learned"].round(4).tolist(),
                       expected=sim["rmse_rank_k"].round(4).tolist(), tolerance=round(tol, 4),
                       passed=bool(np.all(np.abs(diff) <= tol)),
                       detail=f"RMSE over 200 starting points of E[cos 2 pi X_t | x], t = "
                              f"{list(HORIZONS)}, vs the exact conditional expectation")
