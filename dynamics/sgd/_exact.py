r"""Exact expected quadratic forms of SGD on a quadratic finite sum, for every T at once.

With :math:`e_t = w_t - w_\star`, :math:`A_i = I - \eta B_i^\top B_i`,
:math:`g_i = \nabla f_i(w_\star)` and fresh noise variance :math:`s^2`, one SGD step is
:math:`e_{t+1} = A_i e_t - \eta g_i + \eta B_i^\top\varepsilon`, so the mean :math:`m_t` and second
moment :math:`M_t = E[e_t e_t^\top]` obey (derived here; checked
against Monte Carlo in ``tests/dynamics/test_sgd.py::test_exact_matches_monte_carlo``)

.. math::
    m_{t+1} = G m_t,\quad G = I - \eta H, \qquad
    M_{t+1} = \mathcal L M_t + \mathcal C m_t + u,

with :math:`\mathcal L M = \sum_i p_i A_i M A_i`,
:math:`\mathcal C m = -\eta\sum_i p_i(A_i m g_i^\top + g_i m^\top A_i)` and :math:`u =
\eta^2(\sum_i p_i g_i g_i^\top + s^2 H)` (:math:`\sum_i p_i g_i = 0`
at a minimiser). :math:`\mathcal L` is self-adjoint on symmetric matrices; one eigendecomposition of
it (in an orthonormal basis of the :math:`d(d+1)/2` symmetric matrices) and one of :math:`H` give
:math:`E[e_T^\top W e_T] = \langle W, M_T\rangle` for every ``T`` in closed form:

.. math::
    \langle W, M_T\rangle = \sum_a \tilde w_a\Big[\lambda_a^T \tilde M_{0,a}
      + \tilde u_a \textstyle\sum_{j<T}\lambda_a^j
      + \sum_b K_{ab}\,\tilde m_b \sum_{j<T}\lambda_a^{T-1-j}\mu_b^j\Big].
"""

from __future__ import annotations

import numpy as np

__all__ = ["QuadraticSpectral", "quadratic_spectral"]


def _sym_basis_index(d):
    iu, ju = np.triu_indices(d)
    a = iu * d + ju
    b = ju * d + iu
    w = np.where(iu == ju, 0.5, 1.0 / np.sqrt(2.0))
    return iu, ju, a, b, w


def _hv(Mats, d, idx):
    """Coordinates of symmetric matrices ``(..., d, d)`` in the orthonormal basis."""
    _, _, a, b, w = idx
    flat = Mats.reshape(Mats.shape[:-2] + (d * d,))
    return w * (flat[..., a] + flat[..., b])


def _geom_sum(lam, T):
    """sum_{j<T} lam^j, elementwise; T (G,), lam (D,) -> (G, D)."""
    T = T[:, None]
    lam = lam[None, :]
    near1 = np.abs(1.0 - lam) < 1e-12
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (1.0 - lam**T) / (1.0 - lam)
    return np.where(near1, T + 0.0 * lam, out)


def _div_diff(lam, mu, T):
    """sum_{j<T} lam^{T-1-j} mu^j for lam (D,), mu (d,), T (G,) -> (G, D, d)."""
    L = lam[None, :, None]
    M = mu[None, None, :]
    Tt = T[:, None, None]
    diff = L - M
    close = np.abs(diff) <= 1e-7 * np.maximum(np.maximum(np.abs(L), np.abs(M)), 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (L**Tt - M**Tt) / diff
    mid = 0.5 * (L + M)
    approx = Tt * np.where(Tt >= 1, mid ** np.maximum(Tt - 1, 0), 0.0)
    return np.where(close, approx, out)


class QuadraticSpectral:
    """The eigendecomposed second-moment recursion of one (instance, eta); see module docstring."""

    def __init__(self, inst, eta):
        d = inst.dim
        p = inst.probs
        Q = np.einsum("nki,nkj->nij", inst.B, inst.B)
        A = np.eye(d)[None] - eta * Q
        idx = _sym_basis_index(d)
        _, _, a, b, w = idx
        # full operator L[(i,k),(j,l)] = sum_n p_n A_n[i,j] A_n[k,l]
        Af = A.reshape(len(p), d * d)
        P = (Af.T * p) @ Af  # [(i,j),(k,l)]
        Lfull = P.reshape(d, d, d, d).transpose(0, 2, 1, 3).reshape(d * d, d * d)
        LS = w * (Lfull[:, a] + Lfull[:, b])  # L @ S
        Lsym = w[:, None] * (LS[a] + LS[b])  # S^T L S
        Lsym = 0.5 * (Lsym + Lsym.T)
        self.lam, self.U = np.linalg.eigh(Lsym)
        self.mu, self.V = np.linalg.eigh(np.eye(d) - eta * inst.H)
        m0 = inst.w0 - inst.w_star
        g = inst.grad_star
        u = eta**2 * (np.einsum("n,ni,nj->ij", p, g, g) + inst.noise_var * inst.H)
        self.M0t = self.U.T @ _hv(np.outer(m0, m0), d, idx)
        self.ut = self.U.T @ _hv(u, d, idx)
        self.mt = self.V.T @ m0
        self.has_cross = bool(np.any(g != 0.0))
        self.realizable = bool(inst.realizable and inst.noise_var == 0.0)
        if self.has_cross:
            # C v_b = -eta * (X_b + X_b^T), X_b = sum_n p_n A_n v_b g_n^T
            Av = np.einsum("nij,jb->nbi", A, self.V)  # A_n v_b
            Xb = np.einsum("n,nbi,nj->bij", p, Av, g)
            Cv = -eta * (Xb + Xb.transpose(0, 2, 1))
            self.K = self.U.T @ _hv(Cv, d, idx).T  # (D, d)
        self.d = d
        self.idx = idx

    def quadratic_form(self, W, T):
        """E[e_T^T W e_T] for each T in the 1-D integer array ``T``."""
        T = np.asarray(T, dtype=float)
        wt = self.U.T @ _hv(0.5 * (W + W.T), self.d, self.idx)
        lamT = self.lam[None, :] ** T[:, None]
        out = lamT @ (wt * self.M0t) + _geom_sum(self.lam, T) @ (wt * self.ut)
        if self.has_cross:
            DD = _div_diff(self.lam, self.mu, T)  # (G, D, d)
            out = out + np.einsum("a,ab,b,gab->g", wt, self.K, self.mt, DD)
        return out

    def worst_start(self, W, T):
        r""":math:`\max_{\|e_0\|=1} E[e_T^\top W e_T]` for each ``T`` (realizable, noiseless).

        Derived here: with no noise and :math:`g_i = 0` the map :math:`M_0 \mapsto M_T =
        \mathcal L^T M_0` is linear and :math:`\mathcal L` is self-adjoint, so
        :math:`E[e_T^\top W e_T] = e_0^\top (\mathcal L^T W) e_0` and the maximum over unit
        :math:`e_0` is the top eigenvalue of :math:`\mathcal L^T W`. Checked by
        ``tests/dynamics/test_sgd.py::test_worst_start_is_attained``.
        """
        if not self.realizable:
            raise ValueError(
                "the worst start is defined here for realizable, noiseless "
                "instances only (no gradient noise at the optimum)."
            )
        iu, ju, _, _, w = self.idx
        wt = self.U.T @ _hv(0.5 * (W + W.T), self.d, self.idx)
        coords = (self.lam[None, :] ** np.asarray(T, dtype=float)[:, None] * wt) @ self.U.T
        M = np.zeros((len(coords), self.d, self.d))
        M[:, iu, ju] = coords / (2.0 * w)
        M[:, ju, iu] = coords / (2.0 * w)
        return np.linalg.eigvalsh(M)[:, -1]


def quadratic_spectral(inst, eta) -> QuadraticSpectral:
    """Cached :class:`QuadraticSpectral` of ``inst`` at stepsize ``eta``."""
    key = ("spectral", float(eta))
    cache = inst._cache
    if key not in cache:
        if len(cache) > 16:
            cache.clear()
        cache[key] = QuadraticSpectral(inst, float(eta))
    return cache[key]
