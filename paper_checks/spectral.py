"""Nonlinear-Laplacian claims (Ma & Kunisky 2025, arXiv 2505.12528).

Optimised thresholds, transfer between priors, the search modes, and simulations of the detector
against the limits of :mod:`theory.nonlinear_laplacian`. Targets are the numbers of the official
code's logs (``../shared/papers/nonlinear_laplacian.md`` §4); the code computes them afresh.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from tqdm import tqdm

import spectral
from spectral import sigmas

from ._registry import Measurement, claim

PAPER = "Ma & Kunisky 2025 (arXiv 2505.12528)"
TANH_PS = (1.70974534, 0.58384117)
TANH_NN = (2.17506053, 0.57475203)
Z_PS = (7.41704791, 4.40851134, -5.20518863)
Z_NN = (7.41622857, 4.13302992, -4.72853374)
PAPER_BETA = {("tanh", "planted_submatrix"): 0.7550073893, ("tanh", "sparse_nnpca"): 0.6616580861,
              ("zshape", "planted_submatrix"): 0.7650237606,
              ("zshape", "sparse_nnpca"): 0.6803246653,
              ("step16", "planted_submatrix"): 0.7548625372,
              ("step16", "sparse_nnpca"): 0.6643409466}
PAPER_NM_EVALS = {("tanh", "planted_submatrix"): 78, ("tanh", "sparse_nnpca"): 160,
                  ("zshape", "planted_submatrix"): 357, ("zshape", "sparse_nnpca"): 367}
STARTS = {"tanh": [1.0, 1.0], "zshape": [2.0, 2.0, -1.0]}


def step_start(seed: int = 0) -> np.ndarray:
    """The official step search's random start: U[0, 1] coordinates, a0 ~ U[-5, 0]."""
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(0.0, 1.0, 32)
    x0[0] = rng.uniform(-5.0, 0.0)
    return x0


@cache
def optimise(fam: str, prior: str, method: str):
    """One optimisation run from the paper's start point (cached: claims and figures share it)."""
    x0 = step_start(0) if fam == "step16" else STARTS[fam]
    return spectral.optimize_threshold(fam, x0, prior, method=method)


@claim("spectral.bbp_reduction", paper=PAPER,
       statement="With sigma = 0 (or constant) the nonlinear Laplacian is PCA: beta* = 1, outlier "
                 "beta + 1/beta and overlap 1 - 1/beta^2, for both priors.",
       where="Sec. 3 (main theorem at sigma = 0)")
def _bbp(scale: str) -> Measurement:
    vals, exp = [], []
    for prior in spectral.PRIORS:
        for c in (0.0, 1.5):
            vals.append(spectral.critical_threshold(sigmas.constant(c), prior))
            exp.append(1.0)
            lam, ov = spectral.outlier(sigmas.constant(c), 2.0, prior)
            vals += [lam - c, ov]
            exp += [2.5, 0.75]
    err = float(np.max(np.abs(np.subtract(vals, exp))))
    return Measurement(vals, exp, 1e-10, err <= 1e-10, f"max |error| = {err:.1e}")


@claim("spectral.optimized_thresholds", paper=PAPER,
       statement="Optimised sigma lowers the detection threshold from 1 (PCA) to about 0.755 "
                 "(planted submatrix) and 0.662 (sparse NNPCA); tanh and Z-shape within ~0.01.",
       where="Sec. 4, black-box optimisation results")
def _optimised(scale: str) -> Measurement:
    """β* at the published optimal parameters (quick) or re-optimised from the paper's start."""
    meas, exp = {}, {}
    for fam, params in (("tanh", (TANH_PS, TANH_NN)), ("zshape", (Z_PS, Z_NN))):
        for prior, p in zip(spectral.PRIORS, params, strict=True):
            if scale == "full" or (fam, prior) == ("tanh", "planted_submatrix"):
                b = optimise(fam, prior, "gradient").beta_star
            else:
                b = spectral.critical_threshold(spectral.family(fam).make(np.array(p)), prior)
            meas[f"{fam}/{prior}"] = round(b, 10)
            exp[f"{fam}/{prior}"] = PAPER_BETA[(fam, prior)]
    if scale == "full":  # 16-jump steps (32 parameters), gradient from one random start
        for prior in spectral.PRIORS:
            meas[f"step16/{prior}"] = round(optimise("step16", prior, "gradient").beta_star, 10)
            exp[f"step16/{prior}"] = PAPER_BETA[("step16", prior)]
    # the paper's Nelder–Mead stops at xatol/fatol 1e-4-ish: allow its reported digits (1e-8)
    ok = all(meas[k] <= exp[k] + 1e-8 for k in meas)
    detail = ("re-optimised by gradient from the paper's starts" if scale == "full" else
              "tanh/planted re-optimised; others evaluated at the published optima")
    return Measurement(meas, exp, 1e-8, ok, detail)


@claim("spectral.transfer", paper=PAPER,
       statement="A sigma optimised for one prior transfers to the other with a small loss: "
                 "tanh(NNPCA) gives 0.7667 on the planted submatrix, tanh(planted) 0.6732 on "
                 "NNPCA.",
       where="Sec. 4, transferability table")
def _transfer(scale: str) -> Measurement:
    m = {"tanh_nnpca_on_planted": spectral.critical_threshold(sigmas.tanh(*TANH_NN)),
         "tanh_planted_on_nnpca": spectral.critical_threshold(sigmas.tanh(*TANH_PS),
                                                              "sparse_nnpca")}
    e = {"tanh_nnpca_on_planted": 0.766690, "tanh_planted_on_nnpca": 0.673214}
    ok = all(abs(m[k] - e[k]) <= 5e-7 for k in m)
    return Measurement({k: round(v, 8) for k, v in m.items()}, e, 5e-7, ok,
                       "published values carry 6 digits")


@claim("spectral.gradient_search", paper=PAPER,
       statement="(Added here) gradient descent on beta* by implicit differentiation reaches the "
                 "paper's Nelder-Mead optima with fewer beta* evaluations.",
       where="Sec. 4 (Nelder-Mead counts from the official logs)")
def _gradient(scale: str) -> Measurement:
    cases = [("tanh", "planted_submatrix"), ("zshape", "planted_submatrix")]
    if scale == "full":
        cases += [("tanh", "sparse_nnpca"), ("zshape", "sparse_nnpca")]
    meas, exp, ok = {}, {}, True
    for fam, prior in cases:
        # published values carry ~1e-9 quadrature error (the Z-shape one sits 2e-9 below the
        # exact β* at its own parameters), so "reached" means within 1e-8 of them
        target = PAPER_BETA[(fam, prior)] + 1e-8
        gr = optimise(fam, prior, "gradient")
        nm = optimise(fam, prior, "nelder-mead")
        reach_g, reach_nm = gr.evaluations_to_reach(target), nm.evaluations_to_reach(target)
        key = f"{fam}/{prior}"
        meas[key] = {"beta_star": gr.beta_star, "gradient_evals": reach_g,
                     "nelder_mead_evals_here": reach_nm}
        exp[key] = {"beta_star": target, "nelder_mead_evals_paper": PAPER_NM_EVALS[(fam, prior)]}
        ok &= reach_g is not None and reach_g < min(PAPER_NM_EVALS[(fam, prior)],
                                                    reach_nm or np.inf)
    return Measurement(meas, exp, 0.0, bool(ok), "evaluations until the running best <= paper")


@claim("spectral.between_amp_and_pca", paper=PAPER,
       statement="On the planted submatrix the best nonlinear Laplacian sits strictly between "
                 "AMP (beta > e^{-1/2}) and PCA (beta > 1).",
       where="Sec. 1 / comparison with Hajek, Wu & Xu 2018")
def _between(scale: str) -> Measurement:
    b = spectral.critical_threshold(sigmas.tanh(*TANH_PS))
    lo = float(np.exp(-0.5))
    return Measurement(b, [lo, 1.0], 0.0, bool(lo < b < 1.0), "interval [AMP, PCA]")


# ---------------------------------------------------------------- simulations shared with figures
SIM = {"quick": dict(n=1000, trials=4, betas=np.array([0.0, 0.6, 0.9, 1.2, 1.6, 2.0, 2.5, 3.0])),
       "full": dict(n=2000, trials=50, betas=np.round(np.arange(0.0, 2.96, 0.05), 2))}


@cache
def simulate_phase_transition(scale: str, model: str = "planted_submatrix", seed: int = 0):
    """λ1 and ⟨v1, x⟩² of L_σ for σ = 0 and the tanh optimum against β (Sec. 5 figures).

    Each trial draws one instance per β; both σ share it. Returns means, SEs and the theory.
    """
    cfg = SIM[scale]
    n, trials, betas = cfg["n"], cfg["trials"], cfg["betas"]
    gen = {"planted_submatrix": spectral.planted_submatrix,
           "planted_clique": spectral.planted_clique}[model]
    sig = {"pca": sigmas.zero(), "tanh": sigmas.tanh(*TANH_PS)}
    edge = {k: spectral.bulk_edge(s) for k, s in sig.items()}
    lam = {k: np.empty((trials, betas.size)) for k in sig}
    ov = {k: np.empty((trials, betas.size)) for k in sig}
    fin = {k: np.zeros((trials, betas.size, 2)) for k in sig}
    eff = np.empty(betas.size)
    for j in tqdm(range(betas.size), desc=f"phase transition n={n}", leave=False, disable=None):
        for t in range(trials):
            inst = gen(n, float(betas[j]), rng=[seed, j, t])
            eff[j] = inst.beta
            for k, s in sig.items():
                d = spectral.detect(inst.Y, s, edge=edge[k], rng=t)
                lam[k][t, j] = d.eigenvalue
                ov[k][t, j] = d.overlap(inst.x) if inst.beta > 0 else 0.0
                f = spectral.finite_sample_limits(inst, s)
                fin[k][t, j] = (np.nan if f[0] is None else f[0]), f[1]
    out = dict(n=n, trials=trials, beta=eff, model=model)
    for k, s in sig.items():
        th = np.array([spectral.outlier(s, b) for b in eff])
        out[k] = dict(lam=lam[k].mean(0), lam_se=lam[k].std(0, ddof=1) / np.sqrt(trials),
                      ov=ov[k].mean(0), ov_se=ov[k].std(0, ddof=1) / np.sqrt(trials),
                      lam_theory=th[:, 0], ov_theory=th[:, 1], edge=edge[k],
                      lam_finite=fin[k][..., 0].mean(0), ov_finite=fin[k][..., 1].mean(0))
    return out


@claim("spectral.phase_transition", paper=PAPER,
       statement="For beta well above beta*, lambda_1(L) and <v1(L), x>^2 of the tanh-optimal "
                 "nonlinear Laplacian match H(theta(beta)) and its overlap formula.",
       where="Sec. 3 main theorem; Sec. 5 phase-transition figures")
def _phase(scale: str) -> Measurement:
    sim = simulate_phase_transition(scale)
    r = sim["tanh"]
    keep = sim["beta"] >= 1.5 - 1e-9
    n = sim["n"]
    # tolerance: 3 SE plus the finite-support allowance |finite-sample prediction - limit| (the
    # limit formulas on each instance's own degrees, spectral.finite_sample_limits) and, for the
    # overlap, a relative n^{-1/2} term (degree-profile fluctuations; as in tests/spectral)
    fin_lam = np.abs(r["lam_finite"][keep] - r["lam_theory"][keep])
    fin_ov = np.abs(r["ov_finite"][keep] - r["ov_theory"][keep])
    lam_tol = 3 * r["lam_se"][keep] + fin_lam
    ov_tol = 3 * r["ov_se"][keep] + fin_ov + r["ov_theory"][keep] / np.sqrt(n)
    lam_err = np.abs(r["lam"][keep] - r["lam_theory"][keep])
    ov_err = np.abs(r["ov"][keep] - r["ov_theory"][keep])
    ok = bool(np.all(lam_err <= lam_tol) and np.all(ov_err <= ov_tol))
    return Measurement(
        {"beta": sim["beta"][keep].round(4).tolist(), "lam": r["lam"][keep].round(4).tolist(),
         "overlap": r["ov"][keep].round(4).tolist()},
        {"lam": r["lam_theory"][keep].round(4).tolist(),
         "overlap": r["ov_theory"][keep].round(4).tolist()},
        {"lam": lam_tol.round(4).tolist(), "overlap": ov_tol.round(4).tolist()}, ok,
        f"n={n}, {sim['trials']} trials per beta")


@claim("spectral.null_edge", paper=PAPER,
       statement="Under the null the top eigenvalue of the tanh-optimal L tends to the right edge "
                 "2.5596 of the semicircle free-convolved with Law(sigma(g)).",
       where="Sec. 3.1 (bulk) and Fig. 2")
def _null(scale: str) -> Measurement:
    sim = simulate_phase_transition(scale)
    r = sim["tanh"]
    j = int(np.flatnonzero(sim["beta"] == 0)[0])
    # Tracy–Widom-scale n^{-2/3} fluctuation and shift at the edge, plus 3 SE
    tol = 3 * r["lam_se"][j] + 2 * sim["n"] ** (-2 / 3) * r["edge"]
    err = abs(r["lam"][j] - r["edge"])
    return Measurement(round(float(r["lam"][j]), 5), round(r["edge"], 5), round(float(tol), 5),
                       bool(err <= tol), f"n={sim['n']}, {sim['trials']} trials")

