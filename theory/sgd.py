r"""Last-iterate bounds for constant-stepsize SGD on smooth convex losses near interpolation.

Main source: Attia, Schliserman, Sherman & Koren, *Fast Last-Iterate Convergence of SGD in the
Smooth Interpolation Regime*, NeurIPS 2025, arXiv 2507.11274v2 (the NeurIPS version, which allows
:math:`0 < \eta < 2/\beta`). Setting: each per-sample loss :math:`f(\cdot; z)` is convex and
:math:`\beta`-smooth, SGD runs :math:`w_{t+1} = w_t - \eta \nabla f(w_t; z_t)` with i.i.d.
samples, :math:`D^2 = \|w_1 - w_\star\|^2` and :math:`\sigma_\star^2 = E\|\nabla f(w_\star; z)\|^2`.

**Constants.** The paper states the main bound in :math:`\widetilde O` form (Thm 1, as given in the
abstract of v2). Its numerical constants and the logarithmic factors hidden in :math:`\widetilde O`
could not be read from the paper's body here, so every function below that encodes a
:math:`\widetilde O` / :math:`O` statement takes its constant(s) as keyword parameters (default 1)
and says so. The one explicit constant established from a public source is the continual-learning
bound :math:`13/\sqrt{k}` (Attia et al. 2025, as restated by Tsipory, Levinstein, Evron, Kong,
Needell & Soudry 2025, Sec. 5), see :func:`continual_loss_bound`. Own derivations say "derived
here" and name the test that checks them.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.optimize import minimize_scalar

from _core.validation import as_array, check_bool, check_finite_result, check_scalar

_BIG = 1e100  # magnitudes beyond this overflow the products below; no bound here is that large

__all__ = [
    "check_stepsize",
    "bias_term",
    "noise_term",
    "last_iterate_bound",
    "last_iterate_rate_exponent",
    "noiseless_bound",
    "tuned_stepsize",
    "tuned_rate",
    "optimal_stepsize",
    "continual_loss_bound",
    "evron2025_rate",
    "varre2021_rate",
    "averaged_iterate_bound",
    "fejer_decrease",
    "quadratic_gd_loss_ratio",
    "rare_curvature_risk",
    "rare_curvature_worst_p",
    "ar1_risk",
    "ar1_floor",
    "commuting_risk",
]


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
def _horizon(T, name="T"):
    """``T`` as a float64 array (scalar or grid) with every entry >= 1."""
    arr = as_array(T, name)
    if arr.size == 0:
        raise ValueError(f"`{name}` must be non-empty; got an empty array.")
    if np.any(arr < 1):
        raise ValueError(f"`{name}` must be >= 1 (number of SGD steps); got min {arr.min():g}.")
    return arr


def _bound(fn):
    """Evaluate a bound with float64 overflow left to :func:`_out` (which raises
    :class:`NumericalError` on a non-finite result) instead of a RuntimeWarning."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            return fn(*args, **kwargs)

    return wrapper


def _out(arr):
    """A bound as float (scalar) or array; one that overflows float64 (a step size or horizon at
    the edge of its range) is a :class:`NumericalError`, never an inf."""
    arr = check_finite_result(arr, "the bound (float64 overflow: `eta`, `T` or a constant extreme)")
    return float(arr) if np.ndim(arr) == 0 else arr


def check_stepsize(eta, beta) -> tuple[float, float]:
    r"""Validate ``0 < eta < 2/beta`` (Attia et al. 2025 v2, Thm 1 hypothesis); return floats.

    At :math:`\eta = 2/\beta` SGD on a quadratic with curvature :math:`\beta` is a pure reflection
    and above it it diverges (see :func:`quadratic_gd_loss_ratio`), so both are rejected.
    """
    beta = _beta(beta)
    eta = check_scalar(eta, "eta", lower=0.0, closed="neither")
    if not eta * beta < 2.0:
        raise ValueError(
            f"`eta` must satisfy 0 < eta < 2/beta = {2.0 / beta:g} (Attia et al. 2025, Thm 1); "
            f"got eta = {eta:g}, beta*eta = {beta * eta:g}. For eta >= 2/beta SGD need not "
            "converge: see theory.sgd.quadratic_gd_loss_ratio."
        )
    return eta, beta


def _nonneg(x, name):
    return check_scalar(x, name, lower=0.0, upper=_BIG)


def _beta(beta):
    return check_scalar(beta, "beta", lower=1.0 / _BIG, upper=_BIG)


# --------------------------------------------------------------------------------------------------
# Attia et al. 2025, Theorem 1 and its corollaries
# --------------------------------------------------------------------------------------------------
@_bound
def bias_term(T, eta, beta, dist2, *, c_bias=1.0):
    r"""Bias (optimisation) term of the last-iterate bound.

    .. math:: c_b \, \frac{D^2}{\eta (2 - \beta\eta)\, T^{1 - \beta\eta/2}}

    Source: Attia et al. 2025 (arXiv 2507.11274v2), Thm 1 (first term of the :math:`\widetilde O`
    bound in the abstract); :math:`D^2` restored by dimensional analysis. ``c_bias`` stands for the
    paper's constant and log factor, which are not established here (parameter, default 1).
    Decreasing in ``T``. ``T`` may be an array (a grid).

    >>> float(bias_term(100, 1.0, 1.0, 1.0))  # D^2 / (1 * 1 * 100^(1/2))
    0.1
    """
    eta, beta = check_stepsize(eta, beta)
    T = _horizon(T)
    dist2 = _nonneg(dist2, "dist2")
    c_bias = _nonneg(c_bias, "c_bias")
    be = beta * eta
    return _out(c_bias * dist2 / (eta * (2.0 - be) * T ** (1.0 - be / 2.0)))


@_bound
def noise_term(T, eta, beta, sigma2_star, *, c_noise=1.0):
    r"""Noise term of the last-iterate bound.

    .. math:: c_n \, \frac{\eta}{(2 - \beta\eta)^2}\, T^{\beta\eta/2}\, \sigma_\star^2

    Source: Attia et al. 2025 (arXiv 2507.11274v2), Thm 1 (second term). ``c_noise`` stands for
    the paper's constant and log factor, not established here (parameter, default 1). Increasing in
    ``T``.

    >>> float(noise_term(100, 1.0, 1.0, 1.0))  # 1 / 1^2 * 100^(1/2) * 1
    10.0
    """
    eta, beta = check_stepsize(eta, beta)
    T = _horizon(T)
    sigma2_star = _nonneg(sigma2_star, "sigma2_star")
    c_noise = _nonneg(c_noise, "c_noise")
    be = beta * eta
    return _out(c_noise * eta / (2.0 - be) ** 2 * T ** (be / 2.0) * sigma2_star)


@_bound
def last_iterate_bound(T, eta, beta, dist2, sigma2_star, *, c_bias=1.0, c_noise=1.0):
    r"""Last-iterate excess-risk bound of constant-step SGD (both terms).

    .. math::
        E f(w_T) - f_\star \lesssim
        \frac{c_b D^2}{\eta (2-\beta\eta) T^{1-\beta\eta/2}}
        + \frac{c_n \eta}{(2-\beta\eta)^2} T^{\beta\eta/2} \sigma_\star^2 ,
        \qquad 0 < \eta < 2/\beta.

    Source: Attia et al. 2025 (arXiv 2507.11274v2), Thm 1. The constants ``c_bias`` and
    ``c_noise`` (which also absorb the log factors of :math:`\widetilde O`) are not established
    from the paper here; they are parameters (default 1), so the value is the bound's *shape*.

    Parameters
    ----------
    T : int, float or array
        Number of SGD steps (>= 1); an array gives the bound on a grid.
    eta, beta : float
        Stepsize and smoothness; ``0 < eta < 2/beta`` is required (``ValueError`` otherwise).
    dist2 : float
        :math:`D^2 = \|w_1 - w_\star\|^2 \ge 0`.
    sigma2_star : float
        :math:`\sigma_\star^2 = E\|\nabla f(w_\star; z)\|^2 \ge 0`.

    Examples
    --------
    >>> round(last_iterate_bound(100, 1.0, 1.0, 1.0, 0.0), 6)   # 1 / (1 * 1 * 100**0.5)
    0.1
    """
    return _add(
        bias_term(T, eta, beta, dist2, c_bias=c_bias),
        noise_term(T, eta, beta, sigma2_star, c_noise=c_noise),
    )


def _add(a, b):
    return _out(np.asarray(a) + np.asarray(b))


def last_iterate_rate_exponent(eta, beta) -> float:
    r"""Exponent :math:`1 - \beta\eta/2` of the bias term's decay :math:`T^{-(1-\beta\eta/2)}`.

    Source: Attia et al. 2025, Thm 1. In (0, 1) for :math:`0 < \eta < 2/\beta`.

    >>> last_iterate_rate_exponent(1.0, 1.0)  # 1 - beta eta / 2
    0.5
    """
    eta, beta = check_stepsize(eta, beta)
    return 1.0 - beta * eta / 2.0


def noiseless_bound(T, beta, dist2, *, c=1.0):
    r"""The :math:`\sigma_\star = 0`, :math:`\eta = 1/\beta` corollary: :math:`c\beta D^2/\sqrt{T}`.

    Source: Attia et al. 2025, abstract / corollary of Thm 1 (rate :math:`O(1/\sqrt T)`, no log
    factor stated). It is :func:`last_iterate_bound` at ``eta = 1/beta``, ``sigma2_star = 0``.
    ``c`` is the paper's constant, not established here (parameter, default 1).

    >>> float(noiseless_bound(100, 1.0, 1.0))
    0.1
    """
    beta = _beta(beta)
    c = _nonneg(c, "c")
    return bias_term(T, 1.0 / beta, beta, dist2, c_bias=c)


def tuned_stepsize(T, beta, dist2, sigma2_star) -> float:
    r"""Stepsize :math:`\eta = \min\{1/(\beta \max(1, \ln T)),\ D/(\sigma_\star \sqrt{T})\}`.

    Derived here (a standard balancing of the two terms of Thm 1 of Attia et al. 2025, matching
    the tuned-rate corollary of the abstract): with :math:`\beta\eta \le 1/\ln T` the factor
    :math:`T^{\beta\eta/2} \le e^{1/2}`, and :math:`D/(\sigma_\star\sqrt T)` balances
    :math:`D^2/(\eta T)` against :math:`\eta\sigma_\star^2`. Checked by
    ``tests/theory/test_sgd.py::test_tuned_rate_matches_bound_at_tuned_stepsize``.

    >>> tuned_stepsize(100, 1.0, 1.0, 1.0)  # min(1 / ln 100, 1 / 10)
    0.1
    """
    T = check_scalar(T, "T", lower=1.0)
    beta = _beta(beta)
    dist2 = _nonneg(dist2, "dist2")
    sigma2_star = _nonneg(sigma2_star, "sigma2_star")
    eta = 1.0 / (beta * max(1.0, np.log(T)))
    if sigma2_star > 0.0 and dist2 > 0.0:
        eta = min(eta, np.sqrt(dist2 / (sigma2_star * T)))
    return float(eta)


@_bound
def tuned_rate(T, beta, dist2, sigma2_star, *, c=1.0):
    r"""Tuned-stepsize rate :math:`c\,(\beta D^2 \max(1,\ln T)/T + \sigma_\star D/\sqrt{T})`.

    Source: Attia et al. 2025, abstract (rate :math:`\widetilde O(1/T + \sigma_\star/\sqrt T)`,
    with units restored and the log factor written as :math:`\ln T`, derived here from Thm 1 at
    :func:`tuned_stepsize`). ``c`` is not established here (parameter, default 1).

    >>> round(float(tuned_rate(100, 1.0, 1.0, 1.0)), 4)  # ln(100) / 100 + 1 / 10
    0.1461
    """
    T = _horizon(T)
    beta = _beta(beta)
    dist2 = _nonneg(dist2, "dist2")
    sigma2_star = _nonneg(sigma2_star, "sigma2_star")
    c = _nonneg(c, "c")
    L = np.maximum(1.0, np.log(T))
    return _out(c * (beta * dist2 * L / T + np.sqrt(sigma2_star * dist2 / T)))


def optimal_stepsize(T, beta, dist2, sigma2_star, *, c_bias=1.0, c_noise=1.0) -> float:
    r"""The stepsize in :math:`(0, 2/\beta)` that minimises :func:`last_iterate_bound`.

    Minimised numerically in :math:`x = \beta\eta \in (0, 2)` (the bound tends to :math:`+\infty`
    at both ends when ``dist2 > 0``), by a bounded scalar search on a log scale refined from the
    best point of a grid. With ``sigma2_star = 0`` the minimiser is interior and does not depend
    on ``dist2``. Returns ``eta``. The bound is Attia et al. 2025, Thm 1; its minimiser is computed
    here (no closed form in the paper).

    >>> round(optimal_stepsize(100, 1.0, 1.0, 1.0), 3)
    0.101
    """
    T = check_scalar(T, "T", lower=1.0)
    beta = _beta(beta)
    dist2 = _nonneg(dist2, "dist2")
    sigma2_star = _nonneg(sigma2_star, "sigma2_star")
    c_bias, c_noise = _nonneg(c_bias, "c_bias"), _nonneg(c_noise, "c_noise")
    if dist2 == 0.0:
        raise ValueError("`dist2` must be > 0 for the bound to have a minimiser; got 0.")

    def obj(u):  # u = log(x / (2 - x)) maps R onto x = beta*eta in (0, 2)
        x = 2.0 / (1.0 + np.exp(-u))
        x = min(max(x, 1e-300), 2.0 * (1.0 - 1e-16))
        b = c_bias * dist2 * beta / (x * (2.0 - x) * T ** (1.0 - x / 2.0))
        n = c_noise * x / beta / (2.0 - x) ** 2 * T ** (x / 2.0) * sigma2_star
        return np.log(b + n)

    grid = np.linspace(-30.0, 30.0, 601)
    vals = np.array([obj(u) for u in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(obj, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    x = 2.0 / (1.0 + np.exp(-res.x))
    return float(x / beta)


# --------------------------------------------------------------------------------------------------
# continual learning and prior bounds
# --------------------------------------------------------------------------------------------------
@_bound
def continual_loss_bound(k):
    r"""Continual linear regression, random task order: :math:`E\,\mathcal L(w_k) \le 13/\sqrt{k}`.

    :math:`\mathcal L(w) = \frac{1}{T}\sum_m \|X_m w - y_m\|^2 / (\|w_\star\|^2 R^2)` with
    :math:`R = \max_m \|X_m\|` and :math:`w_0 = 0`, for orderings with or without replacement.
    Source: Attia et al. 2025, as restated (with the constant 13) by Tsipory et al. 2025,
    *Are Greedy Task Orderings Better Than Random in Continual Linear Regression?*, Sec. 5.
    This is the one explicit constant available here.

    >>> float(continual_loss_bound(169))  # 13 / sqrt(169)
    1.0
    """
    k = _horizon(k, "k")
    return _out(13.0 / np.sqrt(k))


@_bound
def evron2025_rate(k, *, replacement=True, dim=None, mean_rank=None, n_tasks=None, c=1.0):
    r"""Prior rate of Evron et al. 2025 for realizable continual / Kaczmarz-type regression.

    With replacement :math:`c\min(k^{-1/4}, \sqrt{d-\bar r}/k, \sqrt{T\bar r}/k)`; without
    replacement (``k = T`` tasks seen once) :math:`c\min(T^{-1/4}, (d-\bar r)/T)`, for the
    normalised loss of :func:`continual_loss_bound`. Terms whose data (``dim``, ``mean_rank``,
    ``n_tasks``) are not given are left out. Source: Evron, Levinstein, Schliserman, Sherman,
    Koren, Soudry & Srebro 2025 (arXiv 2504.04579), as tabulated by Tsipory et al. 2025 (App. F,
    Table 1). ``c`` is not established here (parameter, default 1).

    >>> float(evron2025_rate(16))  # 16^(-1/4)
    0.5
    """
    k = _horizon(k, "k")
    c = _nonneg(c, "c")
    replacement = check_bool(replacement, "replacement")
    terms = [k**-0.25]
    if dim is not None and mean_rank is not None:
        dim = check_scalar(dim, "dim", lower=1.0)
        mean_rank = check_scalar(mean_rank, "mean_rank", lower=0.0, upper=dim)
        terms.append(np.sqrt(dim - mean_rank) / k if replacement else (dim - mean_rank) / k)
    if replacement and n_tasks is not None and mean_rank is not None:
        n_tasks = check_scalar(n_tasks, "n_tasks", lower=1.0)
        terms.append(np.sqrt(n_tasks * mean_rank) / k)
    return _out(c * np.minimum.reduce(terms))


@_bound
def varre2021_rate(T, eta, beta, dist2, *, c=1.0):
    r"""Noiseless least-squares last-iterate rate :math:`c\,D^2/(\eta T)` (Varre et al. 2021).

    Source: Varre, Pillaud-Vivien & Flammarion, *Last iterate convergence of SGD for least-squares
    in the interpolation regime*, NeurIPS 2021 (arXiv 2102.03183), the rate without source /
    capacity conditions. Their exact step-size condition and constant were not verified here:
    ``c`` is a parameter (default 1) and ``eta`` is required to satisfy ``0 < eta <= 1/beta``.

    >>> float(varre2021_rate(100, 0.5, 1.0, 1.0))  # 1 / (0.5 * 100)
    0.02
    """
    beta = _beta(beta)
    eta = check_scalar(eta, "eta", lower=0.0, closed="neither")
    if eta > 1.0 / beta:
        raise ValueError(
            f"`eta` must satisfy 0 < eta <= 1/beta = {1.0 / beta:g} (`beta` = {beta:g}); "
            f"got {eta:g}."
        )
    T = _horizon(T)
    dist2 = _nonneg(dist2, "dist2")
    c = _nonneg(c, "c")
    return _out(c * dist2 / (eta * T))


@_bound
def averaged_iterate_bound(T, eta, beta, dist2):
    r"""Interpolation bound for the mean excess risk along the path (explicit constant).

    .. math:: \frac{1}{T}\sum_{t=0}^{T-1} E[f(w_t) - f_\star]
              \le \frac{D^2}{2\eta\,\min(1, 2-\beta\eta)\,T}, \qquad \sigma_\star = 0.

    Derived here: with a common minimiser, co-coercivity gives
    :math:`\|w_{t+1}-w_\star\|^2 \le \|w_t-w_\star\|^2
    - 2\eta\min(1, 2-\beta\eta)(f_{z_t}(w_t)-f_{z_t}(w_\star))`;
    sum and take expectations. Checked by
    ``tests/dynamics/test_sgd.py::test_averaged_iterate_bound_holds``.

    >>> float(averaged_iterate_bound(100, 0.5, 1.0, 1.0))  # 1 / (2 * 0.5 * 1 * 100)
    0.01
    """
    eta, beta = check_stepsize(eta, beta)
    T = _horizon(T)
    dist2 = _nonneg(dist2, "dist2")
    return _out(dist2 / (2.0 * eta * min(1.0, 2.0 - beta * eta) * T))


@_bound
def fejer_decrease(eta, beta, grad_norm2):
    r"""Guaranteed one-step decrease :math:`\eta(2/\beta - \eta)\|\nabla f(w_t; z_t)\|^2`.

    With :math:`\sigma_\star = 0` every path satisfies
    :math:`\|w_{t+1}-w_\star\|^2 \le \|w_t-w_\star\|^2 - \eta(2/\beta-\eta)\|\nabla f(w_t;z_t)\|^2`
    for every minimiser :math:`w_\star` (co-coercivity of a :math:`\beta`-smooth convex function
    minimised at :math:`w_\star`; derived here, standard). Checked pathwise by
    ``tests/dynamics/test_sgd.py::test_fejer_monotone``.

    >>> float(fejer_decrease(0.5, 1.0, 2.0))  # 0.5 * 1.5 * 2
    1.5
    """
    eta, beta = check_stepsize(eta, beta)
    g = as_array(grad_norm2, "grad_norm2")
    if np.any(g < 0):
        raise ValueError("`grad_norm2` must be >= 0.")
    return _out(eta * (2.0 / beta - eta) * g)


@_bound
def quadratic_gd_loss_ratio(T, eta, beta):
    r"""Loss ratio :math:`f(w_T)/f(w_0) = (1-\beta\eta)^{2T}` on :math:`f(w) = \tfrac\beta2 w^2`.

    Any ``eta > 0`` is accepted: this is the function that shows what happens outside Thm 1's
    range. At :math:`\eta = 2/\beta` the ratio is 1 for every ``T`` (pure reflection); for
    :math:`\eta > 2/\beta` it grows geometrically, :math:`|1-\beta\eta|^{2T} \to \infty`.
    Derived here (one line); every sample of this instance has curvature exactly :math:`\beta`, so
    SGD equals GD. Checked against simulation in ``tests/dynamics/test_sgd.py``.

    >>> float(quadratic_gd_loss_ratio(10, 0.5, 1.0)) == 0.5**20  # |1 - beta eta|^(2T)
    True
    """
    beta = _beta(beta)
    eta = check_scalar(eta, "eta", lower=0.0, closed="neither")
    T = _horizon(T)
    with np.errstate(over="ignore"):
        ratio = np.abs(1.0 - beta * eta) ** (2.0 * T)
    return _out(
        check_finite_result(ratio, "the loss ratio |1 - beta*eta|^(2T)", eta=eta, beta=beta)
    )


# --------------------------------------------------------------------------------------------------
# exactly solvable families (derived here; checked against the simulators in tests/dynamics)
# --------------------------------------------------------------------------------------------------
def _contraction(eta, beta):
    eta, beta = check_stepsize(eta, beta)
    return eta, beta, beta * eta * (2.0 - beta * eta)


@_bound
def rare_curvature_risk(T, eta, beta, p, w0):
    r"""Exact :math:`E f(w_T) - f_\star = \tfrac{p\beta}{2} w_0^2 (1 - p c)^T`.

    Here :math:`c = \beta\eta(2-\beta\eta)`.

    Instance: :math:`f(w; z) = z\,\tfrac{\beta}{2} w^2`, :math:`z \sim \mathrm{Bernoulli}(p)`.
    Derived here: :math:`E[(1-\eta\beta z)^2] = 1 - pc`. Checked by
    ``tests/dynamics/test_sgd.py::test_scalar_families_closed_forms``.

    >>> float(rare_curvature_risk(1, 0.5, 1.0, 0.5, 1.0))  # 0.25 * (1 - 0.5 * 0.75)
    0.15625
    """
    eta, beta, c = _contraction(eta, beta)
    p = check_scalar(p, "p", lower=0.0, upper=1.0)
    w0 = check_scalar(w0, "w0", lower=-_BIG, upper=_BIG)
    T = as_array(T, "T", lower=0.0)
    return _out(0.5 * p * beta * w0**2 * (1.0 - p * c) ** T)


def rare_curvature_worst_p(T, eta, beta) -> float:
    r"""The :math:`p` maximising :func:`rare_curvature_risk` at horizon ``T``: :math:`1/(c(T+1))`.

    Derived here (:math:`\partial_p [p(1-pc)^T] = 0`). There the risk is
    :math:`\approx w_0^2/(2e\,\eta(2-\beta\eta)T)`: a lower-bound instance showing that the
    :math:`1/(\eta(2-\beta\eta))` prefactor of Thm 1 is necessary.

    >>> rare_curvature_worst_p(9, 1.0, 1.0)  # 1 / (1 * 10)
    0.1
    """
    eta, beta, c = _contraction(eta, beta)
    T = float(check_scalar(T, "T", lower=1.0))
    return float(min(1.0, 1.0 / (c * (T + 1.0))))


@_bound
def ar1_risk(T, eta, beta, s2, w0):
    r"""Exact excess risk of SGD on :math:`f(w; z) = \tfrac\beta2 (w - z)^2`, :math:`Ez=0`.

    :math:`\mathrm{Var}\,z=s^2`:

    .. math:: \tfrac\beta2\Big[(1-\beta\eta)^{2T} w_0^2
              + \frac{\beta\eta s^2 (1-(1-\beta\eta)^{2T})}{2-\beta\eta}\Big]

    with :math:`\sigma_\star^2 = \beta^2 s^2`. Derived here (AR(1) recursion). Checked by
    ``tests/dynamics/test_sgd.py::test_scalar_families_closed_forms``.

    >>> float(ar1_risk(1, 0.5, 1.0, 1.0, 1.0))  # 0.5 * (0.25 + 0.5 * 0.75 / 1.5)
    0.25
    """
    eta, beta = check_stepsize(eta, beta)
    s2 = _nonneg(s2, "s2")
    w0 = check_scalar(w0, "w0", lower=-_BIG, upper=_BIG)
    T = as_array(T, "T", lower=0.0)
    be = beta * eta
    r = (1.0 - be) ** (2.0 * T)
    return _out(0.5 * beta * (r * w0**2 + be * s2 * (1.0 - r) / (2.0 - be)))


def ar1_floor(eta, beta, sigma2_star) -> float:
    r"""Stationary excess risk of the AR(1) instance: :math:`\eta\sigma_\star^2 / (2(2-\beta\eta))`.

    Derived here (``T -> inf`` in :func:`ar1_risk`). Any valid noise term must dominate it.

    >>> ar1_floor(1.0, 1.0, 1.0)  # eta sigma^2 / (2 (2 - beta eta))
    0.5
    """
    eta, beta = check_stepsize(eta, beta)
    sigma2_star = _nonneg(sigma2_star, "sigma2_star")
    return float(eta * sigma2_star / (2.0 * (2.0 - beta * eta)))


@_bound
def commuting_risk(T, eta, beta, p, w0):
    r"""Exact risk of the commuting mixture: :math:`\sum_k \frac{p_k\beta}{2} w_{0,k}^2 (1-p_kc)^T`.

    Instance: sample :math:`k` with probability :math:`p_k`, loss
    :math:`\tfrac\beta2 (e_k^\top w)^2`; coordinates decouple. Derived here. Checked by
    ``tests/dynamics/test_sgd.py::test_scalar_families_closed_forms``.

    >>> float(commuting_risk(1, 0.5, 1.0, [0.5, 0.5], [1.0, 1.0]))
    0.3125
    """
    eta, beta, c = _contraction(eta, beta)
    p = as_array(p, "p", ndim=1, min_size=1)
    w0 = as_array(w0, "w0", shape=(p.size,), lower=-_BIG, upper=_BIG)
    if np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(
            f"`p` must be a probability vector (>= 0, summing to 1); got min {p.min():g} and "
            f"sum {p.sum():.12g}."
        )
    T = as_array(T, "T", lower=0.0)
    terms = 0.5 * p * beta * w0**2 * (1.0 - p * c) ** T[..., None]
    return _out(terms.sum(axis=-1))
