r"""Route (c2) of the ECC with unknown covariance: the paper's ridge estimators whitened by the
covariance of unlabeled rows, with constants for the resulting population spectrum.

``docs/papers/ecc_unknown_covariance.md#route-c2``, worked out here. Whitening by
``Sigma_U^{-1/2}`` (``Sigma_U`` from ``N`` unlabeled rows) and choosing the square root
``L = Sigma^{1/2} G^{1/2}`` (ridge predictions do not depend on it), with ``G`` the white Wishart
of the unlabeled sample, the whitened rows have population covariance ``G^{-1}`` and coefficients
``G^{1/2} Sigma^{1/2} beta``. ``G`` has Haar eigenvectors, so for any ``g``
``alpha_w^T g(G^{-1}) beta_w ~ theta (1/p) sum_k t_k g(1/t_k)`` with ``t_k`` the spectrum of ``G``
(Marchenko–Pastur with ratio ``p/N``) and ``theta = alpha^T Sigma beta`` — a signal average
``<g>``. The ridge bias terms then follow from the first-order deterministic equivalent
``lam Q(lam) ~ mu (Sigma_w + mu)^{-1}``, ``lam = mu (1 - (1/m) tr Sigma_w (Sigma_w + mu)^{-1})``
(Silverstein's equation; Dobriban & Wager 2018, Ann. Statist. 46(1), §2), the resolvent identity
``lam_a lam_y Q_a Q_y = lam_a lam_y (Q_a - Q_y)/(lam_y - lam_a)`` and, for the DR cross term with
``Sigma_w`` between the two resolvents, the second-order equivalents
``lam_a lam_y Q_a Sigma Q_y ~ mu_a mu_y (Sigma+mu_a)^{-1} Sigma (Sigma+mu_y)^{-1} / (1 - D)``,
``(1/m) tr(Sigma_hat Q_a Sigma Q_y) ~ D/(1 - D)``, ``D = (1/m) tr Sigma^2 (Sigma+mu_a)^{-1}
(Sigma+mu_y)^{-1}`` (Hastie, Montanari, Rosset & Tibshirani 2022, Ann. Statist. 50(2), Thm 5, at
``lam_a = lam_y``; the two-penalty form is derived here and checked against the exact
Marchenko–Pastur constants in ``tests/estimators/test_whitened.py``). With ``s = 1/t``,
``e_j = mu_j/(s + mu_j)``, ``r_j = 1 - e_j``, every estimator's mean is linear,
``naive ~ c_psi psi + c_theta theta`` and ``theta_hat ~ d_psi psi + d_theta theta``:

* three splits: ``theta_hat``: ``(0, <r_a r_y>)``; INT ``(1, 1 - <r_a r_y>)``; NR
  ``(1, <s e_y>)``; DR ``(1, <s e_a e_y>)``;
* two splits: ``theta_hat``: ``(zeta, <1 - e_a - e_y + K>)`` with the sample
  ``zeta = (1/m) tr(Sigma_hat Q_a Q_y)`` and ``K = (lam_y e_a - lam_a e_y)/(lam_y - lam_a)``
  (``e - lam de/dlam`` at equal penalties); INT ``(1 - zeta, 1 - d_theta)``; NR
  ``(1, <s e_y>)``; DR ``(1/(1 - D), <s e_a e_y>/(1 - D))``;

and the estimate solves the 2x2 system. With ``N -> inf`` (``t = 1``) these are the package's
Marchenko–Pastur constants; with identity constants instead the error is of order ``p/N``
(same page). The plug-in SE is the package's identity-covariance formula on the whitened data plus
a delete-a-group jackknife over the unlabeled rows (their fluctuation adds ``O(1/N)``).
"""

from __future__ import annotations

import numpy as np

from theory import marchenko_pastur as _mp

__all__ = ["population_spectrum", "solve_mu", "linear_moments", "solve_moments"]


def population_spectrum(p: int, dof: int) -> np.ndarray:
    """The ``p`` midpoint quantiles of the Marchenko–Pastur law with ratio ``p/dof < 1``: the
    spectrum ``t_k`` of the white Wishart ``G`` of ``dof`` unlabeled rows."""
    g = p / dof
    a, b = _mp.edges(g)
    # cosine grid: dense at the square-root edges, where the density vanishes
    x = a + (b - a) * 0.5 * (1 - np.cos(np.linspace(0.0, np.pi, 4001)))
    f = np.asarray(_mp.density(x, g))
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(x))])
    cdf /= cdf[-1]
    return np.interp((np.arange(p) + 0.5) / p, cdf, x)


def solve_mu(lam, s, m):
    """``mu`` solving ``lam = mu (1 - (1/m) sum_k s_k/(s_k + mu))`` (the root above ``lam``),
    vectorised over ``lam``; and ``dmu/dlam``. The map is convex and increasing there, so Newton
    from ``lam + sum(s)/m`` (where it is >= 0) decreases monotonically to the root."""
    lam = np.atleast_1d(np.asarray(lam, float))
    S = s[None, :]
    mu = lam + s.sum() / m
    for _ in range(100):
        r = S / (S + mu[:, None])
        f = mu * (1 - r.sum(1) / m) - lam
        step = f / (1 - (r**2).sum(1) / m)
        mu = np.maximum(mu - step, lam)
        if np.all(np.abs(step) <= 1e-15 * mu):
            break
    dmu = 1.0 / (1 - ((S / (S + mu[:, None])) ** 2).sum(1) / m)
    return mu, dmu


def linear_moments(estimator, split, lam_a, lam_y, t, m_a, m_y, zeta):
    """``(c_psi, c_theta, d_psi, d_theta)`` of the module docstring for population spectrum
    ``1/t`` (signal weights ``t``); ``m_a, m_y`` the training-fold sizes (equal for two splits);
    ``zeta`` the sample ``(1/m) tr(Sigma_hat Q_a Q_y)`` (two splits only)."""
    s = 1.0 / t
    p = t.size
    la, ly = np.atleast_1d(lam_a).astype(float), np.atleast_1d(lam_y).astype(float)
    mu_a, dmu_a = solve_mu(la, s, m_a)
    mu_y, dmu_y = solve_mu(ly, s, m_y)
    S = s[None, :]
    e_a, e_y = mu_a[:, None] / (S + mu_a[:, None]), mu_y[:, None] / (S + mu_y[:, None])

    def avg(g):
        return (g * t[None, :]).sum(1) / p

    one = np.ones_like(la)
    if split == 3:
        d = (np.zeros_like(la), avg((1 - e_a) * (1 - e_y)))
        c = {
            "int": (one, 1 - d[1]),
            "nr": (one, avg(S * e_y)),
            "dr": (one, avg(S * e_a * e_y)),
        }[estimator]
        return (*c, *d)
    close = np.abs(ly - la) <= 1e-6 * np.maximum(la, ly)
    with np.errstate(divide="ignore", invalid="ignore"):
        K_far = (ly[:, None] * e_a - la[:, None] * e_y) / (ly - la)[:, None]
    # equal penalties: e - lam de/dlam, de/dlam = s/(s + mu)^2 dmu/dlam
    K_eq = e_a - la[:, None] * S / (S + mu_a[:, None]) ** 2 * dmu_a[:, None]
    K = np.where(close[:, None], K_eq, K_far)
    zeta = np.broadcast_to(np.asarray(zeta, float), la.shape)
    d = (zeta, avg(1 - e_a - e_y + K))
    if estimator == "int":
        return (1 - d[0], 1 - d[1], *d)
    if estimator == "nr":
        return (one, avg(S * e_y), *d)
    D = (S**2 / ((S + mu_a[:, None]) * (S + mu_y[:, None]))).sum(1) / m_a
    return (1 / (1 - D), avg(S * e_a * e_y) / (1 - D), *d)


def solve_moments(naive, theta_hat, coef):
    """``(psi, theta)`` solving ``naive = c_psi psi + c_theta theta``,
    ``theta_hat = d_psi psi + d_theta theta``."""
    cp, ct, dp, dt = coef
    det = cp * dt - ct * dp
    return (dt * naive - ct * theta_hat) / det, (cp * theta_hat - dp * naive) / det


def unlabeled_covariance(XU, p, center, extra=3):
    """``(Sigma_U, dof)`` of validated unlabeled rows: ``N >= p + extra`` rows (``p + 4`` at the
    public call, so that every jackknife group leaves ``p + 3``), full column rank."""
    N = XU.shape[0]
    if XU.shape[1] != p:
        raise ValueError(f"`X_unlabeled` must have the {p} columns of X; got {XU.shape[1]}.")
    if N < p + extra:
        raise ValueError(
            f"`X_unlabeled` must have at least p + {extra} = {p + extra} rows (N >= 2p "
            f"recommended); got {N}."
        )
    dof = N - 1 if center else N
    Xc = XU - XU.mean(0) if center else XU
    S = Xc.T @ Xc / dof
    w = np.linalg.eigvalsh(S)
    if w[0] <= 1e-12 * max(w[-1], 1e-300):
        raise ValueError(
            f"`X_unlabeled` must have full column rank (its covariance is singular: smallest "
            f"eigenvalue {w[0]:.3g}); got {N} rows for p={p} columns."
        )
    return S, dof


def fit(prep, estimator, lam_a, lam_y, t):
    """``(naive, psi, theta, var_phi, c)`` of a prepared whitened split (as ``_Prepared.fit``)
    with the constants of population spectrum ``1/t``."""
    naive, phi, theta_hat = prep.scores(estimator, lam_a, lam_y)
    c = prep.constants(lam_a, lam_y, "empirical")  # zeta; Gamma for the INT variance
    coef = linear_moments(
        estimator, prep.split, lam_a, lam_y, t, prep.paths["a"].m, prep.paths["y"].m, c["zeta"]
    )
    psi, theta = solve_moments(naive, theta_hat, coef)
    return naive, psi, theta, phi.var(0, ddof=1), c
