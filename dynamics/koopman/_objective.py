r"""The low-rank-approximation (LoRA) objective for the Koopman SVD, its minibatch estimators and
nesting.

For k pairs of features ``f = (f_1..f_k)`` on the state and ``g = (g_1..g_k)`` on the next state,
Jeong, Ryu, Yun & Wornell 2025 (arXiv 2507.07222, Sec. 3.1) minimise

.. math::
    L_{lora}(f, g) = -2\,tr\,T[f, g] + tr(M_{\rho_0}[f] M_{\rho_1}[g])
                   = \|K - \textstyle\sum_i f_i \otimes g_i\|_{HS}^2 - \|K\|_{HS}^2,

with ``M_rho0[f] = E f(X) f(X)^T``, ``M_rho1[g] = E g(X') g(X')^T`` and ``T = E f(X) g(X')^T``. Its
minimum over k pairs is ``-sum_{i<k} s_i^2`` (Eckart-Young-Mirsky-Schmidt).

Nesting (Ryu et al. ICML 2024, NestedLoRA, Sec. 3; restated in Jeong et al. 2025 Sec. 3.1):

* ``"jnt"`` -- joint: ``sum_l w_l L(f_{1:l}, g_{1:l}) = -2 sum_i m_i T_ii + sum_ij W_ij (M_f)_ij
(M_g)_ij``,
  ``m_i = sum_{l >= i} w_l``, ``W_ij = m_{max(i,j)}``;
* ``"seq"`` -- sequential: pair l receives only the gradient of ``L(f_{1:l}, g_{1:l})`` in ``(f_l,
g_l)``,
  implemented by stop-gradients so that every entry of the moments differentiates only its
  higher-index function; its *value* equals the plain objective.

Minibatch estimators of ``tr(M_f M_g) = E_{X ~ rho0, X~' ~ rho1 indep.} (f(X)^T g(X~'))^2`` on B
pairs:

* ``"unbiased"`` -- the U-statistic ``1/(B(B-1)) sum_{b != b'} (f(x_b)^T g(x'_{b'}))^2``, exactly
unbiased
  (derived here; checked by exact enumeration in ``tests/dynamics/koopman/test_objective.py``);
* ``"plugin"`` -- ``tr(M^_f M^_g)`` from the same batch (the official code), whose mean is
  ``(1 - 1/B) tr(M_f M_g) + (1/B) E_joint (f(X)^T g(X'))^2``: biased by O(1/B).

All functions here are pure JAX functions of feature matrices ``f`` (B, k) and ``g`` (B, k); they
trace under ``jit`` and ``grad``. Arguments are validated at the boundary (under ``jit`` only dtype
and shape are known, so only those are checked); a concrete result that is not finite raises
``theory.NumericalError``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    _is_tracer,
    check_array,
    check_choice,
    check_finite_result,
    check_int,
)

__all__ = [
    "NESTINGS",
    "ESTIMATORS",
    "nesting_masks",
    "lora_from_moments",
    "lora_loss",
    "lora_population",
]

NESTINGS = (None, "jnt", "seq")
ESTIMATORS = ("unbiased", "plugin")
_BIG = 1e50  # feature entries beyond this overflow the fourth-order products of the objectives


def _check_pair(f, g, *, min_rows=1):
    """``f``, ``g`` as real (B, k) feature matrices of equal shape, finite and of moderate size."""
    f = check_array(f, "f", ndim=2, max_abs=_BIG)
    g = check_array(g, "g", ndim=2, max_abs=_BIG)
    if f.shape != g.shape or f.shape[0] < min_rows or f.shape[1] < 1:
        raise ValueError(
            f"`f` and `g` must have the same shape (B, k) with B >= {min_rows}, k >= 1; got "
            f"{tuple(f.shape)} and {tuple(g.shape)}."
        )
    return f, g


def _check_moments(Mf, Mg, T, *, psd=True):
    """``Mf``, ``Mg`` (k, k) symmetric positive semidefinite and ``T`` (k, k), all finite."""
    Mf = check_array(Mf, "Mf", ndim=2, max_abs=_BIG**2)
    Mg = check_array(Mg, "Mg", ndim=2, max_abs=_BIG**2)
    k = Mf.shape[0]
    for name, M in (("Mf", Mf), ("Mg", Mg)):
        if M.shape != (k, k) or k < 1:
            raise ValueError(
                f"`{name}` must be a non-empty square ({k}, {k}) matrix; got {M.shape}."
            )
        if psd and not _is_tracer(M):
            A = np.asarray(M, dtype=float)
            scale = max(float(np.abs(A).max()), 1e-300)
            if (
                np.abs(A - A.T).max() > 1e-8 * scale
                or np.linalg.eigvalsh((A + A.T) / 2).min() < -1e-8 * scale
            ):
                raise ValueError(
                    f"`{name}` must be a symmetric positive semidefinite second-moment matrix."
                )
    T = check_array(T, "T", ndim=2, max_abs=_BIG**2)
    if T.shape != (k, k):
        raise ValueError(f"`T` must have shape ({k}, {k}) like `Mf`; got {tuple(T.shape)}.")
    return Mf, Mg, T


def _finite(out, what, **diagnostics):
    """``out`` after a finiteness check when concrete (under ``jit`` it is returned as is)."""
    return out if _is_tracer(out) else check_finite_result(out, what, **diagnostics)


def _check_nesting(nesting, weights, k, estimator="unbiased"):
    check_choice(nesting, "nesting", NESTINGS)
    check_choice(estimator, "estimator", ESTIMATORS)
    if weights is not None:
        w = check_array(weights, "weights", ndim=1, max_abs=_BIG)
        if w.shape != (k,):
            raise ValueError(f"`weights` must have shape ({k},); got {tuple(w.shape)}.")


def nesting_masks(k, weights=None):
    """Joint-nesting masks ``(m, W)``: ``m_i = sum_{l >= i} w_l`` and ``W_ij = m_{max(i, j)}``.

    ``weights`` defaults to ``w_l = 1/k`` (the official code). NestedLoRA, Ryu et al. 2024, Sec. 3.

    Examples
    --------
    >>> m, W = nesting_masks(3)  # weights 1/3: m_i = (3 - i)/3
    >>> [round(float(v), 6) for v in m], [round(float(v), 6) for v in W[1]]
    ([1.0, 0.666667, 0.333333], [0.666667, 0.666667, 0.333333])
    """
    k = check_int(k, "k", lower=1, upper=100_000)
    w = (
        jnp.full((k,), 1.0 / k)
        if weights is None
        else jnp.asarray(check_array(weights, "weights", ndim=1))
    )
    if w.shape != (k,):
        raise ValueError(f"`weights` must have shape ({k},); got {w.shape}.")
    m = jnp.cumsum(w[::-1])[::-1]
    return m, jnp.minimum(m[:, None], m[None, :])


def lora_from_moments(Mf, Mg, T, *, nesting=None, weights=None):
    """``-2 sum_i m_i T_ii + sum_ij W_ij (Mf)_ij (Mg)_ij`` (plain: m = 1, W = 1).

    Population value of the (nested) objective from the three second-moment matrices
    (Jeong et al. 2025, Sec. 3.1, eq. for L_lora; joint nesting from NestedLoRA Sec. 3). The value
    of ``"seq"`` equals the plain one.

    Examples
    --------
    >>> S = jnp.diag(jnp.array([1.0, 0.5]))  # the optimum f = sqrt(s) phi, g = sqrt(s) psi
    >>> round(float(lora_from_moments(S, S, S @ S)), 6)  # -(s_1^2 + s_2^2)
    -1.25
    """
    Mf, Mg, T = _check_moments(Mf, Mg, T)
    _check_nesting(nesting, weights, Mf.shape[0])
    if nesting == "jnt":
        m, W = nesting_masks(Mf.shape[0], weights)
        out = -2.0 * jnp.sum(m * jnp.diagonal(T)) + jnp.sum(W * Mf * Mg)
    else:
        out = -2.0 * jnp.trace(T) + jnp.sum(Mf * Mg)
    return _finite(out, "the LoRA objective")


def _seq_moment(f):
    """``f^T f / B`` whose entry (i, j) differentiates only ``f_{max(i,j)}`` (seq nesting)."""
    sf = jax.lax.stop_gradient(f)
    a = f.T @ sf
    return (jnp.tril(a, -1) + jnp.triu(a.T, 1) + jnp.diag(jnp.sum(f * f, 0))) / f.shape[0]


def lora_loss(f, g, *, nesting=None, estimator="unbiased", weights=None):
    """Minibatch estimate of the (nested) LoRA objective from features ``f = f(X)``, ``g = g(X')``.

    Parameters
    ----------
    f, g : (B, k) arrays, row b holding the features of the pair ``(x_b, x'_b)``.
    nesting : None, "jnt" or "seq".
    estimator : "unbiased" (U-statistic, no same-pair terms; needs B >= 2) or "plugin".
    weights : joint-nesting weights ``w_l`` (length k, positive); default uniform 1/k.

    Returns
    -------
    Scalar whose expectation over i.i.d. batches is the population objective for
    ``estimator="unbiased"`` (for any nesting; derived here, see the module docstring).

    Examples
    --------
    >>> f = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> g = 2 * f
    >>> plugin = lora_loss(f, g, estimator="plugin")  # the moments' value at the empirical law
    >>> bool(abs(plugin - lora_from_moments(f.T @ f / 3, g.T @ g / 3, f.T @ g / 3)) < 1e-5)
    True
    """
    f, g = _check_pair(f, g, min_rows=2 if estimator == "unbiased" else 1)
    _check_nesting(nesting, weights, f.shape[1], estimator)
    return _finite(_lora_loss(f, g, nesting, estimator, weights), "the LoRA loss")


def _lora_loss(f, g, nesting, estimator, weights):
    B = f.shape[0]
    h = f * g
    if nesting == "seq":
        Mf, Mg = _seq_moment(f), _seq_moment(g)
        corr = -2.0 * jnp.sum(jnp.mean(h, 0))
        metric = jnp.sum(Mf * Mg)
        if estimator == "unbiased":
            lower = jnp.tril(jnp.ones((h.shape[1],) * 2), -1)
            same = 2.0 * jnp.einsum("bi,ij,bj->", h, lower, jax.lax.stop_gradient(h)) + jnp.sum(
                h * h
            )
            metric = (B * B * metric - same) / (B * (B - 1.0))
        return corr + metric
    if nesting == "jnt":
        m, W = nesting_masks(f.shape[1], weights)
    else:
        m, W = 1.0, None
    Mf, Mg = f.T @ f / B, g.T @ g / B
    corr = -2.0 * jnp.sum(m * jnp.mean(h, 0))
    metric = jnp.sum(Mf * Mg) if W is None else jnp.sum(W * Mf * Mg)
    if estimator == "unbiased":
        same = jnp.sum(jnp.sum(h, 1) ** 2) if W is None else jnp.einsum("bi,ij,bj->", h, W, h)
        metric = (B * B * metric - same) / (B * (B - 1.0))
    return corr + metric


def lora_population(F, G, kernel, rho0, *, nesting=None, weights=None):
    """Exact objective for tabular features on a finite chain: ``F = f(states)``, ``G = g(states)``.

    ``M_f = F^T D0 F``, ``M_g = G^T D1 G``, ``T = F^T D0 P G`` with ``D1 = diag(rho0 P)``.
    Equals ``||K~ - F~ G~^T||_F^2 - ||K~||_F^2`` with ``F~ = D0^{1/2} F``, ``G~ = D1^{1/2} G``
    (derived here; property-tested in ``tests/dynamics/koopman/test_objective.py``).

    Examples
    --------
    >>> from dynamics.koopman import FiniteChain
    >>> chain, x = FiniteChain(np.array([[0.9, 0.1], [0.2, 0.8]])), np.arange(2)
    >>> s = chain.singular_values()  # (1, 0.7); the exact top-2 pair minimises the objective
    >>> F = chain.left_singular_functions(x, 2) * np.sqrt(s)
    >>> G = chain.right_singular_functions(x, 2) * np.sqrt(s)
    >>> round(float(lora_population(F, G, chain.kernel, chain.rho0)), 6)  # -(1 + 0.7^2)
    -1.49
    """
    F, G = check_array(F, "F", ndim=2, max_abs=_BIG), check_array(G, "G", ndim=2, max_abs=_BIG)
    n, k = F.shape
    if G.shape != (n, k) or n < 1 or k < 1:
        raise ValueError(f"`F` and `G` must have the same shape (n, k); got {F.shape}, {G.shape}.")
    kernel = check_array(kernel, "kernel", ndim=2)
    rho0 = check_array(rho0, "rho0", ndim=1)
    if kernel.shape != (n, n) or rho0.shape != (n,):
        raise ValueError(
            f"`kernel` must be ({n}, {n}) and `rho0` ({n},) for {n} states; got "
            f"{tuple(kernel.shape)} and {tuple(rho0.shape)}."
        )
    for name, a, ax in (("kernel", kernel, 1), ("rho0", rho0, 0)):
        if not _is_tracer(a):
            a = np.asarray(a)
            if a.min() < 0 or np.abs(a.sum(axis=ax) - 1.0).max() > 1e-8:
                raise ValueError(
                    f"`{name}` must be non-negative with {'rows' if ax else 'entries'} summing "
                    f"to 1; got min {a.min():.3g}, sums off by up to "
                    f"{np.abs(a.sum(axis=ax) - 1.0).max():.3g}."
                )
    rho0 = jnp.asarray(rho0)
    kernel = jnp.asarray(kernel)
    rho1 = rho0 @ kernel
    Mf = F.T @ (rho0[:, None] * F)
    Mg = G.T @ (rho1[:, None] * G)
    T = F.T @ ((rho0[:, None] * kernel) @ G)
    return lora_from_moments(Mf, Mg, T, nesting=nesting, weights=weights)
