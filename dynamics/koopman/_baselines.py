r"""Baseline losses for learning Koopman singular subspaces: VAMP-2, VAMP-E and DPNet (plain /
relaxed).

Pure JAX functions of minibatch features ``f = f(X)`` (B, k) and ``g = g(X')`` (B, k), written so
that the comparison with :func:`dynamics.koopman.lora_loss` is like for like (same features, same
batch). All are *losses* (to minimise, i.e. minus the scores). Each is a nonlinear function of the
minibatch moments, which is why its minibatch gradient is biased (Jeong et al. 2025, Sec. 1-2; the
bias is measured in ``paper_checks/koopman.py``).

* VAMP-2 (Wu & Noe 2020, arXiv 1707.04659, Def. 4/eq. 38): score ``||M_f^{-1/2} T
M_g^{-1/2}||_F^2``,
  computed as ``tr(M_f^{-1} T M_g^{-1} T^T)`` by Cholesky solves with an ``eps`` ridge (no eigh, so
  no gradient blow-up at degenerate spectra). ``center=True`` uses centred covariances and adds 1
  (the constant mode), the usual "1 + sum" convention.
* VAMP-E (Wu & Noe 2020, Sec. 3.2, eq. 41; Jeong et al. 2025 App. B.1): with the SVD
  ``M_f^{-1/2} T M_g^{-1/2} = U S V^T``, score ``2 tr(S U'^T T V') - tr(S U'^T M_f U' S V'^T M_g
  V')`` with ``U' = M_f^{-1/2} U``, ``V' = M_g^{-1/2} V``; backpropagates through eigh and SVD.
* DPNet (Kostic et al. ICLR 2024, arXiv 2307.09912, eq. 8 and the relaxed score of Sec. 3):
  ``P = ||M_f^{-1/2} T M_g^{-1/2}||_F^2 - gamma (R(M_f) + R(M_g))`` with the metric distortion
  ``R(C) = tr(C^2 - C - log C)``; relaxed: ``||T||_F^2 / (||M_f||_op ||M_g||_op) - gamma (R_f +
  R_g)``.
"""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.linalg as jsl

from _core.validation import check_bool, check_scalar

from ._objective import _check_moments, _check_pair, _finite

__all__ = ["vamp2_loss", "vampe_loss", "dpnet_loss", "vamp2_from_moments", "dpnet_from_moments"]


def _moments(f, g, center):
    B = f.shape[0]
    if center:
        f = f - jnp.mean(f, 0)
        g = g - jnp.mean(g, 0)
    return f.T @ f / B, g.T @ g / B, f.T @ g / B


def _check_eps(eps, gamma=0.0):
    check_scalar(gamma, "gamma", lower=0.0, upper=1e10)
    return check_scalar(eps, "eps", lower=0.0, upper=1e10)


def _ridge(M, eps):
    return M + eps * jnp.eye(M.shape[0], dtype=M.dtype)


def _whitened_frob2(Mf, Mg, T, eps):
    """``tr(Mf^{-1} T Mg^{-1} T^T)`` by two Cholesky solves."""
    cf = jsl.cho_factor(_ridge(Mf, eps))
    cg = jsl.cho_factor(_ridge(Mg, eps))
    return jnp.sum(jsl.cho_solve(cf, T) * jsl.cho_solve(cg, T.T).T)


def vamp2_from_moments(Mf, Mg, T, *, eps=1e-6):
    """Minus ``tr(Mf^{-1} T Mg^{-1} T^T)`` from (population or minibatch) moments: the VAMP-2 score
    (Wu & Noé, arXiv 1707.04659).

    Examples
    --------
    >>> I = jnp.eye(2)
    >>> round(float(vamp2_from_moments(I, I, jnp.diag(jnp.array([1.0, 0.5])))), 4)  # -(1^2 + 0.5^2)
    -1.25
    """
    Mf, Mg, T = _check_moments(Mf, Mg, T)
    _check_eps(eps)
    return _finite(-_whitened_frob2(Mf, Mg, T, eps), "the VAMP-2 loss")


def vamp2_loss(f, g, *, center=True, eps=1e-6):
    """Minus the VAMP-2 score of minibatch features (Wu & Noe 2020, eq. 38).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> f, g = rng.standard_normal((2, 50, 2), dtype=np.float32)
    >>> A = np.array([[2.0, 1.0], [0.0, 1.0]])  # the score sees only the span of the features
    >>> bool(abs(vamp2_loss(f, g) - vamp2_loss(f @ A, g)) < 1e-4)
    True
    """
    f, g = _check_pair(f, g)
    center, eps = check_bool(center, "center"), _check_eps(eps)
    Mf, Mg, T = _moments(f, g, center)
    out = -_whitened_frob2(Mf, Mg, T, eps) - (1.0 if center else 0.0)
    return _finite(out, "the VAMP-2 loss")


def _inv_sqrt(M, eps):
    w, V = jnp.linalg.eigh(_ridge(M, eps))
    return (V / jnp.sqrt(jnp.clip(w, eps, None))) @ V.T


def vampe_loss(f, g, *, center=True, eps=1e-6):
    """Minus the VAMP-E score of minibatch features (Wu & Noe 2020, eq. 41).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> f, g = rng.standard_normal((2, 50, 2), dtype=np.float32)
    >>> bool(abs(vampe_loss(f, g) - vamp2_loss(f, g)) < 1e-4)  # equal at the model fitted to f, g
    True
    """
    f, g = _check_pair(f, g)
    center, eps = check_bool(center, "center"), _check_eps(eps)
    Mf, Mg, T = _moments(f, g, center)
    Wf, Wg = _inv_sqrt(Mf, eps), _inv_sqrt(Mg, eps)
    U, s, Vt = jnp.linalg.svd(Wf @ T @ Wg)
    Up, Vp = Wf @ U, Wg @ Vt.T
    S = jnp.diag(s)
    score = 2 * jnp.trace(S @ Up.T @ T @ Vp) - jnp.trace(S @ Up.T @ Mf @ Up @ S @ Vp.T @ Mg @ Vp)
    return _finite(-(score + (1.0 if center else 0.0)), "the VAMP-E loss")


def _distortion(C, eps):
    """``R(C) = tr(C^2 - C - log C)`` (Kostic et al. 2024, eq. 7); zero iff C = I."""
    _, logdet = jnp.linalg.slogdet(_ridge(C, eps))
    return jnp.sum(C * C) - jnp.trace(C) - logdet


def dpnet_loss(f, g, *, gamma=0.01, relaxed=False, center=False, eps=1e-6):
    """Minus the DPNet score ``P^gamma`` (Kostic et al. 2024, eq. 8), or its relaxed form.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> f, g = rng.standard_normal((2, 50, 2), dtype=np.float32)
    >>> bool(abs(dpnet_loss(f, g, gamma=0.0) - vamp2_loss(f, g, center=False)) < 1e-4)  # no penalty
    True
    """
    f, g = _check_pair(f, g)
    Mf, Mg, T = _moments(f, g, check_bool(center, "center"))
    return dpnet_from_moments(Mf, Mg, T, gamma=gamma, relaxed=relaxed, eps=eps)


def dpnet_from_moments(Mf, Mg, T, *, gamma=0.01, relaxed=False, eps=1e-6):
    """Minus the DPNet score from (population or minibatch) moments.

    Examples
    --------
    >>> I, T = jnp.eye(2), jnp.diag(jnp.array([1.0, 0.5]))
    >>> round(float(dpnet_from_moments(I, I, T, gamma=1.0)), 4)  # whitened: the distortion R(I) = 0
    -1.25
    """
    Mf, Mg, T = _check_moments(Mf, Mg, T)
    eps = _check_eps(eps, gamma)
    if check_bool(relaxed, "relaxed"):
        opf = jnp.linalg.eigvalsh(Mf)[-1]
        opg = jnp.linalg.eigvalsh(Mg)[-1]
        score = jnp.sum(T * T) / (opf * opg + 1e-8)
    else:
        score = _whitened_frob2(Mf, Mg, T, eps)
    out = -(score - gamma * (_distortion(Mf, eps) + _distortion(Mg, eps)))
    return _finite(out, "the DPNet loss", gamma=gamma, eps=eps)
