"""Token rank collapse of pure-attention stacks, with and without the Hopfield hidden state.

"Rank collapse" here is the **token** collapse of Dong, Cordonnier & Loukas 2021 (*Attention is not
all you need: pure attention loses rank doubly exponentially with depth*, ICML): all rows of the
token matrix X (T x d) become equal. Its residual is Res(X) = X - 1 xᵀ with x the best constant row.

- :func:`relative_residual`: ``||X - 1 x̄ᵀ||_F / ||X||_F`` with x̄ the column mean (the
  Frobenius-best constant row).
- :func:`composite_residual`: Dong et al.'s ``||Res(X)||_{1,inf} = sqrt(||Res||_1 ||Res||_inf)``.
- :func:`dong_bound_log10`: their Thm 2.2 / Cor 2.3, ``||Res(SAN(X))|| <= c^{(3^L-1)/2}
  ||Res(X)||^{3^L}`` (doubly exponential in the depth L).
- :func:`hopfield_bound_log10`: the MHA bound of Masumura & Taki 2025 as summarised (constants
  not checkable here), whose ``m = 0`` term is geometric in L.
- :func:`collapse_recursion_log10`: the first-order collapse laws derived here (below), checked
  against simulation by ``tests/theory/test_rank_collapse.py`` and the claim ``mha.rank_collapse``.

Derivation (derived here). Write X_n = 1 xᵀ + e_n R with e_n small. The logits S = X W Xᵀ = const +
e (r_i-terms) + e (r_j-terms) + e² r_iᵀ W r_j: the terms that depend on the row i alone cancel in
the softmax, the terms that depend on the column j alone are shared by every row, so the rows of P =
softmax(S) differ by O(e²). Since (P - 1 p̄ᵀ) 1 = 0, Res(P X W_V) = e (P - 1 p̄ᵀ) R W_V = O(e³):
**vanilla** obeys e_{n+1} = c_n e_n³, i.e. with l_n = log10 e_n, l_{n+1} - l_n = 3 (l_n - l_{n-1}) +
(log c_n - log c_{n-1}); with layers drawn i.i.d. the mean decrements grow by the factor 3 (Dong's
3^L). With the **hidden state** (initial condition h_1 = S_1) h_n = alpha'^{n-1} S_1 + (1 - alpha')
sum_{k>=2} alpha'^{n-k} S_k keeps the O(1) row variation of the first layer's logits, damped by
alpha'^{n-1}, so P_n's rows differ by O(alpha'^{n-1}) and e_{n+1} = c_n alpha'^{n-1} e_n: the
decrement grows **linearly**, by -log10 alpha' per layer on average (second difference of l_n equal
to log10 alpha'), i.e. e_n ~ alpha'^{n^2/2} instead of c^{3^n}. The law holds once alpha'^{n-1} >>
e_n^2, which the recursion itself makes true.
"""

from __future__ import annotations

import math

import numpy as np

from _core.validation import as_array, check_finite_result, check_int, check_scalar

__all__ = [
    "relative_residual",
    "composite_residual",
    "dong_bound_log10",
    "hopfield_bound_log10",
    "collapse_recursion_log10",
]

_MAX_DEPTH = 500  # 3^L stays a finite float64 up to L = 646


def _tokens(X, name="X"):
    X = as_array(X, name)
    if X.ndim < 2 or X.shape[-2] < 1:
        raise ValueError(f"`{name}` must have shape (..., T, d) with T >= 1; got shape {X.shape}.")
    return X


def relative_residual(X):
    """``||X - 1 x̄ᵀ||_F / ||X||_F`` over the last two axes (tokens, features), x̄ the token mean.

    Dong et al. 2021, Sec. 2 (residual to the best rank-one, constant-row matrix; the column mean
    is the Frobenius minimiser). Returns an array of the leading shape (a float for one matrix).

    >>> float(relative_residual(np.ones((3, 2))))  # equal rows: fully collapsed
    0.0
    """
    X = _tokens(X)
    scale = np.max(np.abs(X), axis=(-2, -1), keepdims=True)
    if np.any(scale == 0):
        raise ValueError("`X` must not be the zero matrix (relative residual undefined).")
    X = X / scale  # the ratio is scale-free; scaling first keeps the squares finite
    res = X - X.mean(axis=-2, keepdims=True)
    out = np.sqrt(np.sum(res**2, axis=(-2, -1))) / np.sqrt(np.sum(X**2, axis=(-2, -1)))
    return float(out) if out.ndim == 0 else out


def composite_residual(X):
    """Dong et al. 2021's composite norm of the residual, ``sqrt(||Res||_1 ||Res||_inf)``.

    ``||.||_1`` is the largest absolute column sum, ``||.||_inf`` the largest absolute row sum, and
    Res = X - 1 x̄ᵀ with x̄ the token mean (as their released code).

    >>> float(composite_residual(np.eye(2)))  # Res = I - 1/2: both norms 1
    1.0
    """
    X = _tokens(X)
    res = np.abs(X - X.mean(axis=-2, keepdims=True))
    out = np.sqrt(res.sum(axis=-2).max(axis=-1)) * np.sqrt(res.sum(axis=-1).max(axis=-1))
    check_finite_result(out, "the composite residual norm")
    return float(out) if out.ndim == 0 else out


def dong_bound_log10(res0, depth, c):
    """log10 of Dong et al. 2021 Cor. 2.3: ``c^{(3^L - 1)/2} res0^{3^L}`` (pure attention,
    ``c = 4 gamma beta H / sqrt(d_qk)`` in their notation). Computed in log space (no overflow).

    >>> float(dong_bound_log10(0.1, 1, 1.0))  # log10(1 * 0.1^3)
    -3.0
    """
    res0 = check_scalar(res0, "res0", lower=0.0, closed="neither")
    L = check_int(depth, "depth", lower=0, upper=_MAX_DEPTH)
    c = check_scalar(c, "c", lower=0.0, closed="neither")
    out = (3.0**L - 1) / 2 * math.log10(c) + 3.0**L * math.log10(res0)
    return check_finite_result(out, "the log10 bound", depth=L)


def hopfield_bound_log10(res0, depth, alpha_prime, c1, c2):
    """log10 of the MHA rank-collapse bound as summarised from Masumura & Taki 2025 (Thm. on rank
    collapse; third-party digest, constants unverified):

        max_{m=0..L} (c1 (1 - alpha'))^{(3^m - 1)/2} (c2 alpha')^{3^m (L - m)} res0^{3^m}.

    The ``m = 0`` term ``(c2 alpha')^L res0`` is geometric in L (first power of res0), against the
    doubly exponential :func:`dong_bound_log10`.

    >>> # max over m of log10 0.5 * 0.1 (m = 0) and log10 0.5^1 * 0.1^3 (m = 1)
    >>> round(float(hopfield_bound_log10(0.1, 1, 0.5, 1.0, 1.0)), 4)
    -1.301
    """
    res0 = check_scalar(res0, "res0", lower=0.0, closed="neither")
    L = check_int(depth, "depth", lower=0, upper=_MAX_DEPTH)
    a = check_scalar(alpha_prime, "alpha_prime", lower=0.0, upper=1.0, closed="neither")
    c1 = check_scalar(c1, "c1", lower=0.0, closed="neither")
    c2 = check_scalar(c2, "c2", lower=0.0, closed="neither")
    # logs of the factors apart: c1 * (1 - a) may underflow to 0 where its log is finite
    l1 = math.log10(c1) + math.log10(1 - a)
    l2 = math.log10(c2) + math.log10(a)
    terms = [
        (3.0**m - 1) / 2 * l1 + 3.0**m * (L - m) * l2 + 3.0**m * math.log10(res0)
        for m in range(L + 1)
    ]
    return check_finite_result(max(terms), "the log10 bound", depth=L)


def collapse_recursion_log10(l1, l2, depth, alpha_prime, start=1):
    """The collapse law derived here (module docstring), extrapolated from log10 residuals ``l1``,
    ``l2`` at depths ``start`` and ``start + 1`` to depths ``start..depth``.

    ``alpha_prime = 0``: l_{n+1} = 3 l_n + log c with log c = l2 - 3 l1 (doubly exponential);
    ``alpha_prime > 0``: l_{n+1} = l_n + log c + (n - start) log10 alpha' with log c = l2 - l1
    (decrements growing by -log10 alpha' per layer). Returns an array of length
    ``depth - start + 1``.

    >>> collapse_recursion_log10(-1.0, -3.0, 3, 0.0)  # log c = 0: l_3 = 3 l_2
    array([-1., -3., -9.])
    """
    l1 = check_scalar(l1, "l1")
    l2 = check_scalar(l2, "l2")
    start = check_int(start, "start", lower=0, upper=_MAX_DEPTH - 1)
    L = check_int(depth, "depth", lower=start + 1, upper=_MAX_DEPTH)
    a = check_scalar(alpha_prime, "alpha_prime", lower=0.0, upper=1.0)
    out = [l1, l2]
    if a == 0.0:
        logc = l2 - 3 * l1
        for _ in range(L - start - 1):
            out.append(3 * out[-1] + logc)
    else:
        logc = l2 - l1
        for k in range(1, L - start):
            out.append(out[-1] + logc + k * math.log10(a))
    return check_finite_result(np.asarray(out), "the extrapolated log10 residuals", l1=l1, l2=l2)
