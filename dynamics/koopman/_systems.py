"""Stochastic dynamical systems with exactly known Koopman singular values (and Lorenz-63 without).

Each system samples pairs ``(X, Y)`` at its lag (``X ~ rho0``, ``Y ~ p_lag(. | X)``) and
trajectories, and, where an exact answer exists, returns the singular values ``1 = s_0 >= s_1 >=
...`` of the Koopman operator ``K : L2(rho1) -> L2(rho0)``, ``(Kg)(x) = E[g(X') | X = x]``, its
eigenvalues, and its left / right singular functions (orthonormal in L2(rho0) / L2(rho1)).
Conventions follow Jeong, Ryu, Yun & Wornell 2025 (arXiv 2507.07222), Sec. 2; the ground truths are
classical and derived in the docstrings below.
"""

from __future__ import annotations

import math
from functools import cache, cached_property
from typing import cast

import numpy as np
from numpy.polynomial import hermite_e
from scipy import integrate, linalg, special

from _core.validation import (
    ConvergenceError,
    as_array,
    as_generator,
    check_int,
    check_memory,
    check_scalar,
)

__all__ = [
    "make_pairs",
    "FiniteChain",
    "OrnsteinUhlenbeck",
    "NoisyLogisticMap",
    "PrinzLangevin",
    "Lorenz63",
]


def make_pairs(trajectory, lag=1):
    """Pairs ``(X, Y) = (x_t, x_{t+lag})`` from one trajectory of shape ``(T,)`` or ``(T, d)``.

    Raises ``ValueError`` naming ``lag`` when ``lag < 1`` and ``trajectory`` when it is not longer
    than ``lag`` or holds NaN/inf.
    """
    lag = check_int(lag, "lag", lower=1)
    traj = as_array(trajectory, "trajectory")
    if traj.ndim not in (1, 2):
        raise ValueError(f"`trajectory` must be 1-D or 2-D (time first); got shape {traj.shape}.")
    if traj.shape[0] <= lag:
        raise ValueError(
            f"`trajectory` must be longer than `lag` = {lag}; got {traj.shape[0]} steps."
        )
    return traj[:-lag], traj[lag:]


def _check_k(k, kmax, name="k"):
    return check_int(k, name, lower=1, upper=kmax)


def _eig(M) -> tuple[np.ndarray, np.ndarray]:
    """``scipy.linalg.eig(M)``: (eigenvalues, right eigenvectors)."""
    # scipy's stubs union in the ``left=True`` / ``homogeneous_eigvals`` return shapes
    return cast(tuple[np.ndarray, np.ndarray], linalg.eig(M))


def _sorted_eigs(vals):
    """Eigenvalues sorted by decreasing modulus (ties: real part, then imaginary part)."""
    vals = np.asarray(vals)
    order = np.lexsort((-np.imag(vals), -np.real(vals), -np.round(np.abs(vals), 12)))
    return vals[order]


# --------------------------------------------------------------------------------------------------
class FiniteChain:
    r"""Finite-state Markov chain with row-stochastic ``P`` (n x n), initial law ``rho0`` and
    ``lag``.

    With ``P_lag = P^lag``, ``rho1 = rho0 P_lag``, ``D0 = diag rho0`` and ``D1 = diag rho1``, the
    Koopman operator in orthonormal coordinates is :math:`\tilde K = D_0^{1/2} P_{lag} D_1^{-1/2} =
    U S V^T`; the singular functions are ``phi = D0^{-1/2} U`` and ``psi = D1^{-1/2} V``, and ``s_0
    = 1`` with ``phi_0 = psi_0 = 1`` (Jeong et al. 2025, Sec. 2; derived here, checked in
    ``tests/dynamics/koopman/test_systems.py``). ``rho0`` defaults to the stationary law. States are
    the integers ``0..n-1``.

    Examples
    --------
    >>> chain = FiniteChain(np.array([[0.9, 0.1], [0.2, 0.8]]))
    >>> [round(float(s), 6) for s in chain.singular_values()]  # reversible: 1 and 1 - 0.1 - 0.2
    [1.0, 0.7]
    """

    def __init__(self, P, rho0=None, *, lag=1):
        P = as_array(P, "P", ndim=2)
        n = P.shape[0]
        if P.shape != (n, n) or n < 2:
            raise ValueError(f"`P` must be square with n >= 2; got shape {P.shape}.")
        if (P < 0).any() or not np.allclose(P.sum(1), 1.0, atol=1e-12):
            raise ValueError(
                f"`P` must be row-stochastic (non-negative, rows summing to 1); got min entry "
                f"{P.min():.3g}, row sums off by up to {np.abs(P.sum(1) - 1.0).max():.3g}."
            )
        self.lag = check_int(lag, "lag", lower=1)
        self.P = P
        self.kernel = np.linalg.matrix_power(P, self.lag)
        if rho0 is None:
            w, vl = _eig(P.T)
            i = int(np.argmin(np.abs(w - 1.0)))
            rho0 = np.abs(np.real(vl[:, i]))
            rho0 = rho0 / rho0.sum()
        rho0 = as_array(rho0, "rho0", shape=(n,))
        if (rho0 <= 0).any() or abs(rho0.sum() - 1.0) > 1e-10:
            raise ValueError("`rho0` must be a positive probability vector summing to 1.")
        self.rho0 = rho0
        self.rho1 = rho0 @ self.kernel
        if (self.rho1 <= 0).any():
            raise ValueError("`rho1 = rho0 P^lag` must be positive on every state.")
        self.n = n

    @classmethod
    def random(cls, n, *, lag=1, concentration=1.0, rng=None):
        """A chain with Dirichlet(``concentration``) rows and a Dirichlet(1) initial law."""
        n = check_int(n, "n", lower=2)
        rng = as_generator(rng)
        P = rng.dirichlet(np.full(n, float(concentration)), size=n)
        return cls(P, rng.dirichlet(np.ones(n)), lag=lag)

    @property
    def joint(self):
        """Joint law ``J = D0 P^lag`` of ``(X, X')``."""
        return self.rho0[:, None] * self.kernel

    @cached_property
    def _svd(self):
        Kt = np.sqrt(self.rho0)[:, None] * self.kernel / np.sqrt(self.rho1)[None, :]
        U, s, Vt = np.linalg.svd(Kt)
        sign = np.sign(U.sum(0) + (U.sum(0) == 0))
        return Kt, U * sign, s, Vt.T * sign

    @property
    def koopman_matrix(self):
        r""":math:`\tilde K = D_0^{1/2} P^{lag} D_1^{-1/2}`: the operator in orthonormal bases."""
        return self._svd[0]

    def hs_norm2(self):
        """``||K||_HS^2 = ||K~||_F^2 = chi^2(J || rho0 x rho1) + 1``."""
        return float(np.sum(self._svd[0] ** 2))

    def singular_values(self, k=None):
        s = self._svd[2]
        return s if k is None else s[: _check_k(k, self.n)]

    def eigenvalues(self, k=None):
        """Eigenvalues of ``P^lag`` (the Koopman operator on functions of the state)."""
        vals = _sorted_eigs(np.linalg.eigvals(self.kernel))
        return vals if k is None else vals[: _check_k(k, self.n)]

    def left_singular_functions(self, x, k):
        """``phi_i(x)`` for states ``x`` (ints), shape ``(len(x), k)``."""
        U = self._svd[1][:, : _check_k(k, self.n)]
        return (U / np.sqrt(self.rho0)[:, None])[np.asarray(x, dtype=int)]

    def right_singular_functions(self, y, k):
        V = self._svd[3][:, : _check_k(k, self.n)]
        return (V / np.sqrt(self.rho1)[:, None])[np.asarray(y, dtype=int)]

    def pairs(self, n, *, rng=None):
        """``n`` i.i.d. pairs ``X ~ rho0``, ``Y ~ P^lag[X]`` (integer arrays)."""
        n = check_int(n, "n", lower=1)
        rng = as_generator(rng)
        x = rng.choice(self.n, size=n, p=self.rho0)
        cdf = np.cumsum(self.kernel, axis=1)
        y = (rng.random(n)[:, None] > cdf[x]).sum(1)
        return x, np.minimum(y, self.n - 1)

    def trajectory(self, n_steps, *, x0=None, rng=None):
        """A path of ``n_steps + 1`` states (one-step ``P``), started at ``x0`` or from ``rho0``."""
        n_steps = check_int(n_steps, "n_steps", lower=1)
        rng = as_generator(rng)
        cdf = np.cumsum(self.P, axis=1)
        u = rng.random(n_steps)
        out = np.empty(n_steps + 1, dtype=int)
        out[0] = (
            rng.choice(self.n, p=self.rho0)
            if x0 is None
            else check_int(x0, "x0", lower=0, upper=self.n - 1)
        )
        for t in range(n_steps):
            out[t + 1] = min(int(np.searchsorted(cdf[out[t]], u[t], side="right")), self.n - 1)
        return out


# --------------------------------------------------------------------------------------------------
class OrnsteinUhlenbeck:
    r"""Ornstein-Uhlenbeck process :math:`dX = -\theta X dt + \sigma dW` observed at lag ``tau``.

    Stationary law ``N(0, v)``, ``v = sigma^2 / (2 theta)``; exact transition ``X_tau | X_0 = x ~
    N(r x, v (1 - r^2))``, ``r = exp(-theta tau)``. K is self-adjoint on L2(pi) with ``s_n =
    lambda_n = r^n`` and ``phi_n = psi_n = He_n(x / sqrt v) / sqrt(n!)`` (Mehler's formula;
    classical). Sampling uses the exact AR(1) transition, so there is no discretisation error.

    Examples
    --------
    >>> ou = OrnsteinUhlenbeck(theta=1.0, tau=0.5)
    >>> [round(float(s), 6) for s in ou.singular_values(3)]  # r^n, r = exp(-theta tau)
    [1.0, 0.606531, 0.367879]
    """

    def __init__(self, theta=1.0, sigma=1.4142135623730951, tau=0.5):
        # bounds keep the stationary variance sigma^2 / (2 theta) a finite float
        self.theta = check_scalar(theta, "theta", lower=1e-100, upper=1e100)
        self.sigma = check_scalar(sigma, "sigma", lower=0, upper=1e100, closed="right")
        self.tau = check_scalar(tau, "tau", lower=0, closed="neither")
        self.var = self.sigma**2 / (2 * self.theta)
        self.r = math.exp(-self.theta * self.tau)

    def singular_values(self, k):
        return self.r ** np.arange(_check_k(k, 10**6))

    eigenvalues = singular_values

    def hs_norm2(self):
        return 1.0 / (1.0 - self.r**2)

    def left_singular_functions(self, x, k):
        """Normalised probabilists' Hermite functions, shape ``(len(x), k)``."""
        z = np.asarray(x, dtype=float).reshape(-1) / math.sqrt(self.var)
        k = _check_k(k, 170)
        out = np.empty((z.size, k))
        for n in range(k):
            c = np.zeros(n + 1)
            c[n] = 1.0
            out[:, n] = hermite_e.hermeval(z, c) / math.sqrt(math.factorial(n))
        return out

    right_singular_functions = left_singular_functions

    def pairs(self, n, *, rng=None):
        n = check_int(n, "n", lower=1)
        rng = as_generator(rng)
        x = math.sqrt(self.var) * rng.standard_normal(n)
        y = self.r * x + math.sqrt(self.var * (1 - self.r**2)) * rng.standard_normal(n)
        return x, y

    def trajectory(self, n_steps, *, x0=None, rng=None):
        """Exact AR(1) path of ``n_steps + 1`` points at spacing ``tau``."""
        n_steps = check_int(n_steps, "n_steps", lower=1)
        rng = as_generator(rng)
        eps = math.sqrt(self.var * (1 - self.r**2)) * rng.standard_normal(n_steps)
        x = np.empty(n_steps + 1)
        x[0] = math.sqrt(self.var) * rng.standard_normal() if x0 is None else check_scalar(x0, "x0")
        from scipy.signal import lfilter

        x[1:] = lfilter([1.0], [1.0, -self.r], eps, zi=[self.r * x[0]])[0]
        return x


# --------------------------------------------------------------------------------------------------
class NoisyLogisticMap:
    r"""Noisy logistic map :math:`x_{t+1} = (F(x_t) + \xi_t) \bmod 1`, ``F(x) = r x (1 - x)``.

    The noise has density ``C_N cos^N(pi xi)`` on ``[-1/2, 1/2)`` (``N`` even), so
    ``p(y|x) = sum_{i=0}^N beta_i(y) beta_i(F(x))`` with
    ``beta_i(z) = sqrt(C_N binom(N, i)) sin^{N-i}(pi z) cos^i(pi z)`` and ``C_N = pi / B(N/2 + 1/2,
    1/2)``:
    K has rank N + 1 (Jeong et al. 2025, Sec. 5 logistic-map experiment, the setting of
    kooplearn's ``LogisticMap``; N = 20 there). Ground truths, by Gauss-Legendre quadrature with
    ``n_quad`` nodes (derived here, checked in ``tests/dynamics/koopman/test_systems.py``):

    * eigenvalues: ``eig(P)``, ``P_ij = int beta_i(x) beta_j(F(x)) dx``; eigenfunctions
      ``sum_j c_j beta_j(F(x))``;
    * invariant density ``pi = sum_i a_i beta_i`` with ``P^T a = a``, ``int pi = 1``;
    * L2(pi) singular values: ``K = sum_i alpha_i (x) beta~_i`` with ``alpha_i = beta_i o F`` and
      ``beta~_i = beta_i / pi``; ``s^2 = eig(G_alpha G_beta~)`` for the L2(pi) Gram matrices.

    Noise sampling is exact: ``sin^2(pi xi) ~ Beta(1/2, (N+1)/2)`` with a random sign (derived
    here).

    Examples
    --------
    >>> s = NoisyLogisticMap(N=4, n_quad=200).singular_values()
    >>> len(s), round(float(s[0]), 6)  # rank N + 1; the constant function gives s_0 = 1
    (5, 1.0)
    """

    def __init__(self, N=20, r=4.0, *, n_quad=2000):
        self.N = check_int(N, "N", lower=2, upper=1000)  # comb(N, N/2) overflows beyond ~1020
        if self.N % 2:
            raise ValueError(f"`N` must be even (cos^N must be a density); got {N}.")
        self.r = check_scalar(r, "r", lower=0, upper=4, closed="right")
        self.n_quad = check_int(n_quad, "n_quad", lower=100)
        self.C = math.pi / special.beta(self.N / 2 + 0.5, 0.5)
        i = np.arange(self.N + 1)
        self._scale = np.sqrt(self.C * special.comb(self.N, i))

    def F(self, x):
        return self.r * x * (1 - x)

    def beta(self, z):
        """The noise features ``beta_i(z)``, shape ``(len(z), N + 1)``."""
        z = np.asarray(z, dtype=float).reshape(-1, 1)
        i = np.arange(self.N + 1)
        return self._scale * np.sin(np.pi * z) ** (self.N - i) * np.cos(np.pi * z) ** i

    def transition_density(self, y, x):
        return self.C * np.cos(np.pi * (np.asarray(y) - self.F(np.asarray(x)))) ** self.N

    @cached_property
    def _truth(self):
        x, w = _unit_gauss_legendre(self.n_quad)
        B, BF = self.beta(x), self.beta(self.F(x))
        P = B.T @ (w[:, None] * BF)
        vals, vecs = _eig(P)
        order = np.argsort(-np.abs(vals), kind="stable")
        vals, vecs = vals[order], vecs[:, order]
        wl, vl = _eig(P.T)
        a = np.real(vl[:, int(np.argmin(np.abs(wl - 1)))])
        a = a / (w @ (B @ a))
        pi = B @ a
        Ga = BF.T @ ((w * pi)[:, None] * BF)
        Gb = B.T @ ((w / pi)[:, None] * B)
        Ra, Rb = _psd_sqrt(Ga), _psd_sqrt(Gb)
        U, s, Vt = np.linalg.svd(Ra @ Rb)
        # phi = alpha Ra^{-1} U, psi = beta~ Rb^{-1} V (orthonormal in L2(pi)); fix signs by
        # phi(0.3)>0
        cf = np.linalg.solve(Ra, U)
        cg = np.linalg.solve(Rb, Vt.T)
        return {"P": P, "eigvals": vals, "eigvecs": vecs, "a": a, "s": s, "cf": cf, "cg": cg}

    @property
    def transfer_matrix(self):
        """``P_ij = int_0^1 beta_i(x) beta_j(F(x)) dx``, whose eigenvalues are those of K."""
        return self._truth["P"]

    def invariant_density(self, x):
        return self.beta(x) @ self._truth["a"]

    def singular_values(self, k=None):
        s = self._truth["s"]
        return s if k is None else s[: _check_k(k, self.N + 1)]

    def eigenvalues(self, k=None):
        v = self._truth["eigvals"]
        return v if k is None else v[: _check_k(k, self.N + 1)]

    def eigenfunctions(self, x, k):
        """Right eigenfunctions ``sum_j c_j beta_j(F(x))`` (complex), shape ``(len(x), k)``."""
        k = _check_k(k, self.N + 1)
        return self.beta(self.F(np.asarray(x, dtype=float))) @ self._truth["eigvecs"][:, :k]

    def left_singular_functions(self, x, k):
        k = _check_k(k, self.N + 1)
        return self.beta(self.F(np.asarray(x, dtype=float))) @ self._truth["cf"][:, :k]

    def right_singular_functions(self, y, k):
        k = _check_k(k, self.N + 1)
        y = np.asarray(y, dtype=float).reshape(-1)
        return (self.beta(y) / self.invariant_density(y)[:, None]) @ self._truth["cg"][:, :k]

    def hs_norm2(self):
        return float(np.sum(self._truth["s"] ** 2))

    def conditional_expectation(self, h, x, t):
        """Exact ``E[h(X_t) | X_0 = x]`` for ``t >= 1``: ``beta(F(x))^T P^{t-1} c``, ``c = int beta
        h``.

        Derived here from ``K beta_j o F = sum_i P_ij beta_i o F``; checked by Monte Carlo in
        ``tests/dynamics/koopman/test_systems.py``. ``h`` is a vectorised callable on [0, 1).
        """
        t = check_int(t, "t", lower=1)
        q, w = _unit_gauss_legendre(self.n_quad)
        c = self.beta(q).T @ (w * np.asarray(h(q), dtype=float))
        c = np.linalg.matrix_power(self._truth["P"], t - 1) @ c
        return self.beta(self.F(np.asarray(x, dtype=float))) @ c

    def noise(self, n, *, rng=None):
        rng = as_generator(rng)
        u = rng.beta(0.5, (self.N + 1) / 2, size=n)
        return np.arcsin(np.sqrt(u)) / np.pi * rng.choice([-1.0, 1.0], size=n)

    def trajectory(self, n_steps, *, x0=None, burn_in=100, rng=None):
        """A path of ``n_steps + 1`` points after ``burn_in`` discarded steps from ``x0``."""
        n_steps = check_int(n_steps, "n_steps", lower=1)
        burn_in = check_int(burn_in, "burn_in", lower=0)
        rng = as_generator(rng)
        x = rng.random() if x0 is None else check_scalar(x0, "x0", lower=0, upper=1, closed="left")
        xi = self.noise(n_steps + burn_in, rng=rng)
        out = np.empty(n_steps + burn_in + 1)
        out[0] = x
        r = self.r
        for t in range(n_steps + burn_in):
            x = (r * x * (1.0 - x) + xi[t]) % 1.0
            out[t + 1] = x
        return out[burn_in:]

    def pairs(self, n, *, rng=None):
        """``n`` consecutive pairs of one stationary trajectory (lag 1)."""
        return make_pairs(self.trajectory(check_int(n, "n", lower=1), rng=rng), 1)


@cache
def _unit_gauss_legendre(n):
    t, w = special.roots_legendre(n)
    return (t + 1) / 2, w / 2


def _psd_sqrt(G):
    w, V = np.linalg.eigh((G + G.T) / 2)
    return (V * np.sqrt(np.clip(w, 0, None))) @ V.T


# --------------------------------------------------------------------------------------------------
class PrinzLangevin:
    r"""Overdamped Langevin dynamics :math:`dX = -V'(X)/\gamma\,dt + \sqrt{2/(\beta\gamma)}\,dW` in
    the four-well Prinz potential :math:`V(x) = 4(x^8 + 0.8 e^{-80x^2} + 0.2 e^{-80(x-0.5)^2} + 0.5
    e^{-40(x+0.5)^2})`, observed at lag ``tau``. This is the 1-D Langevin system of Jeong et al.
    2025 (poster: generator eigenvalues 0, -1.20, -7.89, -15.36 at gamma = beta = 1).

    Reversible, so ``s_i = |lambda_i| = exp(tau mu_i)`` for the generator eigenvalues ``mu_i <= 0``
    of ``L = (1/gamma)(-V' d + beta^{-1} d^2)``. They are computed by the square-root approximation
    (finite volumes, reversible w.r.t. ``pi ~ exp(-beta V)``, second order in the cell width) on
    ``n_grid`` cells of ``[-1.6, 1.6]``; a symmetric tridiagonal eigenproblem (derived here; the
    grid convergence is checked in ``tests/dynamics/koopman/test_systems.py``). Samples use
    Euler-Maruyama with step ``dt`` (weak error O(dt)) from the grid's stationary law.

    Examples
    --------
    >>> mu = PrinzLangevin().generator_eigenvalues(3)  # Jeong et al. 2025: 0, -1.20, -7.89
    >>> bool(abs(mu[0]) < 1e-9), [round(float(m), 2) for m in mu[1:]]
    (True, [-1.2, -7.89])
    """

    lo, hi = -1.6, 1.6

    def __init__(self, gamma=1.0, beta=1.0, tau=0.1, *, dt=1e-4, n_grid=6000):
        self.gamma = check_scalar(gamma, "gamma", lower=0, closed="neither")
        self.beta = check_scalar(beta, "beta", lower=0, closed="neither")
        self.tau = check_scalar(tau, "tau", lower=0, closed="neither")
        self.dt = check_scalar(dt, "dt", lower=0, closed="neither")
        if self.dt > self.tau:
            raise ValueError(f"`dt` must be <= `tau` = {self.tau:g}; got dt = {self.dt:g}.")
        self.n_grid = check_int(n_grid, "n_grid", lower=100)

    @staticmethod
    def potential(x):
        x = np.asarray(x, dtype=float)
        return 4 * (
            x**8
            + 0.8 * np.exp(-80 * x**2)
            + 0.2 * np.exp(-80 * (x - 0.5) ** 2)
            + 0.5 * np.exp(-40 * (x + 0.5) ** 2)
        )

    @staticmethod
    def force(x):
        """``-V'(x)``. ``x^7`` as products of ``x^2`` (NumPy's ``x**7`` calls ``pow``, which
        took half of the Euler-Maruyama step's time: 8.8 of 15.7 ms at 150,000 points)."""
        x = np.asarray(x, dtype=float)
        x2 = x * x
        return -4 * (
            8 * (x2 * x2 * x2 * x)
            - 128 * x * np.exp(-80 * x2)
            - 32 * (x - 0.5) * np.exp(-80 * (x - 0.5) ** 2)
            - 40 * (x + 0.5) * np.exp(-40 * (x + 0.5) ** 2)
        )

    @cached_property
    def _grid(self):
        n = self.n_grid
        h = (self.hi - self.lo) / n
        x = self.lo + h * (np.arange(n) + 0.5)
        bv = self.beta * self.potential(x)
        pi = np.exp(-(bv - bv.min()))
        pi /= pi.sum()
        D = 1.0 / (self.beta * self.gamma * h * h)
        up = np.exp(-(bv[1:] - bv[:-1]) / 2)  # sqrt(pi_{i+1}/pi_i)
        diag = np.zeros(n)
        diag[:-1] -= D * up
        diag[1:] -= D / up
        return x, h, pi, diag, np.full(n - 1, D)

    @cached_property
    def _spectrum(self):
        x, h, pi, d, e = self._grid
        m = min(20, self.n_grid)
        mu, vec = linalg.eigh_tridiagonal(
            d, e, select="i", select_range=(self.n_grid - m, self.n_grid - 1)
        )
        mu, vec = mu[::-1], vec[:, ::-1]
        phi = vec / np.sqrt(pi)[:, None]  # orthonormal in L2(pi)
        phi *= np.sign(phi[np.argmax(np.abs(phi), axis=0), np.arange(m)])
        phi[:, 0] = np.abs(phi[:, 0])
        return mu, phi

    def generator_eigenvalues(self, k):
        return self._spectrum[0][: _check_k(k, 20)]

    def singular_values(self, k):
        return np.exp(self.tau * self.generator_eigenvalues(k))

    eigenvalues = singular_values

    def left_singular_functions(self, x, k):
        """Eigenfunctions (orthonormal in L2(pi)), linearly interpolated from the grid."""
        k = _check_k(k, 20)
        xs = self._grid[0]
        phi = self._spectrum[1]
        return np.stack(
            [np.interp(np.asarray(x, float).reshape(-1), xs, phi[:, i]) for i in range(k)], axis=1
        )

    right_singular_functions = left_singular_functions

    def sample_stationary(self, n, *, rng=None):
        rng = as_generator(rng)
        x, h, pi = self._grid[:3]
        idx = rng.choice(x.size, size=n, p=pi)
        return x[idx] + h * (rng.random(n) - 0.5)

    def _evolve(self, x, t, rng):
        n_steps = max(1, round(t / self.dt))
        dt = t / n_steps
        amp = math.sqrt(2 * dt / (self.beta * self.gamma))
        for _ in range(n_steps):
            x = x + dt * self.force(x) / self.gamma + amp * rng.standard_normal(x.shape)
        return x

    def pairs(self, n, *, rng=None):
        """``n`` independent stationary pairs at lag ``tau`` (vectorised Euler-Maruyama)."""
        n = check_int(n, "n", lower=1)
        rng = as_generator(rng)
        x = self.sample_stationary(n, rng=rng)
        return x, self._evolve(x.copy(), self.tau, rng)

    def trajectory(self, n_steps, *, x0=None, rng=None):
        n_steps = check_int(n_steps, "n_steps", lower=1)
        rng = as_generator(rng)
        out = np.empty(n_steps + 1)
        out[0] = self.sample_stationary(1, rng=rng)[0] if x0 is None else check_scalar(x0, "x0")
        for t in range(n_steps):
            out[t + 1] = self._evolve(out[t : t + 1], self.tau, rng)[0]
        return out


# --------------------------------------------------------------------------------------------------
class Lorenz63:
    """Lorenz-63 ODE sampled every ``dt`` (DOP853, rtol 1e-10): a system with no known Koopman
    spectrum.

    ``singular_values`` / ``eigenvalues`` raise ``NotImplementedError``: the deterministic Koopman
    operator of a chaotic flow is unitary on L2(invariant measure) with continuous spectrum, so
    there is no exact finite list to compare with; use forecast errors instead.

    Examples
    --------
    >>> c = np.sqrt(8 / 3 * 27)  # the fixed point (c, c, rho - 1) of the flow
    >>> x = Lorenz63().trajectory(2, x0=[c, c, 27.0], burn_in=0)
    >>> x.shape, bool(np.allclose(x, [c, c, 27.0]))
    ((3, 3), True)
    """

    has_exact_spectrum = False

    def __init__(self, sigma=10.0, rho=28.0, beta=8.0 / 3.0, dt=0.01):
        # beyond these the flow is so stiff that the explicit integrator needs ~1e8+ steps
        self.sigma = check_scalar(sigma, "sigma", lower=1e-6, upper=1e3)
        self.rho = check_scalar(rho, "rho", lower=1e-6, upper=1e3)
        self.beta = check_scalar(beta, "beta", lower=1e-6, upper=1e3)
        self.dt = check_scalar(dt, "dt", lower=1e-6, upper=10.0)

    def rhs(self, t, u):
        x, y, z = u
        return [self.sigma * (y - x), x * (self.rho - z) - y, x * y - self.beta * z]

    def trajectory(self, n_steps, *, x0=None, burn_in=1000, rng=None):
        """``(n_steps + 1, 3)`` states, after ``burn_in`` discarded samples."""
        n_steps = check_int(n_steps, "n_steps", lower=1)
        burn_in = check_int(burn_in, "burn_in", lower=0)
        rng = as_generator(rng)
        u0 = (
            (rng.standard_normal(3) + np.array([0.0, 1.0, 20.0]))
            if x0 is None
            else as_array(x0, "x0", shape=(3,))
        )
        m = n_steps + burn_in
        check_memory(6 * (m + 1), "`n_steps`, `burn_in`", what="the trajectory")
        ts = self.dt * np.arange(m + 1)
        cap, calls = 20_000_000, [0]

        def rhs(t, u):
            calls[0] += 1
            if calls[0] > cap:
                raise ConvergenceError(
                    f"Lorenz63 integration stopped after {cap} right-hand-side evaluations at "
                    f"t = {t:.4g} of {ts[-1]:.4g}; reduce `n_steps`/`burn_in`/`dt` or the "
                    f"stiffness (`sigma`, `rho`, `beta`).",
                    t=t,
                    t_end=ts[-1],
                    evaluations=cap,
                )
            return self.rhs(t, u)

        sol = integrate.solve_ivp(
            rhs, (0.0, ts[-1]), u0, method="DOP853", t_eval=ts, rtol=1e-10, atol=1e-10
        )
        if not sol.success or not np.all(np.isfinite(sol.y)):
            raise ConvergenceError(f"Lorenz63 integration failed: {sol.message}", t_end=ts[-1])
        return sol.y.T[burn_in:]

    def pairs(self, n, *, lag=1, rng=None):
        return make_pairs(self.trajectory(check_int(n, "n", lower=1) + lag - 1, rng=rng), lag)

    def singular_values(self, k=None):
        raise NotImplementedError(
            "Lorenz-63 has no known Koopman singular values; compare forecasts."
        )

    eigenvalues = singular_values
