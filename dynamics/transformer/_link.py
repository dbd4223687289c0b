"""The link between the full model and the two stages of the theory (Chen & Luo 2025): the escape
time against eps, the quasi-static key-query weights in stage 1, and the stage-2 rank collapse."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from _core.validation import ConvergenceError, check_scalar
from theory import transformer as th

from ._effective import effective_flow
from ._model import SmallInitTransformer, _check_data, gradient_flow

__all__ = ["EscapeResult", "escape_time", "RankCollapseResult", "rank_collapse"]


def _table(rows):
    w = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:<{w}}  {b}" for a, b in rows)


@dataclass(frozen=True)
class EscapeResult:
    """Stage-1 escape of the full model from its ``N(0, eps^2)`` initialisation.

    ``t_escape``: first gradient-flow time with ``||W_V||_F = factor ||W_V(0)||_F``.
    ``t_predicted``: the same event in the effective dynamics started from the normalised weights
    ``W(0)/eps`` (Eq. 7), mapped back to original time by ``t = tbar n s / (eps ||S||)`` (Eq. 6);
    ``tbar_escape`` its rescaled time. ``wq_rel_change`` and ``wv_rel_change`` are
    ``||W(t_esc) - W(0)||_F / ||W(0)||_F`` for ``W_Q`` and ``W_V`` (stage-1 quasi-stationarity of
    ``W_Q``: the ratio is ``O(eps^2)`` by the order count of Sec. 3.1).
    """

    eps: float
    t_escape: float
    t_predicted: float
    tbar_escape: float
    wq_rel_change: float
    wv_rel_change: float
    num_steps: int

    @property
    def ratio(self) -> float:
        """``t_escape / t_predicted`` (tends to 1 as eps -> 0)."""
        return self.t_escape / self.t_predicted

    def summary(self) -> str:
        return _table(
            [
                ("eps", f"{self.eps:.4g}"),
                ("t_escape", f"{self.t_escape:.8g}"),
                ("t_predicted", f"{self.t_predicted:.8g}"),
                ("ratio", f"{self.ratio:.8f}"),
                ("tbar_escape", f"{self.tbar_escape:.8g}"),
                ("W_Q rel. change", f"{self.wq_rel_change:.3e}"),
                ("W_V rel. change", f"{self.wv_rel_change:.3e}"),
            ]
        )


def _model(d, eps, key, activation):
    return SmallInitTransformer.init(d, eps, key=key, activation=activation)


def escape_time(
    X, y, eps, *, key, factor: float = 10.0, activation: str = "tanh", rtol: float = 1e-10
) -> EscapeResult:
    """Measure the stage-1 escape time of the full model and predict it from the theory.

    The model is :meth:`SmallInitTransformer.init` ``(d, eps, key=key)``, so the normalised
    initialisation ``W(0)/eps`` does not depend on ``eps``: the predicted escape time is exactly
    ``t_predicted = C / eps`` and ``log t_escape`` against ``log eps`` has slope ``-1`` in the limit
    (Chen & Luo 2025, Eqs. 6–7; the slope is derived here from the rescaling).
    """
    X, y = _check_data(X, y)
    eps = check_scalar(eps, "eps", lower=1e-50, upper=1e50)
    factor = check_scalar(factor, "factor", lower=1.0, upper=1e50, closed="right")
    d = X.shape[2]
    m = _model(d, eps, key, activation)
    w = m.numpy()
    v = th.condensation_direction(X, y)
    bar = {k: a / eps for k, a in w.items()}
    eff = effective_flow(
        bar["W_V"],
        bar["W1"],
        bar["W2"],
        v,
        stop_norm=float(1e6 * (1.0 + np.linalg.norm(bar["W_V"]))),
        stop_wv=float(factor * np.linalg.norm(bar["W_V"])),
    )
    if not eff.reached:
        raise ConvergenceError(
            "the effective dynamics did not reach the escape norm; raise `max_steps`."
        )
    t_pred = eff.stop_time / th.time_rescaling(X, y, eps)
    path = gradient_flow(
        m,
        X,
        y,
        4.0 * t_pred,
        ts=np.linspace(0.0, 4.0 * t_pred, 201),
        rtol=rtol,
        stop_factor=factor,
        stop_weight="W_V",
    )
    if path.stop_time is None:
        raise ConvergenceError(
            f"the full model did not escape by t = {4 * t_pred:.4g} (4 x the predicted time)."
        )
    end = path.model(-1).numpy()
    rel = {k: np.linalg.norm(end[k] - w[k]) / np.linalg.norm(w[k]) for k in ("W_Q", "W_V")}
    return EscapeResult(
        eps=eps,
        t_escape=path.stop_time,
        t_predicted=t_pred,
        tbar_escape=eff.stop_time,
        wq_rel_change=float(rel["W_Q"]),
        wv_rel_change=float(rel["W_V"]),
        num_steps=path.num_steps,
    )


@dataclass(frozen=True)
class RankCollapseResult:
    """Stage-2 key-query growth of the full model compared with the linear flow of Prop. 3.

    Stage 2 is taken to start at ``t_start``, when ``||W_Q||_F`` has grown by ``start_factor``
    (the outer weights have condensed and stalled), and is followed to ``t_end``, when it has grown
    by ``end_factor``. ``F`` is the predicted matrix at ``t_start``
    (:func:`theory.transformer.key_query_matrix`) and ``F_end`` the same at ``t_end`` (how far
    the target moved), ``multiplicity`` the multiplicity of its top
    singular value. At ``t_end``: ``stable_rank_Q/K`` of ``W_Q``, ``W_K``; ``align_Q`` =
    ``|<top left sing. vector of W_Q, u_1(F)>|`` and ``align_K`` the same with ``v_1(F)``;
    ``closed_form_error`` = ``||W_Q/||W_Q|| - P/||P|| ||_F`` with ``P`` the closed form from
    ``t_start`` with ``F`` frozen, and ``stable_rank_closed_form`` the stable rank of ``P``;
    ``outer_rel_change`` the relative change of ``W_V W1 W2`` over the window (Assumption 2*:
    small). ``start`` holds the weights at ``t_start`` (a dict of arrays).
    """

    eps: float
    t_start: float
    t_end: float
    F: np.ndarray = field(repr=False)
    F_end: np.ndarray = field(repr=False)
    F_singular_values: np.ndarray = field(repr=False)
    multiplicity: int
    stable_rank_Q_start: float
    stable_rank_Q: float
    stable_rank_K: float
    stable_rank_closed_form: float
    align_Q: float
    align_K: float
    closed_form_error: float
    outer_rel_change: float
    loss_start: float
    loss_end: float
    start: dict = field(repr=False, default_factory=dict)

    def summary(self) -> str:
        s = self.F_singular_values
        return _table(
            [
                ("eps", f"{self.eps:.4g}"),
                ("window", f"[{self.t_start:.6g}, {self.t_end:.6g}]"),
                ("sigma_1, sigma_2 of F", f"{s[0]:.4g}, {s[1]:.4g}"),
                ("multiplicity", f"{self.multiplicity}"),
                (
                    "stable rank W_Q start/end",
                    f"{self.stable_rank_Q_start:.4f} / {self.stable_rank_Q:.4f}",
                ),
                ("stable rank W_K end", f"{self.stable_rank_K:.4f}"),
                ("stable rank closed form", f"{self.stable_rank_closed_form:.4f}"),
                ("|<u1(W_Q), u1(F)>|", f"{self.align_Q:.6f}"),
                ("|<u1(W_K), v1(F)>|", f"{self.align_K:.6f}"),
                ("closed-form error", f"{self.closed_form_error:.3e}"),
                ("outer rel. change", f"{self.outer_rel_change:.3e}"),
                ("loss start/end", f"{self.loss_start:.6f} / {self.loss_end:.6f}"),
            ]
        )


def rank_collapse(
    X,
    y,
    eps,
    *,
    key,
    start_factor: float = 2.0,
    end_factor: float = 30.0,
    activation: str = "linear",
    t_max: float | None = None,
    rtol: float = 1e-10,
) -> RankCollapseResult:
    """Follow the full model into stage 2; compare ``W_Q``, ``W_K`` with Thm 3 of Chen & Luo 2025.

    The stage-2 theory drops the activation (Sec. 4.2), hence ``activation="linear"`` by default.
    ``t_max`` bounds the search for the start of stage 2 (default ``50 / eps``).
    """
    X, y = _check_data(X, y)
    eps = check_scalar(eps, "eps", lower=1e-50, upper=1e50)
    start_factor = check_scalar(start_factor, "start_factor", lower=1.0, upper=1e50, closed="right")
    end_factor = check_scalar(
        end_factor, "end_factor", lower=start_factor, upper=1e50, closed="right"
    )
    t_max = (
        50.0 / eps
        if t_max is None
        else check_scalar(t_max, "t_max", lower=0.0, upper=1e100, closed="right")
    )
    d = X.shape[2]
    m0 = _model(d, eps, key, activation)
    grid = np.linspace(0.0, t_max, 201)  # 201 saves: the shape every other run compiles for
    a = gradient_flow(
        m0, X, y, t_max, ts=grid, rtol=rtol, stop_factor=start_factor, stop_weight="W_Q"
    )
    if a.stop_time is None:
        raise ConvergenceError(
            f"||W_Q|| did not grow by {start_factor:g} before t_max = {t_max:g}."
        )
    ma = a.model(-1)
    wa = ma.numpy()
    F = th.key_query_matrix(X, y, wa["W_V"], wa["W1"], wa["W2"])
    b = gradient_flow(
        ma,
        X,
        y,
        t_max,
        ts=grid,
        rtol=rtol,
        stop_factor=end_factor / start_factor,
        stop_weight="W_Q",
    )
    if b.stop_time is None:
        raise ConvergenceError(f"||W_Q|| did not grow by {end_factor:g} before t_max = {t_max:g}.")
    wb = b.model(-1).numpy()
    F_end = th.key_query_matrix(X, y, wb["W_V"], wb["W1"], wb["W2"])
    U, sig, Vt = np.linalg.svd(F)
    uq = np.linalg.svd(wb["W_Q"])[0][:, 0]
    uk = np.linalg.svd(wb["W_K"])[0][:, 0]
    P, _ = th.key_query_closed_form(F, wa["W_Q"], wa["W_K"], b.stop_time)
    nq = wb["W_Q"] / np.linalg.norm(wb["W_Q"])
    err = np.linalg.norm(nq - P / np.linalg.norm(P))
    oa = wa["W_V"] @ wa["W1"] @ wa["W2"]
    ob = wb["W_V"] @ wb["W1"] @ wb["W2"]
    return RankCollapseResult(
        eps=eps,
        t_start=a.stop_time,
        t_end=a.stop_time + b.stop_time,
        F=F,
        F_end=F_end,
        F_singular_values=sig,
        multiplicity=th.top_multiplicity(F, rtol=1e-6),
        stable_rank_Q_start=th.stable_rank(wa["W_Q"]),
        stable_rank_Q=th.stable_rank(wb["W_Q"]),
        stable_rank_K=th.stable_rank(wb["W_K"]),
        stable_rank_closed_form=th.stable_rank(P),
        align_Q=float(abs(uq @ U[:, 0])),
        align_K=float(abs(uk @ Vt[0])),
        closed_form_error=float(err),
        outer_rel_change=float(np.linalg.norm(ob - oa) / np.linalg.norm(oa)),
        loss_start=float(a.loss[-1]),
        loss_end=float(b.loss[-1]),
        start=wa,
    )
