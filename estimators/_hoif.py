r"""Route (c1) of the ECC with unknown covariance: unlabeled covariate rows, valid also for p > n.

Second-order influence-function U-statistic (``docs/papers/ecc_unknown_covariance.md#route-c1``, in
the form of Robins, Li, Mukherjee, Tchetgen Tchetgen & van der Vaart 2017), with the covariance
estimated from ``N`` independent unlabeled rows ``X_U``::

    psi_U = (1/n) sum_i A_i Y_i - 1/(n(n-1)) sum_{i != j} A_i X_i^T Omega X_j Y_j,
    Omega = ((N - p - 1)/N) Sigma_U^{-1},   Sigma_U = X_U^T X_U / N.

``E[A_i X_i] = Sigma alpha`` and ``E[Y_j X_j] = Sigma beta`` for any row law and rows ``i != j``
are independent, so ``E psi_U = psi + alpha^T Sigma (E Omega - Sigma^{-1}) Sigma beta``; for
Gaussian unlabeled rows ``E Sigma_U^{-1} = N Sigma^{-1}/(N - p - 1)`` (inverse-Wishart mean), so
the estimator is exactly unbiased for every Sigma, alpha, beta (derived here; checked by
Monte Carlo in ``tests/estimators/test_hoif.py``). Needs ``N >= p + 2``; ``N >= 2p`` is
recommended. Elliptical unlabeled rows break the ``(N - p - 1)/N`` scaling (same page).

Standard error (derived here): a delete-one jackknife over the labeled rows (``O(n p)`` after one
whitening, from the sums of the U-statistic) plus a delete-a-group jackknife over ``G`` groups of
unlabeled rows; the labeled part alone measured conservative in simulation (SE/SD 1.2-1.4, same
page).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

__all__ = ["hoif"]


def _whitener(XU, dof):
    """Lower Cholesky factor ``L`` of ``X_U^T X_U / N`` and the scale ``(N - p - 1)/N``."""
    N, p = XU.shape
    S = XU.T @ XU / N
    try:
        L = linalg.cholesky(S, lower=True, check_finite=False)
    except linalg.LinAlgError as err:
        raise ValueError(
            f"`X_unlabeled` must have full column rank (its covariance is singular); "
            f"got {N} rows for p={p} columns."
        ) from err
    return L, (dof - p - 1) / dof


def _estimate(y, a, Z):
    """``psi_U``, its delete-one (labeled) values and the cross term from whitened rows ``Z``
    (``Omega -> I``)."""
    n = y.size
    ay = a * y
    zA, zY = Z.T @ a, Z.T @ y
    g2 = np.einsum("ij,ij->i", Z, Z)
    diag = ay * g2
    cross = zA @ zY - diag.sum()
    psi = ay.mean() - cross / (n * (n - 1))
    # leave row i out: the sums lose their i-th terms
    zA_i = zA[None, :] - a[:, None] * Z
    zY_i = zY[None, :] - y[:, None] * Z
    cross_i = np.einsum("ij,ij->i", zA_i, zY_i) - (diag.sum() - diag)
    psi_i = (ay.sum() - ay) / (n - 1) - cross_i / ((n - 1) * (n - 2))
    return psi, psi_i, cross / (n * (n - 1))


def hoif(y, a, X, XU, *, groups: int = 20):
    """``(estimate, variance, labeled_var, unlabeled_var, theta)`` of route (c1) on validated
    arrays; ``theta`` is the U-statistic's unbiased estimate of ``alpha^T Sigma beta``.

    ``X`` and ``XU`` are the labeled and unlabeled covariates with mean zero (the caller centres);
    ``groups`` is the number of unlabeled groups of the delete-a-group jackknife.
    """
    N, p = XU.shape
    L, c = _whitener(XU, N)
    Z = linalg.solve_triangular(L, X.T, lower=True, check_finite=False).T * np.sqrt(c)
    psi, psi_i, theta = _estimate(y, a, Z)
    n = y.size
    var_lab = (n - 1) / n * float(np.sum((psi_i - psi_i.mean()) ** 2))
    # delete-a-group jackknife over the unlabeled rows (groups of equal size, in row order)
    G = min(N, max(groups, -(-N // (N - p - 2))))  # every group leaves >= p + 2 rows
    vals = []
    for idx in np.array_split(np.arange(N), G):
        keep = np.ones(N, bool)
        keep[idx] = False
        Lg, cg = _whitener(XU[keep], int(keep.sum()))
        Zg = linalg.solve_triangular(Lg, X.T, lower=True, check_finite=False).T * np.sqrt(cg)
        vals.append(_estimate(y, a, Zg)[0])
    vals = np.array(vals)
    var_unl = (G - 1) / G * float(np.sum((vals - vals.mean()) ** 2))
    return float(psi), var_lab + var_unl, var_lab, var_unl, float(theta)
