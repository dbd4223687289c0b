r"""Proportional-asymptotics theory of ridge plug-in estimators of the Expected Cond. Covariance.

Model (McGrath, Mukherjee, Mukherjee & Wang 2025, arXiv 2509.25536, §2; official code
``zixiaowang17/Optimal-Nuisance-Function-Tuning``): ``X ~ N(0, I_p)``, ``A = X^T alpha + delta``,
``Y = X^T beta + eps``, ``psi = E Cov(Y, A | X) = Cov(eps, delta)``. Ridge nuisances with penalties
``lam_a`` (A on X) and ``lam_y`` (Y on X) are fitted on training folds of size ``m`` and evaluated
on a fold of size ``m``; ``gamma = p / m`` (fold level). Estimators (naive):

* INT: ``mean_E(A Y) - alpha_hat^T beta_hat``;
* NR:  ``mean_E(A (Y - X^T beta_hat))``;
* DR:  ``mean_E((Y - X^T beta_hat)(A - X^T alpha_hat))``.

Two splits fit both nuisances on one fold; three splits fit each on its own fold. With
``S_j = x/(x + lam_j)``, ``Q_j = 1/(x + lam_j)`` and integrals against the Marchenko–Pastur law
``F_gamma`` (``theory.marchenko_pastur``), the spectral constants are
``s_j = ∫S_j``, ``Gamma = ∫S_a S_y``, ``zeta = gamma ∫x Q_a Q_y``, ``kappa = lam_a lam_y ∫Q_a Q_y``.
The naive limits and the debiasing moment equations are those of the authors' code (their R scripts
``eval_methods.R``, ``run_all.R``; ``docs/papers/ecc_ridge.md#bias-and-debiasing``).

The asymptotic variances (:func:`variance_components`) were **derived** for this package
(``docs/papers/ecc_ridge.md#variances``, Haar-fluctuation and Gaussian-noise lemmas), not read from
the paper; they are checked against
Monte Carlo in ``tests/estimators/test_ecc_monte_carlo.py``.
"""

from __future__ import annotations

import numpy as np

from _core.validation import as_array, check_choice, check_instance, check_scalar

from . import marchenko_pastur as _mp

__all__ = [
    "ESTIMATORS",
    "SPLITS",
    "SpectralIntegrator",
    "check_model",
    "bias_constants",
    "naive_limit",
    "debias",
    "debias_factors",
    "variance_components",
    "asymptotic_variance",
    "prediction_risk",
    "prediction_optimal_lambda",
]

ESTIMATORS = ("dr", "nr", "int")
SPLITS = (2, 3)
_CONSTANTS = ("s_a", "s_y", "Gamma", "zeta", "kappa")


def _check_kind(estimator, split):
    return check_choice(estimator, "estimator", ESTIMATORS), check_choice(split, "split", SPLITS)


def _check_constants(c):
    """``c`` from :func:`bias_constants`: five finite keys, ``s_a s_y > 0`` and ``Gamma > 0``."""
    if not isinstance(c, dict) or any(k not in c for k in _CONSTANTS):
        raise TypeError(
            f"`c` must be the dict of bias_constants with keys {_CONSTANTS}; got "
            f"{type(c).__name__}."
        )
    out = {k: as_array(c[k], "c") for k in _CONSTANTS}
    if np.any(out["s_a"] * out["s_y"] <= 0) or np.any(out["Gamma"] <= 0):
        raise ValueError("`c` must have s_a * s_y > 0 and Gamma > 0 (bias_constants of lam > 0).")
    return out


def check_model(a2, b2, theta, var_eps, var_delta, cov_eps_delta):
    """The linear-Gaussian model's moments, validated, with the Cauchy–Schwarz constraints the
    derived variance formulas assume (``theta^2 <= a2 b2``, ``cov^2 <= var_eps var_delta``).

    Returns ``(a2, b2, theta, var_eps, var_delta, cov_eps_delta)`` as floats; raises
    ``ValueError`` naming the first argument that breaks a constraint.

    >>> check_model(1, 1, 0.5, 1, 1, 0.0)
    (1.0, 1.0, 0.5, 1.0, 1.0, 0.0)
    >>> check_model(1, 1, 2.0, 1, 1, 0.0)
    Traceback (most recent call last):
    ...
    ValueError: `theta` must satisfy theta^2 <= a2*b2 = 1 (Cauchy–Schwarz); got 2.
    """
    big = 1e100
    a2 = check_scalar(a2, "a2", lower=0.0, upper=big)
    b2 = check_scalar(b2, "b2", lower=0.0, upper=big)
    ve = check_scalar(var_eps, "var_eps", lower=0.0, upper=big)
    vd = check_scalar(var_delta, "var_delta", lower=0.0, upper=big)
    theta = check_scalar(theta, "theta", lower=-big, upper=big)
    ced = check_scalar(cov_eps_delta, "cov_eps_delta", lower=-big, upper=big)
    if theta**2 > a2 * b2 * (1 + 1e-12):
        raise ValueError(
            f"`theta` must satisfy theta^2 <= a2*b2 = {a2 * b2:g} (Cauchy–Schwarz); got {theta:g}."
        )
    if ced**2 > ve * vd * (1 + 1e-12):
        raise ValueError(
            f"`cov_eps_delta` must satisfy cov^2 <= var_eps*var_delta = {ve * vd:g}; got {ced:g}."
        )
    return a2, b2, theta, ve, vd, ced


# --------------------------------------------------------------------------------------------
# Spectral functions as sums of c * x^j Q_a^k Q_y^l, integrated in closed form or empirically
# --------------------------------------------------------------------------------------------


def _mul(f, g):
    out = {}
    for (j1, a1, b1), c1 in f.items():
        for (j2, a2, b2), c2 in g.items():
            key = (j1 + j2, a1 + a2, b1 + b2)
            out[key] = out.get(key, 0.0) + c1 * c2
    return out


def _add(*fs):
    out = {}
    for f in fs:
        for k, c in f.items():
            out[k] = out.get(k, 0.0) + c
    return out


def _scale(c, f):
    return {k: c * v for k, v in f.items()}


_ONE = {(0, 0, 0): 1.0}
_X = {(1, 0, 0): 1.0}
_QA = {(0, 1, 0): 1.0}
_QY = {(0, 0, 1): 1.0}
_SA = {(1, 1, 0): 1.0}
_SY = {(1, 0, 1): 1.0}


class SpectralIntegrator:
    """Integrates spectral functions of ``Sigma_hat`` at ``(lam_a, lam_y)``.

    The integrals are those of McGrath et al. 2025's bias and variance formulas
    (``docs/papers/ecc_ridge.md#as-implemented-here``: Marchenko–Pastur constants, after the
    authors' ``rgmp`` integrals).

    With ``eigenvalues=None`` the integrals are against the Marchenko–Pastur law ``F_gamma``
    (closed form, :func:`theory.marchenko_pastur.resolvent_moment`); otherwise against the empirical
    spectral distribution of the given ``p`` eigenvalues of ``X^T X / m`` (zeros included).
    ``lam_a`` and ``lam_y`` may be arrays (they broadcast); results have their shape.

    >>> integ = SpectralIntegrator(0.5, 1.0, 1.0)
    >>> round(float(integ.gamma), 2)
    0.5
    """

    def __init__(self, gamma, lam_a, lam_y, eigenvalues=None):
        self.gamma = check_scalar(gamma, "gamma", lower=_mp.GAMMA_MIN, upper=1e8)
        lam_a = as_array(lam_a, "lam_a", lower=0.0, upper=1e50, closed="right")
        lam_y = as_array(lam_y, "lam_y", lower=0.0, upper=1e50, closed="right")
        self.lam_a, self.lam_y = np.broadcast_arrays(lam_a, lam_y)
        self.eigenvalues = (
            None
            if eigenvalues is None
            else as_array(eigenvalues, "eigenvalues", ndim=1, min_size=1, lower=0.0, upper=1e50)
        )
        self._cache = {}

    def _term(self, key):
        if key not in self._cache:
            j, a, b = key
            lams = [self.lam_a] * a + [self.lam_y] * b
            if self.eigenvalues is None:
                if a <= 2 and b <= 2 and j <= 4:
                    if "table" not in self._cache:
                        self._cache["table"] = _mp._table(self.gamma, self.lam_a, self.lam_y, 4)
                    return self._cache["table"][key]
                val = (
                    _mp.resolvent_moment(self.gamma, lams, j)
                    if lams
                    else np.full(self.lam_a.shape, _mp.moment(j, self.gamma))
                )
            else:
                val = (
                    _mp.empirical_resolvent_moment(self.eigenvalues, lams, j)
                    if lams
                    else np.full(self.lam_a.shape, np.mean(self.eigenvalues**j))
                )
            self._cache[key] = val
        return self._cache[key]

    def __call__(self, f):
        return sum(c * self._term(k) for k, c in f.items())

    def var(self, f):
        """``Var_F(f) = ∫ f^2 - (∫ f)^2``."""
        return self(_mul(f, f)) - self(f) ** 2


def bias_constants(integ: SpectralIntegrator) -> dict:
    """``s_a, s_y, Gamma, zeta, kappa`` from a :class:`SpectralIntegrator`.

    The spectral constants of McGrath et al. 2025's bias formulas, as in the authors' code
    (``eval_methods.R``; ``docs/papers/ecc_ridge.md#as-implemented-here``).

    >>> c = bias_constants(SpectralIntegrator(0.5, 1.0, 1.0))
    >>> round(float(c["s_a"]), 6)  # 1 - m(-1) = 2.5 - sqrt(4.25) for the MP law at gamma = 1/2
    0.438447
    """
    check_instance(integ, "integ", SpectralIntegrator)
    return {
        "s_a": integ(_SA),
        "s_y": integ(_SY),
        "Gamma": integ(_mul(_SA, _SY)),
        "zeta": integ.gamma * integ(_mul(_X, _mul(_QA, _QY))),
        "kappa": integ.lam_a * integ.lam_y * integ(_mul(_QA, _QY)),
    }


def naive_limit(estimator, split, c: dict, theta, psi):
    """Limit of the naive estimator given constants ``c``.

    McGrath et al. 2025, the bias of the ridge plug-in estimators as in the authors' code
    (``docs/papers/ecc_ridge.md#bias-and-debiasing``).

    Three splits: INT ``theta + psi - s_a s_y theta``, NR ``psi + (1 - s_y) theta``,
    DR ``psi + (1 - s_a)(1 - s_y) theta``. Two splits: INT ``theta + psi - Gamma theta - zeta psi``,
    NR as three splits, DR ``psi + kappa theta + zeta psi``.

    >>> c = bias_constants(SpectralIntegrator(0.5, 1.0, 1.0))
    >>> nv = naive_limit("dr", 3, c, 0.5, 1.0)  # theta = 0.5, psi = 1
    >>> bool(np.isclose(nv, 1.0 + (1 - c["s_a"]) * (1 - c["s_y"]) * 0.5))  # DR, three splits
    True
    """
    estimator, split = _check_kind(estimator, split)
    c = _check_constants(c)
    theta = as_array(theta, "theta", lower=-1e100, upper=1e100)
    psi = as_array(psi, "psi", lower=-1e100, upper=1e100)
    if split == 3:
        if estimator == "int":
            return theta + psi - c["s_a"] * c["s_y"] * theta
        if estimator == "nr":
            return psi + (1 - c["s_y"]) * theta
        return psi + (1 - c["s_a"]) * (1 - c["s_y"]) * theta
    if estimator == "int":
        return theta + psi - c["Gamma"] * theta - c["zeta"] * psi
    if estimator == "nr":
        return psi + (1 - c["s_y"]) * theta
    return psi + c["kappa"] * theta + c["zeta"] * psi


def debias_factors(estimator, split, c: dict):
    """``(k, M)`` with ``psi_tilde = (naive - k theta_hat) / M`` (INT uses ``mean(AY)``, see below).

    McGrath et al. 2025's debiasing, from the authors' code
    (``docs/papers/ecc_ridge.md#bias-and-debiasing``): three
    splits ``M = 1`` and ``k = (1 - s_a s_y)/(s_a s_y)`` (INT), ``(1 - s_y)/(s_a s_y)`` (NR),
    ``(1 - s_a)(1 - s_y)/(s_a s_y)`` (DR). Two splits, solving the 2x2 moment system in
    ``(theta, psi)``: INT ``k = (1 - Gamma)/Gamma``, ``M = (Gamma - zeta)/Gamma``;
    NR ``k = (1 - s_y)/Gamma``, ``M = 1 - zeta (1 - s_y)/Gamma``; DR ``k = kappa/Gamma``,
    ``M = 1 + zeta - zeta kappa / Gamma``.

    >>> c = bias_constants(SpectralIntegrator(0.5, 1.0, 1.0))
    >>> k, M = debias_factors("dr", 3, c)  # three splits: M = 1
    >>> float(M), bool(np.isclose(k, (1 - c["s_a"]) * (1 - c["s_y"]) / (c["s_a"] * c["s_y"])))
    (1.0, True)
    """
    estimator, split = _check_kind(estimator, split)
    c = _check_constants(c)
    if split == 3:
        g = c["s_a"] * c["s_y"]
        k = {
            "int": (1 - g) / g,
            "nr": (1 - c["s_y"]) / g,
            "dr": (1 - c["s_a"]) * (1 - c["s_y"]) / g,
        }[estimator]
        return k, np.ones_like(np.asarray(g))
    G, z = c["Gamma"], c["zeta"]
    if estimator == "int":
        return (1 - G) / G, (G - z) / G
    if estimator == "nr":
        return (1 - c["s_y"]) / G, 1 - z * (1 - c["s_y"]) / G
    return c["kappa"] / G, 1 + z - z * c["kappa"] / G


def debias(estimator, split, naive, theta_hat, c: dict):
    """Debiased ``(psi_tilde, theta_tilde)`` from the naive estimate and ``theta_hat``.

    McGrath et al. 2025's debiased estimators (authors' code;
    ``docs/papers/ecc_ridge.md#bias-and-debiasing``).
    ``theta_tilde = theta_hat/(s_a s_y)`` (three splits) or ``(theta_hat - zeta psi_tilde)/Gamma``
    (two splits), the authors' ``theta_bc_hat``.

    >>> c = bias_constants(SpectralIntegrator(0.5, 1.0, 1.0))
    >>> naive = naive_limit("dr", 2, c, 0.5, 1.0)  # theta = 0.5, psi = 1
    >>> theta_hat = c["Gamma"] * 0.5 + c["zeta"] * 1.0  # the limit of the plug-in theta
    >>> [round(float(v), 9) for v in debias("dr", 2, naive, theta_hat, c)]  # recovers (psi, theta)
    [1.0, 0.5]
    """
    naive = as_array(naive, "naive", lower=-1e100, upper=1e100)
    theta_hat = as_array(theta_hat, "theta_hat", lower=-1e100, upper=1e100)
    k, M = debias_factors(estimator, split, c)
    c = _check_constants(c)
    if np.any(M == 0):
        raise ValueError("`c` gives a singular debiasing factor M = 0 for this estimator.")
    psi = (naive - k * theta_hat) / M
    if split == 3:
        theta = theta_hat / (c["s_a"] * c["s_y"])
    else:
        theta = (theta_hat - c["zeta"] * psi) / c["Gamma"]
    return psi, theta


# --------------------------------------------------------------------------------------------
# Asymptotic variance (derived here; docs/papers/ecc_ridge.md#variances)
# --------------------------------------------------------------------------------------------


def prediction_risk(integ: SpectralIntegrator, which: str, signal2, noise_var):
    """Out-of-sample excess risk ``signal2 * kappa(lam, lam) + noise_var * gamma ∫ x Q^2``.

    McGrath et al. 2025, Lemma F.1 (unit noise there):
    ``R(lam) = ∫ (lam^2 u^2 + gamma x)/(x + lam)^2 dF``. ``which`` in {"a", "y"} picks ``lam_a``
    or ``lam_y``.

    >>> round(float(prediction_risk(SpectralIntegrator(0.5, 1.0, 1.0), "a", 1.0, 1.0)), 4)
    0.4552
    """
    check_instance(integ, "integ", SpectralIntegrator)
    check_choice(which, "which", ("a", "y"))
    signal2 = as_array(signal2, "signal2", lower=0.0, upper=1e100)
    noise_var = as_array(noise_var, "noise_var", lower=0.0, upper=1e100)
    Q, lam = (_QA, integ.lam_a) if which == "a" else (_QY, integ.lam_y)
    QQ = _mul(Q, Q)
    return signal2 * lam**2 * integ(QQ) + noise_var * integ.gamma * integ(_mul(_X, QQ))


def prediction_optimal_lambda(gamma, signal2, noise_var):
    """``lam* = gamma * noise_var / signal2``, the minimiser of the ridge prediction risk.

    McGrath et al. 2025, Lemma F.2 (``c / u^2`` with unit noise; the derivative of the integrand of
    Lemma F.1 in ``lam`` has the sign of ``lam - gamma sigma^2/u^2``).

    >>> prediction_optimal_lambda(0.5, 1.0, 1.0)  # gamma sigma^2 / u^2
    0.5
    """
    gamma = check_scalar(gamma, "gamma", lower=0.0, upper=1e8, closed="right")
    signal2 = check_scalar(signal2, "signal2", lower=1e-100, upper=1e100)
    noise_var = check_scalar(noise_var, "noise_var", lower=0.0, upper=1e100)
    return gamma * noise_var / signal2


def _w2(integ, f, g, h, q, a2, b2, theta, ve, vd, ced):
    """Training-fold piece ``W(f, g, h, q)`` of the two-split variance (derived here)."""
    gm = integ.gamma
    return (
        (a2 * b2 + theta**2) / gm * integ.var(f)
        + ve * a2 * integ(_mul(_X, _mul(g, g)))
        + vd * b2 * integ(_mul(_X, _mul(h, h)))
        + 2 * ced * theta * integ(_mul(_X, _mul(g, h)))
        + gm * (ced**2 + ve * vd) * integ(_mul(_mul(_X, _X), _mul(q, q)))
    )


def variance_components(
    estimator, split, integ: SpectralIntegrator, *, a2, b2, theta, var_eps, var_delta, cov_eps_delta
) -> dict:
    r"""Pieces of ``lim m Var(psi_tilde)`` for one (estimator, split), derived here
    (``docs/papers/ecc_ridge.md#variances``).

    Returns a dict with ``"eval"`` (the conditional variance of the evaluated score given the
    training folds, already multiplied by ``c^2``), ``"train"`` (two splits: the training-fold piece
    ``W``) or ``"fold_a"`` / ``"fold_y"`` (three splits: the pieces of the fold fitting
    ``alpha_hat`` and of the fold fitting ``beta_hat``), and ``"M"``. With fold sizes ``m_E, m_T``,
    ``Var(psi_tilde) ≈ (eval/m_E + train/m_T) / M^2`` (two splits) and
    ``eval/m_E + fold_y/m_y + fold_a/m_a`` (three splits, ``M = 1``).

    Two splits: ``W = (a^2 b^2 + theta^2)/gamma Var_F(f) + s_e^2 a^2 ∫x g^2 + s_d^2 b^2 ∫x h^2
    + 2 psi theta ∫x g h + gamma (psi^2 + s_e^2 s_d^2) ∫x^2 q^2`` with ``(f, g, h, q)`` per
    estimator (derived here). Three splits: ``base + (b^2 |v|^2 + (beta^T v)^2) V_y / gamma
    + s_e^2 e_y |v|^2 + outer`` (derived here). Checked by Monte Carlo in
    ``tests/estimators/test_ecc_monte_carlo.py``
    and in the limits/symmetries of ``tests/estimators/test_ecc_theory.py``.

    >>> v = variance_components(
    ...     "dr", 2, SpectralIntegrator(0.5, 1.0, 1.0), a2=1.0, b2=1.0, theta=0.5, var_eps=1.0,
    ...     var_delta=1.0, cov_eps_delta=0.0,
    ... )
    >>> round(float((v["eval"] + v["train"]) / v["M"] ** 2), 4)  # asymptotic_variance, m_E = m_T
    3.7567
    """
    estimator, split = _check_kind(estimator, split)
    check_instance(integ, "integ", SpectralIntegrator)
    a2, b2, theta, ve, vd, ced = check_model(a2, b2, theta, var_eps, var_delta, cov_eps_delta)
    gm = integ.gamma
    c = bias_constants(integ)
    sa, sy, G, z, kap = c["s_a"], c["s_y"], c["Gamma"], c["zeta"], c["kappa"]
    la, ly = integ.lam_a, integ.lam_y
    r_a = prediction_risk(integ, "a", a2, vd)
    r_y = prediction_risk(integ, "y", b2, ve)
    var_ay = (a2 + vd) * (b2 + ve) + (theta + ced) ** 2
    QQ = _mul(_QA, _QY)
    k, M = debias_factors(estimator, split, c)
    if split == 2:
        SS, SQ, QS = _mul(_SA, _SY), _mul(_SA, _QY), _mul(_QA, _SY)
        if estimator == "int":
            ev = G**2 * var_ay
            W = _w2(integ, SS, SQ, QS, QQ, a2, b2, theta, ve, vd, ced)
            M = G - z
        elif estimator == "nr":
            ev = (a2 + vd) * (r_y + ve) + ((1 - sy) * theta + ced) ** 2
            W = _w2(
                integ,
                _add(_SY, _scale(k, SS)),
                _add(_QY, _scale(k, SQ)),
                _scale(k, QS),
                _scale(k, QQ),
                a2,
                b2,
                theta,
                ve,
                vd,
                ced,
            )
        else:
            ev = (r_y + ve) * (r_a + vd) + (kap * theta + z * ced + ced) ** 2
            W = _w2(
                integ,
                _add(_scale(la * ly, QQ), _scale(-k, SS)),
                _add(_scale(-la, QQ), _scale(-k, SQ)),
                _add(_scale(-ly, QQ), _scale(-k, QS)),
                _scale(1 - k, QQ),
                a2,
                b2,
                theta,
                ve,
                vd,
                ced,
            )
        return {"eval": ev, "train": W, "M": M}
    # three splits
    e_a = integ(_mul(_X, _mul(_QA, _QA)))
    e_y = integ(_mul(_X, _mul(_QY, _QY)))
    v_a = integ.var(_SA)
    v_y = integ.var(_SY)
    c_a = (a2 * b2 + theta**2) / gm * v_a + vd * b2 * e_a  # lim m Var(beta^T alpha_hat)
    if estimator == "int":
        base = var_ay
        g = sa * sy
        v2 = (a2 * integ(_mul(_SA, _SA)) + vd * gm * e_a) / g**2
        bv = theta / sy
        outer = c_a / sa**2
    elif estimator == "nr":
        base = (a2 + vd) * (r_y + ve) + ((1 - sy) * theta + ced) ** 2
        f = _add(_ONE, _scale(k, _SA))
        v2 = a2 * integ(_mul(f, f)) + k**2 * vd * gm * e_a
        bv = theta / sy
        outer = ((1 - sy) / sa) ** 2 * c_a
    else:
        base = (r_y + ve) * (r_a + vd) + ((1 - sa) * (1 - sy) * theta + ced) ** 2
        f = _add(_ONE, _scale(k - 1, _SA))
        v2 = a2 * integ(_mul(f, f)) + (k - 1) ** 2 * vd * gm * e_a
        bv = (1 - sa) * theta / sy
        outer = ((1 - sy) / sa) ** 2 * c_a
    fold_y = (b2 * v2 + bv**2) * v_y / gm + ve * e_y * v2
    return {"eval": base, "fold_y": fold_y, "fold_a": outer, "M": np.ones_like(np.asarray(sa))}


def asymptotic_variance(
    estimator, split, lam_a, lam_y, gamma, *, a2, b2, theta, var_eps, var_delta, cov_eps_delta
):
    """``lim m Var(psi_tilde)`` (equal fold sizes ``m``), vectorised over ``lam_a``, ``lam_y``.

    The sum of :func:`variance_components` (divided by ``M^2``). Derived here; unvalidated
    internal version of ``estimators.asymptotic_variance``.

    >>> v = asymptotic_variance(
    ...     "dr", 2, 1.0, 1.0, 0.5, a2=1.0, b2=1.0, theta=0.5, var_eps=1.0, var_delta=1.0,
    ...     cov_eps_delta=0.0,
    ... )
    >>> round(float(v), 4)
    3.7567
    """
    _check_kind(estimator, split)
    check_model(a2, b2, theta, var_eps, var_delta, cov_eps_delta)
    integ = SpectralIntegrator(gamma, lam_a, lam_y)
    comp = variance_components(
        estimator,
        split,
        integ,
        a2=a2,
        b2=b2,
        theta=theta,
        var_eps=var_eps,
        var_delta=var_delta,
        cov_eps_delta=cov_eps_delta,
    )
    if split == 2:
        return (comp["eval"] + comp["train"]) / comp["M"] ** 2
    return comp["eval"] + comp["fold_y"] + comp["fold_a"]
