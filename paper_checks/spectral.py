"""Nonlinear-Laplacian claims (Ma & Kunisky 2025, arXiv 2505.12528).

Optimised thresholds, transfer between priors, the search modes, and simulations of the detector
against the limits of :mod:`theory.nonlinear_laplacian`. Targets are the numbers of the official
code's logs (``docs/papers/nonlinear_laplacian.md#where-it-is-checked``); the code computes them
afresh.

The Monte Carlo of Sec. 5 (:func:`phase_point`, one memo per β and σ; n = 2000 and 10 trials per
β at quick): ``spectral.phase_transition`` declares and reads the tanh instances at β >= 1.5 only
(40), ``spectral.null_edge`` those at β = 0 only (10), and the figure adds β = 0.9 and σ = 0. Each
instance is thus drawn once per run: before, both claims declared all 60 tanh instances, and a
run on threads computed them twice (the second claim's plan runs before its check reads the
memo). The instances (seeds ``[seed, j, t]``) and so the verdicts are unchanged.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

import spectral
from paper_checks import (
    Measurement,
    Replicates,
    at_least,
    at_most,
    claim,
    holds,
    measure,
    memo,
    run_replicates,
    scaled,
    sizes,
    within,
    wrap,
)
from spectral import sigmas
from theory import nonlinear_laplacian_floor as nlf
from theory.bbp import TW1_MEAN
from theory.nonlinear_laplacian import null_law

PAPER = "Ma & Kunisky 2025 (arXiv 2505.12528)"
TANH_PS = (1.70974534, 0.58384117)
TANH_NN = (2.17506053, 0.57475203)
Z_PS = (7.41704791, 4.40851134, -5.20518863)
Z_NN = (7.41622857, 4.13302992, -4.72853374)
PARAMS = {
    ("tanh", "planted_submatrix"): TANH_PS,
    ("tanh", "sparse_nnpca"): TANH_NN,
    ("zshape", "planted_submatrix"): Z_PS,
    ("zshape", "sparse_nnpca"): Z_NN,
}
PAPER_BETA = {
    ("tanh", "planted_submatrix"): 0.7550073893,
    ("tanh", "sparse_nnpca"): 0.6616580861,
    ("zshape", "planted_submatrix"): 0.7650237606,
    ("zshape", "sparse_nnpca"): 0.6803246653,
    ("step16", "planted_submatrix"): 0.7548625372,
    ("step16", "sparse_nnpca"): 0.6643409466,
}
PAPER_NM_EVALS = {
    ("tanh", "planted_submatrix"): 78,
    ("tanh", "sparse_nnpca"): 160,
    ("zshape", "planted_submatrix"): 357,
    ("zshape", "sparse_nnpca"): 367,
}
STARTS = {"tanh": [1.0, 1.0], "zshape": [2.0, 2.0, -1.0]}
#: the published β* carry ~1e-9 quadrature error (ours and the official code's differ by up to
#: 2.6e-9 at the published parameters) and the official Nelder–Mead stops on the regime boundary
#: 6e-9 above the NNPCA tanh minimum: agreement to 1e-8 is what the published digits support
BETA_TOL = 1e-8
AMP = math.exp(-0.5)  # Hajek, Wu & Xu 2018: AMP weak recovery iff beta > e^{-1/2}
PS, NN = "planted_submatrix", "sparse_nnpca"

SIZES = sizes(
    # reopt: (family, prior) pairs re-optimised by gradient from the paper's start (the others are
    # evaluated at the published optima); search: pairs of the gradient-vs-Nelder–Mead race
    smoke=dict(
        n=300,
        trials=2,
        betas=(0.0, 1.5, 3.0),
        reopt=(),
        search=(("tanh", PS),),
        step16=False,
        hist_n=300,
        grid=(4.0, 3.0, 4.0),
    ),
    quick=dict(
        n=2000,
        trials=10,
        betas=(0.0, 0.9, 1.5, 2.0, 2.5, 3.0),
        reopt=(("tanh", PS), ("zshape", PS)),
        search=(("tanh", PS), ("zshape", PS)),
        step16=False,
        hist_n=1000,
        grid=(1.5, 1.0, 1.5),
    ),
    full=dict(
        n=4000,
        trials=50,
        betas=tuple(np.round(np.arange(0.0, 2.96, 0.15), 2)),
        reopt=tuple(PARAMS),
        search=tuple(PARAMS),
        step16=True,
        hist_n=10000,
        grid=(0.5, 0.5, 0.5),
    ),
)
#: planted-submatrix σ of the simulations: PCA (σ = 0) and the tanh optimum
SIGMAS = {"pca": sigmas.zero(), "tanh": sigmas.tanh(*TANH_PS)}


def step_start(seed: int = 0) -> np.ndarray:
    """The official step search's random start: U[0, 1] coordinates, a0 ~ U[-5, 0]."""
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(0.0, 1.0, 32)
    x0[0] = rng.uniform(-5.0, 0.0)
    return x0


@memo
def optimise(fam: str, prior: str, method: str):
    """One optimisation run from the paper's start point (claims and figures share it)."""
    x0 = step_start(0) if fam == "step16" else STARTS[fam]
    return spectral.optimize_threshold(fam, x0, prior, method=method)


def published_beta(fam: str, prior: str) -> float:
    """β* computed here at the paper's published optimal parameters."""
    return spectral.critical_threshold(
        spectral.family(fam).make(np.array(PARAMS[fam, prior])), prior
    )


def _solver_low(f):
    """Mutant wrapper: every β* returned 1 % low (a biased root or quadrature)."""

    def g(*args, **kwargs):
        r = f(*args, **kwargs)
        return dataclasses.replace(r, beta_star=0.99 * r.beta_star)

    return g


def _no_beta_shift(f):
    """Mutant wrapper: the signal term σ(βηm1/m2 + g) evaluated without the β of the shift."""
    return lambda sigma, beta, eta: f(sigma, 1.0, eta)


def _no_m_ratio(f):
    """Mutant wrapper: the signal shift βη instead of βη m1/m2 (the prior's moments dropped)."""
    return lambda sigma, beta, eta: f(sigma, beta * eta.m2 / eta.m1, eta)


def _weights_high(f):
    """Mutant wrapper: the Gaussian rule's weights 1 % too heavy (an unnormalised density)."""

    def g(*args, **kwargs):
        x, w = f(*args, **kwargs)
        return x, 1.01 * w

    return g


def _no_edge_term(f):
    """Mutant wrapper: the implicit gradient of β* without the edge-point term du*/dp."""

    def g(*args):
        g1, g2 = f(*args)
        return (lambda u, p: (g1(u, p)[0], 0.0 * g1(u, p)[1])), g2

    return g


def _overlap_without_hprime(f):
    """Mutant wrapper: the overlap limit <v1(X), x>^2 without the factor H'(theta)."""

    def g(*args, **kwargs):
        r = f(*args, **kwargs)
        return dataclasses.replace(r, overlap=min(r.overlap / r.hprime, 1.0)) if r.exists else r

    return g


SOLVER_LOW = wrap(
    "theory.nonlinear_laplacian.critical_threshold",
    _solver_low,
    "the beta* root 1 % low",
    name="beta_star_1pct_low",
)
WEIGHTS_HIGH = wrap(
    "theory.gaussian.gaussian_nodes",
    _weights_high,
    "Gaussian quadrature weights 1 % too heavy",
    name="quadrature_weights",
)


@claim(
    "spectral.bbp_reduction",
    paper=PAPER,
    statement="With sigma = 0 (or constant) the nonlinear Laplacian is PCA: beta* = 1, outlier "
    "beta + 1/beta and overlap 1 - 1/beta^2, for both priors.",
    where="Sec. 3 (main theorem at sigma = 0); BBP: Baik, Ben Arous & Péché 2005",
    mutants=[
        WEIGHTS_HIGH,
        wrap(
            "theory.nonlinear_laplacian._theta_u",
            scaled(1.01),
            "theta(beta) root 1 % high",
            name="theta_1pct_high",
        ),
    ],
)
def _bbp(size, seed) -> Measurement:
    meas, exp = {}, {}
    for prior in spectral.PRIORS:
        for c in (0.0, 1.5):
            key = f"{prior}/c={c:g}"
            lam, ov = spectral.outlier(sigmas.constant(c), 2.0, prior)
            meas[key] = [spectral.critical_threshold(sigmas.constant(c), prior), lam - c, ov]
            exp[key] = [1.0, 2.5, 0.75]
    return measure(
        within(meas, exp, 1e-10, name="beta*, outlier - c, overlap at beta = 2"),
        detail="deterministic (exact quadrature and roots); the limits are BBP's: "
        "beta* = 1, 2 + 1/2, 1 - 1/4",
    )


@claim(
    "spectral.optimized_thresholds",
    paper=PAPER,
    statement="Optimised sigma lowers the detection threshold from 1 (PCA) to about 0.755 "
    "(planted submatrix) and 0.662 (sparse NNPCA); tanh and Z-shape within ~0.01.",
    where="Sec. 4, black-box optimisation results (official logs)",
    sizes=SIZES,
    mutants=[SOLVER_LOW, WEIGHTS_HIGH],
)
def _optimised(size, seed) -> Measurement:
    """β* re-optimised (``size.reopt``) or at the published optima, two-sided against the paper."""
    meas, exp, how = {}, {}, {}
    for fam, prior in PARAMS:
        key = f"{fam}/{prior}"
        if (fam, prior) in size.reopt:
            meas[key], how[key] = optimise(fam, prior, "gradient").beta_star, "re-optimised"
        else:
            meas[key], how[key] = published_beta(fam, prior), "at published optimum"
        exp[key] = PAPER_BETA[fam, prior]
    if size.step16:  # 16-jump steps (32 parameters), gradient from one random start: an upper
        for prior in spectral.PRIORS:  # bound on the paper's best-of-10 Nelder–Mead (reported)
            meas[f"step16/{prior}"] = optimise("step16", prior, "gradient").beta_star
            exp[f"step16/{prior}"] = PAPER_BETA["step16", prior]
    step = {k: meas.pop(k) for k in list(meas) if k.startswith("step16")}
    rules = [within(meas, {k: exp[k] for k in meas}, BETA_TOL, name="beta*")]
    if step:
        rules.append(within(step, {k: exp[k] for k in step}, 5e-3, name="beta* step16"))
    return measure(
        *rules,
        detail="; ".join(f"{k}: {v}" for k, v in how.items())
        + f"; tolerance {BETA_TOL:g} (the published digits' quadrature error)",
    )


@claim(
    "spectral.transfer",
    paper=PAPER,
    statement="A sigma optimised for one prior transfers to the other with a small loss: "
    "tanh(NNPCA) gives 0.7667 on the planted submatrix, tanh(planted) 0.6732 on "
    "NNPCA.",
    where="Sec. 4, transferability table",
    mutants=[
        wrap(
            "theory.nonlinear_laplacian.signal_expectations",
            _no_m_ratio,
            "signal shift beta*eta without the factor m1/m2",
            name="no_m1_over_m2",
        ),
        WEIGHTS_HIGH,
    ],
)
def _transfer(size, seed) -> Measurement:
    m = {
        "tanh_nnpca_on_planted": spectral.critical_threshold(sigmas.tanh(*TANH_NN)),
        "tanh_planted_on_nnpca": spectral.critical_threshold(sigmas.tanh(*TANH_PS), NN),
    }
    e = {"tanh_nnpca_on_planted": 0.766690, "tanh_planted_on_nnpca": 0.673214}
    return measure(
        within(m, e, 5e-7, name="beta*"),
        detail="published values carry 6 digits (tolerance half a unit of the last)",
    )


@claim(
    "spectral.gradient_search",
    paper=PAPER,
    statement="(Added here) gradient descent on beta* by implicit differentiation reaches the "
    "paper's Nelder-Mead optima with fewer beta* evaluations.",
    where="Sec. 4 (Nelder-Mead counts from the official logs)",
    sizes=SIZES,
    mutants=[
        wrap(
            "spectral._search._grad_fns",
            _no_edge_term,
            "implicit gradient without the edge-point term du*/dp",
            name="no_edge_term",
        ),
        wrap(
            "spectral._search.threshold_and_gradient",
            lambda f: lambda *a, **k: (lambda b, g, r: (b, -g, r))(*f(*a, **k)),
            "implicit gradient without the minus sign of the implicit-function theorem",
            name="gradient_sign",
        ),
    ],
)
def _gradient(size, seed) -> Measurement:
    reached, evals, nm_evals, beta = {}, {}, {}, {}
    for fam, prior in size.search:
        # "reached" = the running best within BETA_TOL of the published value
        target = PAPER_BETA[fam, prior] + BETA_TOL
        gr, nm = optimise(fam, prior, "gradient"), optimise(fam, prior, "nelder-mead")
        key = f"{fam}/{prior}"
        g_reach, nm_reach = gr.evaluations_to_reach(target), nm.evaluations_to_reach(target)
        reached[key] = g_reach is not None
        evals[key] = g_reach if g_reach is not None else gr.evaluations
        nm_evals[key] = min(PAPER_NM_EVALS[fam, prior], nm_reach or nm.evaluations)
        beta[key] = gr.beta_star
    return measure(
        holds(
            all(reached.values()),
            name="gradient reaches the paper's beta*",
            rule=f"running best <= published beta* + {BETA_TOL:g}",
            measured=reached,
        ),
        at_most({k: v + 1 for k, v in evals.items()}, nm_evals, name="gradient evals + 1"),
        within(
            beta,
            {k: PAPER_BETA[tuple(k.split("/"))] for k in beta},
            BETA_TOL,
            name="gradient beta*",
        ),
        extra={"gradient_evals": evals},
        detail="beta* evaluations until the running best reaches the published value; bound: "
        "fewer than both the paper's Nelder–Mead count and ours from the same start",
    )


@claim(
    "spectral.between_amp_and_pca",
    paper=PAPER,
    statement="On the planted submatrix the best nonlinear Laplacian (tanh, beta* = 0.7550) "
    "sits strictly between AMP (beta > e^{-1/2} = 0.6065) and PCA (beta > 1).",
    where="Sec. 1 / comparison with Hajek, Wu & Xu 2018",
    sizes=SIZES,
    mutants=[SOLVER_LOW, WEIGHTS_HIGH],
)
def _between(size, seed) -> Measurement:
    b = (
        optimise("tanh", PS, "gradient").beta_star
        if ("tanh", PS) in size.reopt
        else published_beta("tanh", PS)
    )
    pca = spectral.critical_threshold(sigmas.zero())
    return measure(
        within(b, PAPER_BETA["tanh", PS], BETA_TOL, name="beta* tanh"),
        within(pca, 1.0, 1e-10, name="beta* PCA"),
        holds(
            AMP < b < pca,
            name="AMP < NL < PCA",
            rule="e^{-1/2} < beta*(tanh) < beta*(0)",
            measured=[AMP, b, pca],
        ),
        extra={"gap_to_amp": b - AMP, "gap_to_pca": pca - b},
        detail="beta* of the tanh optimum (re-optimised at quick/full) and of sigma = 0, against "
        "0.7550073893 (paper) and 1 (BBP); AMP threshold e^{-1/2} (Hajek, Wu & Xu 2018)",
    )


# ---------------------------------------------------------------- simulations shared with figures
def phase_instance(n: int, betas: tuple, j: int, seed: int, sigma: str, t: int):
    """Trial ``t`` at ``beta = betas[j]`` of :func:`phase_point`, drawn from ``[seed, j, t]`` (so
    every sigma sees the same instances). Returns the realised beta = k/sqrt(n), lambda_1 and
    <v1, x>^2 of L_sigma, the top eigenpair by Lanczos (tolerance 1e-8, far below the spread)."""
    rng = np.random.default_rng([seed, j, t])
    inst = spectral.planted_submatrix(n, float(betas[j]), rng=rng)
    val, vec = spectral.top_eigenpair(
        spectral.nonlinear_laplacian(inst.Y, SIGMAS[sigma]), rng=rng, tol=1e-8
    )
    return float(inst.beta), float(val), float((vec @ inst.x) ** 2) if inst.beta > 0 else 0.0


def phase_replicates(n: int, trials: int, betas: tuple, j: int, seed: int, sigma: str):
    """The ``trials`` independent instances at ``betas[j]`` (:func:`phase_instance`)."""
    return Replicates(
        phase_instance,
        (n, tuple(betas), j, seed, sigma),
        trials,
        label=f"phase transition n={n} beta={betas[j]:g}",
    )


def _phase_js(size) -> list[int]:
    """The beta indices ``phase_transition`` judges: nominal beta >= 1.5, well above beta*."""
    return [j for j, b in enumerate(size.betas) if b >= 1.5]


def _null_j(size) -> int:
    return size.betas.index(0.0)


def _phase_plan(size, seed) -> list[Replicates]:
    """The tanh replicates ``phase_transition`` reads (the betas it judges, not beta = 0 or 0.9:
    each instance is drawn by one claim only, and the figure adds the rest)."""
    return [
        phase_replicates(size.n, size.trials, size.betas, j, seed, "tanh") for j in _phase_js(size)
    ]


def _null_plan(size, seed) -> list[Replicates]:
    """The tanh replicates ``null_edge`` reads: beta = 0 only."""
    return [phase_replicates(size.n, size.trials, size.betas, _null_j(size), seed, "tanh")]


@memo
def phase_point(n: int, trials: int, betas: tuple, j: int, seed: int = 0, sigma: str = "tanh"):
    """λ1 and ⟨v1, x⟩² of L_σ (σ = ``SIGMAS[sigma]``: ``"tanh"`` the tanh optimum, ``"pca"``
    σ = 0) over the ``trials`` planted-submatrix instances at ``betas[j]`` (Sec. 5): the
    realised β = k/√n, means and standard errors. One memo per β, so the claims (each its own
    betas) and the figure (all of them, both σ) compute every instance once per process."""
    res = np.array(run_replicates(phase_replicates(n, trials, betas, j, seed, sigma)))
    se = lambda a: float(a.std(ddof=1) / np.sqrt(trials))  # noqa: E731
    lam, ov = res[:, 1], res[:, 2]
    return dict(
        beta=float(res[-1, 0]),
        lam=float(lam.mean()),
        lam_se=se(lam),
        ov=float(ov.mean()),
        ov_se=se(ov),
    )


def simulate_phase_transition(
    n: int, trials: int, betas: tuple, seed: int = 0, sigma: str = "tanh", js=None
):
    """:func:`phase_point` at the beta indices ``js`` (default: all of ``betas``), stacked:
    ``n``, ``trials``, and per beta the realised β, ``lam``, ``lam_se``, ``ov``, ``ov_se``."""
    js = range(len(betas)) if js is None else js
    pts = [phase_point(n, trials, tuple(betas), j, seed, sigma) for j in js]
    out = {k: np.array([p[k] for p in pts]) for k in ("beta", "lam", "lam_se", "ov", "ov_se")}
    return dict(n=n, trials=trials, **out)


def theory_curves(sigma, beta) -> tuple[np.ndarray, np.ndarray]:
    """Limits (λ1, overlap) of :func:`spectral.outlier` on a grid of β."""
    th = np.array([spectral.outlier(sigma, float(b)) for b in np.atleast_1d(beta)])
    return th[:, 0], th[:, 1]


def edge_scale(sigma) -> float:
    """Tracy–Widom scale factor γ of the right edge of μ_SC ⊞ Law(σ(g)) (derived here).

    Near a regular edge H(ω) = E₊ + ½H''(z*)(ω - z*)², so the density is
    (1/π)√(2(E₊ - x)/H''(z*)) = (c/π)√(E₊ - x); matching the semicircle's c = 1 gives the edge
    scale γ n^{-2/3} with γ = c^{-2/3} = (H''(z*)/2)^{1/3} = E[(z* - σ(g))^{-3}]^{1/3}
    (= 1 for σ = 0; checked in tests/paper_checks/test_spectral.py).
    """
    from theory.free_convolution import edge_point

    law = null_law(sigma)
    u = edge_point(law).u
    return float(np.sum(law.weights / (u + law.upper_gaps) ** 3)) ** (1.0 / 3.0)


#: the mutant shared by the two GOE-simulation claims (phase transition, null edge)
GOE_SCALE = wrap("spectral.goe", scaled(1.05), "GOE noise 5 % too large", name="goe_scale")


@claim(
    "spectral.phase_transition",
    paper=PAPER,
    statement="For beta well above beta*, lambda_1(L) and <v1(L), x>^2 of the tanh-optimal "
    "nonlinear Laplacian match H(theta(beta)) and its overlap formula.",
    where="Sec. 3 main theorem; Sec. 5 phase-transition figures",
    sizes=SIZES,
    mutants=[
        wrap(
            "theory.nonlinear_laplacian.signal_expectations",
            _no_beta_shift,
            "signal term sigma(eta m1/m2 + g) without beta in the shift",
            name="no_beta_in_shift",
        ),
        wrap(
            "theory.nonlinear_laplacian.outlier",
            _overlap_without_hprime,
            "overlap <v1(X), x>^2 without the factor H'(theta)",
            name="overlap_no_hprime",
        ),
        GOE_SCALE,
    ],
    replicates=_phase_plan,
)
def _phase(size, seed) -> Measurement:
    # nominal beta >= 1.5 (realised k/sqrt(n) can be below)
    r = simulate_phase_transition(size.n, size.trials, size.betas, seed, js=_phase_js(size))
    beta = r["beta"]
    k = np.round(beta * np.sqrt(r["n"]))
    lam_th, ov_th = theory_curves(SIGMAS["tanh"], beta)
    # finite-n band: 3 SE over trials plus the finite-support bias. The limits average the degree
    # profile over the spike's k = beta sqrt(n) coordinates (the secular equation of Sec. 3.3);
    # its root has sd O(k^{-1/2}) (in the SE) and bias O(1/k) (second-order delta method), allowed
    # as 2/k relative (measured agreement at n = 2000: within 0.3-1 % / 1-4 %)
    lam_tol = 3 * r["lam_se"] + 2 * lam_th / k
    ov_tol = 3 * r["ov_se"] + 2 * ov_th / k
    return measure(
        within(r["lam"], lam_th, lam_tol, name="lambda1"),
        within(r["ov"], ov_th, ov_tol, name="overlap"),
        extra={"beta": beta},
        detail=f"n={r['n']}, {r['trials']} trials per beta (seed {seed}); "
        "tolerance 3 SE + 2/k relative (k = beta sqrt(n) support size)",
    )


@claim(
    "spectral.null_edge",
    paper=PAPER,
    statement="Under the null the top eigenvalue of the tanh-optimal L tends to the right edge "
    "2.5596 of the semicircle free-convolved with Law(sigma(g)).",
    where="Sec. 3.1 (bulk) and Fig. 2",
    sizes=SIZES,
    mutants=[
        wrap(
            "theory.nonlinear_laplacian.bulk_edge",
            lambda f: lambda s: f(s) + 0.1,
            "bulk edge 0.1 high",
            name="edge_plus_0.1",
        ),
        GOE_SCALE,
    ],
    replicates=_null_plan,
)
def _null(size, seed) -> Measurement:
    r = simulate_phase_transition(size.n, size.trials, size.betas, seed, js=[_null_j(size)])
    n, j = r["n"], 0
    edge = spectral.bulk_edge(SIGMAS["tanh"])
    gamma = edge_scale(SIGMAS["tanh"])
    # Tracy–Widom band: lambda1 - E+ = gamma n^{-2/3} TW1 + O(n^{-1/2}) (the empirical degree
    # law's edge, Gaussian; in the SE). The mean TW shift gamma E[TW1] n^{-2/3} is allowed twice,
    # in either direction: the diagonal sigma(Y1) depends on Y, which the deformed-Wigner edge
    # theory (Lee & Schnelli 2016) does not cover, and at n = 250-2000 the measured shift is
    # positive while the TW mean is negative.
    tw = gamma * abs(TW1_MEAN) * n ** (-2.0 / 3.0)
    tol = 3 * r["lam_se"][j] + 2 * tw
    return measure(
        within(r["lam"][j], edge, tol, name="null lambda1"),
        extra={"gamma": gamma, "tw_shift": -tw, "se": r["lam_se"][j]},
        detail=f"n={n}, {r['trials']} trials (seed {seed}); tolerance 3 SE + 2 gamma "
        "|E TW1| n^(-2/3) (edge scale gamma = E[(z*-sigma)^-3]^(1/3))",
    )


# ------------------------------------------------------------------ the floor (issue 47)
#: the gradient search's optimum of the extremal family (c, t0, width) from FLOOR_START, with
#: the cap t0 at or near its bound 8 (β* decreases toward the floor as t0 grows)
FLOOR_PARAMS = {PS: (0.56714329, 7.77889725, 14.34125233), NN: (0.78216893, 8.0, 12.89299685)}
FLOOR_START = {PS: (0.57, 5.0, 8.0), NN: (0.7855, 5.0, 8.0)}
#: the paper's best β* per prior: the 16-jump step (planted), tanh (NNPCA)
PAPER_BEST = {PS: PAPER_BETA["step16", PS], NN: PAPER_BETA["tanh", NN]}
FLOOR_GAP = 1e-4
FLOOR_SIZES = sizes(smoke=dict(reopt=()), quick=dict(reopt=(PS,)), full=dict(reopt=(PS, NN)))


def floor_values() -> dict[str, float]:
    """β0 per prior (:func:`theory.nonlinear_laplacian_floor.beta_floor`)."""
    return {p: nlf.beta_floor(p) for p in spectral.PRIORS}


@memo
def floor_sigma(prior: str, reopt: bool):
    """(params, β*) of the extremal family: re-optimised by gradient from FLOOR_START, or at
    FLOOR_PARAMS."""
    fam = f"extremal_{prior}"
    if reopt:
        r = spectral.optimize_threshold(fam, FLOOR_START[prior], prior, maxiter=200)
        return tuple(float(v) for v in r.params), r.beta_star
    p = FLOOR_PARAMS[prior]
    return p, spectral.critical_threshold(spectral.family(fam).make(np.array(p)), prior)


FLOOR_HIGH = wrap(
    "theory.nonlinear_laplacian_floor.beta_floor",
    scaled(1.01),
    "the floor 1 % high",
    name="floor_1pct_high",
)


@claim(
    "spectral.floor",
    paper=PAPER,
    statement="(Derived here) every bounded sigma has beta*(sigma) >= beta0, with beta0 = "
    "sqrt(W(1)) = 0.7530892 (planted submatrix) and 0.66093 (sparse NNPCA): below every beta* "
    "the paper reports, and each of the paper's optima respects it.",
    where="Sec. 3 threshold characterisation + Cauchy-Schwarz (theory.nonlinear_laplacian_floor)",
    mutants=[SOLVER_LOW, FLOOR_HIGH],
)
def _floor(size, seed) -> Measurement:
    from scipy.optimize import brentq

    fl = floor_values()
    omega = brentq(lambda x: x * math.exp(x) - 1.0, 0.1, 1.0, xtol=1e-16)  # W(1), no lambertw
    independent = {PS: math.sqrt(omega), NN: nlf.beta_floor(spectral.as_prior(NN))}
    reported = {f"{f}/{p}": PAPER_BETA[f, p] for f, p in PAPER_BETA}
    ours = {f"{f}/{p}": published_beta(f, p) for f, p in PARAMS}
    return measure(
        within(fl, independent, 1e-10, name="beta0 (closed form vs root / quadrature rule)"),
        at_most({k: fl[k.split("/")[1]] for k in reported}, reported, name="beta0 vs reported"),
        at_least(ours, {k: fl[k.split("/")[1]] for k in ours}, name="beta* of paper optima"),
        extra={"floor": fl, "margin_to_paper_best": {p: PAPER_BEST[p] - fl[p] for p in fl}},
        detail="beta0: Lambert W / closed-form NNPCA expectation, against the root of x e^x = 1 "
        "and the generic quadrature of the half-normal rule; bounds against the paper's reported "
        "beta* (tanh, Z-shape, step16) and against beta* recomputed at its tanh/Z optima",
    )


@claim(
    "spectral.floor_sigma",
    paper=PAPER,
    statement="(Added here) a 3-parameter sigma built from the extremal one (the exponential "
    "kernel capped at t0 in the tail, constant below t0 - width) reaches beta* <= floor + 1e-4 "
    "on both models, below the paper's best 0.7548625 and 0.6616581.",
    where="Sec. 4 (the paper's best sigma); theory.nonlinear_laplacian_floor (the floor)",
    sizes=FLOOR_SIZES,
    mutants=[
        SOLVER_LOW,
        wrap(
            "theory.nonlinear_laplacian_floor.extremal_log_kernel",
            lambda f: lambda t, prior="planted_submatrix": 0.8 * f(t, prior),
            "the extremal kernel's exponent 20 % low",
            name="kernel_rate_low",
        ),
    ],
)
def _floor_sigma(size, seed) -> Measurement:
    fl = floor_values()
    got = {p: floor_sigma(p, p in size.reopt) for p in spectral.PRIORS}
    beta = {p: b for p, (_, b) in got.items()}
    return measure(
        at_least(beta, fl, name="beta* >= floor"),
        at_most({p: beta[p] - fl[p] for p in beta}, FLOOR_GAP, name="beta* - floor"),
        at_most(beta, PAPER_BEST, name="beta* vs the paper's best"),
        holds(
            all(spectral.family(f"extremal_{p}").size <= 3 for p in beta),
            name="parameters",
            rule="at most 3 parameters",
            measured={p: len(got[p][0]) for p in beta},
        ),
        extra={"params": {p: list(got[p][0]) for p in beta}, "floor": fl},
        detail="; ".join(
            f"{p}: {'re-optimised by gradient' if p in size.reopt else 'at stored optimum'}"
            for p in beta
        ),
    )


# ---------------------------------------------------------- where the asymptotics stop (issue 47)
FINITE_SIZES = sizes(
    smoke=dict(ns=(600,), trials=3),
    quick=dict(ns=(2000,), trials=3),
    full=dict(ns=(2000, 8000), trials=4),
)
FINITE_BETA = 1.5
FINITE_TOP = 10  # coordinates expected on the top level (degree >= t0) under the null
FINITE_TOL = {"null": 0.01, "outlier": 0.02, "overlap": 0.05}


@memo
def finite_member(n: int, member: str) -> tuple[tuple[float, float, float], float]:
    """(params, β*) of an extremal σ on the planted submatrix: ``"top"`` has its cap at
    t0 = Φ̄^{-1}(10/n), so n Φ̄(t0) = 10 coordinates sit on the top level, with (c, width)
    re-optimised by the gradient search at that t0 (β* decreases in t0: the best under the
    rule); ``"control"`` is the near-floor optimum FLOOR_PARAMS (t0 = 7.8: none)."""
    if member == "control":
        p = FLOOR_PARAMS[PS]
        return p, spectral.critical_threshold(sigmas.extremal(*p), PS)
    from scipy.stats import norm

    t0 = float(norm.isf(FINITE_TOP / n))
    fam = spectral.family(f"extremal_{PS}")
    fam = dataclasses.replace(fam, bounds=(fam.bounds[0], (t0, t0), fam.bounds[2]))
    r = spectral.optimize_threshold(fam, [0.6, t0, 8.0], PS, maxiter=200)
    return tuple(float(v) for v in r.params), r.beta_star


def finite_instance(n: int, trials: int, seed: int, member: str, i: int):
    """Instance ``i``: (β = 0 or 1.5, trial) = divmod(i, trials), drawn from [seed, 47, n, j, t]
    (both members see the same instances): λ1, ⟨v1, x⟩² and the top-level count of L_σ."""
    j, t = divmod(i, trials)
    rng = np.random.default_rng([seed, 47, n, j, t])
    inst = spectral.planted_submatrix(n, (0.0, FINITE_BETA)[j], rng=rng)
    p, _ = finite_member(n, member)
    s = sigmas.extremal(*p)
    val, vec = spectral.top_eigenpair(spectral.nonlinear_laplacian(inst.Y, s), rng=rng, tol=1e-8)
    top = int(np.sum(inst.Y.sum(1) >= p[1]))
    return float(val), float((vec @ inst.x) ** 2) if j else 0.0, top


def _finite_reps(n: int, trials: int, seed: int, member: str) -> Replicates:
    return Replicates(
        finite_instance, (n, trials, seed, member), 2 * trials, label=f"floor finite n={n}"
    )


def _finite_plan(size, seed) -> list[Replicates]:
    return [_finite_reps(n, size.trials, seed, m) for n in size.ns for m in ("top", "control")]


def finite_errors(n: int, trials: int, seed: int, member: str) -> dict:
    """Relative errors of the simulated null λ1, outlier and overlap (means over ``trials``)
    against the limits, with their standard errors. Eigenvalues are compared for the centred σ
    (E σ(g) = 0): a constant added to σ moves λ1 and its limit together, so a relative
    tolerance needs a fixed origin."""
    res = np.array(run_replicates(_finite_reps(n, trials, seed, member))).reshape(2, trials, 3)
    p, bstar = finite_member(n, member)
    s = sigmas.extremal(*p)
    law = null_law(s)
    mean = float(law.weights @ law.values)
    lam_th, ov_th = spectral.outlier(s, FINITE_BETA)
    th = {"null": spectral.bulk_edge(s) - mean, "outlier": lam_th - mean, "overlap": ov_th}
    sim = {"null": res[0, :, 0] - mean, "outlier": res[1, :, 0] - mean, "overlap": res[1, :, 1]}
    err = {k: float(sim[k].mean() / th[k] - 1.0) for k in th}
    se = {k: float(sim[k].std(ddof=1) / np.sqrt(trials) / abs(th[k])) for k in th}
    return dict(err=err, se=se, top=float(res[:, :, 2].mean()), beta_star=bstar, t0=p[1])


@claim(
    "spectral.floor_finite_n",
    paper=PAPER,
    statement="(Added here) at n = 2000 and 8000 the extremal sigma with >= 10 coordinates on "
    "its top level follows the limits (null lambda1 within 1 % of the edge, outlier within 2 %, "
    "overlap within 5 % at beta = 1.5), and so does the near-floor one with none there: the "
    "limits are carried by degrees near 2 beta0, not by the top level.",
    where="Sec. 3 main theorem (the limits); theory.nonlinear_laplacian_floor (the floor)",
    sizes=FINITE_SIZES,
    mutants=[
        GOE_SCALE,
        wrap(
            "theory.nonlinear_laplacian.outlier",
            _overlap_without_hprime,
            "overlap <v1(X), x>^2 without the factor H'(theta)",
            name="overlap_no_hprime",
        ),
    ],
    replicates=_finite_plan,
)
def _floor_finite(size, seed) -> Measurement:
    rules, extra = [], {}
    for n in size.ns:
        r = finite_errors(n, size.trials, seed, "top")
        ctrl = finite_errors(n, size.trials, seed, "control")
        for who, e in (("top", r), ("control", ctrl)):
            for k, tol in FINITE_TOL.items():
                rules.append(
                    within(e["err"][k], 0.0, tol + 2 * e["se"][k], name=f"n={n} {who} {k} error")
                )
        extra[f"n={n}"] = dict(
            best_beta_star=r["beta_star"],
            t0=r["t0"],
            top_level=r["top"],
            errors=r["err"],
            control_errors=ctrl["err"],
            control_top_level=ctrl["top"],
            control_beta_star=ctrl["beta_star"],
        )
    return measure(
        *rules,
        extra=extra,
        detail=f"{size.trials} trials per n and beta (seed {seed}); relative errors (centred "
        "sigma) within 1/2/5 % + 2 SE; best beta* with >= 10 top-level coordinates: "
        + ", ".join(f"{k}: {v['best_beta_star']:.6f}" for k, v in extra.items())
        + f"; control (top level empty) beta* {floor_sigma(PS, False)[1]:.9f}",
    )
