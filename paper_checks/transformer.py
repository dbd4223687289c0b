"""Claims of Chen & Luo 2025 (NeurIPS 2025 oral, arXiv 2510.06954): a small-initialisation
one-layer Transformer first condenses (stage 1, effective cubic-energy dynamics that blow up in
finite rescaled time), then its key-query weights collapse in rank (stage 2, linear flow driven by
F). Statements in :mod:`theory.transformer`, simulators in :mod:`dynamics.transformer`.

The full-model runs use one synthetic binary task (``gaussian_task(64, 4, 8, labels="bilinear")``:
its labels are not linearly separable in the mean token, so the outer weights stall on a plateau
and stage 2 takes over) and the paper's model with tanh, from ``N(0, eps^2)`` weights. The escape
claims are repeated on the paper's own anchor-function task (Sec. 5.1, binary parity version,
:func:`dynamics.transformer.anchor_task`).

Verdicts (issue 44): the escape, conservation, blow-up, condensation and rank-collapse claims
compare deterministic runs with closed forms or bounds (two-valued). In
``transformer.full_model_rank_collapse`` the two paired gaps over initialisations carry Thm 3's
prediction as the paper's effect: the fall of the stable rank and the gain in alignment that the
frozen-F closed form gives over the same window.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from tqdm import tqdm

import dynamics.transformer as dt
from _core.validation import ConvergenceError
from paper_checks import (
    Measurement,
    at_least,
    at_most,
    claim,
    holds,
    measure,
    memo,
    paired_gap,
    scaled,
    sizes,
    slope_within,
    within,
    wrap,
)
from theory import transformer as th

PAPER = "Chen & Luo 2025 (arXiv 2510.06954)"
TASK = dict(n=64, s=4, d=8)
D_EFF = 8
SIZES = sizes(
    # eps: the escape sweep; inits: effective-dynamics initialisations; rank_keys / rank_eps:
    # the stage-2 runs (one per init key); paths: full-model loss curves drawn by the figures
    smoke=dict(eps=(1e-2, 5e-3), inits=4, rank_keys=2, rank_eps=1e-2, paths=1),
    quick=dict(eps=(1e-2, 5e-3, 2.5e-3, 1e-3), inits=30, rank_keys=6, rank_eps=1e-3, paths=3),
    full=dict(
        eps=(1e-2, 5e-3, 2.5e-3, 1e-3, 5e-4, 2.5e-4),
        inits=500,
        rank_keys=20,
        rank_eps=2.5e-4,
        paths=6,
    ),
)


@memo
def task(seed: int = 0):
    """The synthetic task shared by every full-model claim and figure (drawn from ``seed``)."""
    return dt.gaussian_task(TASK["n"], TASK["s"], TASK["d"], labels="bilinear", rng=seed)


@memo
def anchor(seed: int = 0):
    """The paper's anchor-function task (Sec. 5.1; s = 10, 20 keys, d = 16, binary labels)."""
    return dt.anchor_task(64, s=10, n_keys=20, d=16, rng=seed)


TASKS = {"gaussian": task, "anchor": anchor}


def softmax_order(X, model) -> float:
    """Bound on the attention logits at initialisation, max |X_is W_Q W_K^T X_ij^T| / sqrt(d)
    <= max ||X_is|| max ||X_ij|| ||W_Q||_2 ||W_K||_2 / sqrt(d): the softmax deviates from uniform
    by this much to first order, the largest term the effective dynamics (Eq. 7) neglects
    (order count derived here; it is O(eps^2))."""
    w = model.numpy()
    xn = np.linalg.norm(X, axis=2)
    return float(
        xn[:, -1].max()
        * xn.max()
        * np.linalg.norm(w["W_Q"], 2)
        * np.linalg.norm(w["W_K"], 2)
        / math.sqrt(X.shape[2])
    )


def predicted_wq_change(X, y, eps, *, key) -> float:
    """||W_Q(t_esc) - W_Q(0)|| / ||W_Q(0)|| predicted by stage 1: dW_Q/dt = F(t) W_K with F of
    Prop. 3 (App. Eq. 50) along the effective trajectory (Eq. 7) and W_K frozen at W_K(0), so
    the change is ||int F dt W_K(0)|| / ||W_Q(0)|| = O(eps^2) (derived here; trapezoid rule on the
    solver's steps, dt = dtbar / (eps ||S|| / (n s)))."""
    w = dt.SmallInitTransformer.init(X.shape[2], eps, key=key).numpy()
    bar = {k: a / eps for k, a in w.items()}
    eff = dt.effective_flow(
        bar["W_V"],
        bar["W1"],
        bar["W2"],
        th.condensation_direction(X, y),
        stop_norm=1e6 * (1.0 + np.linalg.norm(bar["W_V"])),
        stop_wv=10.0 * np.linalg.norm(bar["W_V"]),
    )
    F = np.array(
        [
            th.key_query_matrix(X, y, eps * a, eps * b, eps * c)
            for a, b, c in zip(eff.W_V, eff.W1, eff.W2, strict=True)
        ]
    )
    intF = np.trapezoid(F, eff.t, axis=0) / th.time_rescaling(X, y, eps)
    return float(np.linalg.norm(intF @ w["W_K"]) / np.linalg.norm(w["W_Q"]))


@memo
def escape_sweep(eps: tuple, task_name: str = "gaussian", seed: int = 0) -> dict:
    """Escape time of the full model (||W_V||_F x10) and its effective-dynamics prediction, per
    eps, from one normalised initialisation (``key = seed``) on ``TASKS[task_name](seed)``; with
    the predicted W_Q change and the softmax order :func:`softmax_order` per eps."""
    X, y = TASKS[task_name](seed)
    key = jax.random.key(seed)
    res = [
        _escape_or_none(X, y, e, key)
        for e in tqdm(eps, desc="escape times", leave=False, disable=None)
    ]
    delta = [softmax_order(X, dt.SmallInitTransformer.init(X.shape[2], e, key=key)) for e in eps]
    get = lambda name: np.array([getattr(r, name) if r else np.nan for r in res])  # noqa: E731
    return dict(
        eps=np.array(eps),
        results=res,
        delta=np.array(delta),
        escaped=[r is not None for r in res],
        t_escape=get("t_escape"),
        t_predicted=get("t_predicted"),
        wq=get("wq_rel_change"),
        wq_pred=np.array([predicted_wq_change(X, y, e, key=key) for e in eps]),
        wv=get("wv_rel_change"),
    )


def _escape_or_none(X, y, eps, key):
    """:func:`dynamics.transformer.escape_time`, or None when the full model does not escape by
    4x the predicted time (a measured failure: its numbers become NaN and the rules fail)."""
    try:
        return dt.escape_time(X, y, eps, key=key)
    except ConvergenceError:
        return None


def _rate3(t, E, k):
    """Three-point dE/dt at points k..N-k-1 of a non-uniform grid from the neighbours at offset k,
    [h-^2 E+ - h+^2 E- + (h+^2 - h-^2) E] / (h+ h- (h+ + h-)), and its error weight h+ h-."""
    i = np.arange(k, t.size - k)
    hm, hp = t[i] - t[i - k], t[i + k] - t[i]
    d = (hm**2 * E[i + k] - hp**2 * E[i - k] + (hp**2 - hm**2) * E[i]) / (hp * hm * (hp + hm))
    return d, hp * hm


#: bound on the relative error of the finite-difference energy rate (measured <= 3e-5 over
#: seeds 0-2 on the solver's steps up to ||theta|| = 1e3, ~7e-7 typical)
FD_TOL = 1e-4


def _rate_fd(t, E):
    """dE/dt at points 2..N-3 from the samples alone: the three-point formula at offsets 1 and 2,
    whose leading errors are proportional to h+ h- (times E'''/6), combined to cancel that term
    (Richardson extrapolation on the non-uniform grid; exact for cubics)."""
    d1, w1 = _rate3(t, E, 1)
    d2, w2 = _rate3(t, E, 2)
    d1, w1 = d1[1:-1], w1[1:-1]
    return (d1 * w2 - d2 * w1) / (w2 - w1)


@memo
def effective_ensemble(inits: int, seed: int = 0) -> dict:
    """Effective dynamics (Eq. 7) from ``inits`` Gaussian initialisations (d = 8, drawn from
    ``[seed, 8, i]``) to ``||theta|| = 1e6``: invariant drift, the energy rate measured by finite
    differences of the simulated E(tbar), the blow-up bracket, condensation."""
    rows = []
    for i in tqdm(range(inits), desc="effective dynamics", leave=False, disable=None):
        g = np.random.default_rng([seed, 8, i])
        WV, W1 = g.standard_normal((2, D_EFF, D_EFF))
        W2 = g.standard_normal(D_EFF)
        v = g.standard_normal(D_EFF)
        v /= np.linalg.norm(v)
        r = dt.effective_flow(WV, W1, W2, v, stop_norm=1e6)
        inv = np.array(
            [
                np.concatenate(th.conserved_quantities(u, a, b))
                for u, a, b in zip(r.u, r.W1, r.W2, strict=True)
            ]
        )
        scale2 = np.sum(WV**2) + np.sum(W1**2) + np.sum(W2**2)
        norm = np.sqrt(
            np.sum(r.W_V**2, axis=(1, 2)) + np.sum(r.W1**2, axis=(1, 2)) + np.sum(r.W2**2, axis=1)
        )
        small = norm <= 1e4  # float64 cancellation limits the invariants beyond ~1e4
        E = r.E
        fd = _rate_fd(r.t, E)
        rate = np.array([th.energy_rate(u, a, b) for u, a, b in zip(r.u, r.W1, r.W2, strict=True)])[
            2:-2
        ]
        # compare up to ||theta|| = 1e3 and where the rate is not at float64 rounding of E
        ok = (norm[2:-2] <= 1e3) & (rate > 1e-8 * np.abs(E[2:-2]).max()) & np.isfinite(fd)
        pos = (E[2:-2] > 0) & ok
        grown = np.linalg.norm(r.W_V[-1], axis=0) >= 1e3 * np.linalg.norm(WV, axis=0)
        cos = np.abs(th.column_alignment(r.W_V[-1], v))
        rows.append(
            dict(
                reached=r.reached,
                E0=E[0],
                upper=r.blowup_upper,
                stop=r.stop_time,
                bound=th.blowup_time_bound(E[0]) if E[0] > 0 else np.inf,
                drift=np.max(np.abs(inv[small] - inv[0])) / scale2,
                fd_err=float(np.max(np.abs(fd[ok] / rate[ok] - 1))),
                fd_ineq=float(np.min(fd[pos] / (3 * E[2:-2][pos] ** (4 / 3))))
                if pos.any()
                else np.inf,
                min_cos_grown=cos[grown].min() if grown.any() else np.nan,
                fractions=th.condition_fractions(r.u[-1], r.W1[-1], r.W2[-1]),
            )
        )
    return dict(rows=rows)


# The frozen-F closed form (Thm 3 under Assumption 2*) is a first-order prediction: it must
# account for the alignment gained and the stable rank lost by the full model in the window to
# within this fraction (measured, seeds 0-2 at quick: at most 1.8 % and 1.6 %).
REL_TOL = 0.03


@memo
def rank_collapse_runs(eps: float, keys: int, seed: int = 0) -> list:
    """Stage 2 of the full model (tanh) on ``task(seed)`` from ``keys`` initialisations
    (``fold_in(key(seed), k)``), each with the closed form from its start (F frozen) at its end."""
    X, y = task(seed)
    out = []
    for k in tqdm(range(keys), desc="stage 2", leave=False, disable=None):
        r = dt.rank_collapse(
            X, y, eps, key=jax.random.fold_in(jax.random.key(seed), k), activation="tanh"
        )
        P, K = th.key_query_closed_form(r.F, r.start["W_Q"], r.start["W_K"], r.t_end - r.t_start)
        U, _, Vt = np.linalg.svd(r.F)
        out.append(
            dict(
                result=r,
                closed_align_Q=float(abs(np.linalg.svd(P)[0][:, 0] @ U[:, 0])),
                closed_align_K=float(abs(np.linalg.svd(K)[0][:, 0] @ Vt[0])),
                start_align_Q=float(abs(np.linalg.svd(r.start["W_Q"])[0][:, 0] @ U[:, 0])),
                start_align_K=float(abs(np.linalg.svd(r.start["W_K"])[0][:, 0] @ Vt[0])),
            )
        )
    return out


def _two_point_slope_tol(sw) -> float:
    """Bound on the deviation of the two smallest eps' log-log slope from -1: each ratio
    t_esc/t_pred is within 2 delta of 1 (see :func:`_escape_rules`), so the slope is within
    (2 delta_a + 2 delta_b) / log(eps_a / eps_b)."""
    e, d = sw["eps"], sw["delta"]
    return float(2 * (d[-2] + d[-1]) / math.log(e[-2] / e[-1]))


def _escape_rules(sw, prefix=""):
    """Slope of the escape time and t_esc/t_pred within 2 delta of 1, both at the two smallest
    eps (the eps -> 0 regime of the claim; at eps = 1e-2 W_Q can move by O(1) before escape),
    delta = the softmax order at initialisation (:func:`softmax_order`)."""
    ratios = (sw["t_escape"] / sw["t_predicted"])[-2:]
    if not all(sw["escaped"][-2:]):  # no escape by 4x the prediction: a measured failure
        slope = holds(
            False,
            name=prefix + "slope",
            measured=sw["escaped"],
            rule="the full model escapes at the two smallest eps",
        )
    else:
        slope = slope_within(
            sw["eps"][-2:],
            sw["t_escape"][-2:],
            -1.0,
            _two_point_slope_tol(sw),
            name=prefix + "slope",
        )
    return [slope, within(ratios, np.ones(2), 2 * sw["delta"][-2:], name=prefix + "t_esc/t_pred")]


def _fit_slope(sw) -> float:
    """Least-squares log-log slope over the whole sweep (reported, not judged)."""
    if not np.all(np.isfinite(sw["t_escape"])):
        return math.nan
    return float(np.polyfit(np.log(sw["eps"]), np.log(sw["t_escape"]), 1)[0])


VARIANCE_FOR_STD = wrap(
    "dynamics.transformer._link._model",
    lambda f: lambda d, eps, key, act: f(d, math.sqrt(eps), key, act),
    "init draws N(0, eps) (eps used as the variance, std sqrt(eps))",
    name="eps_as_variance",
)
RESCALING_5PCT = wrap(
    "theory.transformer.time_rescaling",
    scaled(1.05),
    "rescaled time tbar/t 5 % high",
    name="time_rescaling_5pct",
)


def _rhs_mutant(transform):
    def wrapper(f):
        def g(s, state, v):
            return transform(f(s, state, v), state, v)

        return g

    return wrapper


W1_HALF = wrap(
    "dynamics.transformer._effective._effective_rhs",
    _rhs_mutant(lambda out, state, v: (out[0], 0.5 * out[1], out[2], out[3])),
    "effective dW1/dtbar half its value (a dropped factor 2)",
    name="dW1_half",
)


@claim(
    "transformer.escape_slope",
    paper=PAPER,
    statement="Stage 1 lasts O(1) in rescaled time tbar = eps ||S|| t/(n s), so the escape "
    "time of the full model from N(0, eps^2) weights scales as 1/eps "
    "(log-log slope -1).",
    where="Prop. 1, Eq. 6 (slope: derived from the rescaling)",
    sizes=SIZES,
    mutants=[VARIANCE_FOR_STD],
)
def _escape_slope(size, seed) -> Measurement:
    sw = escape_sweep(size.eps, "gaussian", seed)
    return measure(
        _escape_rules(sw)[0],
        extra={"fit_slope_all_eps": _fit_slope(sw), "escaped": sw["escaped"]},
        detail=f"two smallest eps of {list(sw['eps'])} (seed {seed}); tolerance "
        "(2 delta_a + 2 delta_b)/log(eps_a/eps_b), delta = softmax order",
    )


@claim(
    "transformer.escape_time",
    paper=PAPER,
    statement="The leading-order effective dynamics (gradient ascent on E = v W_V W1 W2) "
    "predicts the full model's escape time as eps -> 0.",
    where="Prop. 1, Eqs. 5-7",
    sizes=SIZES,
    mutants=[RESCALING_5PCT, VARIANCE_FOR_STD],
)
def _escape_time(size, seed) -> Measurement:
    sw = escape_sweep(size.eps, "gaussian", seed)
    ratio_all = sw["t_escape"] / sw["t_predicted"]
    return measure(
        _escape_rules(sw)[1],
        extra={"eps": sw["eps"], "escaped": sw["escaped"], "ratio_all_eps": ratio_all},
        detail="t_esc/t_pred at the two smallest eps; tolerance 2 delta(eps), "
        "delta = max logit of "
        "the attention at initialisation (O(eps^2): the softmax's first-order "
        "deviation from uniform, the largest term Eq. 7 neglects)",
    )


@claim(
    "transformer.anchor_escape",
    paper=PAPER,
    statement="On the anchor-function task the escape time scales as 1/eps and the effective "
    "dynamics predicts it as eps -> 0.",
    where="Sec. 5.1 (task), Prop. 1, Eqs. 5-7",
    sizes=SIZES,
    mutants=[RESCALING_5PCT, VARIANCE_FOR_STD],
)
def _anchor_escape(size, seed) -> Measurement:
    sw = escape_sweep(size.eps, "anchor", seed)
    return measure(
        *_escape_rules(sw),
        extra={"fit_slope_all_eps": _fit_slope(sw)},
        detail="n = 64, s = 10, d = 16; tolerances as transformer.escape_slope / escape_time",
    )


@claim(
    "transformer.quasi_static_attention",
    paper=PAPER,
    statement="W_Q and W_K do not enter the leading-order stage-1 dynamics: at escape their "
    "relative change is O(eps^2), as predicted by dW_Q/dt = F W_K along the "
    "effective trajectory, while W_V has grown tenfold.",
    where="Prop. 1 / Eq. 7, Prop. 3 (order count and prediction derived here)",
    sizes=SIZES,
    mutants=[
        wrap(
            "theory.transformer.key_query_matrix",
            scaled(1.1),
            "F of Prop. 3 10 % high (a normalisation)",
            name="F_10pct",
        ),
        wrap(
            "theory.transformer.key_query_matrix",
            lambda f: lambda *a: f(*a).T,
            "F transposed",
            name="F_transposed",
        ),
    ],
)
def _quasi_static(size, seed) -> Measurement:
    sw = escape_sweep(size.eps, "gaussian", seed)
    ratio = sw["wq"][-2:] / sw["wq_pred"][-2:]
    # neglected: the softmax beyond first order (delta) and the motion of W_K itself, of the
    # relative size of the W_Q change (W_K moves like W_Q)
    tol = 2 * sw["delta"][-2:] + sw["wq_pred"][-2:]
    return measure(
        within(ratio, np.ones(2), tol, name="measured/predicted W_Q change"),
        extra={"wq": sw["wq"], "wq_pred": sw["wq_pred"], "wv": sw["wv"]},
        detail="two smallest eps; ||dW_Q||/||W_Q|| at escape against "
        "||int F dt W_K(0)||/||W_Q(0)||; tolerance 2 delta + predicted change",
    )


@claim(
    "transformer.conservation",
    paper=PAPER,
    statement="u_k^2 - ||W1[k,:]||^2 and W2_k^2 - ||W1[:,k]||^2 are conserved by the "
    "effective dynamics.",
    where="Prop. 2",
    sizes=SIZES,
    mutants=[W1_HALF],
)
def _conservation(size, seed) -> Measurement:
    rows = effective_ensemble(size.inits, seed)["rows"]
    drift = max(r["drift"] for r in rows)
    return measure(
        at_most(drift, 1e-8, name="max invariant drift / ||theta(0)||^2"),
        detail=f"{len(rows)} inits, up to ||theta|| = 1e4 (float64 cancellation "
        "beyond); bound: solver rtol 1e-12 times the growth 1e4^2",
    )


@claim(
    "transformer.blowup",
    paper=PAPER,
    statement="Gaussian initialisations blow up in finite rescaled time; along the flow "
    "dE/dt = ||W1 W2||^2 + ||u W1||^2 + ||u||^2 ||W2||^2 >= 3E^{4/3}, and "
    "T* <= E(0)^{-1/3} when E(0) > 0.",
    where="Thm 1, Eq. 16 and the proof (App. A.1)",
    sizes=SIZES,
    mutants=[
        W1_HALF,
        wrap(
            "theory.transformer.energy_rate",
            lambda f: lambda u, a, b: f(u, a, b) - float(u @ u) * float(b @ b),
            "Eq. 16 without the ||u||^2 ||W2||^2 term",
            name="rate_missing_term",
        ),
    ],
)
def _blowup(size, seed) -> Measurement:
    rows = effective_ensemble(size.inits, seed)["rows"]
    pos = [r for r in rows if r["E0"] > 0]
    fd_err = max(r["fd_err"] for r in rows)
    return measure(
        holds(
            all(r["reached"] for r in rows),
            name="blow-up",
            rule="||theta|| reaches 1e6 at finite tbar for every init",
            measured=[r["stop"] for r in rows],
        ),
        at_most(fd_err, FD_TOL, name="max |FD dE/dt / Eq. 16 - 1|"),
        # the bound is approached as the neurons condense (AM-GM near equality): the measured
        # rate is known to FD_TOL relative, so the inequality is checked to that precision
        at_least(min(r["fd_ineq"] for r in rows), 1.0, tol=FD_TOL, name="min FD dE/dt / (3 E^4/3)"),
        at_least(
            min(r["bound"] - r["upper"] for r in pos),
            0.0,
            tol=1e-9,
            name="min E(0)^-1/3 - T*_upper",
        ),
        detail=f"{len(rows)} inits ({len(pos)} with E(0) > 0); dE/dt by three-point finite "
        "differences of the simulated E on the solver's steps, Richardson-extrapolated "
        "(||theta|| <= 1e3; residual truncation error ~1e-6 relative, bound 1e-4)",
    )


@claim(
    "transformer.condensation",
    paper=PAPER,
    statement="Near blow-up every growing column of W_V aligns with +-v and the condensation "
    "conditions hold for all neurons (|A_1|/d = |A_2|/d^2 = 1).",
    where="Thm 2, Assumption 1, Prop. 4-5, Fig. 2a",
    sizes=SIZES,
    mutants=[
        wrap(
            "theory.transformer.condition_fractions",
            lambda f: lambda u, W1, W2: f(u, W1.T, W2),
            "Assumption 1 conditions with W1 transposed (row/column convention)",
            name="fractions_W1_transposed",
        )
    ],
)
def _condensation(size, seed) -> Measurement:
    rows = effective_ensemble(size.inits, seed)["rows"]
    cos = float(np.nanmin([r["min_cos_grown"] for r in rows]))
    frac = [min(r["fractions"][i] for r in rows) for i in (0, 1)]
    return measure(
        within(cos, 1.0, 1e-6, name="min |cos(W_V[:, k], v)|"),
        within(frac, [1.0, 1.0], 0.0, name="|A1|/d, |A2|/d^2"),
        detail=f"columns grown >= 1e3 x, at ||theta|| = 1e6, {len(rows)} inits",
    )


@claim(
    "transformer.kq_rank_collapse",
    paper=PAPER,
    statement="With the outer weights frozen, W_Q/||W_Q|| and W_K/||W_K|| collapse to the "
    "rank of the top singular space of F (rank 1 when sigma_1(F) is simple).",
    where="Prop. 3, Def. 2, Thm 3",
    sizes=SIZES,
    mutants=[
        wrap(
            "theory.transformer.key_query_closed_form",
            lambda f: lambda F, Q, K, t: f(F.T, Q, K, t),
            "closed form with U and V of the SVD swapped",
            name="closed_form_UV",
        )
    ],
)
def _kq(size, seed) -> Measurement:
    g = np.random.default_rng([seed, 3])
    d = TASK["d"]
    U, _ = np.linalg.qr(g.standard_normal((d, d)))
    V, _ = np.linalg.qr(g.standard_normal((d, d)))
    Q0, K0 = g.standard_normal((2, d, d)) * 1e-2
    ts = np.linspace(0.0, 30.0, 31)
    beyond, kept, err = {}, {}, 0.0
    for k in (1, 2):
        sig = np.linspace(1.0, 0.1, d)
        sig[:k] = 1.5
        F = U @ np.diag(sig) @ V.T
        Q, _ = dt.key_query_flow(F, Q0, K0, ts)
        Qc, _ = th.key_query_closed_form(F, Q0, K0, ts)
        err = max(
            err,
            float(np.max(np.linalg.norm(Q - Qc, axis=(1, 2)) / np.linalg.norm(Qc, axis=(1, 2)))),
        )
        ns = th.normalised_singular_values(Q[-1])
        beyond[f"mult{k}"] = float(ns[k])  # first singular value beyond the limit rank
        kept[f"mult{k}"] = float(ns[k - 1])
    return measure(
        at_most(err, 1e-10, name="solver vs closed form (rel.)"),
        at_most(list(beyond.values()), 1e-6, name="sigma_{k+1}/sigma_1 at t = 30"),
        at_least(kept["mult2"], 1e-3, name="sigma_2/sigma_1, multiplicity 2"),
        detail="normalised singular values of W_Q at t = 30 (sigma_1 - sigma_next = "
        "0.5 -> exp(-15) ~ 3e-7 of the initial ratio)",
    )


@claim(
    "transformer.full_model_rank_collapse",
    paper=PAPER,
    statement="After condensation the full model's W_Q and W_K grow along the top singular "
    "vectors of the predicted F, as the closed form with F frozen does, and their "
    "stable rank falls towards 1.",
    where="Thm 3, Assumption 2*, Fig. 1c",
    sizes=SIZES,
    mutants=[
        wrap(
            "theory.transformer.key_query_matrix",
            lambda f: lambda *a: f(*a).T,
            "F transposed",
            name="F_transposed",
        ),
        wrap(
            "theory.transformer.key_query_closed_form",
            lambda f: lambda F, Q, K, t: f(F, Q, K, 0.8 * t),
            "the closed form integrated over 80 % of the window",
            name="window_80pct",
        ),
    ],
)
def _full_rank(size, seed) -> Measurement:
    runs = rank_collapse_runs(size.rank_eps, size.rank_keys, seed)
    r = [x["result"] for x in runs]
    sr = np.array([x.stable_rank_Q for x in r])
    sr_cf = np.array([x.stable_rank_closed_form for x in r])
    sr0 = np.array([x.stable_rank_Q_start for x in r])
    al = np.array([[x.align_Q, x.align_K] for x in r]).ravel()
    al_cf = np.array([[x["closed_align_Q"], x["closed_align_K"]] for x in runs]).ravel()
    al0 = np.array([[x["start_align_Q"], x["start_align_K"]] for x in runs]).ravel()
    se = lambda v: float(np.std(v, ddof=1) / math.sqrt(len(v)))  # noqa: E731
    rel = float(np.mean(al - al_cf) / np.mean(al - al0))
    rel_sr = float(np.mean(sr - sr_cf) / np.mean(sr0 - sr))
    return measure(
        paired_gap(
            sr0,
            sr,
            n_se=2,
            name="stable rank start - end",
            paper=max(float(np.mean(sr0 - sr_cf)), 1e-12),  # Thm 3's fall (> 0 unless a bug)
        ),
        paired_gap(
            al,
            al0,
            n_se=2,
            name="alignment end - start",
            paper=max(float(np.mean(al_cf - al0)), 1e-12),  # Thm 3's gain
        ),
        within(rel, 0.0, REL_TOL, name="alignment: (full - closed form) / (end - start)"),
        within(rel_sr, 0.0, REL_TOL, name="stable rank: (full - closed form) / (start - end)"),
        holds(
            all(x.multiplicity == 1 for x in r),
            name="sigma_1(F) simple",
            rule="multiplicity of sigma_1(F) is 1 (the rank-1 limit applies)",
        ),
        extra={
            "stable_rank_end": sr,
            "stable_rank_closed_form": sr_cf,
            "stable_rank_full_minus_closed": {
                "mean": float(np.mean(sr - sr_cf)),
                "se": se(sr - sr_cf),
            },
            "alignment_full_minus_closed": {
                "mean": float(np.mean(al - al_cf)),
                "se": se(al - al_cf),
            },
            "alignment_gain": {"mean": float(np.mean(al - al0)), "se": se(al - al0)},
            "outer_drift": [x.outer_rel_change for x in r],
        },
        detail=f"eps={size.rank_eps:g}, {len(r)} inits (seed {seed}); window ||W_Q|| x2 -> x30; "
        "alignment of the top singular vectors of W_Q, W_K with u1(F), v1(F), and the stable "
        "rank of W_Q: the frozen-F closed form must account for the alignment gained and the "
        f"stable rank lost in the window to within {REL_TOL:.0%}. Not judged within SEs: the "
        "full model departs from the linearised (frozen-F) flow systematically, by about -5e-4 "
        "in cosine (seed 2: -5.0e-4 +- 1.1e-4 over 6 inits; the same at eps = 2.5e-4 and 6e-5, "
        "and not explained by the rotation of F over the window), 1-2 % of the gain",
    )


N_PATH = 201  # samples per full-model trajectory (one compiled solver serves every figure)


@memo
def loss_curves(eps: tuple, paths: int, seed: int = 0) -> dict:
    """Full-model gradient flow for the first ``paths`` eps of the sweep, sampled log-spaced up to
    just before the predicted escape and densely through stages 2 and 3."""
    X, y = task(seed)
    sw = escape_sweep(eps, "gaussian", seed)
    out = []
    for e, tp in tqdm(
        list(zip(sw["eps"][:paths], sw["t_predicted"], strict=False)),
        desc="loss curves",
        leave=False,
        disable=None,
    ):
        ts = np.concatenate(
            [
                [0.0],
                np.geomspace(1e-2 * tp, 0.98 * tp, 60),
                np.linspace(0.98 * tp, 1.4 * tp, N_PATH - 60)[1:],
            ]
        )
        m = dt.SmallInitTransformer.init(TASK["d"], float(e), key=jax.random.key(seed))
        out.append((float(e), float(tp), dt.gradient_flow(m, X, y, ts[-1], ts=ts)))
    return dict(paths=out, v=th.condensation_direction(X, y))


@memo
def stage2_path(eps: float, keys: int, seed: int = 0) -> dict:
    """The stage-2 window of the first run of :func:`rank_collapse_runs`, densely sampled,
    beside the closed form from its start with F frozen."""
    X, y = task(seed)
    r = rank_collapse_runs(eps, keys, seed)[0]["result"]
    w = r.start
    m = dt.SmallInitTransformer.from_arrays(w["W_Q"], w["W_K"], w["W_V"], w["W1"], w["W2"])
    T = 1.5 * (r.t_end - r.t_start)
    ts = np.linspace(0.0, T, N_PATH)
    path = dt.gradient_flow(m, X, y, T, ts=ts)
    Qc, Kc = th.key_query_closed_form(r.F, w["W_Q"], w["W_K"], path.t)
    return dict(result=r, path=path, Qc=Qc, Kc=Kc)
