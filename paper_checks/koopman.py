"""Koopman SVD by low-rank approximation: Jeong, Ryu, Yun & Wornell, NeurIPS 2025 (arXiv
2507.07222).

Claims on systems with exactly known answers (:mod:`dynamics.koopman`): learned vs exact singular
values and eigenvalues (noisy logistic map, N = 20; the paper's 1-D Langevin system, the Prinz
potential at gamma = beta = 1), LoRA vs VAMP-2 / DPNet paired over trained replicates (same data,
initialisation, budget and learning rate), the bias of their minibatch gradients on a finite chain
where the population gradient is exact, and multi-step prediction compared pointwise with the exact
rank-k compression. Replicates of one configuration train side by side
(:func:`dynamics.koopman.fit_koopman_batch`). Tolerances: a canonical correlation from N pairs has
standard error about (1 - s^2) / sqrt(N); each tolerance is 4 standard errors (or the spread over
replicates, when larger) plus a stated allowance.

Verdicts (issue 44). Rules that compare with the exact answer the paper's method should reach
(singular values, eigenvalues, unbiasedness) carry it as the paper's effect (``paper=``, power
about 1 at these SEs); bounds stay two-valued.

- ``koopman.lora_vs_baselines``: every loss tuned on one learning-rate grid (quick: 2e-3 and
  1e-2, 2,000 Adam steps with cosine decay; full: 1e-3, 2e-3, 5e-3 at the paper's ~31,000 steps)
  by its mean error over the first 2 replicates (full: all 8), then trained at its best rate on
  all 16 replicates (same data, initialisation and batches for every loss); each loss is
  compared with LoRA by the paired log-ratio of the mean relative error of s_1..s_4 over the 16.
  (Tuning on all 16 cost a third of the area's time for a choice that 2 replicates settle: over
  replicates 0-3 of seed 0 each loss's error at 2e-3 is 2-20x its error at 1e-2, LoRA 1.15 %
  against 0.17 %, VAMP-2 3.0 against 0.15, DPNet 1.2 against 0.15, relaxed DPNet 39 against
  20; tuning on 4 replicates trained 16 fits at the losing rate, on 2 it trains 8.) The
  paper gives the direction (LoRA better) but its logistic-map numbers could not be read, so its
  effect is registered as a baseline error 1.5x LoRA's. At the shared 2e-3 of the earlier
  design every loss was under-trained (errors 1-3 %) and the verdict followed the seed; tuned
  alike, VAMP-2 and DPNet reach LoRA's error (about 0.15 %, the read-out's sampling floor), which
  excludes the paper's 1.5x: recorded not reproduced at quick. Relaxed DPNet stays far worse.
  With 8 replicates one read-out outlier (seed 2: LoRA 0.11 % against 0.03 %) took the power to
  0.69 and the verdict followed the seed; with 16, seeds 0-2 give log(VAMP-2 / LoRA) = -0.01 +-
  0.06, -0.16 +- 0.08, -0.12 +- 0.09 and log(DPNet / LoRA) = -0.09 +- 0.08, -0.30 +- 0.09,
  -0.15 +- 0.11 (power 0.97-1.00 to see log 1.5 = 0.41): not reproduced at every seed, the
  baselines if anything slightly ahead. Every loss's best rate is the grid's top, 1e-2 (the grid
  is not widened at quick: VAMP-2 diverged at 3e-3 at k = 20).
  (At the paper's k = 20, VAMP-2 diverged at 3e-3 and matched LoRA's eigenvalue error at 3e-4;
  not registered.) Cost (issue 46): LoRA's fits at 1e-2 are the 16 of :func:`logistic_fits`,
  which the claims below read too (quick trains them at the grid's top, ``size.lr``, since that
  is LoRA's tuned rate), and a loss's rates share one compiled program (the rate a value in the
  optimiser's state, :mod:`dynamics.koopman._train`): 80 fits and 8 compilations where there
  were 92 and 12, the area 176 -> 147-156 CPU-s (two runs on a shared, loaded machine), every
  number of this claim bit for bit the same; mutant ``lora_grid_10x_low`` moves log(VAMP-2 /
  LoRA) from -0.01 +- 0.06 to -3.49 (seed 0). Then tuning on 2 replicates (72 fits) and the
  read-outs on one BLAS thread (``_core.runtime.one_blas_thread``: a read-out 0.16 -> 0.024
  CPU-s): the area 163 -> 144 CPU-s cold (same loaded machine, issue 46). A baseline's
  replicates 2-3 now train in the batch of the other 14 rather than beside replicates 0-1,
  which moves float32 rounding: seed 0's log(VAMP-2 / LoRA) -0.007 +- 0.058 -> -0.014 +-
  0.061 (DPNet's and relaxed DPNet's alike, in the 4th digit).
- ``koopman.unbiased_gradients``: one compiled program per loss for the population gradient and
  the three batch sizes, at -O1 (63 compilations were 11 CPU-s for 1 of run; now 7.6); the
  numbers are those of before at seed 0 to the printed digits.
- ``koopman.logistic_singular_values``, ``logistic_eigenvalues``, ``multistep_prediction`` read
  16 LoRA replicates at 1e-2 (quick; 2e-3 before, when they were under-trained: s_4 2.8 % off,
  Hausdorff 0.024 of its 0.03 bound). Seeds 0-2: s_1..s_4 within 0.01-0.5 % of the exact
  values (seed 0: 0.07 of the tolerance), Hausdorff 0.0096, 0.0089, 0.0081, forecast at 0.14,
  0.16, 0.13 of its subspace bound (the sines fell from 0.1-0.4 to 0.02-0.13, the bound with
  them); the five mutants are caught at seed 0.
- ``koopman.multistep_prediction``: the learned forecast of E[cos 2 pi X_t | x] is compared in
  L2(pi) with the exact rank-k compression's, against a tolerance derived from the measured
  largest principal angles of the learned f and g spans to the exact singular functions:
  ||(P_F K P_G)^t - K_k^t|| <= t (sin_F + sin_G) on mean-zero functions (derived here), plus the
  read-out's sampling error. The earlier pointwise tolerance (10 % of the forecast's spread)
  ignored the subspace error that the forecast inherits, and failed by 1.2x at horizon 2 while
  the forecast was as close to the truth as the compression. That bound (measured at 0.14 of it,
  sines 0.02-0.13 at quick) does not by itself catch a forecast one power of K_fwd off, so the
  read-out's forecast is also held to the paper's formula phi~(x)^T K_fwd^(t-1) E[psi~ h]
  evaluated from its own matrices (mutant ``power_off_by_one``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import roots_legendre

from _core.runtime import fast_compile, one_blas_thread
from _core.validation import NumericalError
from dynamics.koopman import (
    FiniteChain,
    NoisyLogisticMap,
    PrinzLangevin,
    cca_readout,
    directed_hausdorff,
    dpnet_from_moments,
    fit_koopman_batch,
    lora_loss,
    lora_population,
    relative_singular_value_errors,
    vamp2_from_moments,
)
from paper_checks import (
    Measurement,
    at_least,
    at_most,
    claim,
    measure,
    memo,
    paired_gap,
    patch,
    record,
    scaled,
    sizes,
    within,
    wrap,
)

PAPER = "Jeong, Ryu, Yun & Wornell 2025 (arXiv 2507.07222)"
OPT_ALLOWANCE = 0.01  # relative optimisation error allowed on top of 4 standard errors
LOGISTIC = sizes(
    smoke=dict(n_train=4000, steps=150, n_test=20_000, seeds=2, lr_grid=(2e-3, 1e-2), tune=2,
               lr=1e-2),
    quick=dict(n_train=50_000, steps=2000, n_test=100_000, seeds=16, lr_grid=(2e-3, 1e-2), tune=2,
               lr=1e-2),
    full=dict(n_train=50_000, steps=31_000, n_test=200_000, seeds=8, lr_grid=(1e-3, 2e-3, 5e-3),
              tune=8, lr=2e-3),
)  # fmt: skip
# lr: LoRA's rate in the fits that the singular-value, eigenvalue and forecast claims read
# (logistic_fits); quick: the grid's top, the rate lora_vs_baselines tunes LoRA to, so that claim
# reads these 16 fits instead of training its own (full keeps 2e-3, within its grid)
LANGEVIN = sizes(
    smoke=dict(n_train=4000, steps=150, n_test=20_000, seeds=2),
    quick=dict(n_train=50_000, steps=2000, n_test=100_000, seeds=2),
    full=dict(n_train=200_000, steps=10_000, n_test=400_000, seeds=4),
)
BASELINES = ("lora", "vamp2", "dpnet", "dpnet_relaxed")
K_LOGISTIC = 5  # constant + 4 learned: the two close pairs 0.923/0.892, 0.696/0.657
GRID_SCALE = {loss: 1.0 for loss in BASELINES}  # each loss's grid = lr_grid * this (a mutant's)
PAPER_RATIO = 1.5  # "outperforms", as the ratio of a baseline's error to LoRA's (see the claim)


def _se(s, n):
    """Standard error (1 - s^2)/sqrt(n) of a canonical correlation s from n pairs."""
    s = np.asarray(s, float)
    return (1 - s**2) / np.sqrt(n)


@memo
@one_blas_thread
def logistic_fits(n_train, steps, n_test, seeds, lr, seed) -> dict:
    """Train LoRA (joint nesting) at the learning rate ``lr`` on ``seeds``
    independent logistic-map trajectories (paper's encoder: [sin 2 pi x, cos 2 pi x] -> MLP,
    separate f and g, Adam; lag 1; one vmap-ed program); read out on a fresh trajectory per
    replicate. Replicate ``i`` has the data and initialisation that every loss gets in
    :func:`tuned_errors` (paired)."""
    L = NoisyLogisticMap(N=20)
    tr = [L.trajectory(n_train, rng=np.random.default_rng([seed, i, 0])) for i in range(seeds)]
    te = [L.trajectory(n_test, rng=np.random.default_rng([seed, i, 1])) for i in range(seeds)]
    keys = [jax.random.fold_in(jax.random.key(seed), i) for i in range(seeds)]
    models = _fit_logistic(tr, keys, "lora", steps, lr)
    fits = {"lora": [(m, _readout(m, t)) for m, t in zip(models, te, strict=True)]}
    return {"system": L, "test": te, "n_test": n_test, "steps": steps, "seeds": seeds, "lr": lr,
            "fits": fits}  # fmt: skip


def _readout(model, t):
    """CCA read-out on the pairs ``(t[:-1], t[1:])`` of a trajectory, each network evaluated
    once on the trajectory (f(X) and f(Y) overlap but for one point): the read-out
    ``model.readout(t[:-1], t[1:])`` at two thirds of its cost."""
    F = model.f(t)
    return cca_readout(F[:-1], model.g(t[1:]), F[1:])  # a mutant's patch rebinds this name


def _fit_logistic(tr, keys, loss, steps, lr):
    """``fit_koopman_batch`` with the logistic-map settings of :func:`logistic_fits`."""
    return fit_koopman_batch(
        [t[:-1] for t in tr],
        [t[1:] for t in tr],
        K_LOGISTIC,
        keys=keys,
        loss=loss,
        nesting="jnt",
        embedding="fourier",
        width=64,
        depth=2,
        batch_size=256,
        steps=steps,
        lr=lr,
        progress=False,
    )


@memo
@one_blas_thread
def tuned_errors(n_train, steps, n_test, seeds, lr_grid, tune, scale, lr, seed) -> dict:
    """Each loss tuned on its grid (``lr_grid`` times ``dict(scale)[loss]``) by the mean relative
    error of s_1..s_4 over the first ``tune`` replicates, then trained at its best rate on the
    other replicates too: ``errors[loss][lr]`` per tuning replicate, ``best[loss]`` and
    ``full[loss]`` (all ``seeds`` replicates at the best rate; the replicates' data,
    initialisation and batches are :func:`logistic_fits`', the same for every loss). A run that
    diverges counts as error 1. LoRA's fits at ``lr`` are :func:`logistic_fits`' own."""
    sim = logistic_fits(n_train, steps, n_test, seeds, lr, seed)
    L, scale = sim["system"], dict(scale)
    s = L.singular_values(K_LOGISTIC)
    tr = [L.trajectory(n_train, rng=np.random.default_rng([seed, i, 0])) for i in range(seeds)]
    keys = [jax.random.fold_in(jax.random.key(seed), i) for i in range(seeds)]

    def svals(loss, lr, rows):
        """(len(rows), K) learned singular values of replicates ``rows``; None if diverged."""
        if not rows:
            return np.zeros((0, K_LOGISTIC))
        if loss in sim["fits"] and lr == sim["lr"]:
            return np.array([sim["fits"][loss][i][1].singular_values for i in rows])
        try:
            models = _fit_logistic([tr[i] for i in rows], [keys[i] for i in rows], loss, steps, lr)
        except NumericalError:  # diverged: the grid point loses
            return None
        tests = [sim["test"][i] for i in rows]
        ros = [_readout(m, t) for m, t in zip(models, tests, strict=True)]
        return np.array([ro.singular_values for ro in ros])

    def errors(sv, n):
        if sv is None:
            return np.ones(n)
        return np.array([np.mean(relative_singular_value_errors(v, s)[1:]) for v in sv])

    out = {"errors": {}, "best": {}, "full": {}, "svals": {}}
    head, rest = list(range(tune)), list(range(tune, seeds))
    for loss in BASELINES:
        grid = [round(v * scale[loss], 12) for v in lr_grid]
        sv = {lr: svals(loss, lr, head) for lr in grid}
        out["errors"][loss] = {lr: errors(sv[lr], tune) for lr in grid}
        best = min(grid, key=lambda lr, loss=loss: out["errors"][loss][lr].mean())
        tail = svals(loss, best, rest) if sv[best] is not None else None
        both = None if tail is None else np.concatenate([sv[best], tail])
        out["best"][loss] = best
        out["full"][loss] = errors(both, seeds)
        out["svals"][loss] = both
    return out


@claim(
    "koopman.logistic_singular_values",
    paper=PAPER,
    statement="Nested LoRA learns the ordered top singular values of the noisy logistic map's "
    "Koopman operator (exact: 0.9232, 0.8923, 0.6964, 0.6573).",
    where="Sec. 3.1 (objective, nesting), Sec. 3.2.1 (CCA read-out), Sec. 5 (logistic map)",
    sizes=LOGISTIC,
    mutants=[
        wrap(
            "dynamics.koopman._readout._inv_sqrt",
            lambda f: lambda M, rtol: f(M, rtol) @ f(M, rtol).T @ f(M, rtol),
            "CCA whitening by M^-3/2 instead of M^-1/2",
            name="whitening_power",
        ),
        wrap(
            "dynamics.koopman._systems.NoisyLogisticMap.noise",
            scaled(1.1),
            "noise sampler 10 % too wide (data no longer from the N = 20 map)",
            name="noise_10pct",
        ),
    ],
)
def _logistic_svals(size, seed) -> Measurement:
    sim = logistic_fits(size.n_train, size.steps, size.n_test, size.seeds, size.lr, seed)
    s = sim["system"].singular_values(K_LOGISTIC)[1:]
    est = np.array([ro.singular_values[1:] for _, ro in sim["fits"]["lora"]])
    se = np.maximum(est.std(0, ddof=1), _se(s, size.n_test)) / np.sqrt(size.seeds)
    # the last learned mode is the least determined (close pair 0.696 / 0.657): allowance 5 %
    allow = np.r_[OPT_ALLOWANCE, OPT_ALLOWANCE, OPT_ALLOWANCE, 0.05] * s
    return measure(
        within(
            est.mean(0).round(5),
            s.round(5),
            (4 * se + allow).round(5),
            name="s_1..s_4",
            paper=s.round(5),
            se=se,
            replicates=size.seeds,
        ),
        extra={"relative errors": np.round(np.abs(est.mean(0) - s) / s, 4).tolist()},
        detail=f"mean over {size.seeds} trained replicates (own data, init), {size.steps} Adam "
        f"steps on {size.n_train} pairs, CCA on {size.n_test} fresh pairs each; tolerance "
        "4 SE (the larger of the spread over replicates and (1 - s^2)/sqrt(n)) + 1 % "
        "(5 % for s_4, second of a close pair)",
    )


@memo
def _exact_compression_eigenvalues(r: int, n_nodes: int = 400) -> np.ndarray:
    """Eigenvalues of the exact rank-r compression ``sum_{i<r} s_i phi_i (x) psi_i`` of K: the
    nonzero ones are those of ``A_ik = s_i <psi_i, phi_k>_pi`` (stationary, rho0 = rho1 = pi),
    by Gauss-Legendre quadrature of the system's exact singular functions (derived here; no read-
    out code involved)."""
    L = NoisyLogisticMap(N=20)
    t, w = roots_legendre(n_nodes)
    x, w = (t + 1) / 2, w / 2 * L.invariant_density((t + 1) / 2)
    phi, psi = L.left_singular_functions(x, r), L.right_singular_functions(x, r)
    A = L.singular_values(r)[:, None] * (psi.T @ (w[:, None] * phi))
    return np.linalg.eigvals(A)


@claim(
    "koopman.logistic_eigenvalues",
    paper=PAPER,
    statement="Eigenvalues of the Koopman matrix of the learned top singular subspace (CCA + "
    "LoRA) match those of the exact rank-r compression of K.",
    where="Sec. 3.2.1 (Koopman matrix, eigen-analysis), Sec. 5 (logistic map)",
    sizes=LOGISTIC,
    mutants=[
        wrap(
            "dynamics.koopman._readout.cca_readout",
            lambda f: lambda fx, gy, fy=None, **kw: f(fx, gy, None if fy is None else fx, **kw),
            "Koopman matrix from f(X) instead of f(X')",
            name="koopman_matrix_lag0",
        ),
        wrap(
            "dynamics.koopman._readout.KoopmanReadout.truncated",
            lambda f: (
                lambda self, r: dataclasses.replace(f(self, r), eigenvalues=self.eigenvalues[:r])
            ),
            "rank-r eigenvalues taken as the top r of the full-rank Koopman matrix (the "
            "eigendecomposition before the truncation)",
            name="eigs_before_truncation",
        ),
    ],
)
def _logistic_eigs(size, seed) -> Measurement:
    sim = logistic_fits(size.n_train, size.steps, size.n_test, size.seeds, size.lr, seed)
    L = sim["system"]
    # r = 3: the block (1, 0.923, 0.892) is separated from s_3 = 0.696 by a wide gap, so its
    # compression is well determined; the rank-5 eigenvalues hinge on the close pair 0.696/0.657
    r = 3
    exact = _exact_compression_eigenvalues(r)
    lam = [ro.truncated(r).eigenvalues for _, ro in sim["fits"]["lora"]]
    d = np.array([max(directed_hausdorff(v, exact), directed_hausdorff(exact, v)) for v in lam])
    d_true = [directed_hausdorff(ro.eigenvalues, L.eigenvalues()) for _, ro in sim["fits"]["lora"]]
    # allowance: eigenvalues of a 3 x 3 compression move by about the singular-value error of its
    # modes (4 SE + 1 %, ~0.01) times the eigenvector conditioning (<= ~3): 0.03
    return measure(
        at_most(
            round(float(d.mean()), 4),
            0.03,
            name="Hausdorff(learned, exact rank-3)",
            paper=0.0,
            se=float(d.std(ddof=1) / np.sqrt(d.size)),
            replicates=size.seeds,
        ),
        extra={
            "learned (replicate 0)": [[round(z.real, 4), round(z.imag, 4)] for z in lam[0]],
            "exact rank-3": [[round(z.real, 4), round(z.imag, 4)] for z in exact],
            "d_H(learned rank-5 -> true spectrum)": round(float(np.mean(d_true)), 4),
        },
        detail=f"symmetric Hausdorff distance per replicate ({size.seeds}), exact compression by "
        "quadrature of the exact singular functions (independent of the read-out code); "
        "d_H of the exact rank-5 compression to the true spectrum is 0.2535",
    )


@memo
@one_blas_thread
def langevin_fits(n_train, steps, n_test, seeds, seed) -> dict:
    """Sequential-nesting LoRA on the Prinz-potential Langevin system (tau = 0.1, one encoder),
    ``seeds`` replicates trained side by side; read out on fresh pairs each."""
    p = PrinzLangevin(gamma=1.0, beta=1.0, tau=0.1, dt=2e-4)
    data = [p.pairs(n_train, rng=np.random.default_rng([seed, i, 0])) for i in range(seeds)]
    test = [p.pairs(n_test, rng=np.random.default_rng([seed, i, 1])) for i in range(seeds)]
    keys = [jax.random.fold_in(jax.random.key(seed), i) for i in range(seeds)]
    models = fit_koopman_batch(
        [d[0] for d in data],
        [d[1] for d in data],
        4,
        keys=keys,
        nesting="seq",
        width=64,
        depth=2,
        batch_size=512,
        steps=steps,
        lr=2e-3,
        shared=True,
        progress=False,
    )
    return {
        "system": p,
        "readouts": [m.readout(*t) for m, t in zip(models, test, strict=True)],
        "n_test": n_test,
    }


@claim(
    "koopman.langevin_eigenvalues",
    paper=PAPER,
    statement="Sequential-nesting LoRA recovers the leading Koopman eigenvalues of the 1-D "
    "overdamped Langevin system (Prinz potential; generator eigenvalues 0, -1.20, "
    "-7.89, -15.36, i.e. exp(0.1 mu) = 0.887, 0.454, 0.215 at lag 0.1).",
    where="Sec. 5 (1-D Langevin), poster eigenvalue table",
    sizes=LANGEVIN,
    mutants=[
        wrap(
            "dynamics.koopman._systems.PrinzLangevin._evolve",
            lambda f: lambda self, x, t, rng: f(self, x, 1.05 * t, rng),
            "pairs simulated at a lag 5 % too long",
            name="lag_5pct",
        )
    ],
)
def _langevin(size, seed) -> Measurement:
    sim = langevin_fits(size.n_train, size.steps, size.n_test, size.seeds, seed)
    s = sim["system"].singular_values(4)[1:]
    lam = np.array([np.sort(ro.eigenvalues.real)[::-1][1:] for ro in sim["readouts"]])
    se = _se(s, size.n_test * size.seeds)
    return measure(
        within(
            lam.mean(0).round(5),
            s.round(5),
            (4 * se + 0.005 * s).round(5),
            name="lambda_1..lambda_3",
            paper=s.round(5),
            se=se,
        ),
        extra={
            "singular values": np.round(
                np.mean([ro.singular_values[1:] for ro in sim["readouts"]], 0), 4
            ).tolist(),
            "relative errors": np.round(np.abs(lam.mean(0) - s) / s, 4).tolist(),
        },
        detail=f"mean over {size.seeds} replicates, {size.n_train} training pairs, {size.steps} "
        f"steps, {size.n_test} test pairs each; tolerance 4 SE ((1 - s^2)/sqrt(n) over all "
        "test pairs) + 0.5 % (Euler-Maruyama dt = 2e-4, optimisation)",
    )


@claim(
    "koopman.lora_vs_baselines",
    paper=PAPER,
    statement="With the same encoder, data and budget, and each loss's learning rate tuned on "
    "the same grid, LoRA learns the top singular values more accurately than VAMP-2 and DPNet "
    "(plain and relaxed).",
    where="Sec. 5 (comparisons with VAMPnet and DPNet); abstract",
    sizes=LOGISTIC,
    mutants=[
        patch(
            "paper_checks.koopman.GRID_SCALE",
            {**GRID_SCALE, "lora": 0.1},
            "LoRA tuned on a learning-rate grid 10x below the baselines'",
            name="lora_grid_10x_low",
        )
    ],
    recorded=record(
        quick="not reproduced",
        reason="tuned alike (best of the grid per loss: 1e-2 for every loss), VAMP-2 and DPNet "
        "reach LoRA's accuracy (errors at the read-out's sampling floor, about 0.15 %): over 16 "
        "replicates log(VAMP-2 error / LoRA error) = -0.01 +- 0.06, -0.16 +- 0.08, -0.12 +- 0.09 "
        "at seeds 0-2, which excludes the paper's 1.5x (log 0.41) with power 0.97-1.00; relaxed "
        "DPNet is far worse (log ratio 4.0-4.6)",
    ),
)
def _baselines(size, seed) -> Measurement:
    grid = tuned_errors(
        size.n_train,
        size.steps,
        size.n_test,
        size.seeds,
        size.lr_grid,
        size.tune,
        tuple(GRID_SCALE.items()),
        size.lr,
        seed,
    )
    best = grid["best"]
    log_err = {loss: np.log(e) for loss, e in grid["full"].items()}
    return measure(
        *[
            paired_gap(
                log_err[b],
                log_err["lora"],
                n_se=2,
                name=f"log({b} error / LoRA error)",
                paper=float(np.log(PAPER_RATIO)),
            )
            for b in BASELINES[1:]
        ],
        extra={
            "tuned learning rate": dict(best),
            f"mean relative error per learning rate (tuning replicates 0-{size.tune - 1})": {
                loss: {f"{lr:g}": round(float(e.mean()), 5) for lr, e in g.items()}
                for loss, g in grid["errors"].items()
            },
            "mean relative error at the tuned rate": {
                loss: round(float(e.mean()), 5) for loss, e in grid["full"].items()
            },
        },
        detail=f"mean relative error of s_1..s_4 per replicate at each loss's best learning rate "
        f"of the grid {list(size.lr_grid)} (chosen on replicates 0-{size.tune - 1}; "
        f"{size.steps} Adam steps, cosine decay; same data, init and batches for every loss), "
        f"log-ratio to LoRA's paired over {size.seeds} replicates; the paper's effect registered "
        f"as a ratio of {PAPER_RATIO} (its logistic-map numbers could not be read)",
    )


# ------------------------------------------------------------------ minibatch-gradient bias
BIAS = sizes(
    smoke=dict(batches=(4, 16), reps=500),
    quick=dict(batches=(4, 16, 64), reps=4000),
    full=dict(batches=(4, 8, 16, 32, 64, 128), reps=50_000),
)
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
        "lora (U-statistic)": (
            lambda F, G, c: lora_population(F, G, c["P"], c["rho0"]),
            lambda f, g: lora_loss(f, g, estimator="unbiased"),
        ),
        "lora (plug-in)": (
            lambda F, G, c: lora_population(F, G, c["P"], c["rho0"]),
            lambda f, g: lora_loss(f, g, estimator="plugin"),
        ),
        "vamp2": (
            lambda F, G, c: vamp2_from_moments(*moments_pop(F, G, c)),
            lambda f, g: vamp2_from_moments(*moments_mb(f, g)),
        ),
        "dpnet": (
            lambda F, G, c: dpnet_from_moments(*moments_pop(F, G, c)),
            lambda f, g: dpnet_from_moments(*moments_mb(f, g)),
        ),
    }


@memo
@one_blas_thread
def gradient_bias(batches, reps, seed) -> dict:
    """Bias of minibatch gradients w.r.t. tabular features on a 6-state chain, k = 3.

    The population gradient is exact (autodiff of the population loss). For each batch size B,
    ``REPS`` independent batches of B i.i.d. pairs give the mean minibatch gradient; with the
    covariance S of one batch gradient, ``||mean - g||^2 - tr(S)/R`` estimates ``||bias||^2``
    unbiasedly and ``z = that / (sqrt(2 tr S^2)/R)`` is its z-score under zero bias (derived here).
    Features: the exact top-3 singular functions plus N(0, 0.3^2) perturbations (fixed seed).
    """
    with jax.enable_x64(True):
        chain = FiniteChain.random(6, rng=np.random.default_rng([seed, 7]), concentration=0.5)
        rng = np.random.default_rng([seed, 0])
        st = np.arange(chain.n)
        F = chain.left_singular_functions(st, 3) + 0.3 * rng.standard_normal((chain.n, 3))
        G = chain.right_singular_functions(st, 3) + 0.3 * rng.standard_normal((chain.n, 3))
        F, G = jnp.asarray(F), jnp.asarray(G)
        c = {
            "P": jnp.asarray(chain.kernel),
            "rho0": jnp.asarray(chain.rho0),
            "rho1": jnp.asarray(chain.rho1),
            "J": jnp.asarray(chain.joint),
        }
        R = reps
        out = {"B": np.array(batches), "R": R}
        xy = [chain.pairs(R * B, rng=np.random.default_rng([seed, 1, B])) for B in batches]
        xs = [jnp.asarray(x.reshape(R, B)) for (x, _), B in zip(xy, batches, strict=True)]
        ys = [jnp.asarray(y.reshape(R, B)) for (_, y), B in zip(xy, batches, strict=True)]

        def flat(grads):
            return jnp.concatenate([jnp.ravel(a) for a in grads])

        for name, (pop, mb) in _tabular_losses().items():

            def grads(F, G, c, xs, ys, pop=pop, mb=mb):
                """The population gradient and the ``R`` minibatch gradients at each batch
                size: one program per loss (12 op-by-op population gradients and 12 programs
                were 11 CPU-s of compilation for 1 of run)."""
                one = jax.vmap(
                    lambda x, y: flat(jax.grad(lambda F_, G_: mb(F_[x], G_[y]), (0, 1))(F, G))
                )
                return flat(jax.grad(pop, (0, 1))(F, G, c)), [
                    one(x, y) for x, y in zip(xs, ys, strict=True)
                ]

            g_pop, gs_all = jax.jit(grads, compiler_options=fast_compile())(F, G, c, xs, ys)
            g_pop = np.asarray(g_pop)
            rel, z = [], []
            for gs in gs_all:
                gs = np.asarray(gs)
                diff = gs.mean(0) - g_pop
                S = np.cov(gs, rowvar=False)
                b2 = diff @ diff - np.trace(S) / R
                z.append(b2 / (np.sqrt(2 * np.sum(S * S)) / R))
                rel.append(np.sqrt(max(b2, 0.0)) / np.linalg.norm(g_pop))
            out[name] = {"rel_bias": np.array(rel), "z": np.array(z)}
    return out


@claim(
    "koopman.unbiased_gradients",
    paper=PAPER,
    statement="The LoRA objective has unbiased minibatch gradients (U-statistic), while the "
    "minibatch gradients of VAMP-2 and DPNet are biased, the bias shrinking with the "
    "batch size.",
    where="Abstract; Sec. 3.1 (unbiased gradient estimates), Sec. 1 (bias of VAMP/DPNet)",
    sizes=BIAS,
    mutants=[
        wrap(
            "dynamics.koopman._objective.lora_loss",
            lambda f: lambda f_, g_, **kw: f(f_, g_, **{**kw, "estimator": "plugin"}),
            "U-statistic same-pair correction dropped (plug-in metric term)",
            name="no_u_statistic",
        )
    ],
)
def _bias(size, seed) -> Measurement:
    sim = gradient_bias(size.batches, size.reps, seed)
    zl = sim["lora (U-statistic)"]["z"]
    return measure(
        within(
            np.round(zl, 2),
            np.zeros_like(zl),
            4.0,
            name="z(LoRA U-statistic bias)",
            paper=np.zeros_like(zl),
            se=np.ones_like(zl),
        ),
        *[
            at_least(
                round(float(sim[n]["z"][0]), 2), 4.0, name=f"z({n} bias) at B={size.batches[0]}"
            )
            for n in ("vamp2", "dpnet")
        ],
        *[
            at_most(
                round(float(sim[n]["rel_bias"][-1]), 5),
                round(float(sim[n]["rel_bias"][0]), 5),
                name=f"{n} bias at B={size.batches[-1]} vs B={size.batches[0]}",
            )
            for n in ("vamp2", "dpnet")
        ],
        extra={n: sim[n]["rel_bias"].round(4).tolist() for n in BIAS_LOSSES},
        detail=f"B = {list(size.batches)}, {sim['R']} batches each; z = unbiased estimate of "
        "||bias||^2 over its standard error under zero bias (|z| < 4: no bias detected)",
    )


# ------------------------------------------------------------------ multi-step prediction
HORIZONS = (1, 2, 3, 4, 5)
INFORMATIVE = 0.05  # horizons where the exact forecast varies over x by more than this (SD)


def _h(x):
    return np.cos(2 * np.pi * x)


@memo
def _exact_rank_k_forecast(x0: tuple, k: int, n_nodes: int = 400) -> np.ndarray:
    """``E_k[h(X_t) | x] = phi(x)^T C^{t-1} b`` for the exact rank-k compression
    ``K_k = sum_{i<k} s_i phi_i (x) psi_i``, with ``C_ij = s_i <psi_i, phi_j>_pi`` and ``b_i = s_i
    <psi_i, h>_pi`` by Gauss-Legendre quadrature (derived here; independent of the read-out)."""
    L = NoisyLogisticMap(N=20)
    t, w = roots_legendre(n_nodes)
    q = (t + 1) / 2
    w = w / 2 * L.invariant_density(q)
    phi, psi = L.left_singular_functions(q, k), L.right_singular_functions(q, k)
    s = L.singular_values(k)
    C = s[:, None] * (psi.T @ (w[:, None] * phi))
    b = s * (psi.T @ (w * _h(q)))
    phi0 = L.left_singular_functions(np.asarray(x0), k)
    return np.stack([phi0 @ np.linalg.matrix_power(C, t - 1) @ b for t in HORIZONS])


def _pi_quadrature(n_nodes: int = 400):
    """Gauss-Legendre nodes on [0, 1] with weights ``w`` of the invariant density (sum 1)."""
    L = NoisyLogisticMap(N=20)
    t, w = roots_legendre(n_nodes)
    q = (t + 1) / 2
    return q, w / 2 * L.invariant_density(q)


def _sin_max_angle(B, E, w) -> float:
    """Sine of the largest principal angle in L2(pi) between ``span(B)`` and the orthonormal
    ``E`` (columns at the quadrature nodes, weights ``w``): ``sqrt(1 - sigma_min^2)``,
    ``sigma`` the singular values of ``G_BB^{-1/2} G_BE``."""
    Gbb, Gbe = B.T @ (w[:, None] * B), B.T @ (w[:, None] * E)
    lam, V = np.linalg.eigh(Gbb)
    cos = np.linalg.svd((V / np.sqrt(lam)) @ V.T @ Gbe, compute_uv=False)
    return float(np.sqrt(max(0.0, 1.0 - min(1.0, cos.min()) ** 2)))


@memo
@one_blas_thread
def forecasts(n_train, steps, n_test, seeds, lr, seed) -> dict:
    """Forecasts of E[cos(2 pi X_t) | X_0 = x] from each trained LoRA replicate, from the exact
    rank-k compression, and the exact conditional expectation (transfer-matrix formula), on a
    grid of starting points and at the pi-weighted quadrature nodes; with the sines of the
    largest principal angles of each replicate's learned f and g spans to the exact ones."""
    sim = logistic_fits(n_train, steps, n_test, seeds, lr, seed)
    L = sim["system"]
    x0 = np.linspace(0.0, 1.0, 201)[:-1]
    q, w = _pi_quadrature()
    phi, psi = L.left_singular_functions(q, K_LOGISTIC), L.right_singular_functions(q, K_LOGISTIC)
    learned, learned_q, formula_q, sin_f, sin_g = [], [], [], [], []
    for (model, ro), te in zip(sim["fits"]["lora"], sim["test"], strict=True):
        dec = ro.decoder(model.g(te[1:]), _h(te[1:]))
        learned.append(ro.forecast(model.f(x0), dec, HORIZONS)[..., 0])
        learned_q.append(ro.forecast(model.f(q), dec, HORIZONS)[..., 0])
        # Sec. 3.2.1: phi~(x)^T K_fwd^(t-1) E[psi~ h], from the read-out's matrices
        Kp = [np.linalg.matrix_power(ro.koopman_matrix, t - 1) for t in HORIZONS]
        formula_q.append(np.stack([(model.f(q) @ ro.coef_f) @ P @ dec[:, 0] for P in Kp]))
        sin_f.append(_sin_max_angle(model.f(q), phi, w))
        sin_g.append(_sin_max_angle(model.g(q), psi, w))
    exact = np.stack([L.conditional_expectation(_h, x0, t) for t in HORIZONS])
    return {
        "x0": x0,
        "learned": np.array(learned),
        "rank_k": _exact_rank_k_forecast(tuple(x0), K_LOGISTIC),
        "exact": exact,
        "q": q,
        "w": w,
        "learned_q": np.array(learned_q),
        "formula_q": np.array(formula_q),
        "rank_k_q": _exact_rank_k_forecast(tuple(q), K_LOGISTIC),
        "exact_q": np.stack([L.conditional_expectation(_h, q, t) for t in HORIZONS]),
        "sin_f": np.array(sin_f),
        "sin_g": np.array(sin_g),
        "n_test": n_test,
        "seeds": seeds,
    }


@claim(
    "koopman.multistep_prediction",
    paper=PAPER,
    statement="Multi-step forecasts of observables from the learned singular functions match "
    "those of the exact rank-k Koopman compression up to the error of the learned subspaces, "
    "at horizons where the forecast still depends on the starting point.",
    where="Sec. 3.2 (forward prediction), Sec. 5 (multi-step prediction)",
    sizes=LOGISTIC,
    mutants=[
        wrap(
            "dynamics.koopman._readout._mat_powers",
            lambda f: lambda K, ts: f(K, [t + 1 for t in ts]),
            "forecast uses K^t instead of K^(t-1) (one step too many)",
            name="power_off_by_one",
        )
    ],
)
def _forecast(size, seed) -> Measurement:
    sim = forecasts(size.n_train, size.steps, size.n_test, size.seeds, size.lr, seed)
    w = sim["w"]

    def norm(v):  # L2(pi) norm over x by the pi-weighted quadrature, per leading index
        return np.sqrt(np.sum(w * v**2, axis=-1))

    h_sd = float(norm(_h(sim["q"]) - np.sum(w * _h(sim["q"]))))
    info = norm(sim["exact_q"] - np.sum(w * sim["exact_q"], -1, keepdims=True))
    rank_err = norm(sim["rank_k_q"] - sim["exact_q"])
    # informative: the forecast varies with x, and the exact rank-k compression carries it
    keep = np.flatnonzero((info > INFORMATIVE) & (rank_err < 0.5 * info))
    t = np.array(HORIZONS)[keep]
    err = norm(sim["learned_q"][:, keep] - sim["rank_k_q"][keep])  # (replicates, horizons)
    # derived here: ||(P_F K P_G)^t - K_k^t|| <= t (sin_F + sin_G) on mean-zero functions
    # (||K|| = 1, ||P_F - P_Phi|| = sin of the largest principal angle), plus the read-out's
    # sampling error, 4 SD_pi(h)/sqrt(n_test) per step
    sub = (sim["sin_f"] + sim["sin_g"])[:, None]
    tol = t[None, :] * (sub + 4 / np.sqrt(size.n_test)) * h_sd
    gap = float(np.max(np.abs(sim["learned_q"] - sim["formula_q"])))
    return measure(
        at_most(
            round(float(np.max(err / tol)), 4),
            1.0,
            name="max ||learned - exact rank-k||_pi / subspace bound",
        ),
        at_most(gap, 1e-9, name="max |forecast - phi~^T K_fwd^(t-1) E[psi~ h]|"),
        extra={
            "horizons": t.tolist(),
            "sin(angle) f, g per replicate": np.c_[sim["sin_f"], sim["sin_g"]].round(4).tolist(),
            "||learned - exact rank-k||_pi (mean)": err.mean(0).round(4).tolist(),
            "bound (mean)": tol.mean(0).round(4).tolist(),
            "RMSE_pi(exact rank-k vs exact) / SD_pi": (rank_err / info).round(3).tolist(),
            "RMSE_pi(learned vs exact) / SD_pi": (
                norm(sim["learned_q"].mean(0) - sim["exact_q"]) / info
            )
            .round(3)
            .tolist(),
        },
        detail=f"E[cos(2 pi X_t) | x] from each of {size.seeds} LoRA replicates, compared in "
        "L2(pi) (400-node quadrature) with the exact rank-k compression's forecast at horizons "
        f"where SD_pi(E[h(X_t)|x]) > {INFORMATIVE} and the compression's error to the truth is "
        "below half of it; bound per replicate t (sin_F + sin_G + 4/sqrt(n_test)) SD_pi(h), "
        "from the measured largest principal angles of the learned f and g spans to the exact "
        "top-k singular functions (derived here: ||K|| = 1 and a projection error of sin); "
        "and the read-out's forecast equals the paper's formula phi~(x)^T K_fwd^(t-1) "
        "E[psi~ h] evaluated from its own matrices",
    )
