r"""Marchenko–Pastur law: closed-form resolvent functionals, atom at 0 included.

``F_gamma`` is the limiting spectral distribution of the ``p x p`` matrix ``X^T X / m`` for an
``m x p`` matrix ``X`` with i.i.d. standard entries and ``p / m -> gamma`` (Marchenko & Pastur
1967): density ``sqrt((b - x)(x - a)) / (2 pi gamma x)`` on ``[a, b] = [(1 - sqrt(gamma))^2,
(1 + sqrt(gamma))^2]`` plus an atom of mass ``1 - 1/gamma`` at 0 when ``gamma > 1``.

Every ridge functional used by the ECC estimators (``estimators.ecc``) is an integral
``∫ x^j prod_i (x + lam_i)^{-1} dF_gamma(x)``. Such an integral is a divided difference of the
Stieltjes transform ``m(lam) = ∫ dF(x) / (x + lam)`` over the nodes ``lam_i`` (the divided
difference of ``t -> 1/(x + t)`` over nodes ``t_1..t_k`` is ``(-1)^{k-1} / prod (x + t_i)``), and
powers of ``x`` are removed with ``x / (x + t) = 1 - t / (x + t)``. Divided differences, confluent
nodes included, are the first row of the matrix function ``m(J)`` with ``J`` the bidiagonal
matrix of the nodes (Opitz 1964). ``m`` is a composition of a square root and an inverse, and
the triangular square-root recurrence divides by sums (never differences) of square roots, so
``m(J)`` is accurate for equal, close or distant nodes alike (no cancellation as lam_1 -> lam_2).

Closed form (Marchenko & Pastur 1967; e.g. Bai & Silverstein 2010, ch. 3, at ``z = -lam``):
``m(lam) = 2 / (sqrt((1 - gamma + lam)^2 + 4 gamma lam) + 1 - gamma + lam)``, the rationalised form
of ``[sqrt(.) - (1 - gamma + lam)] / (2 gamma lam)``; it is the positive root of
``gamma lam m^2 + (1 - gamma + lam) m - 1 = 0`` and includes the atom (``m ~ (1 - 1/gamma)/lam`` as
``lam -> 0`` when ``gamma > 1``). Checked against quadrature and against finite-sample traces in
``tests/theory/test_marchenko_pastur.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

from _core.validation import (
    as_array,
    call_scalar,
    check_callable,
    check_finite_result,
    check_int,
    check_scalar,
)

#: the smallest ridge penalty accepted: the resolvent functionals hold up to four factors
#: 1/lam, which stay finite in float64 down to here (1e-300 overflowed to a NaN constant)
LAM_MIN = 1e-50

__all__ = [
    "edges",
    "atom",
    "density",
    "moment",
    "stieltjes",
    "resolvent_moment",
    "resolvent_table",
    "ridge_df",
    "integrate",
    "empirical_resolvent_moment",
]


#: least aspect ratio accepted: below it the closed forms cancel in float64 (the DR variance of
#: ``theory.ecc`` drifts by 1e-5 relative at gamma = 1e-12 and by 10% at 1e-15)
GAMMA_MIN = 1e-10


def _gamma(gamma):
    return check_scalar(gamma, "gamma", lower=GAMMA_MIN, upper=1e8)


def edges(gamma) -> tuple[float, float]:
    """Edges ``((1 - sqrt(gamma))^2, (1 + sqrt(gamma))^2)`` of the continuous part of F_gamma.

    Marchenko & Pastur 1967; Bai & Silverstein 2010, §3.1.

    >>> tuple(float(e) for e in edges(0.25))  # ((1 - 1/2)^2, (1 + 1/2)^2)
    (0.25, 2.25)
    """
    g = _gamma(gamma)
    return (1.0 - np.sqrt(g)) ** 2, (1.0 + np.sqrt(g)) ** 2


def atom(gamma) -> float:
    """Mass ``max(0, 1 - 1/gamma)`` of F_gamma at 0 (the ``p - m`` zero eigenvalues when p > m).

    Marchenko & Pastur 1967; Bai & Silverstein 2010, §3.1.

    >>> atom(2.0)  # half the eigenvalues are 0 when p = 2m
    0.5
    """
    g = _gamma(gamma)
    return max(0.0, 1.0 - 1.0 / g)


def density(x, gamma):
    """Density of the continuous part of F_gamma, ``sqrt((b - x)(x - a)) / (2 pi gamma x)``.

    Marchenko & Pastur 1967; Bai & Silverstein 2010, §3.1.

    >>> round(float(density(1.0, 1.0)), 12)  # sqrt(3) / (2 pi)
    0.275664447711
    """
    g = _gamma(gamma)
    x = as_array(x, "x")
    a, b = edges(g)
    inside = (x > a) & (x < b) & (x > 0)
    xs = np.where(inside, x, 0.5 * (a + b))
    return np.where(inside, np.sqrt((b - xs) * (xs - a)) / (2 * np.pi * g * xs), 0.0)


def moment(k, gamma) -> float:
    """``∫ x^k dF_gamma``: the Narayana polynomial ``sum_r gamma^r/(r+1) C(k, r) C(k-1, r)``.

    Bai & Silverstein 2010, Lemma 3.1 (moments of the Marchenko–Pastur law). ``moment(0) = 1``
    (the atom included), ``moment(1) = 1``, ``moment(2) = 1 + gamma``.

    >>> moment(2, 0.5)  # 1 + gamma
    1.5
    """
    k = check_int(k, "k", lower=0, upper=1000)
    g = _gamma(gamma)
    if k == 0:
        return 1.0
    with np.errstate(over="ignore"):
        out = float(
            sum(np.float64(g) ** r / (r + 1) * comb(k, r) * comb(k - 1, r) for r in range(k))
        )
    return check_finite_result(out, "the moment", k=k, gamma=g)


# --------------------------------------------------------------------------------------------
# Divided differences of m via the matrix function m(J)
# --------------------------------------------------------------------------------------------


def _sqrt_upper(T):
    """Principal square root of a batch of upper-triangular matrices with positive diagonal."""
    k = T.shape[-1]
    U = np.zeros_like(T)
    for i in range(k):
        U[..., i, i] = np.sqrt(T[..., i, i])
    for d in range(1, k):
        for i in range(k - d):
            j = i + d
            s = T[..., i, j].copy()
            for l in range(i + 1, j):
                s -= U[..., i, l] * U[..., l, j]
            U[..., i, j] = s / (U[..., i, i] + U[..., j, j])
    return U


def _stieltjes_matrix(gamma: float, nodes: Sequence[np.ndarray], sup: float = 1.0) -> np.ndarray:
    """``m(J)`` for the bidiagonal matrices ``J`` with diagonal ``nodes`` and superdiagonal
    ``sup`` (batched)."""
    nodes = np.broadcast_arrays(*[np.asarray(t, dtype=np.float64) for t in nodes])
    k = len(nodes)
    shape = nodes[0].shape
    J = np.zeros(shape + (k, k))
    for i, t in enumerate(nodes):
        J[..., i, i] = t
        if i + 1 < k:
            J[..., i, i + 1] = sup
    eye = np.eye(k)
    B = (1.0 - gamma) * eye + J
    D = B @ B + 4.0 * gamma * J
    S = _sqrt_upper(D)
    return 2.0 * np.linalg.inv(S + B)


def _continuous_matrix(g: float, nodes: Sequence[np.ndarray]) -> tuple[np.ndarray, float]:
    """``m_c(J)`` of the continuous part of F_g, and that part's mass.

    For ``g > 1``, ``F_g = (1 - 1/g) delta_0 + F_c``: the nonzero eigenvalues of ``X^T X / m`` are
    those of ``X X^T / m``, distributed as ``g Y`` with ``Y ~ F_{1/g}``, so
    ``m_c(t) = m_{1/g}(t / g) / g^2`` (derived here; checked against ``m - (1 - 1/g)/t`` and
    quadrature in ``tests/theory/test_marchenko_pastur.py``). The ``x``-power recursions run on
    ``F_c`` alone: the atom adds nothing to any power ``>= 1``, and carried through the recursion
    its ``1/t^k`` terms cancel catastrophically for small ``t`` (at ``t = 1e-8`` the float64 result
    was off by orders of magnitude).
    """
    if g <= 1.0:
        return _stieltjes_matrix(g, nodes), 1.0
    return _stieltjes_matrix(1.0 / g, [t / g for t in nodes], sup=1.0 / g) / g**2, 1.0 / g


def _atom(g: float, nodes: Sequence[np.ndarray]) -> np.ndarray | float:
    """The atom's share of ``∫ prod_l (x + t_l)^{-1} dF_g``: ``(1 - 1/g) / prod t_l`` for g > 1."""
    if g <= 1.0:
        return 0.0
    return (1.0 - 1.0 / g) / np.prod(np.stack(np.broadcast_arrays(*nodes)), axis=0)


def stieltjes(lam, gamma, *, derivative: int = 0):
    r"""Stieltjes transform of F_gamma at ``-lam`` and its derivatives in ``lam``, in closed form.

    .. math:: m_\gamma(-\lambda) = \int \frac{dF_\gamma(x)}{x + \lambda}
       = \frac{2}{\sqrt{(1-\gamma+\lambda)^2 + 4\gamma\lambda} + 1 - \gamma + \lambda}

    (Marchenko & Pastur 1967), atom at 0 included. ``derivative=k`` returns
    ``d^k/dlam^k m = (-1)^k k! ∫ (x + lam)^{-(k+1)} dF``, from the confluent divided difference.

    Examples
    --------
    >>> round(float(stieltjes(0.05, 1.0)), 12), round(float(stieltjes(0.3, 2.0)), 12)
    (4.0, 2.0)
    """
    g = _gamma(gamma)
    k = check_int(derivative, "derivative", lower=0, upper=8)
    lam = _lams(lam, "lam")
    M = _stieltjes_matrix(g, [lam] * (k + 1))
    fact = float(np.prod(np.arange(1, k + 1))) if k else 1.0
    return M[..., 0, k] * fact


def _lams(lam, name):
    return as_array(lam, name, lower=LAM_MIN, upper=1e50)


def resolvent_moment(gamma, lams, power: int = 0):
    r"""``∫ x^power prod_i (x + lams[i])^{-1} dF_gamma(x)`` in closed form (atom included).

    Parameters
    ----------
    gamma : float
        Aspect ratio ``p / m > 0``.
    lams : sequence of array_like
        The ridge parameters ``lam_i > 0`` (broadcast together; repeats allowed and exact).
    power : int
        Power ``j >= 0`` of ``x``; ``j > len(lams)`` uses the Narayana moments.

    Returns
    -------
    ndarray (broadcast shape of ``lams``).

    Notes
    -----
    Derived here from the divided-difference identity in the module docstring and the recursion
    ``∫ x^j Q_1 R = ∫ x^{j-1} R - t_1 ∫ x^{j-1} Q_1 R`` (``Q_1 = 1/(x + t_1)``); checked against
    quadrature in ``tests/theory/test_marchenko_pastur.py::test_resolvent_moment_quadrature``.
    For ``power = len(lams)`` and very large ``lam`` (``> 1e3``) the recursion cancels and
    loses relative accuracy (the integrand is then ``~ lam^-k``).

    >>> round(float(resolvent_moment(0.5, [1.0])), 12)  # m(-1) = 2 / (sqrt(17/4) + 3/2)
    0.561552812809
    """
    g = _gamma(gamma)
    j = check_int(power, "power", lower=0, upper=64)
    if not isinstance(lams, list | tuple):
        raise TypeError(
            f"`lams` must be a list or tuple of ridge parameters; got {type(lams).__name__}."
        )
    nodes = [_lams(t, "lams") for t in lams]
    k = len(nodes)
    if k == 0:
        return np.asarray(moment(j, g))
    nodes = np.broadcast_arrays(*nodes)
    M, mass = _continuous_matrix(g, list(nodes))
    # F[i] = ∫ x^q prod_{l >= i} Q_l dF_c for the current power q; F[k] = its moment q.
    F = [((-1) ** (k - i - 1)) * M[..., i, k - 1] for i in range(k)]
    F.append(np.full(nodes[0].shape, mass))
    for q in range(1, j + 1):
        F = [F[i + 1] - nodes[i] * F[i] for i in range(k)] + [np.full(nodes[0].shape, moment(q, g))]
    return F[0] + _atom(g, nodes) if j == 0 else F[0]


def resolvent_table(gamma, lam_a, lam_y, *, max_power: int = 4) -> dict:
    r"""All ``∫ x^j (x + lam_a)^{-a} (x + lam_y)^{-b} dF_gamma``, ``a, b <= 2``, ``j <= max_power``.

    One matrix function ``m(J)`` for the node list ``(lam_a, lam_a, lam_y, lam_y)`` gives the
    divided differences of every contiguous sub-list, i.e. of every ``(a, b)`` with
    ``a, b <= 2``; the powers of ``x`` follow from the recursion of :func:`resolvent_moment`
    (divided differences by Opitz 1964's matrix function; derived here, see the module docstring).
    Returns ``{(j, a, b): array}`` (``(j, 0, 0)`` are the moments).
    Batched over the broadcast shape of ``lam_a, lam_y``.

    >>> t = resolvent_table(0.5, 1.0, 1.0)
    >>> round(float(t[0, 0, 1]), 6)  # Stieltjes transform at -1: sqrt(4.25) - 1.5
    0.561553
    """
    g = _gamma(gamma)
    J = check_int(max_power, "max_power", lower=0, upper=64)
    nodes = np.broadcast_arrays(_lams(lam_a, "lam_a"), _lams(lam_y, "lam_y"))
    return _table(g, nodes[0], nodes[1], J)


def _table(g, la, ly, J):
    t = [la, la, ly, ly]
    M, mass = _continuous_matrix(g, t)
    shape = la.shape
    # G[(i, e)]: ∫ x^q prod_{l=i..e} Q_l dF_c for the current power q (e = i - 1: empty product).
    G = {(i, e): ((-1) ** (e - i)) * M[..., i, e] for i in range(4) for e in range(i, 4)}
    for i in range(5):
        G[(i, i - 1)] = np.full(shape, mass)
    out = {}

    def record(q):
        for a in range(3):
            for b in range(3):
                out[(q, a, b)] = G[(2 - a, 1 + b)]

    record(0)
    for a in range(3):  # the atom at 0 (g > 1) enters the power-0 integrals only
        for b in range(3):
            sub = t[2 - a : 2 + b]
            out[(0, a, b)] = out[(0, a, b)] + (_atom(g, sub) if sub else (g > 1) * (1 - 1 / g))
    for q in range(1, J + 1):
        mq = np.full(shape, moment(q, g))
        new = {}
        for (i, e), _ in G.items():
            new[(i, e)] = mq if e < i else G[(i + 1, e)] - t[i] * G[(i, e)]
        G = new
        record(q)
    return out


def ridge_df(lam, gamma):
    """Normalised ridge degrees of freedom ``s = ∫ x / (x + lam) dF = 1 - lam m_gamma(-lam)``.

    Derived here from :func:`stieltjes` with ``x / (x + lam) = 1 - lam / (x + lam)``.
    ``s -> min(1, 1/gamma)`` as ``lam -> 0`` and decreases to 0 as ``lam -> inf``.

    >>> round(float(ridge_df(1.0, 1.0)), 12)  # (3 - sqrt(5)) / 2
    0.38196601125
    """
    return resolvent_moment(gamma, [_lams(lam, "lam")], power=1)


def empirical_resolvent_moment(eigenvalues, lams, power: int = 0):
    """The finite-sample analogue ``(1/p) sum_i x_i^power prod_l (x_i + lams[l])^{-1}``.

    A definition, no formula to source: the empirical spectral distribution in place of F_gamma.
    ``eigenvalues`` are the ``p`` eigenvalues of ``X^T X / m`` (zeros included when p > m). Used by
    the ECC estimators for their exact-in-expectation corrections; vectorised over ``lams``.

    >>> float(empirical_resolvent_moment([1.0, 3.0], [1.0]))  # (1/2 + 1/4) / 2
    0.375
    """
    x = as_array(eigenvalues, "eigenvalues", ndim=1, min_size=1, lower=0.0, upper=1e50)
    power = check_int(power, "power", lower=0, upper=64)
    if not isinstance(lams, list | tuple):
        raise TypeError(
            f"`lams` must be a list or tuple of ridge parameters; got {type(lams).__name__}."
        )
    nodes = np.broadcast_arrays(*[_lams(t, "lams") for t in lams])
    shape = nodes[0].shape if nodes else ()
    out = np.broadcast_to(x**power, shape + x.shape).copy()
    for t in nodes:
        out /= x + t[..., None]
    return out.mean(axis=-1)


def integrate(f, gamma, *, epsabs: float = 1e-13, epsrel: float = 1e-12) -> float:
    """Reference quadrature ``∫ f dF_gamma``: the atom ``(1 - 1/gamma) f(0)`` plus the density part.

    The square-root edge behaviour is absorbed into QUADPACK's algebraic weight (``weight='alg'``),
    so the rule converges fast for smooth ``f`` (QUADPACK's QAWS, Piessens et al. 1983). For testing
    the closed forms, not for speed.

    >>> round(integrate(lambda x: x, 0.5), 12)  # the mean of F_gamma
    1.0
    """
    from scipy import integrate as _integrate  # on first use: scipy.integrate loads scipy.optimize

    f = check_callable(f, "f")
    g = _gamma(gamma)
    epsabs = check_scalar(epsabs, "epsabs", lower=0.0)
    epsrel = check_scalar(epsrel, "epsrel", lower=0.0)
    a, b = edges(g)
    c = 1.0 / (2 * np.pi * g)
    if a > 0:
        val, _ = _integrate.quad(
            lambda x: call_scalar(f, x, "f") * c / x,
            a,
            b,
            weight="alg",
            wvar=(0.5, 0.5),
            epsabs=epsabs,
            epsrel=epsrel,
            limit=200,
        )
    else:  # gamma == 1: sqrt((b - x) x) / x = x^{-1/2} (b - x)^{1/2}
        val, _ = _integrate.quad(
            lambda x: call_scalar(f, x, "f") * c,
            a,
            b,
            weight="alg",
            wvar=(-0.5, 0.5),
            epsabs=epsabs,
            epsrel=epsrel,
            limit=200,
        )
    val = val + atom(g) * call_scalar(f, 0.0, "f")
    return check_finite_result(float(val), "the integral of `f`", gamma=g)
