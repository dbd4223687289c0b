r"""Route (b) of the ECC with unknown covariance: generic alignment, constants from the sample.

``docs/papers/ecc_unknown_covariance.md#route-b`` (derived for this package and checked here). On
all
``n`` rows (centred: ``m = n - 1``, else ``m = n``), with ``Sigma_hat = X^T X/m`` of eigenvalues
``d_k`` (zeros included), ``Q_j = (Sigma_hat + lam_j)^{-1}``, ridge residuals ``r_A, r_Y`` and
coefficients ``alpha_hat, beta_hat``:

* ``T_1 = r_A^T r_Y/m`` has conditional mean ``c_11 psi + lam_a lam_y alpha^T Q_a Sigma_hat Q_y
  beta`` with ``c_11 = tr((I - H_a)(I - H_y))/m`` (exact for any X: ``(I - H_j) X = lam_j X Q_j``);
* ``T_2 = alpha_hat^T beta_hat`` has mean ``c_21 psi + alpha^T Sigma_hat Q_a Q_y Sigma_hat beta``,
  ``c_21 = (1/m) sum_k d_k/((d_k + lam_a)(d_k + lam_y))``.

Under generic alignment — ``(alpha, beta)`` rotation invariant, independent of X, with
``Cov(alpha, beta) = (theta_I/p) I`` — ``E[alpha^T f(Sigma_hat) beta | X] = (theta_I/p) tr f``,
which gives ``c_12 = (1/p) sum lam_a lam_y d_k/((d_k + lam_a)(d_k + lam_y))``,
``c_22 = (1/p) sum d_k^2/((d_k + lam_a)(d_k + lam_y))``, and ``psi`` solves the 2x2 system; no
covariance, no split, any row law. ``theta_I = alpha^T beta`` (not ``alpha^T Sigma beta``).

The estimate is a bilinear form ``A^T W Y`` with ``W = omega_0 P_perp + U diag(omega) U^T`` in the
left singular basis of X; ``tr W = 1`` and ``tr(X^T W X) = 0`` by construction. Its variance
(derived here) for Gaussian noise and a Gaussian random-effects prior (``|alpha|^2 = a2``,
``|beta|^2 = b2``) conditional on X::

    Var = (s_e a2 + s_d b2 + 2 psi theta_I) (1/p) sum_k omega_k^2 m d_k
          + (s_e s_d + psi^2) tr W^2 + (a2 b2 + theta_I^2) / p^2 sum_k (m omega_k d_k)^2,

the last term being the spread of the conditional bias ``alpha^T X^T W X beta`` over the prior
(for fixed generic coefficients: the size of their conditional bias). The same formula with
``omega_j omega_k`` gives the covariance of the estimates at two penalty pairs, from which the
over-identification check (``docs/papers/ecc_unknown_covariance.md#route-b``, after Li & Sur's
alignment test, arXiv 2309.07810) builds a
chi-square statistic from the differences of the estimates at ``lam/4, lam, 4 lam``. Moments are
plugged in from the same system applied to ``(A, A)``, ``(Y, Y)`` and ``(A, Y)``.
"""

from __future__ import annotations

import numpy as np

from _core.validation import NumericalError

__all__ = ["GenericFit"]

#: penalty multipliers of the over-identification check
CHECK_FACTORS = (0.25, 1.0, 4.0)


class GenericFit:
    """One SVD of the (centred) design serves every penalty pair."""

    def __init__(self, y, a, X, m):
        n, p = X.shape
        try:
            U, sv, _ = np.linalg.svd(X, full_matrices=False)
        except np.linalg.LinAlgError as err:  # e.g. entries near the float64 underflow limit
            raise NumericalError(
                f"the SVD of `X` (shape {X.shape}) did not converge ({err}); rescale `X`.",
                shape=X.shape,
            ) from err
        keep = sv > sv[0] * max(n, p) * np.finfo(float).eps
        U, sv = U[:, keep], sv[keep]
        self.n, self.p, self.m, self.r = n, p, m, sv.size
        self.d = sv**2 / m
        if not (np.all(np.isfinite(self.d)) and np.all(self.d > 0)):
            raise NumericalError(
                f"the spectrum of `X` is not representable in float64 (largest squared singular "
                f"value / m = {self.d.max(initial=0.0):.3g}); rescale `X`.",
                shape=X.shape,
            )
        self.z = {"a": U.T @ a, "y": U.T @ y}
        raw = {"a": a, "y": y}
        # products of the parts orthogonal to the column space, per pair of targets
        self.perp = {
            (k1, k2): float(raw[k1] @ raw[k2] - self.z[k1] @ self.z[k2])
            for k1 in "ay"
            for k2 in "ay"
        }
        self.m_perp = m - self.r

    def _system(self, la, ly):
        """``(c11, c12, c21, c22)`` and the per-component factors ``g`` and ``h``."""
        d, m, p = self.d, self.m, self.p
        den = (d + la) * (d + ly)
        g = la * ly / den
        h = d / den
        return (self.m_perp + g.sum()) / m, (d * g).sum() / p, h.sum() / m, (d * h).sum() / p, g, h

    def stats(self, k1, k2, la, ly):
        """``(T_1, T_2)`` for targets ``k1`` (penalty ``la``) and ``k2`` (penalty ``ly``)."""
        _, _, _, _, g, h = self._system(la, ly)
        zz = self.z[k1] * self.z[k2]
        return (self.perp[(k1, k2)] + (g * zz).sum()) / self.m, (h * zz).sum() / self.m

    def solve(self, k1, k2, la, ly):
        """``(psi, theta_I, df_only)`` from the 2x2 system; ``df_only = T_1/c_11``."""
        c11, c12, c21, c22, _, _ = self._system(la, ly)
        t1, t2 = self.stats(k1, k2, la, ly)
        det = c11 * c22 - c12 * c21
        return (c22 * t1 - c12 * t2) / det, (c11 * t2 - c21 * t1) / det, t1 / c11

    def weights(self, la, ly):
        """``(omega_0, omega)`` of ``W``."""
        c11, c12, c21, c22, g, h = self._system(la, ly)
        det = c11 * c22 - c12 * c21
        w1, w2 = c22 / det, -c12 / det
        return w1 / self.m, (w1 * g + w2 * h) / self.m

    def moments(self, la, ly, psi):
        """Plug-in ``(s_e, s_d, a2, b2, theta_I)``, clipped to their feasible ranges."""
        s_d, a2, _ = self.solve("a", "a", la, la)
        s_e, b2, _ = self.solve("y", "y", ly, ly)
        _, th, _ = self.solve("a", "y", la, ly)
        tiny = 1e-12 * (abs(s_d) + abs(s_e) + 1e-300)
        s_d, s_e = max(s_d, tiny), max(s_e, tiny)
        a2, b2 = max(a2, 0.0), max(b2, 0.0)
        bound = np.sqrt(a2 * b2)
        return s_e, s_d, a2, b2, float(np.clip(th, -bound, bound))

    def covariance(self, pairs, psi, mom):
        """Covariance matrix of the estimates at the penalty ``pairs`` (module docstring)."""
        s_e, s_d, a2, b2, th = mom
        psi = float(np.clip(psi, -np.sqrt(s_e * s_d), np.sqrt(s_e * s_d)))
        W = [self.weights(la, ly) for la, ly in pairs]
        k = len(pairs)
        C = np.empty((k, k))
        md = self.m * self.d
        for i in range(k):
            for j in range(k):
                (o0i, oi), (o0j, oj) = W[i], W[j]
                lin = (s_e * a2 + s_d * b2 + 2 * psi * th) * float((oi * oj * md).sum()) / self.p
                quad = (s_e * s_d + psi**2) * (self.m_perp * o0i * o0j + float((oi * oj).sum()))
                re = (a2 * b2 + th**2) * float((oi * md * oj * md).sum()) / self.p**2
                C[i, j] = lin + quad + re
        return C

    def variance(self, la, ly, psi):
        mom = self.moments(la, ly, psi)
        return float(self.covariance([(la, ly)], psi, mom)[0, 0]), mom

    def auto_lambda(self):
        """Both penalties ``tr(Sigma_hat)/p``: scale-equivariant and a function of X alone, so
        the conditional-on-X arguments above still hold. (Minimising the plug-in variance over
        the penalty instead depends on ``(A, Y)``; measured with p = 2n = 300: bias -0.02 to
        -0.03, 2-3 MC SE, and coverage 0.93.)"""
        lam = float(self.d.sum() / self.p)
        return lam, lam

    def alignment_check(self, la, ly, mom):
        """Estimates at ``CHECK_FACTORS`` times the penalties and the chi-square statistic of
        their differences (2 degrees of freedom; p-value ``exp(-stat/2)``)."""
        pairs = [(f * la, f * ly) for f in CHECK_FACTORS]
        est = np.array([self.solve("a", "y", *pq)[0] for pq in pairs])
        C = self.covariance(pairs, float(est[1]), mom)
        D = np.array([[1.0, -1.0, 0.0], [0.0, -1.0, 1.0]])
        diff = D @ est
        stat = float(diff @ np.linalg.pinv(D @ C @ D.T) @ diff)
        return {
            "lams": pairs,
            "estimates": est.tolist(),
            "statistic": stat,
            "df": 2,
            "pvalue": float(np.exp(-stat / 2)),
        }
