"""Stiefel-manifold optimisation as jittable optax transforms: retractions and the landing field.

``St(p, r) = {X in R^{p x r} : X^T X = I_r}`` with ``p >= r``. Every function acts on the last two
axes, so a stack of matrices ``(..., p, r)`` is handled at once (no Python loop, no ``vmap``).

Two families, both plain :class:`optax.GradientTransformation` objects that need ``params``:

* **Retractions** (feasible methods): :func:`stiefel_retraction` turns an incoming update ``u``
  (e.g. ``-lr * grad`` from ``optax.sgd``) into ``R_X(P_X u) - X``, so that optax's additive
  ``apply_updates`` lands exactly on ``R_X(P_X u)``. Put it *after* the base optimiser:
  ``optax.chain(optax.sgd(lr), stiefel_retraction("qr"))``. Retractions: ``"qr"`` (sign-fixed Q
  factor, by CholeskyQR2), ``"polar"`` (``U V^T`` of the SVD, from the ``r x r`` Gram matrix)
  and ``"cayley"`` (the rank-2r Woodbury form of Wen & Yin 2013, O(p r^2) rather than geoopt's
  O(p^3) solve).
* **Landing** (infeasible method of Ablin & Peyre, AISTATS 2022, eq. (5); used by PoLAR, Lion et
  al. 2025, arXiv 2506.03133, official code ``callbacks/landing_callback.py``): :func:`landing`
  replaces the gradient ``G`` by the field
  ``Lambda(X) = psi(X) X + lam X (X^T X - I)`` with ``psi(X) = skew(G X^T)``; it goes *before* the
  base optimiser: ``optax.chain(landing(lam), optax.sgd(lr))``. No retraction is ever computed;
  feasibility is attracted at rate set by ``lam``. (PoLAR's code computes
  ``(G X^T - X G^T) X + lam X (X^T X - I)``, which is ``2 * landing_field(X, G, lam / 2)``;
  under Adam, whose step is invariant to a positive rescaling of its input up to ``eps``, the
  code's ``reg_lambda`` is our ``lam = reg_lambda / 2``; tested in
  ``tests/nn/test_riemannian.py::test_landing_field_matches_polar_code_convention``.)

Use :func:`optax.masked` or :func:`optax.partition` when only some leaves of a model are Stiefel.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from _core.validation import check_array, check_choice, check_int, check_key, check_scalar

__all__ = [
    "sym",
    "skew",
    "project_tangent",
    "retract_qr",
    "retract_polar",
    "retract_cayley",
    "RETRACTIONS",
    "landing_field",
    "feasibility",
    "stiefel_retraction",
    "landing",
    "random_stiefel",
]


def _stiefel(x, name="x"):
    """``x`` a (batch of) tall matrix (..., p, r), p >= r, real and finite."""
    x = check_array(x, name, min_ndim=2, max_abs=1e100)
    if x.shape[-2] < x.shape[-1] or x.shape[-1] < 1:
        raise ValueError(
            f"`{name}` must have shape (..., p, r) with p >= r >= 1; got {tuple(x.shape)}."
        )
    return x


def _like(v, x, name):
    v = check_array(v, name, max_abs=1e100)
    if tuple(v.shape) != tuple(x.shape):
        raise ValueError(
            f"`{name}` must have the shape of `x` {tuple(x.shape)}; got {tuple(v.shape)}."
        )
    return v


def _t(a):
    return jnp.swapaxes(a, -1, -2)


def _square(a):
    a = check_array(a, "a", min_ndim=2, max_abs=1e300)
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"`a` must be square in its last two axes; got shape {tuple(a.shape)}.")
    return a


def sym(a):
    """``(A + A^T) / 2`` over the last two axes."""
    a = _square(a)
    return 0.5 * (a + _t(a))


def skew(a):
    """``(A - A^T) / 2`` over the last two axes."""
    a = _square(a)
    return 0.5 * (a - _t(a))


def project_tangent(x, v):
    """Orthogonal projection of ``v`` onto the tangent space of St(p, r) at ``x``.

    ``P_X(V) = V - X sym(X^T V)`` (Euclidean metric; Absil, Mahony & Sepulchre 2008, eq. (3.35)).

    Examples
    --------
    >>> x = jnp.eye(3)[:, :2]
    >>> project_tangent(x, jnp.ones((3, 2))).tolist()  # X sym(X^T V) removed: X^T P skew
    [[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]
    """
    x = _stiefel(x)
    v = _like(v, x, "v")
    return v - x @ sym(_t(x) @ v)


def _cholesky_qr(m):
    """One CholeskyQR pass: ``Q = M R^{-1}`` with ``R^T R = M^T M`` (Cholesky, ``diag(R) > 0``)."""
    low = jnp.linalg.cholesky(_t(m) @ m)
    # an r x r inverse, then one BLAS-3 product (XLA's CPU triangular solve is far slower)
    return m @ _t(jnp.linalg.inv(low))


def _householder_q(m):
    """Sign-fixed Q of the Householder QR: orthonormal even when ``m`` is rank-deficient (a zero
    diagonal of R keeps its column's sign)."""
    q, r = jnp.linalg.qr(m)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    return q * jnp.where(d < 0, -1.0, 1.0).astype(q.dtype)[..., None, :]


def _svd_polar(m):
    """``U W^T`` of the thin SVD: a closest point of St(p, r) to ``m`` for any rank."""
    u, _, wt = jnp.linalg.svd(m, full_matrices=False)
    return u @ wt


def _or_exact(y, m, exact):
    """``y`` (a Gram-matrix retraction of ``m``) unless it is non-finite or off the manifold, as
    when ``M = X + V`` is (nearly) rank-deficient; then ``exact(m)``, computed only in that case."""
    tol = 10 * float(jnp.finfo(y.dtype).eps) ** 0.5
    off = jnp.abs(_t(y) @ y - jnp.eye(y.shape[-1], dtype=y.dtype))
    bad = ~(jnp.isfinite(y).all() & (jnp.max(off, initial=0.0) <= tol))
    return jax.lax.cond(bad, exact, lambda _: y, m)


def retract_qr(x, v):
    """QR retraction ``qf(X + V)``, the Q factor with ``diag(R) > 0`` (Absil et al. 2008, (4.8)).

    Computed as CholeskyQR2 (Fukaya, Nakatsukasa, Yanagisawa & Yamamoto 2014, Sec. 3): two passes
    of ``Q = M R^{-1}``, ``R^T R = M^T M``, i.e. ``r x r`` Cholesky factorisations and O(p r^2)
    matrix products instead of a Householder QR of the tall ``p x r`` matrix (about 5x slower
    in XLA on CPU at p = 4096, r = 32; ``benchmarks/adapters.py``). The positive diagonal of the
    Cholesky factors gives the sign-fixed Q exactly. Accurate to working precision when
    ``M = X + V`` is well conditioned, which holds at ``X`` on St(p, r) with tangent ``V``: then
    ``M^T M = I + V^T V``, condition number ``1 + ||V||_2^2`` (derived here; tested against the
    Householder QR in ``tests/nn/test_riemannian.py``). Where it is not (``M`` rank-deficient or
    nearly so, off the tangent space), the Householder QR is used instead, so the result is
    always on St(p, r).

    Examples
    --------
    >>> x = jnp.eye(3)[:, :2]
    >>> y = retract_qr(x, project_tangent(x, jnp.ones((3, 2))))
    >>> round(float(feasibility(y)), 5)  # back on St(3, 2)
    0.0
    """
    x = _stiefel(x)
    v = _like(v, x, "v")
    return _or_exact(_cholesky_qr(_cholesky_qr(x + v)), x + v, _householder_q)


def retract_polar(x, v):
    """Polar retraction ``M (M^T M)^{-1/2}`` of ``M = X + V`` (Absil et al. 2008, eq. (4.7)).

    Equal to ``U W^T`` for the thin SVD ``M = U S W^T``: the closest point of St(p, r) to ``M`` in
    Frobenius norm. Computed from the eigendecomposition of the ``r x r`` Gram matrix ``M^T M``
    (O(p r^2 + r^3)); as for :func:`retract_qr`, ``M^T M = I + V^T V`` at ``X`` on St(p, r) with
    tangent ``V``, so squaring the condition number costs no accuracy (tested against the SVD).
    A rank-deficient ``M`` (no unique polar factor) gets ``U W^T`` of its SVD, one of the closest
    points, so the result is always on St(p, r).

    Examples
    --------
    >>> x, v = jnp.eye(3)[:, :2], jnp.zeros((3, 2)).at[2, 0].set(1.0)  # a tangent V
    >>> y = retract_polar(x, v)  # M = X + V has orthogonal columns: each is normalised
    >>> round(float(feasibility(y)), 5), [round(float(c), 6) for c in y[:, 0]]  # (1, 0, 1)/sqrt 2
    (0.0, [0.707107, 0.0, 0.707107])
    """
    x = _stiefel(x)
    v = _like(v, x, "v")
    m = x + v
    w, q = jnp.linalg.eigh(_t(m) @ m)
    return _or_exact(m @ ((q * jax.lax.rsqrt(w)[..., None, :]) @ _t(q)), m, _svd_polar)


def retract_cayley(x, v):
    """Cayley retraction, rank-2r Woodbury form (Wen & Yin 2013, Math. Program. 142, Lemma 4(1)).

    With ``P = V - X (X^T V) / 2`` and ``A = P X^T - X P^T`` (skew), the Cayley transform
    ``Y = (I - A/2)^{-1} (I + A/2) X`` equals ``X + U (I - V_^T U / 2)^{-1} V_^T X`` for
    ``U = [P, X]`` and ``V_ = [X, -P]``: an ``2r x 2r`` solve, O(p r^2). For tangent ``V`` it is a
    first-order retraction (``dY/dt = V`` at 0). ``Y^T Y = X^T X`` exactly in exact arithmetic, so
    it *keeps* feasibility; it does not restore a drifted ``X`` (use QR or polar for that).

    Examples
    --------
    >>> x = jnp.eye(3)[:, :2]
    >>> y = retract_cayley(x, project_tangent(x, jnp.ones((3, 2))))
    >>> round(float(feasibility(y)), 5)  # Y^T Y = X^T X: feasibility kept
    0.0
    """
    x = _stiefel(x)
    v = _like(v, x, "v")
    r = x.shape[-1]
    p_ = v - 0.5 * x @ (_t(x) @ v)
    u = jnp.concatenate([p_, x], axis=-1)
    vv = jnp.concatenate([x, -p_], axis=-1)
    eye = jnp.eye(2 * r, dtype=x.dtype)
    m = eye - 0.5 * (_t(vv) @ u)
    # a 2r x 2r inverse: XLA's CPU triangular solves (inside ``solve``) cost ~10x more here
    return x + u @ (jnp.linalg.inv(m) @ (_t(vv) @ x))


RETRACTIONS = {"qr": retract_qr, "polar": retract_polar, "cayley": retract_cayley}


def landing_field(x, g, lam):
    """The landing field ``psi(X) X + lam X (X^T X - I)`` with ``psi(X) = skew(G X^T)``.

    Ablin & Peyre 2022 (AISTATS), eq. (5); ``X (X^T X - I)`` is the gradient of
    ``N(X) = ||X^T X - I||_F^2 / 4``. Computed as ``(G (X^T X) - X (G^T X)) / 2``, never forming the
    ``p x p`` matrix ``G X^T`` (O(p r^2)). The two terms are Frobenius-orthogonal for every ``X``
    (derived here; tested in ``tests/nn/test_riemannian.py::test_landing_components_orthogonal``).

    Examples
    --------
    >>> x = 2 * jnp.eye(3)[:, :2]  # off the manifold, zero gradient: only the attraction is left
    >>> landing_field(x, jnp.zeros((3, 2)), 1.0)[:2].tolist()  # lam X (X^T X - I) = 2 (4 - 1) I
    [[6.0, 0.0], [0.0, 6.0]]
    """
    x = _stiefel(x)
    g = _like(g, x, "g")
    lam = check_scalar(lam, "lam", lower=0.0, upper=1e100)
    xtx = _t(x) @ x
    rel = 0.5 * (g @ xtx - x @ (_t(g) @ x))
    eye = jnp.eye(x.shape[-1], dtype=x.dtype)
    return rel + lam * x @ (xtx - eye)


def feasibility(x):
    """``||X^T X - I||_F`` over the last two axes (distance to the manifold, up to constants; the
    landing method's infeasibility, Ablin & Peyré 2022).

    Examples
    --------
    >>> x = jnp.eye(3)[:, :2]
    >>> float(feasibility(x)), round(float(feasibility(2 * x)), 4)  # ||4 I - I||_F = 3 sqrt 2
    (0.0, 4.2426)
    """
    x = _stiefel(x)
    eye = jnp.eye(x.shape[-1], dtype=x.dtype)
    return jnp.linalg.norm(_t(x) @ x - eye, axis=(-2, -1))


def _check_tall(params, who):
    for leaf in jax.tree_util.tree_leaves(params):
        if leaf.ndim < 2 or leaf.shape[-2] < leaf.shape[-1]:
            raise ValueError(
                f"`params` of {who} must be Stiefel matrices of shape (..., p, r) with p >= r; "
                f"got a leaf of shape {leaf.shape}."
            )


class _EmptyState(NamedTuple):
    pass


def stiefel_retraction(method: str = "qr") -> optax.GradientTransformation:
    """Map an update ``u`` at ``X`` to ``R_X(P_X u) - X``: a Riemannian step under additive apply.

    Parameters
    ----------
    method : {"qr", "polar", "cayley"}
        The retraction (:func:`retract_qr`, :func:`retract_polar`, :func:`retract_cayley`).

    Chain it after a Euclidean optimiser: ``optax.chain(optax.sgd(lr), stiefel_retraction())`` is
    Riemannian gradient descent (projection of the Euclidean gradient is the Riemannian gradient
    for the embedded metric; Absil et al. 2008, eq. (3.37)). Every leaf it sees must be
    ``(..., p, r)`` with ``p >= r``; mask the other leaves with :func:`optax.masked`.

    Examples
    --------
    >>> tx = optax.chain(optax.sgd(1e-2), stiefel_retraction("polar"))  # doctest: +SKIP
    """
    check_choice(method, "method", tuple(RETRACTIONS))
    retract = RETRACTIONS[method]

    def init_fn(params):
        _check_tall(params, "stiefel_retraction")
        return _EmptyState()

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("`params` must be given to stiefel_retraction's update (it needs X).")

        def one(u, x):
            return retract(x, project_tangent(x, u)) - x

        return jax.tree_util.tree_map(one, updates, params), state

    return optax.GradientTransformation(init_fn, update_fn)


def landing(lam: float = 1.0) -> optax.GradientTransformation:
    """Replace each gradient ``G`` at ``X`` by the landing field (see :func:`landing_field`).

    Parameters
    ----------
    lam : float > 0
        Weight of the attraction ``X (X^T X - I)`` towards the manifold; PoLAR's ``reg_lambda``
        (its scripts use 5e-3) corresponds to ``lam = reg_lambda / 2`` under Adam (module notes).

    Chain it *before* a Euclidean optimiser: ``optax.chain(landing(lam), optax.sgd(lr))`` is the
    landing iteration ``X <- X - lr * Lambda(X)`` of Ablin & Peyre 2022, Alg. 1;
    ``optax.chain(landing(lam), optax.adamw(lr))`` is what PoLAR's code runs.

    Examples
    --------
    >>> tx = optax.chain(landing(1.0), optax.sgd(0.05))
    >>> x = 1.1 * jnp.eye(3)[:, :2]
    >>> u, _ = tx.update(jnp.zeros((3, 2)), tx.init(x), x)
    >>> bool(feasibility(x + u) < feasibility(x))  # a step towards St(3, 2)
    True
    """
    lam = check_scalar(lam, "lam", lower=0.0, upper=1e100, closed="neither")

    def init_fn(params):
        _check_tall(params, "landing")
        return _EmptyState()

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("`params` must be given to landing's update (it needs X).")
        return jax.tree_util.tree_map(lambda g, x: landing_field(x, g, lam), updates, params), state

    return optax.GradientTransformation(init_fn, update_fn)


def random_stiefel(p: int, r: int, *, key, dtype=None):
    """A Haar-distributed point of St(p, r): the sign-fixed Q factor of a Gaussian ``p x r`` matrix.

    (Mezzadri 2007, Notices AMS 54, Sec. 5.)

    Examples
    --------
    >>> q = random_stiefel(5, 2, key=jax.random.key(0))
    >>> q.shape, round(float(feasibility(q)), 5)
    ((5, 2), 0.0)
    """
    p = check_int(p, "p", lower=1, upper=10**8)
    r = check_int(r, "r", lower=1, upper=p)
    key = check_key(key)
    q, rr = jnp.linalg.qr(jax.random.normal(key, (p, r), dtype=dtype))
    return q * jnp.where(jnp.diagonal(rr) < 0, -1.0, 1.0).astype(q.dtype)
