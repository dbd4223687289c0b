"""Bounds of Attia, Schliserman, Sherman & Koren 2025 (arXiv 2507.11274) over their instances."""

import numpy as np

import theory.sgd as ts
from dynamics import sgd
from paper_checks import scaled, wrap

from .._properties import prop

PAPER = "Attia et al. 2025 (arXiv 2507.11274)"
HORIZONS = np.unique(np.geomspace(1, 1e6, 30).astype(int))


def _rel_room(bound, value):
    """min over entries of (bound - value) / bound: the bound's relative room."""
    bound, value = np.asarray(bound, float), np.asarray(value, float)
    return float(np.min((bound - value) / bound))


@prop(
    "sgd.thm1_bias",
    paper=PAPER,
    statement="On realizable smooth convex instances, E[F(w_T)] - F* <= D^2 / (eta (2 - beta "
    "eta) T^{1 - beta eta / 2}) for every T and 0 < eta < 2/beta (noiseless Thm 1, "
    "c_bias = 1): exact expected risk of least squares and of the rare-curvature "
    "family (the bound's lower-bound instances).",
    where="Thm 1 (sigma_*^2 = 0)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "family": st.sampled_from(["least_squares", "rare_curvature"]),
            "seed": st.integers(0, 2**31 - 1),
            "be": st.floats(0.02, 1.98),
            "n": st.integers(1, 12),
            "d": st.integers(1, 6),
            "spread": st.floats(0.0, 3.0),
            "log10_p": st.floats(-6.0, 0.0),
        }
    ),
    mutants=[
        wrap(
            "theory.sgd.bias_term",
            scaled(0.05),
            "the bias bound's constant / 20",
            name="bias_constant_20x_low",
        )
    ],
)
def _thm1_bias(ex) -> float:
    if ex["family"] == "rare_curvature":
        beta, eta = 1.0, ex["be"]
        risk = ts.rare_curvature_risk(HORIZONS, eta, beta, 10.0 ** ex["log10_p"], 1.0)
        return _rel_room(ts.bias_term(HORIZONS, eta, beta, 1.0), risk)
    g = np.random.default_rng(ex["seed"])
    scales = np.exp(-ex["spread"] * g.uniform(0, 1, ex["d"]))
    A = g.standard_normal((ex["n"], ex["d"])) * scales
    inst = sgd.least_squares(A, w_star=g.standard_normal(ex["d"]))
    eta = ex["be"] / inst.beta
    risk = sgd.expected_excess_risk(inst, eta, HORIZONS).mean
    return _rel_room(ts.bias_term(HORIZONS, eta, inst.beta, inst.dist2), risk)


@prop(
    "sgd.commuting_derived_constant",
    paper=PAPER,
    statement="On commuting quadratics (rank-one directions p_i, curvature beta) the exact risk "
    "is at most D^2 / (2e eta (2 - beta eta) T) (derived here from "
    "p (1 - p c)^T <= 1/(e c T)), below Thm 1's bias term with c_bias = 1/(2e).",
    where="Thm 1, lower-bound family (derived constant)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "be": st.floats(0.05, 1.95),
            "k": st.integers(1, 30),
            "alpha": st.floats(0.05, 3.0),
        }
    ),
    mutants=[
        wrap("theory.sgd.bias_term", scaled(0.5), "bias bound halved", name="bias_bound_half")
    ],
)
def _commuting(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    p = g.dirichlet(np.full(ex["k"], ex["alpha"]))
    w0 = g.standard_normal(ex["k"])
    beta = 2.0
    eta = ex["be"] / beta
    r = ts.commuting_risk(HORIZONS, eta, beta, p, w0)
    bound = ts.bias_term(HORIZONS, eta, beta, float(np.sum(w0**2)), c_bias=1 / (2 * np.e))
    return _rel_room(bound, r)


@prop(
    "sgd.continual_13_over_sqrt_k",
    paper=PAPER,
    statement="Continual linear regression (random task order with replacement): "
    "E L(w_k) <= 13 / sqrt(k) when the tasks are jointly realizable, normalised "
    "by ||w*||^2 R^2 (the exact second-moment recursion).",
    where="Cor. (continual learning), constant via Tsipory et al.",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "tasks": st.integers(2, 12),
            "dim": st.integers(2, 8),
            "rank": st.integers(1, 4),
        }
    ),
    mutants=[
        wrap(
            "theory.sgd.continual_loss_bound",
            scaled(0.01),
            "13 replaced by 0.13",
            name="constant_100x_low",
        )
    ],
)
def _continual(ex) -> float:
    rank = min(ex["rank"], ex["dim"])
    tasks = sgd.random_continual_tasks(ex["tasks"], ex["dim"], rank, rng=ex["seed"])
    k = np.array([1, 2, 5, 10, 30, 100, 300])
    loss = sgd.continual_learning(tasks, k, method="exact").loss
    return _rel_room(ts.continual_loss_bound(k), loss)
