r"""Performance estimation (PEP) of the last iterate of constant-step SGD over finite sums.

Class: :math:`F = \frac1n\sum_{j=1}^n f_j` with every :math:`f_j` convex and :math:`\beta`-smooth
and a *common* minimiser :math:`w_\star` (:math:`\nabla f_j(w_\star) = 0` for all :math:`j`, i.e.
:math:`\sigma_\star = 0`), start :math:`\|w_0 - w_\star\|^2 \le D^2`; SGD samples :math:`j`
uniformly. The worst case of :math:`E[F(w_T)] - F_\star` (the expectation is the average over the
:math:`n^T` index sequences) is the value of a semidefinite program in the Gram matrix of
:math:`w_0 - w_\star` and the gradients :math:`\nabla f_j(w_s)` at every node :math:`s` of the
tree of iterates, with the smooth-convex interpolation conditions of Taylor, Hendrickx & Glineur
(2017,
Thm 4) for each :math:`f_j` on the nodes and :math:`w_\star`. Interpolation is necessary and
sufficient, so the SDP is exact (dimension-free) for this class. The tree has
:math:`\sum_{t\le T} n^t` nodes: small ``n`` and ``T`` only. By scaling the value is
:math:`\beta D^2\,\phi(\beta\eta, n, T)`.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from theory._validation import check_int, check_scalar

__all__ = ["PEPResult", "pep_worst_case", "pepit_worst_case"]


@dataclass(frozen=True)
class PEPResult:
    """Worst-case :math:`E[F(w_T)] - F_\\star` over the finite-sum class (see module docstring)."""

    value: float
    T: int
    n: int
    eta: float
    beta: float
    dist2: float
    status: str
    solver: str
    gram_size: int
    n_constraints: int

    def summary(self) -> str:
        rows = [("worst-case E[F(w_T)]-F*", f"{self.value:.8g}"), ("T", self.T),
                ("n functions", self.n), ("eta", f"{self.eta:.6g}"), ("beta", f"{self.beta:.6g}"),
                ("dist2", f"{self.dist2:.6g}"),
                ("solver / status", f"{self.solver} / {self.status}"),
                ("Gram size", self.gram_size), ("constraints", self.n_constraints)]
        return "\n".join(f"{a:<26}{b!s:>22}" for a, b in rows)


def _check(T, n, eta, beta, dist2):
    T = check_int(T, "T", lower=1, upper=12)
    n = check_int(n, "n", lower=1, upper=8)
    beta = check_scalar(beta, "beta", lower=0.0, closed="neither")
    eta = check_scalar(eta, "eta", lower=0.0, closed="neither")
    if not eta * beta < 2.0:
        raise ValueError(f"`eta` must satisfy 0 < eta < 2/beta = {2 / beta:g}; got {eta:g}.")
    dist2 = check_scalar(dist2, "dist2", lower=0.0, closed="neither")
    nodes = sum(n ** t for t in range(T + 1))
    if nodes > 400:
        raise ValueError(f"the iterate tree has {nodes} nodes for `T`={T}, `n`={n} (limit 400): "
                         "choose smaller T or n.")
    return T, n, eta, beta, dist2


def _nodes(T, n):
    out = [()]
    for t in range(1, T + 1):
        out.extend(itertools.product(range(n), repeat=t))
    return out


def pep_worst_case(T, n, eta, beta=1.0, dist2=1.0, *, solver="CLARABEL") -> PEPResult:
    r"""Worst-case last-iterate excess risk of SGD over the finite-sum class, by an exact SDP.

    Parameters
    ----------
    T : int
        Number of SGD steps (the tree has :math:`\sum_{t\le T} n^t \le 400` nodes).
    n : int
        Number of component functions (uniform sampling).
    eta, beta, dist2 : float
        Stepsize (``0 < eta < 2/beta``), smoothness, :math:`D^2`.
    solver : str
        A cvxpy SDP solver (``"CLARABEL"`` or ``"SCS"``).
    """
    import cvxpy as cp

    T, n, eta, beta, dist2 = _check(T, n, eta, beta, dist2)
    nodes = _nodes(T, n)
    index = {s: k for k, s in enumerate(nodes)}
    P = len(nodes)
    N = 1 + n * P                                  # basis: x0, then g_j(x_s)

    def gcol(j, s):
        return 1 + index[s] * n + j

    # coordinates of x_s - x_star in the basis
    X = np.zeros((P, N))
    X[0, 0] = 1.0
    for s in nodes[1:]:
        X[index[s]] = X[index[s[:-1]]]
        X[index[s], gcol(s[-1], s[:-1])] -= eta
    # points: 0 = x_star (x = 0, g = 0), 1..P = nodes
    rows, cols, vals = [], [], []
    fa, fb = [], []                                # function-value indices (-1 = f_j(x*) = 0)
    r = 0
    for j in range(n):
        pts = [None, *nodes]
        for a, b in itertools.permutations(range(P + 1), 2):
            sa, sb = pts[a], pts[b]
            xa = X[index[sa]] if sa is not None else np.zeros(N)
            xb = X[index[sb]] if sb is not None else np.zeros(N)
            u = np.zeros(N)
            if sb is not None:
                u[gcol(j, sb)] = 1.0
            ga = np.zeros(N)
            if sa is not None:
                ga[gcol(j, sa)] = 1.0
            dg = ga - u
            # f_b - f_a + <g_b, x_a - x_b> + ||g_a - g_b||^2 / (2 beta) <= 0
            Mq = 0.5 * (np.outer(u, xa - xb) + np.outer(xa - xb, u)) + np.outer(dg, dg) / (2 * beta)
            nz = np.nonzero(Mq)
            rows.extend([r] * len(nz[0]))
            cols.extend((nz[0] * N + nz[1]).tolist())
            vals.extend(Mq[nz].tolist())
            fa.append(-1 if sa is None else j * P + index[sa])
            fb.append(-1 if sb is None else j * P + index[sb])
            r += 1
    n_con = r
    Acon = sp.csr_matrix((vals, (rows, cols)), shape=(n_con, N * N))
    G = cp.Variable((N, N), PSD=True)
    Fv = cp.Variable(n * P)
    fa, fb = np.array(fa), np.array(fb)
    Sa = sp.csr_matrix((np.ones(np.sum(fa >= 0)), (np.nonzero(fa >= 0)[0], fa[fa >= 0])),
                       shape=(n_con, n * P))
    Sb = sp.csr_matrix((np.ones(np.sum(fb >= 0)), (np.nonzero(fb >= 0)[0], fb[fb >= 0])),
                       shape=(n_con, n * P))
    cons = [Sb @ Fv - Sa @ Fv + Acon @ cp.vec(G, order="C") <= 0, G[0, 0] <= dist2]
    leaves = [index[s] for s in nodes if len(s) == T]
    w = np.zeros(n * P)
    for j in range(n):
        w[j * P + np.array(leaves)] = 1.0 / (n * len(leaves))
    prob = cp.Problem(cp.Maximize(w @ Fv), cons)
    with warnings.catch_warnings():     # an inaccurate solve is reported in `status` instead
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        prob.solve(solver=solver)
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"the PEP SDP did not solve: status {prob.status!r}.")
    return PEPResult(float(prob.value), T, n, eta, beta, dist2, prob.status, solver, N, n_con)


def pepit_worst_case(T, n, eta, beta=1.0, dist2=1.0, *, solver="CLARABEL") -> float:
    """The same worst case computed with PEPit (an optional, test/benchmark-only dependency)."""
    try:
        from PEPit import PEP
        from PEPit.functions import SmoothConvexFunction
    except ImportError as err:  # pragma: no cover - optional dependency
        raise ImportError("pepit_worst_case needs the optional package PEPit "
                          "(pip install pepit).") from err
    T, n, eta, beta, dist2 = _check(T, n, eta, beta, dist2)
    problem = PEP()
    fs = [problem.declare_function(SmoothConvexFunction, L=beta) for _ in range(n)]
    F = np.mean(fs)
    xs = F.stationary_point()
    problem.add_constraint(np.sum([f.gradient(xs) ** 2 for f in fs]) <= 0.0)
    x0 = problem.set_initial_point()
    problem.set_initial_condition((x0 - xs) ** 2 <= dist2)
    level = [x0]
    for _ in range(T):
        level = [x - eta * f.gradient(x) for x in level for f in fs]
    metric = np.mean([f(x) - f(xs) for x in level for f in fs])
    problem.set_performance_metric(metric)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        return float(problem.solve(wrapper="cvxpy", solver=solver, verbose=0))
