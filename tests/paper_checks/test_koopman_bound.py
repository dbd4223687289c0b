"""The subspace bound behind koopman.multistep_prediction, checked on random finite chains."""

import numpy as np
import pytest
from scipy.linalg import subspace_angles

from paper_checks.koopman import _sin_max_angle


def _chain(n, rng):
    P = rng.dirichlet(np.full(n, 0.5), size=n)
    evals, evecs = np.linalg.eig(P.T)
    pi = np.real(evecs[:, np.argmin(np.abs(evals - 1))])
    return P, pi / pi.sum()


def _proj(B, pi):
    """Orthogonal projection onto span(B) in L2(pi), as a matrix acting on function values."""
    return B @ np.linalg.solve(B.T @ (pi[:, None] * B), B.T * pi)


@pytest.mark.parametrize("seed", range(6))
def test_forecast_error_within_t_times_the_sines(seed):
    """||((P_F K P_G)^t - K_k^t)(h - E h)||_pi <= t (sin_F + sin_G) ||h - E h||_pi."""
    rng = np.random.default_rng(seed)
    n, k = 9, 3
    P, pi = _chain(n, rng)
    d = np.sqrt(pi)
    U, s, Vt = np.linalg.svd(d[:, None] * P / d[None, :])
    phi, psi = U[:, :k] / d[:, None], Vt[:k].T / d[:, None]  # phi_0 = psi_0 = +-1
    K_k = (phi * s[:k]) @ (psi.T * pi)  # sum_i s_i phi_i <psi_i, .>_pi
    F = np.c_[np.ones(n), phi[:, 1:] + 0.3 * rng.standard_normal((n, k - 1))]
    G = np.c_[np.ones(n), psi[:, 1:] + 0.3 * rng.standard_normal((n, k - 1))]
    K_hat = _proj(F, pi) @ P @ _proj(G, pi)
    sin_f, sin_g = _sin_max_angle(F, phi, pi), _sin_max_angle(G, psi, pi)
    h = rng.standard_normal(n)
    h = h - pi @ h
    norm = lambda v: np.sqrt(pi @ v**2)  # noqa: E731
    for t in range(1, 6):
        err = norm(np.linalg.matrix_power(K_hat, t) @ h - np.linalg.matrix_power(K_k, t) @ h)
        assert err <= t * (sin_f + sin_g) * norm(h) + 1e-12


def test_sin_max_angle_is_scipys_largest_principal_angle():
    rng = np.random.default_rng(0)
    w = rng.uniform(0.5, 1.5, 40)
    w /= w.sum()
    B, E = rng.standard_normal((40, 4)), rng.standard_normal((40, 4))
    Q, _ = np.linalg.qr(np.sqrt(w)[:, None] * E)
    E = Q / np.sqrt(w)[:, None]  # orthonormal in L2(w)
    angle = subspace_angles(np.sqrt(w)[:, None] * B, np.sqrt(w)[:, None] * E).max()
    assert _sin_max_angle(B, E, w) == pytest.approx(np.sin(angle), rel=1e-10)
