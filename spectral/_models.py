"""Planted models, the nonlinear Laplacian L = Ŷ + diag(σ(Ŷ1)) and the spectral detector.

Models follow Ma & Kunisky 2025 (arXiv 2505.12528, Sec. 2) and the official code's generators:
Ŷ = W/√n + β x xᵀ with W GOE (off-diagonal N(0,1), diagonal N(0,2)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import ArpackError, eigsh

from _core.validation import (
    NumericalError,
    as_array,
    as_generator,
    check_finite_result,
    check_instance,
    check_int,
    check_memory,
    check_scalar,
)

from ._sigmas import as_sigma
from ._theory import as_prior, bulk_edge

__all__ = [
    "Instance",
    "goe",
    "spiked_wigner",
    "planted_submatrix",
    "planted_clique",
    "nonlinear_laplacian",
    "Detection",
    "detect",
    "top_eigenpair",
    "finite_sample_limits",
]


@dataclass(frozen=True, eq=False)
class Instance:
    """A normalised observation ``Y`` (= Ŷ, n×n), the unit spike ``x`` and the effective β.

    ``beta`` is the realised strength (k/√n for planted submatrices and cliques); the models of
    Ma & Kunisky 2025, Sec. 2.
    """

    Y: np.ndarray
    x: np.ndarray
    beta: float
    model: str

    def __repr__(self):
        return f"Instance({self.model}, n={self.Y.shape[0]}, beta={self.beta:.4g})"


def goe(n: int, rng=None) -> np.ndarray:
    """GOE matrix (G + Gᵀ)/√2: off-diagonal entries N(0, 1), diagonal N(0, 2).

    The noise convention of Ma & Kunisky 2025, Sec. 2 and their code (AGZ 2010, Sec. 2.5).

    >>> G = goe(4, rng=0)
    >>> G.shape, bool(np.allclose(G, G.T))
    ((4, 4), True)
    """
    n = check_int(n, "n", lower=1)
    check_memory(3 * n * n, "`n`", what="the n x n GOE matrix")
    g = as_generator(rng).standard_normal((n, n))
    w = g + g.T
    w *= 1.0 / np.sqrt(2.0)
    return w


def spiked_wigner(
    n: int, beta: float, prior="sparse_nnpca", *, rho: float | None = None, rng=None
) -> Instance:
    """Ŷ = W/√n + β x xᵀ, x = y/‖y‖, y_i i.i.d. (1-ρ)δ0 + ρη (Sec. 2).

    Code: ``generate_nnpca_matrix``.

    ``rho`` defaults to max(β, 1)/√n: β/√n is the sparsity of all the paper's experiments (the
    max keeps a support for β < 1 and β = 0);
    ``prior`` is as in :func:`spectral.critical_threshold` (η is sampled from the prior's rule:
    ``"sparse_nnpca"`` samples |N(0,1)| exactly). ``beta = 0`` gives pure noise (x still drawn).

    >>> inst = spiked_wigner(200, 2.0, rho=0.1, rng=0)
    >>> inst, round(float(inst.x @ inst.x), 9)  # x a unit vector
    (Instance(sparse_nnpca, n=200, beta=2), 1.0)
    """
    n = check_int(n, "n", lower=2)
    beta = check_scalar(beta, "beta", lower=0.0, upper=1e100)
    gen = as_generator(rng)
    if rho is None:
        rho = min(1.0, max(beta, 1.0) / np.sqrt(n))
    rho = check_scalar(rho, "rho", lower=0.0, upper=1.0, closed="right")
    law = None if isinstance(prior, str) and prior == "sparse_nnpca" else as_prior(prior)
    # P(y != 0) per entry; the support is redrawn while empty, so it must not be (almost) surely
    p_nonzero = rho * (1.0 if law is None else float(law.probs[law.nodes > 0].sum()))
    if -np.expm1(n * np.log1p(-min(p_nonzero, 1.0 - 1e-16))) < 1e-3:
        raise ValueError(
            f"`rho` = {rho:g} with this `prior` leaves the spike's support empty with "
            f"probability > 0.999 at n = {n}; raise `rho` (n*rho*P(eta > 0) = "
            f"{n * p_nonzero:.3g})."
        )
    w = goe(n, gen)
    y = np.zeros(n)
    for _ in range(100_000):
        support = gen.random(n) < rho
        m = int(support.sum())
        eta = (
            np.abs(gen.standard_normal(m))
            if law is None
            else gen.choice(law.nodes, size=m, p=law.probs)
        )
        y[support] = eta
        if np.any(y):
            break
    x = y / np.linalg.norm(y)
    Y = w
    Y *= 1.0 / np.sqrt(n)
    Y += beta * np.outer(x, x)
    name = prior if isinstance(prior, str) else "spiked_wigner"
    return Instance(Y, x, beta, name)


def planted_submatrix(n: int, beta: float, *, rng=None) -> Instance:
    """Ŷ = (W + 1_S 1_Sᵀ)/√n, |S| = k = round(β√n) uniform (Ma & Kunisky 2025, Sec. 2).

    Code: ``generate_planted_matrix``.

    The effective strength is k/√n (x = 1_S/√k), returned as ``beta``.

    >>> inst = planted_submatrix(400, 2.0, rng=0)
    >>> int(np.count_nonzero(inst.x))  # k = round(2 sqrt(400))
    40
    """
    n = check_int(n, "n", lower=2)
    beta = check_scalar(beta, "beta", lower=0.0, upper=np.sqrt(n))
    gen = as_generator(rng)
    k = int(round(beta * np.sqrt(n)))
    Y = goe(n, gen)
    x = np.zeros(n)
    if k > 0:
        S = gen.choice(n, size=k, replace=False)
        Y[np.ix_(S, S)] += 1.0
        x[S] = 1.0 / np.sqrt(k)
    Y *= 1.0 / np.sqrt(n)
    return Instance(Y, x, k / np.sqrt(n), "planted_submatrix")


def planted_clique(n: int, beta: float, *, rng=None) -> Instance:
    """Signed adjacency (2A - J + I)/√n of G(n, 1/2) with a planted k-clique, k = round(β√n).

    Ma & Kunisky 2025, Sec. 2 (planted clique).

    Zero diagonal, ±1/√n off it, +1/√n inside the clique (code ``generate_planted_clique``); the
    same limits as the planted submatrix.

    >>> inst = planted_clique(400, 2.0, rng=0)
    >>> # +-1/sqrt(n) off the diagonal, 0 on it
    >>> set(np.unique(inst.Y * 20).round(9)) <= {-1.0, 0.0, 1.0}
    True
    """
    n = check_int(n, "n", lower=2)
    beta = check_scalar(beta, "beta", lower=0.0, upper=np.sqrt(n))
    check_memory(4 * n * n, "`n`", what="the n x n sign matrix")
    gen = as_generator(rng)
    k = int(round(beta * np.sqrt(n)))
    signs = np.where(gen.random((n, n)) < 0.5, 1.0, -1.0)
    A = np.triu(signs, 1)
    A = A + A.T
    x = np.zeros(n)
    if k > 0:
        S = gen.choice(n, size=k, replace=False)
        A[np.ix_(S, S)] = 1.0
        A[S, S] = 0.0
        x[S] = 1.0 / np.sqrt(k)
    A *= 1.0 / np.sqrt(n)
    return Instance(A, x, k / np.sqrt(n), "planted_clique")


def _check_square_symmetric(Y, name="Y"):
    Y = as_array(Y, name, ndim=2, lower=-1e150, upper=1e150)
    if Y.shape[0] != Y.shape[1] or Y.shape[0] < 1:
        raise ValueError(f"`{name}` must be square; got shape {Y.shape}.")
    scale = max(1.0, float(np.abs(Y).max()))
    if not np.allclose(Y, Y.T, rtol=0, atol=1e-10 * scale):
        raise ValueError(f"`{name}` must be symmetric; max |Y - Yᵀ| = {np.abs(Y - Y.T).max():.3g}.")
    return Y


def nonlinear_laplacian(Y, sigma) -> np.ndarray:
    """L_σ(Ŷ) = Ŷ + diag(σ(Ŷ1)), with the full row sums (diagonal included) (Sec. 2, eq. for L).

    ``Y`` is the normalised observation Ŷ (n×n, symmetric, finite), e.g. ``Instance.Y``.

    >>> from spectral import sigmas
    >>> nonlinear_laplacian(np.eye(2), sigmas.constant(1.0))  # Y + diag(1)
    array([[2., 0.],
           [0., 2.]])
    """
    Y = _check_square_symmetric(Y)
    sig = as_sigma(sigma)
    diag = np.asarray(sig(Y.sum(1)), dtype=float)
    if diag.shape != Y.shape[:1] or not np.all(np.isfinite(diag)):
        raise ValueError(
            f"`sigma` must map the {Y.shape[0]} row sums of `Y` to as many finite values; got "
            f"shape {diag.shape} with {int((~np.isfinite(diag)).sum())} non-finite."
        )
    L = Y.copy()
    idx = np.arange(Y.shape[0])
    L[idx, idx] += diag
    return check_finite_result(L, "L = Y + diag(σ(Y1))", max_abs_sigma=float(np.abs(diag).max()))


@dataclass(frozen=True, eq=False)
class Detection:
    """Top eigenpair of L_σ(Ŷ), the predicted null edge E₊(σ) and the test decision.

    ``statistic`` = λ1(L) - E₊; ``detected`` = statistic > ``margin`` (the test of Ma & Kunisky
    2025, Sec. 2).
    """

    eigenvalue: float
    eigenvector: np.ndarray
    edge: float
    margin: float

    @property
    def statistic(self) -> float:
        return self.eigenvalue - self.edge

    @property
    def detected(self) -> bool:
        return self.statistic > self.margin

    def overlap(self, x) -> float:
        """Squared overlap ⟨v1(L), x⟩² with a unit vector x."""
        x = as_array(x, "x", shape=self.eigenvector.shape)
        return float((self.eigenvector @ x) ** 2 / (x @ x))

    def summary(self) -> str:
        rows = [
            ("lambda1(L)", self.eigenvalue),
            ("edge E+", self.edge),
            ("statistic", self.statistic),
            ("margin", self.margin),
        ]
        body = "\n".join(f"{k:<12}{v:>14.6f}" for k, v in rows)
        return (
            f"Nonlinear-Laplacian detector\n{'=' * 26}\n{body}\n"
            f"{'detected':<12}{self.detected!s:>14}"
        )

    def __repr__(self):
        return (
            f"Detection(lambda1={self.eigenvalue:.6g}, edge={self.edge:.6g}, "
            f"detected={self.detected})"
        )


def top_eigenpair(M: np.ndarray, *, rng=None, tol: float = 1e-10):
    """Largest eigenvalue and its unit eigenvector by Lanczos (``eigsh(k=1, which="LA")``).

    ``M`` symmetric; dense ``eigh`` for n < 3 and for the zero matrix (where Lanczos breaks down).
    Standard numerics (ARPACK, Lehoucq et al. 1998), no paper formula. An ARPACK failure raises
    :class:`theory.NumericalError`.
    """
    M = _check_square_symmetric(M, "M")
    gen = as_generator(rng)
    tol = check_scalar(tol, "tol", lower=0.0, upper=1.0, closed="left")
    if M.shape[0] < 3 or not np.any(M):
        vals, vecs = np.linalg.eigh(M)
        return float(vals[-1]), vecs[:, -1]
    v0 = gen.standard_normal(M.shape[0])
    try:
        # scipy's stub types `tol` as int; ARPACK takes a float tolerance
        vals, vecs = eigsh(M, k=1, which="LA", v0=v0, tol=tol)  # pyright: ignore[reportArgumentType]
    except ArpackError as err:
        raise NumericalError(
            f"Lanczos (ARPACK) failed on `M` of shape {M.shape}: {err}", shape=M.shape, tol=tol
        ) from err
    return float(vals[0]), vecs[:, 0]


def detect(Y, sigma, *, margin: float = 0.05, edge: float | None = None, rng=None) -> Detection:
    """Spectral detector of Ma & Kunisky 2025 (Sec. 2): λ1(L_σ(Ŷ)) against the bulk edge E₊(σ).

    The top eigenpair comes from Lanczos; ``edge`` defaults to :func:`spectral.bulk_edge`.
    The estimate of the spike is ``Detection.eigenvector``.

    >>> from spectral import sigmas
    >>> detect(planted_submatrix(400, 2.0, rng=0).Y, sigmas.zero(), rng=0).detected  # beta > 1
    True
    """
    margin = check_scalar(margin, "margin", lower=0.0, upper=1e100)
    e = None if edge is None else check_scalar(edge, "edge")
    as_generator(rng)
    L = nonlinear_laplacian(Y, sigma)
    if e is None:
        e = bulk_edge(sigma)
    lam, vec = top_eigenpair(L, rng=rng)
    return Detection(lam, vec, e, margin)


def finite_sample_limits(instance: Instance, sigma) -> tuple[float | None, float]:
    """The limit formulas evaluated on one instance's own degrees (a deterministic equivalent).

    θ solves β Σ_i x_i²/(θ - σ(d_i)) = 1 with d = Ŷ1 (the exact top eigenvalue of
    β x xᵀ + diag(σ(d))), ν is replaced by the empirical law of σ(d_i), and the limits of
    Sec. 3 are applied: (H_n(θ), H_n'(θ)/(β² Σ x_i²/(θ - σ(d_i))²)). The gap between these and
    the asymptotic values measures the finite-support (k^{-1/2}) effect; tests use it as the
    finite-n allowance. Returns (nan-free) (eigenvalue, overlap), or (edge-free) (None, 0.0)
    when no outlier is predicted.

    >>> from spectral import sigmas
    >>> finite_sample_limits(planted_submatrix(400, 2.0, rng=0), sigmas.zero())  # sigma = 0: BBP
    (2.5, 0.75)
    """
    from theory.roots import find_root

    check_instance(instance, "instance", Instance, "an Instance (e.g. planted_submatrix(n, beta))")
    Y = _check_square_symmetric(instance.Y, "instance.Y")
    x = as_array(instance.x, "instance.x", shape=Y.shape[:1])
    beta = check_scalar(instance.beta, "instance.beta", upper=1e150)
    x2 = x**2
    if abs(x2.sum() - 1.0) > 1e-6:
        raise ValueError(f"`instance.x` must be a unit vector; got squared norm {x2.sum():.6g}.")
    sig = as_sigma(sigma)
    gap = sig.gap_upper(Y.sum(1))
    if beta <= 0:
        return None, 0.0
    res = find_root(
        lambda s: beta * np.sum(x2 / (np.exp(s) + gap)) - 1.0, -40.0, np.log(beta) + 1e-9
    )
    if not res.found or res.root is None:
        return None, 0.0
    u = np.exp(res.root)
    hp = 1.0 - np.mean(1.0 / (u + gap) ** 2)
    if hp <= 0:
        return None, 0.0
    lam = sig.upper + u + np.mean(1.0 / (u + gap))
    overlap = hp / (beta * beta * np.sum(x2 / (u + gap) ** 2))
    check_finite_result([lam, overlap], "the finite-sample (eigenvalue, overlap)", beta=beta)
    return float(lam), float(overlap)
