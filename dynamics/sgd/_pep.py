r"""Performance estimation (PEP) of the last iterate of constant-step SGD over finite sums.

Class: :math:`F = \frac1n\sum_{j=1}^n f_j` with every :math:`f_j` convex and :math:`\beta`-smooth
and a *common* minimiser :math:`w_\star` (:math:`\nabla f_j(w_\star) = 0` for all :math:`j`, i.e.
:math:`\sigma_\star = 0`), start :math:`\|w_0 - w_\star\|^2 \le D^2`; SGD samples :math:`j`
uniformly. The worst case of :math:`E[F(w_T)] - F_\star` (the expectation is the average over the
:math:`n^T` index sequences) is the value of a semidefinite program in the Gram matrix of
:math:`w_0 - w_\star` and the gradients :math:`\nabla f_j(w_s)` at every node :math:`s` of the
tree of iterates, with the smooth-convex interpolation conditions of Taylor, Hendrickx & Glineur
(2017, Thm 4) for each :math:`f_j` on the nodes and :math:`w_\star`. Interpolation is necessary and
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

from _core.validation import NumericalError, check_choice, check_int, check_scalar

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
        rows = [
            ("worst-case E[F(w_T)]-F*", f"{self.value:.8g}"),
            ("T", self.T),
            ("n functions", self.n),
            ("eta", f"{self.eta:.6g}"),
            ("beta", f"{self.beta:.6g}"),
            ("dist2", f"{self.dist2:.6g}"),
            ("solver / status", f"{self.solver} / {self.status}"),
            ("Gram size", self.gram_size),
            ("constraints", self.n_constraints),
        ]
        return "\n".join(f"{a:<26}{b!s:>22}" for a, b in rows)


def _check(T, n, eta, beta, dist2):
    T = check_int(T, "T", lower=1, upper=12)
    n = check_int(n, "n", lower=1, upper=8)
    # the worst case scales as beta * dist2 * w(eta * beta): outside these ranges the SDP's
    # entries span more decades than an interior-point solver resolves; rescale instead
    beta = check_scalar(beta, "beta", lower=1e-6, upper=1e6)
    eta = check_scalar(eta, "eta", lower=0.0, closed="neither")
    if not eta * beta < 2.0:
        raise ValueError(f"`eta` must satisfy 0 < eta < 2/beta = {2 / beta:g}; got {eta:g}.")
    dist2 = check_scalar(dist2, "dist2", lower=1e-6, upper=1e6)
    nodes = sum(n**t for t in range(T + 1))
    if nodes > 400:
        raise ValueError(
            f"the iterate tree has {nodes} nodes for `T`={T}, `n`={n} (limit 400): "
            "choose smaller T or n."
        )
    return T, n, eta, beta, dist2


def _nodes(T, n):
    out: list[tuple[int, ...]] = [()]
    for t in range(1, T + 1):
        out.extend(itertools.product(range(n), repeat=t))
    return out


def _tree_coordinates(T, n, eta):
    """Nodes of the iterate tree and, per node, the sparse coordinates of ``x_s - x_star`` in the
    Gram basis (``x0``, then ``g_j(x_s)`` at column ``1 + s*n + j``): arrays ``(P, T+1)``."""
    nodes = _nodes(T, n)
    index = {s: k for k, s in enumerate(nodes)}
    cols = np.zeros((len(nodes), T + 1), dtype=np.int64)
    vals = np.zeros((len(nodes), T + 1))
    vals[0, 0] = 1.0
    for s in nodes[1:]:
        k, parent = index[s], index[s[:-1]]
        depth = len(s)
        cols[k, :depth], vals[k, :depth] = cols[parent, :depth], vals[parent, :depth]
        cols[k, depth], vals[k, depth] = 1 + parent * n + s[-1], -eta
    return nodes, index, cols, vals


def _svec_index(i, j, N, solver):
    """Position of ``G[i, j]`` in the solver's packed PSD vector and its coefficient factor
    (off-diagonal entries are stored times sqrt(2)): Clarabel packs the upper triangle column by
    column, SCS the lower triangle column by column."""
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    if solver == "CLARABEL":
        k = hi * (hi + 1) // 2 + lo
    else:
        k = lo * N - lo * (lo - 1) // 2 + (hi - lo)
    return k, np.where(lo == hi, 1.0, 1.0 / np.sqrt(2.0))


def _symmetry_blocks(nodes, index, n):
    """Block structure of the Gram matrix under the symmetry of the problem.

    For ``n = 2`` swapping the two functions (and every label of the tree, ``s -> sigma(s)``) maps
    the SDP to itself and keeps its objective, so averaging a solution over the swap is optimal:
    the Gram matrix may be taken invariant, ``G = Q diag(B_+, B_-) Q^T`` with the basis vectors
    ``x0``, ``(u + v)/sqrt(2)`` (block +) and ``(u - v)/sqrt(2)`` (block -) for each swapped pair
    ``u = g_0(x_s)``, ``v = g_1(x_sigma(s))``, and ``f_1(x_s) = f_0(x_sigma(s))`` (derived here;
    checked against the unreduced SDP by ``tests/dynamics/test_sgd_pep.py``). Two PSD blocks of
    sizes ``P + 1`` and ``P`` replace one of size ``2P + 1``: the interior-point cost, which grows
    like the cube of the packed size, drops about 32-fold. Other ``n``: one block, no reduction.
    Returns block sizes and, per original basis index, its index and coefficient in each block
    (-1 where absent).
    """
    N = 1 + n * len(nodes)
    if n != 2:
        ident = np.arange(N)
        return (N,), ident, np.ones(N), np.full(N, -1), np.zeros(N)
    sym_idx, anti_idx = np.full(N, -1), np.full(N, -1)
    sym_c, anti_c = np.zeros(N), np.zeros(N)
    sym_idx[0], sym_c[0] = 0, 1.0
    h = 1.0 / np.sqrt(2.0)
    for k, s in enumerate(nodes):
        u, v = 1 + k * 2, 1 + index[tuple(1 - x for x in s)] * 2 + 1
        sym_idx[[u, v]], sym_c[[u, v]] = 1 + k, h
        anti_idx[[u, v]], anti_c[u], anti_c[v] = k, h, -h
    return (len(nodes) + 1, len(nodes)), sym_idx, sym_c, anti_idx, anti_c


def pep_worst_case(T, n, eta, beta=1.0, dist2=1.0, *, solver="CLARABEL", eps=1e-8) -> PEPResult:
    r"""Worst-case last-iterate excess risk of SGD over the finite-sum class, by an exact SDP.

    Parameters
    ----------
    T : int
        Number of SGD steps (the tree has :math:`\sum_{t\le T} n^t \le 400` nodes).
    n : int
        Number of component functions (uniform sampling).
    eta, beta, dist2 : float
        Stepsize (``0 < eta < 2/beta``), smoothness, :math:`D^2`.
    solver : {"CLARABEL", "SCS"}
        Clarabel (interior point: accurate; its cost grows like :math:`N^6` in the Gram size
        :math:`N`: at ``n = 2``, after the symmetry reduction, ``T = 4`` takes seconds and
        ``T = 5`` minutes) or SCS (first order, to relative accuracy ``eps``).

    The SDP is assembled directly in conic form (vectorised over all pairs of points, no
    modelling layer): variables the packed Gram blocks and the function values, one non-negative
    cone for the :math:`n(P+1)P` interpolation inequalities (half of them for ``n = 2``, see
    :func:`_symmetry_blocks`) and :math:`G_{00} \le D^2`, one PSD cone per block.

    Examples
    --------
    >>> r = pep_worst_case(1, 1, 1.0)  # n = 1 is gradient descent: beta D^2 / (4T + 2)
    >>> round(r.value, 4), r.status
    (0.1667, 'optimal')
    """
    import clarabel
    import scs

    T, n, eta, beta, dist2 = _check(T, n, eta, beta, dist2)
    solver = check_choice(solver, "solver", ("CLARABEL", "SCS"))
    eps = check_scalar(eps, "eps", lower=0.0, upper=1.0, closed="neither")  # also for CLARABEL
    nodes, index, xc, xv = _tree_coordinates(T, n, eta)
    P = len(nodes)
    N = 1 + n * P
    blocks, sym_idx, sym_c, anti_idx, anti_c = _symmetry_blocks(nodes, index, n)
    sizes = [bl * (bl + 1) // 2 for bl in blocks]
    offsets = np.cumsum([0] + sizes)
    S = offsets[-1]
    funcs = 1 if len(blocks) == 2 else n  # n = 2: f_1(x_s) = f_0(x_sigma(s)) (symmetry)
    # points 0..P-1 are the nodes, P is x_star (x = 0, g = 0, f = 0)
    xc = np.vstack([xc, np.zeros((1, T + 1), np.int64)])
    xv = np.vstack([xv, np.zeros((1, T + 1))])
    a, b = np.array([(a, b) for a, b in itertools.permutations(range(P + 1), 2)]).T
    m = a.size
    rows, cols, vals = [], [], []

    def add(r, i, j, v):  # the term v G[i, j] through G = Q diag(B) Q^T
        for blk, idx, coef in ((0, sym_idx, sym_c), (1, anti_idx, anti_c)):
            keep = (v != 0) & (idx[i] >= 0) & (idx[j] >= 0)
            k, f = _svec_index(
                idx[i][keep], idx[j][keep], blocks[min(blk, len(blocks) - 1)], solver
            )
            rows.append(r[keep])
            cols.append(offsets[blk] + k)
            vals.append(v[keep] * coef[i][keep] * coef[j][keep] * f)

    r_all = np.arange(funcs * m)
    for j in range(funcs):
        r = r_all[j * m : (j + 1) * m]
        gb = 1 + b * n + j  # column of g_j(x_b) (unused for star)
        ga = 1 + a * n + j
        has_a, has_b = a < P, b < P
        # <g_b, x_a - x_b>
        for src, sign in ((a, 1.0), (b, -1.0)):
            for q in range(T + 1):
                sel = has_b
                add(r[sel], gb[sel], xc[src[sel], q], sign * xv[src[sel], q])
        # ||g_a - g_b||^2 / (2 beta)
        c = 1.0 / (2.0 * beta)
        add(r[has_a], ga[has_a], ga[has_a], np.full(has_a.sum(), c))
        add(r[has_b], gb[has_b], gb[has_b], np.full(has_b.sum(), c))
        both = has_a & has_b
        add(r[both], ga[both], gb[both], np.full(both.sum(), -2.0 * c))
        # f_b - f_a
        rows += [r[has_b], r[has_a]]
        cols += [S + j * P + b[has_b], S + j * P + a[has_a]]
        vals += [np.ones(has_b.sum()), -np.ones(has_a.sum())]
    n_con = funcs * m
    rows.append(np.array([n_con]))
    cols.append(np.array([0]))
    vals.append(np.array([1.0]))
    Acon = sp.csc_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_con + 1, S + funcs * P),
    )
    Apsd = sp.hstack([-sp.identity(S), sp.csc_matrix((S, funcs * P))])
    A = sp.vstack([Acon, Apsd]).tocsc()
    bvec = np.zeros(n_con + 1 + S)
    bvec[n_con] = dist2
    q = np.zeros(S + funcs * P)
    leaves = np.array([index[s] for s in nodes if len(s) == T])
    for j in range(funcs):
        q[S + j * P + leaves] = -1.0 / (funcs * leaves.size)
    if solver == "CLARABEL":
        # clarabel is a compiled module without stubs: its classes are invisible to the checker
        settings = clarabel.DefaultSettings()  # pyright: ignore[reportAttributeAccessIssue]
        settings.verbose = False
        settings.direct_solve_method = "faer"  # supernodal LDL: the PSD block is dense
        settings.chordal_decomposition_enable = False  # the Gram matrix has no chordal sparsity
        sol = clarabel.DefaultSolver(  # pyright: ignore[reportAttributeAccessIssue]
            sp.csc_matrix((q.size, q.size)),
            q,
            A,
            bvec,
            [clarabel.NonnegativeConeT(n_con + 1)]  # pyright: ignore[reportAttributeAccessIssue]
            + [clarabel.PSDTriangleConeT(bl) for bl in blocks],  # pyright: ignore[reportAttributeAccessIssue]
            settings,
        ).solve()
        status, value = str(sol.status), -sol.obj_val
        ok, inaccurate = status in ("Solved", "AlmostSolved"), status == "AlmostSolved"
    else:
        out = scs.SCS(
            dict(A=A, b=bvec, c=q),
            dict(l=n_con + 1, s=list(blocks)),
            verbose=False,
            eps_abs=eps,
            eps_rel=eps,
            max_iters=200_000,
        ).solve()
        status, value = out["info"]["status"], -out["info"]["pobj"]
        ok, inaccurate = status in ("solved", "solved_inaccurate"), status != "solved"
    if not ok:
        raise NumericalError(
            f"the PEP SDP did not solve: {solver} status {status!r}.", status=status, T=T, n=n
        )
    return PEPResult(
        float(value),
        T,
        n,
        eta,
        beta,
        dist2,
        "optimal_inaccurate" if inaccurate else "optimal",
        solver,
        N,
        n_con,
    )


def pepit_worst_case(T, n, eta, beta=1.0, dist2=1.0, *, solver="CLARABEL") -> float:
    """The same worst case computed with PEPit (an optional, test/benchmark-only dependency).

    Examples
    --------
    >>> bool(abs(pepit_worst_case(1, 2, 0.5) - pep_worst_case(1, 2, 0.5).value) < 1e-5)
    True
    """
    try:
        from PEPit import PEP
        from PEPit.functions import SmoothConvexFunction
    except ImportError as err:  # pragma: no cover - optional dependency
        raise ImportError(
            "pepit_worst_case needs the optional package PEPit (pip install pepit)."
        ) from err
    T, n, eta, beta, dist2 = _check(T, n, eta, beta, dist2)
    check_choice(solver, "solver", ("CLARABEL", "SCS"))
    problem = PEP()
    fs = [problem.declare_function(SmoothConvexFunction, L=beta) for _ in range(n)]
    # numpy's stubs take no lists of PEPit expressions (numpy reduces them as objects)
    F = np.mean(fs)  # pyright: ignore[reportCallIssue, reportArgumentType]
    xs = F.stationary_point()
    grad2 = np.sum([f.gradient(xs) ** 2 for f in fs])  # pyright: ignore[reportCallIssue, reportArgumentType]
    problem.add_constraint(grad2 <= 0.0)
    x0 = problem.set_initial_point()
    problem.set_initial_condition((x0 - xs) ** 2 <= dist2)
    level = [x0]
    for _ in range(T):
        level = [x - eta * f.gradient(x) for x in level for f in fs]
    metric = np.mean([f(x) - f(xs) for x in level for f in fs])  # pyright: ignore[reportCallIssue, reportArgumentType]
    problem.set_performance_metric(metric)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        value = problem.solve(wrapper="cvxpy", solver=solver, verbose=0)
    if value is None or not np.isfinite(value):
        raise NumericalError(f"PEPit's SDP did not solve ({solver}); got {value!r}.", T=T, n=n)
    return float(value)
