"""Public entry points for the asymptotic theory (validated wrappers of
:mod:`theory.nonlinear_laplacian`): ``critical_threshold``, ``outlier``, ``bulk_edge``."""

from __future__ import annotations

from functools import cache

from _core.validation import check_scalar
from theory import nonlinear_laplacian as _nl
from theory.free_convolution import free_convolution_density
from theory.nonlinear_laplacian import EtaLaw, null_law

from ._sigmas import as_sigma

__all__ = [
    "as_prior",
    "critical_threshold",
    "threshold",
    "outlier",
    "outlier_limits",
    "bulk_edge",
    "bulk_density",
    "PRIORS",
]

PRIORS = ("planted_submatrix", "sparse_nnpca")


@cache
def _builtin(name: str) -> EtaLaw:
    return EtaLaw.point(1.0) if name == "planted_submatrix" else EtaLaw.half_normal()


def as_prior(prior) -> EtaLaw:
    """``"planted_submatrix"`` (η = δ1), ``"sparse_nnpca"`` (η = |N(0,1)|), an
    :class:`~theory.nonlinear_laplacian.EtaLaw`, or a frozen continuous scipy.stats law on
    [0, ∞). The priors of Ma & Kunisky 2025, Sec. 2 (planted submatrix, Gaussian sparse NNPCA)."""
    if isinstance(prior, str):
        if prior not in PRIORS:
            raise ValueError(f"`prior` must be one of {PRIORS} or a law for eta; got {prior!r}.")
        return _builtin(prior)
    if isinstance(prior, EtaLaw):
        return prior
    if hasattr(prior, "pdf") and hasattr(prior, "ppf"):
        return EtaLaw.from_scipy(prior)
    raise TypeError(
        f"`prior` must be a name in {PRIORS}, an EtaLaw or a frozen scipy.stats law; "
        f"got {type(prior).__name__}."
    )


def threshold(sigma, prior="planted_submatrix") -> _nl.ThresholdResult:
    """β*(σ) with z*, the regime and the edge (a :class:`ThresholdResult`).

    Ma & Kunisky 2025, Sec. 3 (β*) and Biane 1997, Cor. 2 (z*, the edge); the single-root form
    is derived here (see :mod:`theory.nonlinear_laplacian`).

    >>> from spectral import sigmas
    >>> round(threshold(sigmas.zero()).beta_star, 9)  # sigma = 0: the BBP threshold
    1.0
    """
    return _nl.critical_threshold(as_sigma(sigma), as_prior(prior))


def critical_threshold(sigma, prior="planted_submatrix") -> float:
    """Critical signal strength β*(σ): L_σ has an outlier iff β > β* (Ma & Kunisky 2025, Sec. 3).

    β*(σ) = inf{β : H'(θ(β)) > 0}, computed as the unique root of β S_β(z*) = 1 (see
    :mod:`theory.nonlinear_laplacian`), to ~1e-12.

    Examples
    --------
    >>> from spectral import sigmas
    >>> round(critical_threshold(sigmas.tanh(1.70974534, 0.58384117)), 8)
    0.75500739
    """
    return threshold(sigma, prior).beta_star


def outlier_limits(sigma, beta, prior="planted_submatrix") -> _nl.OutlierResult:
    """Full :class:`OutlierResult` (θ, H'(θ), edge, whether an outlier exists) at ``beta``.

    Ma & Kunisky 2025, main theorem of Sec. 3 (official code's ``outlier_eval``).

    >>> from spectral import sigmas
    >>> r = outlier_limits(sigmas.zero(), 0.5)  # below beta* = 1: no outlier
    >>> r.exists, round(r.edge, 9)
    (False, 2.0)
    """
    beta = check_scalar(beta, "beta", lower=0.0)
    return _nl.outlier(as_sigma(sigma), beta, as_prior(prior))


def outlier(sigma, beta, prior="planted_submatrix") -> tuple[float, float]:
    """Limits (λ1(L), ⟨v1(L), x⟩²) at signal strength ``beta`` (Ma & Kunisky 2025, Sec. 3).

    Above β*: (H(θ(β)), H'(θ)·⟨v1(X), x⟩²); below: (E₊, 0). σ = 0 gives BBP:
    (β + 1/β, 1 - 1/β²).

    >>> from spectral import sigmas
    >>> outlier(sigmas.zero(), 2.0)  # sigma = 0: BBP, (beta + 1/beta, 1 - 1/beta^2)
    (2.5, 0.75)
    """
    r = outlier_limits(sigma, beta, prior)
    return r.eigenvalue, r.overlap


def bulk_edge(sigma) -> float:
    """Right edge of the bulk μ_SC ⊞ Law(σ(g)) of L_σ: the null limit of λ1(L).

    Ma & Kunisky 2025, Sec. 3.1; the edge by Biane 1997, Cor. 2.

    >>> from spectral import sigmas
    >>> round(bulk_edge(sigmas.constant(1.0)), 9)  # the semicircle edge 2, shifted by 1
    3.0
    """
    return _nl.bulk_edge(as_sigma(sigma))


def bulk_density(sigma, *, points: int = 2001):
    """Density of μ_SC ⊞ Law(σ(g)) (a callable :class:`FreeConvolutionDensity`).

    The bulk law of Ma & Kunisky 2025, Sec. 3.1, by Biane 1997, Prop. 2.

    >>> import math
    >>> from spectral import sigmas
    >>> density = bulk_density(sigmas.zero(), points=201)  # the semicircle: 1/pi at 0
    >>> round(float(density(0.0)) * math.pi, 6)
    1.0
    """
    return free_convolution_density(null_law(as_sigma(sigma)), points=points)
