"""Two-stage training dynamics of a small-initialisation Transformer: the exact statements.

Chen & Luo 2025, "From Condensation to Rank Collapse: A Two-Stage Analysis of Transformer Training
Dynamics" (NeurIPS 2025 oral, arXiv 2510.06954). The model is one softmax-attention layer and a
tanh feed-forward layer, ``f(X) = tanh(softmax(X W_Q W_K^T X^T / sqrt(d)) X W_V W1) W2``, read at
the last token, trained by gradient flow on the exponential loss from ``N(0, eps^2)`` weights.
Everything here is pure float64 NumPy: closed forms, bounds and metrics. The simulators are in
:mod:`dynamics.transformer`.

Stage 1 (effective dynamics, Eq. 7): in normalised weights ``W/eps`` and rescaled time
``tbar = eps ||S|| t / (n s)`` with ``S = sum_i y_i sum_j X_ij``, the outer weights follow gradient
*ascent* on the cubic energy ``E = u W1 W2``, ``u = v W_V``, ``v = S/||S||``::

    dW_V/dt = v^T (W1 W2)^T,   dW1/dt = u^T W2^T,   dW2/dt = (u W1)^T,   dW_Q/dt = dW_K/dt = 0.

Stage 2 (Prop. 3): with the outer weights frozen, ``dW_Q/dt = F W_K`` and ``dW_K/dt = F^T W_Q``.

Shapes: ``X`` is ``(n, s, d)``, ``y`` is ``(n,)`` with entries ±1, ``W_V, W1, W_Q, W_K`` are
``(d, d)``, ``W2`` and ``u`` are ``(d,)`` and ``v`` is a unit ``(d,)`` vector.
"""

from __future__ import annotations

import numpy as np

from _core.validation import as_array, check_finite_result, check_scalar

_BIG = 1e30  # weight and data entries beyond this overflow the cubic products and exp below

__all__ = [
    "condensation_direction",
    "time_rescaling",
    "effective_vector_field",
    "cubic_energy",
    "energy_rate",
    "energy_rate_lower_bound",
    "conserved_quantities",
    "nondegeneracy",
    "blowup_time_bound",
    "energy_lower_envelope",
    "column_alignment",
    "condition_fractions",
    "key_query_matrix",
    "check_key_query",
    "key_query_closed_form",
    "key_query_limit",
    "top_multiplicity",
    "stable_rank",
    "effective_rank",
    "normalised_singular_values",
]


# --------------------------------------------------------------------------------------------
# data, direction, time scale
# --------------------------------------------------------------------------------------------


def _check_data(X, y):
    X = as_array(X, "X", ndim=3, lower=-_BIG, upper=_BIG)
    n, s, d = X.shape
    if n < 1 or s < 1 or d < 1:
        raise ValueError(f"`X` must have shape (n, s, d) with n, s, d >= 1; got {X.shape}.")
    y = as_array(y, "y", shape=(n,))
    if not np.all(np.abs(y) == 1.0):
        bad = y[np.abs(y) != 1.0][:3]
        raise ValueError(f"`y` must hold labels in {{-1, +1}}; got values such as {bad.tolist()}.")
    return X, y


def _label_sum(X, y):
    return np.einsum("i,ijk->k", y, X)


def condensation_direction(X, y) -> np.ndarray:
    """The data direction ``v = S / ||S||_2`` with ``S = sum_i y_i sum_j X_ij`` (a ``(d,)`` vector).

    Chen & Luo 2025, Prop. 1 / Eq. 6. Every column of ``W_V`` condenses onto ``±v`` (Thm 2).
    Flipping all labels flips ``v``.

    >>> X = np.ones((2, 3, 2)); X[1] *= -1
    >>> condensation_direction(X, [1, -1])
    array([0.70710678, 0.70710678])
    """
    X, y = _check_data(X, y)
    S = _label_sum(X, y)
    norm = np.linalg.norm(S)
    if norm == 0.0:
        raise ValueError(
            "`X`, `y`: the label-weighted token sum S = sum_i y_i sum_j X_ij is zero, "
            "so the condensation direction v = S/||S|| is undefined."
        )
    return S / norm


def time_rescaling(X, y, eps) -> float:
    """``tbar / t = eps ||S||_2 / (n s)``: rescaled time per unit of gradient-flow time.

    Chen & Luo 2025, Eq. 6. Stage 1 lasts ``O(1)`` in ``tbar``, hence ``Theta(1/eps)`` in ``t``.

    >>> X, y = np.ones((1, 2, 2)), np.ones(1)  # S = (2, 2), ||S|| = 2 sqrt 2
    >>> round(time_rescaling(X, y, 0.1), 4)
    0.1414
    """
    X, y = _check_data(X, y)
    eps = check_scalar(eps, "eps", lower=0.0, closed="neither")
    n, s, _ = X.shape
    ratio = eps * float(np.linalg.norm(_label_sum(X, y))) / (n * s)
    return check_finite_result(ratio, "the time rescaling tbar/t", eps=eps)


# --------------------------------------------------------------------------------------------
# stage 1: effective dynamics, energy, conservation, blow-up
# --------------------------------------------------------------------------------------------


def _check_outer(W_V, W1, W2):
    W1 = as_array(W1, "W1", ndim=2)
    d = W1.shape[0]
    W1 = as_array(W1, "W1", shape=(d, d), lower=-_BIG, upper=_BIG)
    W2 = as_array(W2, "W2", shape=(d,), lower=-_BIG, upper=_BIG)
    W_V = as_array(W_V, "W_V", shape=(d, d), lower=-_BIG, upper=_BIG)
    return W_V, W1, W2


def _check_unit(v, d):
    v = as_array(v, "v", shape=(d,), lower=-_BIG, upper=_BIG)
    if abs(np.linalg.norm(v) - 1.0) > 1e-8:
        raise ValueError(f"`v` must be a unit vector; got norm {np.linalg.norm(v):.6g}.")
    return v


def _check_u(u, W1, W2):
    W1 = as_array(W1, "W1", ndim=2)
    d = W1.shape[0]
    W1 = as_array(W1, "W1", shape=(d, d), lower=-_BIG, upper=_BIG)
    return (
        as_array(u, "u", shape=(d,), lower=-_BIG, upper=_BIG),
        W1,
        as_array(W2, "W2", shape=(d,), lower=-_BIG, upper=_BIG),
    )


def effective_vector_field(W_V, W1, W2, v):
    """Right-hand side of the stage-1 effective dynamics (Chen & Luo 2025, Eq. 7).

    Returns ``(dW_V, dW1, dW2)`` with ``dW_V = v^T (W1 W2)^T``, ``dW1 = u^T W2^T``,
    ``dW2 = (u W1)^T`` and ``u = v W_V``: the gradient of ``E = v W_V W1 W2`` (component form
    derived here, checked against autodiff in ``tests/theory/test_transformer.py``).

    >>> W1, W2 = np.eye(2), np.ones(2)
    >>> dW_V, dW1, dW2 = effective_vector_field(np.eye(2), W1, W2, np.array([1.0, 0.0]))
    >>> dW_V  # v^T (W1 W2)^T
    array([[1., 1.],
           [0., 0.]])
    """
    W_V, W1, W2 = _check_outer(W_V, W1, W2)
    v = _check_unit(v, W1.shape[0])
    u = v @ W_V
    return np.outer(v, W1 @ W2), np.outer(u, W2), W1.T @ u


def cubic_energy(u, W1, W2) -> float:
    """``E = u W1 W2`` (Chen & Luo 2025, Eq. 7): the energy the effective flow ascends.

    >>> cubic_energy([1.0, 0.0], np.eye(2), [2.0, 0.0])  # u W1 W2
    2.0
    """
    u, W1, W2 = _check_u(u, W1, W2)
    return float(u @ W1 @ W2)


def energy_rate(u, W1, W2) -> float:
    """``dE/dtbar = ||W1 W2||^2 + ||u W1||^2 + ||u||^2 ||W2||^2`` (Chen & Luo 2025, Eq. 16).

    Always ``>= 3 |E|^{4/3}`` by AM–GM (see :func:`energy_rate_lower_bound`).

    >>> energy_rate(np.array([1.0, 0.0]), np.eye(2), np.ones(2))  # 2 + 1 + 1 * 2
    5.0
    """
    u, W1, W2 = _check_u(u, W1, W2)
    a = W1 @ W2
    b = u @ W1
    return float(a @ a + b @ b + (u @ u) * (W2 @ W2))


def energy_rate_lower_bound(E):
    """``3 |E|^{4/3}``, a lower bound on ``dE/dtbar`` (Chen & Luo 2025, App. A.1 / proof of Thm 1).

    The paper states it for ``E > 0``; the same AM–GM step (each term of Eq. 16 times another
    bounds ``E^2``) gives it for every ``E`` (derived here, tested in
    ``tests/theory/test_transformer.py``).

    >>> float(energy_rate_lower_bound(-1.0))
    3.0
    """
    E = np.asarray(as_array(E, "E", lower=-1e200, upper=1e200))
    out = 3.0 * np.abs(E) ** (4.0 / 3.0)
    return float(out) if out.ndim == 0 else out


def conserved_quantities(u, W1, W2):
    """Per-neuron invariants of the effective flow (Chen & Luo 2025, Prop. 2).

    Returns ``(row, col)``, two ``(d,)`` arrays: ``row_k = u_k^2 - ||W1[k, :]||^2`` and
    ``col_k = W2_k^2 - ||W1[:, k]||^2``. Both are constant along Eq. 7, so are their sums
    ``||u||^2 - ||W1||_F^2`` and ``||W2||^2 - ||W1||_F^2``.

    >>> conserved_quantities(np.array([1.0, 0.0]), np.eye(2), np.ones(2))
    (array([ 0., -1.]), array([0., 0.]))
    """
    u, W1, W2 = _check_u(u, W1, W2)
    return u**2 - np.sum(W1**2, axis=1), W2**2 - np.sum(W1**2, axis=0)


def nondegeneracy(u, W1, W2):
    """The two quantities of Definition 4 (Chen & Luo 2025); the initialisation is non-degenerate
    iff both are nonzero (Gaussian initialisations are, almost surely: Thm 1).

    Returns ``(q1, q2)`` with ``q1 = ||u||^2 - ||W2||^2`` and
    ``q2 = ||du||^2 - ||dW2||^2 + min(||u||^2, ||W2||^2) q1``, where ``du = (W1 W2)^T`` and
    ``dW2 = (u W1)^T`` are the effective velocities.

    >>> u, W1, W2 = np.array([1.0, 0.0]), np.eye(2), np.ones(2)
    >>> nondegeneracy(u, W1, W2)  # q2 = 2 - 1 + 1 * (-1): degenerate
    (-1.0, 0.0)
    """
    u, W1, W2 = _check_u(u, W1, W2)
    q1 = float(u @ u - W2 @ W2)
    du, dw2 = W1 @ W2, u @ W1
    q2 = float(du @ du - dw2 @ dw2 + min(u @ u, W2 @ W2) * q1)
    return q1, q2


def blowup_time_bound(E0) -> float:
    """Upper bound ``T* <= E(0)^{-1/3}`` on the blow-up time of Eq. 7 (Chen & Luo 2025, proof of
    Thm 1), valid when ``E(0) > 0``.

    Applied from any time ``tbar`` with ``E(tbar) > 0`` it gives ``T* <= tbar + E(tbar)^{-1/3}``:
    ``tbar + E^{-1/3}`` never increases along the flow.

    >>> blowup_time_bound(8.0)  # E(0)^(-1/3)
    0.5
    """
    E0 = check_scalar(E0, "E0", lower=0.0, closed="neither")
    return E0 ** (-1.0 / 3.0)


def energy_lower_envelope(E0, t):
    """Lower envelope of ``E(tbar)`` from ``dE/dtbar >= 3|E|^{4/3}`` (Chen & Luo 2025, Thm 1 proof).

    ``E(0) > 0``: ``E >= (E0^{-1/3} - t)^{-3}`` for ``t < E0^{-1/3}`` (``+inf`` beyond).
    ``E(0) < 0``: ``E >= -((-E0)^{-1/3} + t)^{-3}``. ``E(0) = 0``: ``E >= 0``.

    >>> float(energy_lower_envelope(1.0, 0.5))  # (1 - 0.5)^-3
    8.0
    """
    E0 = check_scalar(E0, "E0", lower=-1e100, upper=1e100)
    t = as_array(t, "t", finite="nan")
    if np.any(t < 0):
        raise ValueError(f"`t` must be >= 0; got min {t.min():g}.")
    if E0 > 0:
        gap = E0 ** (-1.0 / 3.0) - t
        with np.errstate(divide="ignore"):
            out = np.where(gap > 0, 1.0 / np.where(gap > 0, gap, 1.0) ** 3, np.inf)
    elif E0 < 0:
        out = -1.0 / ((-E0) ** (-1.0 / 3.0) + t) ** 3
    else:
        out = np.zeros_like(t)
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------------------------
# condensation metrics
# --------------------------------------------------------------------------------------------


def column_alignment(W, v) -> np.ndarray:
    """Signed cosines ``<W[:, k], v> / ||W[:, k]||`` of each column of ``W`` with ``v``.

    Chen & Luo 2025, Def. 1 (condensation: ``|cos| -> 1``). Zero columns give 0. For the
    feed-forward weight pass ``W1.T`` to align the rows of ``W1``.

    >>> column_alignment(np.array([[1.0, 0.0], [1.0, 2.0]]), np.array([1.0, 0.0]))
    array([0.70710678, 0.        ])
    """
    W = as_array(W, "W", ndim=2, lower=-_BIG, upper=_BIG)
    v = as_array(v, "v", shape=(W.shape[0],), lower=-_BIG, upper=_BIG)
    norms = np.linalg.norm(W, axis=0) * np.linalg.norm(v)
    dots = v @ W
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def condition_fractions(u, W1, W2):
    """Fractions ``|A_1|/d`` and ``|A_2|/d^2`` of Assumption 1 (Chen & Luo 2025, Sec. 4, Fig. 2a).

    ``A_1 = {i : W2_i (u W1)_i > 0 and u_i (W1 W2)_i > 0}``;
    ``A_2 = {(i, j) : <W2_i W1[:, i], W2_j W1[:, j]> > 0 and <u_i W1[i, :], u_j W1[j, :]> > 0}``.
    Once both are 1 they stay 1 (Prop. 4) and ``W_V`` condenses (Thm 2).

    >>> u, W1, W2 = np.array([1.0, 0.0]), np.eye(2), np.ones(2)
    >>> condition_fractions(u, W1, W2)  # A_1 = {0}, A_2 = {(0, 0)}
    (0.5, 0.25)
    """
    u, W1, W2 = _check_u(u, W1, W2)
    d = W1.shape[0]
    a1 = (W2 * (u @ W1) > 0) & (u * (W1 @ W2) > 0)
    cols = W1 * W2[None, :]  # column i is W2_i W1[:, i]
    rows = W1 * u[:, None]  # row i is u_i W1[i, :]
    a2 = (cols.T @ cols > 0) & (rows @ rows.T > 0)
    return float(a1.sum()) / d, float(a2.sum()) / d**2


# --------------------------------------------------------------------------------------------
# stage 2: key-query dynamics
# --------------------------------------------------------------------------------------------


def key_query_matrix(X, y, W_V, W1, W2) -> np.ndarray:
    """The stage-2 matrix ``F`` of Chen & Luo 2025, Prop. 3 (App. Eq. 50)::

        F = 1/(n s sqrt(d)) sum_i y_i L1_i X_is^T (W_V W1 W2)^T M_i,
        M_i = sum_j X_ij^T X_ij - s Xbar_i^T Xbar_i,   L1_i = exp(-y_i Xbar_i W_V W1 W2),

    with ``Xbar_i`` the token mean, so that ``dW_Q/dt = F W_K``, ``dW_K/dt = F^T W_Q`` (original
    time, no activation). The first-order softmax expansion behind it is re-derived here; the test
    checks ``F`` against autodiff of the linearised loss. ``rank(F) <= n``.

    >>> X, y = np.ones((1, 2, 2)), np.ones(1)  # identical tokens: M_1 = 0
    >>> key_query_matrix(X, y, np.eye(2), np.eye(2), np.ones(2))
    array([[0., 0.],
           [0., 0.]])
    """
    X, y = _check_data(X, y)
    n, s, d = X.shape
    W_V, W1, W2 = _check_outer(W_V, W1, W2)
    if W_V.shape[0] != d:
        raise ValueError(f"`W_V` must be ({d}, {d}) to match `X`; got {W_V.shape}.")
    w = W_V @ W1 @ W2
    xbar = X.mean(axis=1)
    L1 = np.exp(-y * (xbar @ w))
    M = np.einsum("ijk,ijl->ikl", X, X) - s * np.einsum("ik,il->ikl", xbar, xbar)
    wM = np.einsum("k,ikl->il", w, M)
    return np.einsum("i,ik,il->kl", y * L1, X[:, -1, :], wM) / (n * s * np.sqrt(d))


def check_key_query(F, W_Q0, W_K0):
    """``(F, W_Q0, W_K0)`` of the key-query flow ``dW_Q/dt = F W_K``, ``dW_K/dt = F^T W_Q``,
    validated: finite matrices, ``W_Q0`` with as many rows as ``F``, ``W_K0`` of shape
    ``(F.shape[1], W_Q0.shape[1])``. Returns them as float arrays; raises ``ValueError`` naming
    the argument whose shape or entries do not fit.

    >>> [a.shape for a in check_key_query(np.ones((3, 2)), np.ones((3, 1)), np.ones((2, 1)))]
    [(3, 2), (3, 1), (2, 1)]
    """
    F = as_array(F, "F", ndim=2, lower=-_BIG, upper=_BIG)
    W_Q0 = as_array(W_Q0, "W_Q0", ndim=2, lower=-_BIG, upper=_BIG)
    if W_Q0.shape[0] != F.shape[0]:
        raise ValueError(
            f"`W_Q0` must have {F.shape[0]} rows to match `F` {F.shape}; got {W_Q0.shape}."
        )
    W_K0 = as_array(W_K0, "W_K0", shape=(F.shape[1], W_Q0.shape[1]), lower=-_BIG, upper=_BIG)
    return F, W_Q0, W_K0


def key_query_closed_form(F, W_Q0, W_K0, t):
    """Exact solution of ``dW_Q/dt = F W_K``, ``dW_K/dt = F^T W_Q`` (Chen & Luo 2025, Prop. 3 /
    proof of Thm 3; the closed form is derived here and tested against a numerical solve).

    With the full SVD ``F = U diag(sig) V^T`` (zeros padded)::

        W_Q(t) = U [cosh(sig t) U^T W_Q0 + sinh(sig t) V^T W_K0]
        W_K(t) = V [sinh(sig t) U^T W_Q0 + cosh(sig t) V^T W_K0]

    ``t`` a scalar gives two matrices; an array of times gives stacks ``(len(t), ...)``.

    >>> F = np.diag([2.0, 1.0])
    >>> W_Q, W_K = key_query_closed_form(F, np.eye(2), np.zeros((2, 2)), 1.0)
    >>> np.allclose(np.diag(W_Q), np.cosh([2, 1])), np.allclose(np.diag(W_K), np.sinh([2, 1]))
    (True, True)
    """
    F, W_Q0, W_K0 = check_key_query(F, W_Q0, W_K0)
    t = as_array(t, "t", lower=-_BIG, upper=_BIG)
    U, sig, Vt = np.linalg.svd(F)
    if sig.size and sig[0] * np.max(np.abs(t), initial=0.0) > 700.0:
        raise ValueError(
            f"`t` must satisfy sigma_max(F) |t| <= 700 (cosh overflows float64); got "
            f"sigma_max = {sig[0]:.3g}, max |t| = {np.max(np.abs(t)):.3g}."
        )
    p, q = F.shape
    r = max(p, q)
    sig_full = np.zeros(r)
    sig_full[: sig.size] = sig
    # embed both sides in dimension r so that the rectangular case works too
    Ur = np.zeros((r, r))
    Ur[:p, :p] = U
    Vr = np.zeros((r, r))
    Vr[:q, :q] = Vt.T
    if p < r:
        Ur[p:, p:] = np.eye(r - p)
    if q < r:
        Vr[q:, q:] = np.eye(r - q)
    a = Ur[:p].T @ W_Q0  # (r, k)
    b = Vr[:q].T @ W_K0
    tt = np.atleast_1d(t)[:, None, None]
    ch, sh = np.cosh(sig_full[None, :, None] * tt), np.sinh(sig_full[None, :, None] * tt)
    WQ = np.einsum("pr,trk->tpk", Ur[:p], ch * a + sh * b)
    WK = np.einsum("qr,trk->tqk", Vr[:q], sh * a + ch * b)
    if t.ndim == 0:
        return WQ[0], WK[0]
    return WQ, WK


def top_multiplicity(F, *, rtol=1e-9) -> int:
    """Multiplicity of the top singular value of ``F`` (singular values within ``rtol`` of it).

    The ``k`` of Chen & Luo 2025, Thm 3 (the rank of the key-query limit).

    >>> top_multiplicity(np.diag([1.0, 1.0, 0.5]))
    2
    """
    rtol = check_scalar(rtol, "rtol", lower=0.0, upper=1.0, closed="left")
    F = _check_matrices(as_array(F, "F", ndim=2), "F")
    sig = np.linalg.svd(F, compute_uv=False)
    if sig[0] == 0:
        raise ValueError("`F` is zero: the key-query flow does not move.")
    return int(np.sum(sig >= sig[0] * (1.0 - rtol)))


def key_query_limit(F, W_Q0, W_K0, *, rtol=1e-9):
    """Limit of ``W_Q/||W_Q||_F`` and ``W_K/||W_K||_F`` as ``t -> inf`` (Chen & Luo 2025, Thm 3).

    With ``U_k, V_k`` the top singular space of ``F`` (multiplicity ``k``, see
    :func:`top_multiplicity`) and ``C = U_k^T W_Q0 + V_k^T W_K0``, the limits are
    ``U_k C / ||C||_F`` and ``V_k C / ||C||_F``, of rank ``<= k`` (derived here from the
    closed form).

    >>> W_Q, W_K = key_query_limit(np.diag([2.0, 1.0]), np.eye(2), np.zeros((2, 2)))
    >>> W_Q  # the top singular direction of F
    array([[1., 0.],
           [0., 0.]])
    """
    F, W_Q0, W_K0 = check_key_query(F, W_Q0, W_K0)
    k = top_multiplicity(F, rtol=rtol)
    U, _, Vt = np.linalg.svd(F)
    Uk, Vk = U[:, :k], Vt[:k].T
    C = Uk.T @ W_Q0 + Vk.T @ W_K0
    nc = np.linalg.norm(C)
    if nc == 0:
        raise ValueError("`W_Q0`, `W_K0` have no component along the top singular space of `F`.")
    return Uk @ C / nc, Vk @ C / nc


def _check_matrices(W, name="W"):
    """``W`` as a non-empty matrix or stack of matrices."""
    W = as_array(W, name)
    if W.ndim < 2 or 0 in W.shape:
        raise ValueError(
            f"`{name}` must be a non-empty matrix or stack of matrices; got shape {W.shape}."
        )
    return W


def normalised_singular_values(W) -> np.ndarray:
    """Singular values of ``W`` (or of each matrix of a stack) divided by the largest.

    A definition, no paper formula: ``σ_i/σ_1`` tracks the rank collapse of Chen & Luo 2025, Thm 3.

    >>> normalised_singular_values(np.diag([2.0, 1.0])).tolist()
    [1.0, 0.5]
    """
    W = _check_matrices(W)
    sig = np.linalg.svd(W, compute_uv=False)
    top = sig[..., :1]
    return np.divide(sig, top, out=np.zeros_like(sig), where=top > 0)


def stable_rank(W):
    """Stable rank ``||W||_F^2 / ||W||_2^2`` (1 for rank one; a stack gives an array).

    The standard definition (Rudelson & Vershynin 2007); no paper formula.

    >>> stable_rank(np.eye(3))
    3.0
    """
    W = _check_matrices(W)
    sig = np.linalg.svd(W, compute_uv=False)
    top = np.maximum(sig[..., :1], np.finfo(float).tiny)  # scale first: sig**2 may overflow
    out = np.sum((sig / top) ** 2, axis=-1)
    return float(out) if out.ndim == 0 else out


def effective_rank(W):
    """Entropy effective rank ``exp(-sum p_i log p_i)``, ``p = sig/sum(sig)`` (Roy & Vetterli 2007).

    The paper's figures plot an "effective rank" without a formula; this is the standard one.

    >>> round(float(effective_rank(np.eye(3))), 12)
    3.0
    """
    W = _check_matrices(W)
    sig = np.linalg.svd(W, compute_uv=False)
    p = sig / np.maximum(sig.sum(axis=-1, keepdims=True), np.finfo(float).tiny)
    ent = -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)
    out = np.exp(ent)
    return float(out) if out.ndim == 0 else out
