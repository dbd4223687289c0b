r"""Read-out after training: CCA + LoRA (ordered singular values and functions, Koopman matrix,
eigenvalues, eigenfunctions, forecasts) and EDMD on a learned basis (Jeong et al. 2025, Sec. 3.2).

Everything here is float64 NumPy on full-data feature matrices; only k x k linear algebra.

CCA (Sec. 3.2.1): with ``W_f = M_f^{-1/2}``, ``W_g = M_g^{-1/2}`` and ``W_f T W_g = U S V^T``, the
aligned functions ``phi~(x) = S^{1/2} U^T W_f f(x)`` and ``psi~(y) = S^{1/2} V^T W_g g(y)`` give
``K^ = sum_i phi~_i (x) psi~_i``, the exact SVD of the compression of K onto span f x span g
(gauge- and basis-invariant). Koopman matrix ``K_fwd = E_rho1[psi~ phi~^T]``; an eigenvector
``K_fwd a = lam a`` gives the eigenfunction ``phi~^T a``; forecasts
``E[h(X_t) | X_0 = x] ~ phi~(x)^T K_fwd^{t-1} E_rho1[psi~ h^T]`` (stationary data, rho0 = rho1).

EDMD (Sec. 3.2.2): for a basis b, ``K_b = M_rho0[b]^+ E[b(X) b(X')^T]`` and forecasts
``b(x)^T K_b^t P_b``, ``P_b = M_rho0[b]^+ E_rho0[b h^T]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from _core.validation import as_array, check_int, check_scalar

__all__ = ["KoopmanReadout", "cca_readout", "EDMDReadout", "edmd_readout"]


def _features(x, name, n=None, k=None):
    a = as_array(x, name, ndim=2, lower=-1e50, upper=1e50)  # beyond: products overflow
    if n is not None and a.shape[0] != n:
        raise ValueError(f"`{name}` must have {n} rows (one per pair); got {a.shape[0]}.")
    if k is not None and a.shape[1] != k:
        raise ValueError(f"`{name}` must have {k} columns; got {a.shape[1]}.")
    return a


def _inv_sqrt(M, rtol):
    w, V = np.linalg.eigh((M + M.T) / 2)
    keep = w > rtol * max(w.max(), 0.0)
    return V[:, keep] / np.sqrt(w[keep])


def _sorted_eig(K):
    lam, A = np.linalg.eig(K)
    order = np.lexsort((-np.imag(lam), -np.real(lam), -np.round(np.abs(lam), 12)))
    return lam[order], A[:, order]


def _mat_powers(K, ts):
    """``K^t`` for each t in ``ts`` by repeated squaring (no eigendecomposition needed)."""
    return [np.linalg.matrix_power(K, int(t)) for t in ts]


@dataclass(frozen=True)
class KoopmanReadout:
    """CCA + LoRA read-out (Jeong et al. 2025, Sec. 3.2.1). ``coef_f`` (k, r) and ``coef_g`` (k, r)
    map features to the aligned functions ``phi~ = f @ coef_f``, ``psi~ = g @ coef_g``;
    ``singular_values`` (r,) in decreasing order; ``koopman_matrix`` (r, r) ``E_rho1[psi~ phi~^T]``
    (None when ``fy`` was not given); ``eigenvalues`` sorted by decreasing modulus with eigenvectors
    ``eigvecs`` (columns)."""

    singular_values: np.ndarray
    coef_f: np.ndarray
    coef_g: np.ndarray
    koopman_matrix: np.ndarray | None
    eigenvalues: np.ndarray | None
    eigvecs: np.ndarray | None

    @property
    def rank(self):
        return self.singular_values.size

    def left_functions(self, fx):
        """Orthonormal left singular functions ``phi~_i / sqrt(s_i)`` at features ``fx``."""
        return (
            _features(fx, "fx", k=self.coef_f.shape[0])
            @ self.coef_f
            / np.sqrt(np.maximum(self.singular_values, 1e-300))
        )

    def right_functions(self, gy):
        return (
            _features(gy, "gy", k=self.coef_g.shape[0])
            @ self.coef_g
            / np.sqrt(np.maximum(self.singular_values, 1e-300))
        )

    def eigenfunctions(self, fx):
        """Approximate Koopman eigenfunctions ``phi~(x)^T a_j`` (complex), shape (n, r)."""
        _, A = self._need_K()
        return (_features(fx, "fx", k=self.coef_f.shape[0]) @ self.coef_f) @ A

    def decoder(self, gy, hy):
        """``E_rho1[psi~(Y) h(Y)^T]`` (r, d) from training features ``gy``, observables ``hy``."""
        gy = _features(gy, "gy", k=self.coef_g.shape[0])
        hy = as_array(hy, "hy")
        hy = hy.reshape(hy.shape[0], -1)
        if hy.shape[0] != gy.shape[0]:
            raise ValueError(f"`hy` must have {gy.shape[0]} rows like `gy`; got {hy.shape[0]}.")
        return (gy @ self.coef_g).T @ hy / gy.shape[0]

    def forecast(self, fx, decoder, horizons):
        """``E[h(X_t) | X_0 = x]`` for each t >= 1 in ``horizons``: array (len(horizons), n, d)."""
        K, _ = self._need_K()
        ts = [check_int(int(t), "horizons", lower=1) for t in np.atleast_1d(horizons)]
        phi = _features(fx, "fx", k=self.coef_f.shape[0]) @ self.coef_f
        return np.stack([phi @ Kp @ decoder for Kp in _mat_powers(K, [t - 1 for t in ts])])

    def truncated(self, r):
        """The rank-``r`` read-out ``sum_{i<r} phi~_i (x) psi~_i`` (the top r aligned pairs)."""
        r = check_int(r, "r", lower=1, upper=self.rank)
        K = lam = A = None
        if self.koopman_matrix is not None:
            K = self.koopman_matrix[:r, :r]
            lam, A = _sorted_eig(K)
        return KoopmanReadout(
            self.singular_values[:r], self.coef_f[:, :r], self.coef_g[:, :r], K, lam, A
        )

    def _need_K(self) -> tuple[np.ndarray, np.ndarray]:
        """``(koopman_matrix, eigvecs)``, or ValueError when the read-out has none."""
        K, A = self.koopman_matrix, self.eigvecs
        if K is None or A is None:
            raise ValueError(
                "this read-out has no Koopman matrix: pass `fy` = f(Y) to cca_readout."
            )
        return K, A

    def summary(self):
        lines = ["CCA + LoRA read-out", "-" * 44, f"{'i':>4}{'s_i':>14}{'|lambda_i|':>14}"]
        for i, s in enumerate(self.singular_values):
            lam = "" if self.eigenvalues is None else f"{abs(self.eigenvalues[i]):14.6f}"
            lines.append(f"{i:>4}{s:>14.6f}{lam}")
        return "\n".join(lines)

    def __repr__(self):
        s = ", ".join(f"{v:.4g}" for v in self.singular_values[:6])
        more = ", ..." if self.rank > 6 else ""
        return f"KoopmanReadout(rank={self.rank}, singular_values=[{s}{more}])"


def _weights(weights, n):
    if weights is None:
        return np.full(n, 1.0 / n)
    w = as_array(weights, "weights", shape=(n,))
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError("`weights` must be non-negative with a positive sum.")
    return w / w.sum()


def cca_readout(fx, gy, fy=None, *, weights=None, rtol=1e-7):
    """CCA + LoRA read-out from features ``fx = f(X)``, ``gy = g(X')`` (and ``fy = f(X')``) of N
    pairs.

    Jeong et al. 2025, Sec. 3.2.1 (eqs. 6-7): whitening by ``M^{-1/2}`` (eigenvalues below
    ``rtol * max`` dropped), SVD of ``W_f T W_g``, singular values clipped to ``[0, 1]``. The
    Koopman matrix ``E_rho1[psi~ phi~^T]`` needs ``fy``; it assumes stationary data (rho0 = rho1).
    ``weights`` (n,) turns the sample means into weighted means, e.g. quadrature weights of the
    joint law for population read-outs.

    Examples
    --------
    >>> from dynamics.koopman import FiniteChain
    >>> chain, E = FiniteChain(np.array([[0.9, 0.1], [0.2, 0.8]])), np.eye(2)
    >>> i, j = np.divmod(np.arange(4), 2)  # every pair (i, j), weighted by the joint law
    >>> r = cca_readout(E[i], E[j], E[j], weights=chain.joint.ravel())  # one-hot features
    >>> [round(float(s), 6) for s in r.singular_values]
    [1.0, 0.7]
    """
    fx = _features(fx, "fx")
    n, k = fx.shape
    gy = _features(gy, "gy", n=n, k=k)
    if n < 2:
        raise ValueError(f"`fx` must hold at least 2 pairs; got {n}.")
    rtol = check_scalar(rtol, "rtol", lower=0, upper=1, closed="neither")
    w = _weights(weights, n)
    Mf, Mg, T = fx.T @ (w[:, None] * fx), gy.T @ (w[:, None] * gy), fx.T @ (w[:, None] * gy)
    Wf, Wg = _inv_sqrt(Mf, rtol), _inv_sqrt(Mg, rtol)
    U, s, Vt = np.linalg.svd(Wf.T @ T @ Wg, full_matrices=False)
    s = np.clip(s, 0.0, 1.0)
    sq = np.sqrt(s)
    cf, cg = (Wf @ U) * sq, (Wg @ Vt.T) * sq
    # sign convention: each aligned left function has a positive mean (ties: no flip)
    sign = np.where(w @ (fx @ cf) < 0, -1.0, 1.0)
    cf, cg = cf * sign, cg * sign
    K = lam = A = None
    if fy is not None:
        fy = _features(fy, "fy", n=n, k=k)
        K = (gy @ cg).T @ (w[:, None] * (fy @ cf))
        lam, A = _sorted_eig(K)
    return KoopmanReadout(s, cf, cg, K, lam, A)


@dataclass(frozen=True)
class EDMDReadout:
    """EDMD on a learned basis b (Williams, Kevrekidis & Rowley 2015; Jeong et al. 2025, Sec.
    3.2.2): ``koopman_matrix`` (k, k) ``M_rho0[b]^+ E[b(X) b(X')^T]``, ``eigenvalues`` sorted by
    decreasing modulus, ``eigvecs`` (columns; eigenfunction ``b(x)^T c``)."""

    koopman_matrix: np.ndarray
    gram_pinv: np.ndarray
    eigenvalues: np.ndarray
    eigvecs: np.ndarray

    def eigenfunctions(self, bx):
        return _features(bx, "bx", k=self.koopman_matrix.shape[0]) @ self.eigvecs

    def decoder(self, bx, hx):
        """``P_b = M_rho0[b]^+ E_rho0[b h^T]`` (k, d)."""
        bx = _features(bx, "bx", k=self.koopman_matrix.shape[0])
        hx = as_array(hx, "hx").reshape(bx.shape[0], -1)
        return self.gram_pinv @ (bx.T @ hx / bx.shape[0])

    def forecast(self, bx, decoder, horizons):
        ts = [check_int(int(t), "horizons", lower=1) for t in np.atleast_1d(horizons)]
        bx = _features(bx, "bx", k=self.koopman_matrix.shape[0])
        return np.stack([bx @ Kp @ decoder for Kp in _mat_powers(self.koopman_matrix, ts)])

    def summary(self):
        lines = ["EDMD read-out", "-" * 30, f"{'i':>4}{'|lambda_i|':>14}"]
        lines += [f"{i:>4}{abs(v):>14.6f}" for i, v in enumerate(self.eigenvalues)]
        return "\n".join(lines)


def edmd_readout(bx, by, *, weights=None, rcond=1e-7):
    """EDMD on basis values ``bx = b(X)``, ``by = b(X')`` (Jeong et al. 2025, Sec. 3.2.2, eq. 9);
    ``weights`` as in :func:`cca_readout`.

    Examples
    --------
    >>> from dynamics.koopman import FiniteChain
    >>> chain, E = FiniteChain(np.array([[0.9, 0.1], [0.2, 0.8]])), np.eye(2)
    >>> i, j = np.divmod(np.arange(4), 2)  # every pair (i, j), weighted by the joint law
    >>> r = edmd_readout(E[i], E[j], weights=chain.joint.ravel())  # one-hot basis: K = P
    >>> [round(float(abs(v)), 6) for v in r.eigenvalues]
    [1.0, 0.7]
    """
    bx = _features(bx, "bx")
    n, k = bx.shape
    by = _features(by, "by", n=n, k=k)
    rcond = check_scalar(rcond, "rcond", lower=0, upper=1, closed="neither")
    w = _weights(weights, n)
    G = np.linalg.pinv(bx.T @ (w[:, None] * bx), rcond=rcond, hermitian=True)
    K = G @ (bx.T @ (w[:, None] * by))
    lam, A = _sorted_eig(K)
    return EDMDReadout(K, G, lam, A)
