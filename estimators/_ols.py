r"""Route 0 of the ECC with unknown covariance: exact residual estimators when p < n.

Model: ``A = X alpha + delta``, ``Y = X beta + eps`` with ``(eps_i, delta_i)`` independent across
rows, ``E[(eps, delta) | X] = 0`` and ``Cov(eps, delta | X) = psi``; nothing is assumed about the
covariance or the law of the rows of ``X`` (derived here,
``docs/papers/ecc_unknown_covariance.md#route-0``; the residual form is the classical
partial-covariance estimator).
With ``M = I - H`` the OLS residual maker of ``X`` (an intercept column added when centring),
``k = n - rank X`` and ``d_i = M_ii``:

* residual form ``psi_0 = A^T M Y / k``: ``M X = 0`` gives ``A^T M Y = delta^T M eps``, so
  ``E[psi_0 | X] = psi`` exactly;
* leave-one-out form ``psi_L = (1/n) sum_i A_i (M Y)_i / d_i`` (``(M Y)_i / d_i`` is the OLS
  leave-one-out residual): ``E[psi_L | X] = (1/n) sum_i psi_i`` exactly, also when
  ``Cov(eps_i, delta_i | X_i) = psi_i`` varies with the row (derived here).

Both are quadratic forms ``sum_ij W_ij A_i eps_j``; with ``kappa = E eps^2 delta^2 - s_e s_d
- 2 psi^2`` (zero for Gaussian noise), ``kappa_3 = E delta eps^2`` and ``c = W^T X alpha`` their
conditional variance is (derived here; checked by sympy and Monte Carlo in
``tests/estimators/test_ols.py``)::

    Var(sum W_ij A_i eps_j | X) = s_e |c|^2 + 2 kappa_3 sum_j c_j + kappa sum_i W_ii^2
                                  + s_e s_d |W|_F^2 + psi^2 tr(W W).

For ``W = M``: ``c = 0`` and ``Var(psi_0 | X) = [k (s_e s_d + psi^2) + kappa sum_i d_i^2] / k^2``
(derived here). For ``psi_L``, ``ecc`` reports :meth:`OLSFit.var_loo_hc`, which stays valid
when ``s_e, s_d, psi`` vary by row (``var_loo`` is the homoskedastic formula above). Everything
is computed from a thin QR factorisation, never an ``n x n`` matrix (``var_loo_hc`` takes
``O(n^2 p)`` time, in row blocks of ``H``).
"""

from __future__ import annotations

import functools
from typing import cast

import numpy as np
from scipy import linalg

__all__ = ["ols_fit", "OLSFit"]


class OLSFit:
    """Residuals, leverages and the two route-0 estimates of one data set, with their variances.

    ``columns`` are the column indices of ``X`` (after the intercept, if any) for messages.
    """

    def __init__(self, y, a, X, *, center: bool, column_names=None, estimator="ols"):
        n, p = X.shape
        Xd = np.column_stack([np.ones(n), X]) if center else X
        r_needed = Xd.shape[1]
        if r_needed >= n:
            extra = " plus the intercept" if center else ""
            raise ValueError(
                f"estimator={estimator!r} needs fewer columns than rows (p{extra} < n); got n={n}, "
                f"p={p}. With p >= n the ECC is not identified without more information: pass "
                f"the known covariance of the rows as `cov=` (ridge estimators), or see the "
                f"guidance of estimator='dr'."
            )
        # scipy is untyped here: its return type is inferred from every branch of qr
        Q, R, piv = cast(
            "tuple[np.ndarray, np.ndarray, np.ndarray]",
            linalg.qr(Xd, mode="economic", pivoting=True, check_finite=False),
        )
        diag = np.abs(np.diag(R))
        tol = diag[0] * max(Xd.shape) * np.finfo(float).eps
        rank = int((diag > tol).sum())
        if rank < r_needed:
            names = (["(intercept)"] if center else []) + (
                list(column_names) if column_names is not None else [str(j) for j in range(p)]
            )
            dropped = [names[j] for j in piv[rank:]]
            raise ValueError(
                f"`X` must have full column rank for estimator={estimator!r}; got rank {rank} of "
                f"{r_needed} columns{' (intercept included)' if center else ''}: column(s) "
                f"{dropped} are linear combinations of the others. Drop them."
            )
        Q = Q[:, :rank]
        self.n, self.p, self.k = n, p, n - rank
        self.Q = Q
        self.h = np.einsum("ij,ij->i", Q, Q)
        self.d = 1.0 - self.h
        if self.d.min() <= 1e-10:
            i = int(np.argmin(self.d))
            raise ValueError(
                f"`X` must give every row a leverage below 1 for estimator={estimator!r}; "
                f"row {i} has leverage {self.h[i]:.12g} (a row that alone "
                f"determines a coefficient). Drop that row or column."
            )
        self.rY = y - Q @ (Q.T @ y)
        self.rA = a - Q @ (Q.T @ a)
        self.a, self.y = a, y
        self.center = center
        k = self.k
        self.s_e = float(self.rY @ self.rY / k)
        self.s_d = float(self.rA @ self.rA / k)

    # ------------------------------------------------------------------------ estimates
    def residual(self) -> float:
        """``psi_0 = A^T M Y / k``."""
        return float(self.rA @ self.rY / self.k)

    def loo(self) -> float:
        """``psi_L = mean(A_i (M Y)_i / d_i)``."""
        return float(np.mean(self.a * self.rY / self.d))

    def theta(self, psi) -> float:
        """Unbiased ``alpha^T (X^T X / n) beta`` given X: ``(HA)^T (HY)/n - psi rank/n``
        (``E[delta^T H eps | X] = psi rank``; derived here)."""
        fa, fy = self.a - self.rA, self.y - self.rY
        return float(fa @ fy / self.n - psi * (self.n - self.k) / self.n)

    # ------------------------------------------------------------------------ variances
    def _kappa(self, psi) -> float:
        """Estimate of ``kappa = E eps^2 delta^2 - s_e s_d - 2 psi^2`` (derived here).

        ``E sum_i (MA)_i^2 (MY)_i^2 = kappa sum_i S4_i + (s_e s_d + 2 psi^2) sum_i d_i^2`` with
        ``S4_i = sum_j M_ij^4 = d_i^4 + sum_{j != i} H_ij^4``; the off-diagonal part is
        ``O(p^2/n^3)`` per row and is dropped. Clipped below at ``-(s_e s_d + psi^2)`` (from
        ``E eps^2 delta^2 >= psi^2``), where the variance is still non-negative.
        """
        # E[s_e s_d + 2 psi_0^2] = s_e s_d + 2 psi^2 + (2 s_e s_d + 4 psi^2)/k + O(kappa/k) with
        # Gaussian-like noise (Cov(s_e, s_d) = 2 psi^2/k, E psi_0^2 = psi^2 + Var psi_0): removed.
        k = self.k
        base = (self.s_e * self.s_d + 2 * psi**2) * (1 - 2 / k)
        num = float(np.sum(self.rA**2 * self.rY**2) - base * np.sum(self.d**2))
        kap = num / float(np.sum(self.d**4))
        return max(kap, -(self.s_e * self.s_d + psi**2))

    def residual_variance(self, s_e, s_d, psi, kappa) -> float:
        """``Var(psi_0 | X) = [k (s_e s_d + psi^2) + kappa sum d_i^2] / k^2`` at given moments."""
        k = self.k
        return float((k * (s_e * s_d + psi**2) + kappa * np.sum(self.d**2)) / k**2)

    def loo_variance(self, s_e, s_d, psi, kappa, kappa3, c2, csum) -> float:
        """``Var(psi_L | X)`` at given moments, ``c2 = |c|^2`` and ``csum = sum_j c_j`` for
        ``c = M D^{-1} X alpha``; homoskedastic noise. With ``W = D^{-1} M`` (derived here):
        ``sum W_ii^2 = n``, ``|W|_F^2 = sum 1/d_i``,
        ``tr(W W) = sum 1/d_i^2 - 2 sum h_i/d_i^2 + |Q^T D^{-1} Q|_F^2``."""
        n, d, h = self.n, self.d, self.h
        trWW = float(np.sum(1.0 / d**2) - 2 * np.sum(h / d**2) + self._g2)
        var_t = (
            s_e * c2
            + 2 * kappa3 * csum
            + kappa * n
            + s_e * s_d * float(np.sum(1.0 / d))
            + psi**2 * trWW
        )
        return float(max(var_t, 0.0) / n**2)

    @functools.cached_property
    def _g2(self) -> float:
        """``|Q^T D^{-1} Q|_F^2``."""
        G = self.Q.T @ (self.Q / self.d[:, None])
        return float(np.sum(G * G))

    def var_residual(self, psi) -> float:
        """Plug-in ``Var(psi_0 | X)``: ``s_e, s_d`` from the residuals, ``kappa`` estimated."""
        return self.residual_variance(self.s_e, self.s_d, psi, self._kappa(psi))

    def var_loo(self, psi) -> float:
        """Plug-in ``Var(psi_L | X)`` (homoskedastic noise assumed for the variance; the estimate
        itself is unbiased without it). ``|c|^2`` from ``c_hat = M D^{-1} H A`` less its noise
        part ``s_d (sum h_i/d_i^2 - |Q^T D^{-1} Q|_F^2)``; ``kappa_3`` from
        ``E sum (MA)_i (MY)_i^2 ~ kappa_3 sum d_i^3`` (off-diagonal ``M_ij^3`` dropped);
        ``sum c_j = 0`` exactly with an intercept (``M 1 = 0``). Derived here.
        """
        Q, d, h = self.Q, self.d, self.h
        u = (self.a - self.rA) / d
        c_hat = u - Q @ (Q.T @ u)
        noise = self.s_d * (float(np.sum(h / d**2)) - self._g2)
        c2 = max(float(c_hat @ c_hat) - noise, 0.0)
        k3 = 0.0 if self.center else float(np.sum(self.rA * self.rY**2) / np.sum(d**3))
        return self.loo_variance(
            self.s_e, self.s_d, psi, self._kappa(psi), k3, c2, float(c_hat.sum())
        )

    # ------------------------------------------------------- heteroskedasticity-robust variance
    def var_loo_hc(self) -> float:
        r"""``Var(psi_L | X)`` when the noise moments vary by row (derived here).

        With ``W = D^{-1} M`` (``W_jj = 1``), ``a~ = W^T A = c + delta + u`` (``c = W^T X alpha``,
        ``u_j = sum_{i != j} W_ij delta_i``) and ``n psi_L = sum_j a~_j eps_j``, independent rows
        with moments ``s_e_j, s_d_j, psi_j`` give::

            Var(n psi_L | X) = sum_j E[a~_j^2 eps_j^2] - sum_j psi_j^2 + psi^T S psi,

        ``S_ij = W_ij W_ji`` (``i != j``, zero diagonal). With the leave-one-out residual
        ``e_j = (W Y)_j = eps_j + v_j`` (``v_j`` free of row ``j``) the first sum is
        ``E sum_j a~_j^2 e_j^2`` less ``E[a~_j^2] E v_j^2 + 2 sum_{i != k} S_ji S_jk psi_i psi_k
        + 4 psi_j (S psi)_j``, exact up to the third moments ``E[u_j v_j^2]`` and single-row
        fourth moments in ``E[u_j^2 v_j^2]``. Per-row moments enter through the unbiased
        leave-one-out estimates of Kline, Saggio & Sølvsten (2020, Econometrica 88(5),
        "Leave-out estimation of variance components"; their ``sigma_i^2 = y_i (y_i - x_i^T
        beta_{-i})``): ``s_e_j ~ Y_j e_j``, ``psi_j ~ (A_j e_j + Y_j (W A)_j)/2``, and
        ``E[a~_j^2] E v_j^2 ~ a~_j^2 sum_l W_jl^2 Y_l e_l``; a sum over distinct rows of products of
        them is unbiased up to their covariances, so squared sums keep only their off-diagonal
        pairs. The terms left out are ``O(1)`` against ``O(n)`` at fixed ``p/n`` but carry powers
        of ``1/d_j``: measured conservative by up to about 10 % in SE at ``p/n = 0.7`` and on t5
        rows (claim ``ecc.ols_loo_se``). ``sum_j psi_j^2`` is not identified from one row each:
        ``n psi_L^2 <= sum_j psi_j^2`` replaces it, so the estimate of ``Var(n psi_L | X)`` is
        conservative by ``sum_j (psi_j - mean psi)^2`` (what the sampling of the rows adds,
        ``n Var psi(X)``, when the target is the population mean of ``psi(X)``). The estimate
        is noisy when ``n - p`` is small (one noise draw per row), which costs the Wald interval
        coverage. ``O(n^2 p)`` time, memory ``O(n p)`` (rows of ``H`` in blocks).
        """
        n, Q, d, h = self.n, self.Q, self.d, self.h
        A, Y = self.a, self.y
        e, eA = self.rY / d, self.rA / d
        at = A / d - Q @ (Q.T @ (A / d))  # W^T A
        s_e = Y * e
        ps = 0.5 * (A * e + Y * eA)
        # W_jl^2 = H_jl^2 / d_j^2 and S_jl = H_jl^2 / (d_j d_l) off the diagonal: rows of H in
        # blocks of about 2^22 entries
        v, w, s4 = np.empty(n), np.empty(n), 0.0
        step = max(1, (1 << 22) // n)
        for lo in range(0, n, step):
            J = slice(lo, min(lo + step, n))
            H2 = (Q[J] @ Q.T) ** 2
            hJ2, dJ = h[J] ** 2, d[J]
            v[J] = (H2 @ s_e - hJ2 * s_e[J]) / dJ**2  # E v_j^2
            w[J] = (H2 @ (ps / d) - hJ2 * ps[J] / dJ) / dJ  # (S psi)_j
            s4 += float(np.sum(((H2**2) @ (ps / d) ** 2 - hJ2**2 * (ps[J] / dJ) ** 2) / dJ**2))
        off = float(w @ w) - s4
        total = float(at**2 @ (e**2 - v)) - 2 * off - 3 * float(ps @ w) - n * self.loo() ** 2
        return total / n**2


def ols_fit(y, a, X, *, center: bool, column_names=None, estimator="ols") -> OLSFit:
    """The route-0 fit of validated arrays (``p < n``, full column rank, leverages < 1);
    ``estimator`` ("ols" or "ols_loo") is named in the errors."""
    return OLSFit(y, a, X, center=center, column_names=column_names, estimator=estimator)
