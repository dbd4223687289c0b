"""Uni-LoRA (Li et al. 2025, arXiv 2506.00799) and the baselines it unifies as projections.

Flatten every LoRA factor of the model into ``theta_D = concat_l [vec(A_l); vec(B_l)] in R^D``,
``D = sum_l r (m_l + n_l)``; a method is then ``theta_D = P theta_d`` with a fixed
``P in R^{D x d}`` (Uni-LoRA, Sec. 3.1). All projections here have **one nonzero per row**, so
``P theta`` is a gather ``theta[index] * value`` (O(D), no ``D x d`` matrix) and ``P^T g`` a
segment sum:

* **Uni-LoRA** (Sec. 3.2; official code ``generate_index``): a balanced random partition of the
  D coordinates into d groups of sizes ``n_j in {floor(D/d), floor(D/d)+1}``, value
  ``1/sqrt(n_j)``. Then ``P^T P = I_d`` exactly (isometric; derived here, tested in
  ``tests/nn/adapters/test_unilora.py``). No ``alpha/r`` scaling; ``theta ~ U(-0.02, 0.02)``.
* **VeRA** (Kopiczko et al. 2024, arXiv 2310.11454, eq. (1)): ``Delta W = diag(lambda_b) B
  diag(lambda_d) A`` with frozen random ``A, B`` shared by all layers (sliced ``A[:, :n]``,
  ``B[:m]`` as PEFT does); per layer ``theta_l = [lambda_b; lambda_d]``, ``lambda_b = 0``,
  ``lambda_d = 0.1`` at init. Row ``(i, k)`` of ``B'`` has its nonzero ``B_ik`` in column
  ``lambda_b,i``: ``P^T P`` is diagonal but not ``I`` (not isometric).

Tied-LoRA (Renduchintala et al., NAACL 2024) and VB-LoRA (Li et al., NeurIPS 2024) are in
``_tied.py`` and ``_vblora.py``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

import nn as _nn
from _core.validation import (
    _is_tracer,
    as_array,
    as_generator,
    check_finite_result,
    check_int,
    check_key,
    check_memory,
    check_scalar,
)

from ._core import AdapterLayer, _check_rank, _real_array, register_method

__all__ = [
    "isometric_projection",
    "vera_projection",
    "project",
    "project_transpose",
    "ProjectedLoRALinear",
    "UniLoRALinear",
    "VeRALinear",
    "kaiming_uniform_bases",
]


def isometric_projection(D: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Uni-LoRA's projection (Sec. 3.2) as ``(index, value)`` of length ``D``:
    ``P[i, index[i]] = value[i]``.

    Balanced random partition (official code ``generate_index``): ``floor(D/d)`` copies of every
    column id, ``D mod d`` extra ids drawn without replacement, shuffled by
    ``np.random.default_rng(seed)``; ``value = 1/sqrt(n_j)`` with ``n_j`` the group size.
    Requires ``1 <= d <= D`` (else a group would be empty and ``P^T P != I``).

    >>> index, value = isometric_projection(5, 2)  # groups of 3 and 2
    >>> sorted(np.round(value, 6).tolist())  # 1 / sqrt(n_j)
    [0.57735, 0.57735, 0.57735, 0.707107, 0.707107]
    """
    D = check_int(D, "D", lower=1)
    d = check_int(d, "d", lower=1, upper=D)
    check_memory(3 * D, ["D"])
    rng = as_generator(check_int(seed, "seed", lower=0), "seed")
    index = np.repeat(np.arange(d), D // d)
    extra = rng.choice(d, size=D % d, replace=False)
    index = np.concatenate([index, extra])
    rng.shuffle(index)
    counts = np.bincount(index, minlength=d)
    return index.astype(np.int32), 1.0 / np.sqrt(counts[index])


def project(theta, index, value):
    """``P theta`` for a one-nonzero-per-row projection: ``theta[index] * value`` (a gather;
    Uni-LoRA, Sec. 3.1).

    >>> index, value = isometric_projection(5, 2)
    >>> theta = jnp.array([1.0, 2.0])
    >>> y = project(theta, index, value)
    >>> project_transpose(y, index, value, 2).round(5).tolist()  # P^T P = I
    [1.0, 2.0]
    """
    theta = _real_array(theta, "theta", ndim=1, min_size=1)
    index, value = _check_projection(index, value, theta.shape[0])
    out = jnp.take(theta, index, axis=0) * value
    return out if _is_tracer(out) else check_finite_result(out, "P theta")


def _check_projection(index, value, d):
    """``(index, value)`` validated: equal shapes, ``0 <= index < d`` when concrete."""
    as_array(index, "index", dtype=np.float64, lower=0, upper=d - 1)
    index = jnp.asarray(index)
    if not jnp.issubdtype(index.dtype, jnp.integer):
        raise TypeError(f"`index` must hold integers; got dtype {index.dtype}.")
    value = _real_array(value, "value", shape=index.shape)
    return index, value


def project_transpose(g, index, value, d: int):
    """``P^T g``: group ``j`` receives ``sum_{i: index_i = j} value_i g_i`` (a segment sum; the
    adjoint of :func:`project`).

    >>> index, value = jnp.array([0, 0, 1]), jnp.array([1.0, 1.0, 2.0])
    >>> project_transpose(jnp.ones(3), index, value, 2).tolist()
    [2.0, 2.0]
    """
    d = check_int(d, "d", lower=1)
    check_memory(d, ["d"])
    index, value = _check_projection(index, value, d)
    g = _real_array(g, "g", shape=index.shape)
    out = jax.ops.segment_sum(g * value, index, num_segments=d)
    return out if _is_tracer(out) else check_finite_result(out, "P^T g")


def kaiming_uniform_bases(r: int, m_max: int, n_max: int, *, key, dtype=None):
    """VeRA's shared frozen bases (Kopiczko et al. 2024): ``A (r, n_max)``, ``B (m_max, r)``, each
    Kaiming-uniform (a = sqrt(5), i.e. ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, PEFT ``vera``
    ``_kaiming_init``).

    >>> A, B = kaiming_uniform_bases(2, 3, 4, key=jax.random.key(0))
    >>> A.shape, B.shape, bool(abs(A).max() <= 0.5)  # A's fan-in is n_max = 4
    ((2, 4), (3, 2), True)
    """
    r = check_int(r, "r", lower=1)
    m_max = check_int(m_max, "m_max", lower=1)
    n_max = check_int(n_max, "n_max", lower=1)
    check_memory(r * (m_max + n_max), ["r", "m_max", "n_max"])
    ka, kb = jax.random.split(check_key(key))
    dt = _nn.default_float(dtype)
    a = jax.random.uniform(ka, (r, n_max), dt, -1 / math.sqrt(n_max), 1 / math.sqrt(n_max))
    b = jax.random.uniform(kb, (m_max, r), dt, -1 / math.sqrt(r), 1 / math.sqrt(r))
    return a, b


def _pair(x, name):
    if not isinstance(x, list | tuple) or len(x) != 2:
        raise TypeError(f"`{name}` must hold (out, in) pairs; got {x!r:.60}.")
    return x


def vera_projection(shapes, a, b):
    """VeRA (and Tied-LoRA with frozen ``A, B``) as a one-nonzero projection (Uni-LoRA, Sec. 3.1;
    derived here, ``docs/papers/adapters_unilora.md``, and tested in
    ``tests/nn/adapters/test_unilora.py``).

    Returns a list, per layer of shape ``(m, n)``, of ``(index_A, value_A, index_B, value_B)``
    with ``theta_l = [lambda_b (m); lambda_d (r)]`` stored at consecutive offsets, so that
    ``A' = diag(lambda_d) A[:, :n]`` and ``B' = diag(lambda_b) B[:m]``.

    >>> a, b = jnp.ones((1, 2)), jnp.ones((2, 1))  # r = 1, one 2 x 2 layer
    >>> [(index_a, value_a, index_b, value_b)] = vera_projection([(2, 2)], a, b)
    >>> theta = jnp.array([2.0, 3.0, 5.0])  # lambda_b = (2, 3), lambda_d = (5,)
    >>> project(theta, index_a, value_a).tolist(), project(theta, index_b, value_b).tolist()
    ([[5.0, 5.0]], [[2.0], [3.0]])
    """
    if not isinstance(shapes, list | tuple) or not shapes:
        raise TypeError(
            f"`shapes` must be a non-empty list of (out, in) pairs; got {shapes!r:.60}."
        )
    shapes = [
        tuple(check_int(v, "shapes", lower=1, upper=2**20) for v in _pair(sh, "shapes"))
        for sh in shapes
    ]
    a = _real_array(a, "a", ndim=2, min_size=1)
    b = _real_array(b, "b", ndim=2, min_size=1)
    r = a.shape[0]
    m_max, n_max = max(m for m, _ in shapes), max(n for _, n in shapes)
    if a.shape[1] < n_max:
        raise ValueError(f"`a` must have at least {n_max} columns (r, n_max); got {a.shape}.")
    if b.shape != (b.shape[0], r) or b.shape[0] < m_max:
        raise ValueError(f"`b` must have shape (>= {m_max}, {r}); got {b.shape}.")
    out, off = [], 0
    for m, n in shapes:
        ib = np.broadcast_to(off + np.arange(m)[:, None], (m, r))
        ia = np.broadcast_to(off + m + np.arange(r)[:, None], (r, n))
        out.append((jnp.asarray(ia, jnp.int32), a[:, :n], jnp.asarray(ib, jnp.int32), b[:m]))
        off += m + r
    return out


class ProjectedLoRALinear(AdapterLayer):
    """``Delta W = B A`` with ``A = theta[index_A] * value_A``, ``B = theta[index_B] * value_B``
    (the unified view of Uni-LoRA, arXiv 2506.00799, Sec. 3.1).

    ``theta`` is the shared vector ``adapted.shared["theta"]``; the indices and values are frozen.
    """

    index_A: jax.Array
    value_A: jax.Array
    index_B: jax.Array
    value_B: jax.Array

    frozen = ("index_A", "value_A", "index_B", "value_B")

    def factors(self, ctx):
        theta = ctx["theta"]
        a = project(theta, self.index_A, self.value_A)
        b = project(theta, self.index_B, self.value_B)
        return a, b

    def delta_weight(self, ctx):
        a, b = self.factors(ctx)
        return b @ a

    def delta(self, x, ctx, *, key=None):
        a, b = self.factors(ctx)
        return (x @ a.T) @ b.T


def _uni_layout(shapes, r):
    """Offsets of each layer's ``[vec(A); vec(B)]`` block inside ``theta_D``."""
    sizes = [r * (m + n) for m, n in shapes]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(int)


@register_method("unilora")
class UniLoRALinear(ProjectedLoRALinear):
    """Uni-LoRA (arXiv 2506.00799, Sec. 3.2): one trainable vector ``theta in R^d`` for the whole
    model (isometric ``P``)."""

    options = ("r", "d", "seed", "init_bound")

    @classmethod
    def complete_config(cls, config, shapes):
        r = _check_rank(config.get("r", 4), shapes)
        D = sum(r * (m + n) for m, n in shapes)
        if "d" not in config:
            raise ValueError("`d` (the trainable dimension) must be given for Uni-LoRA.")
        d = check_int(config["d"], "d", lower=1, upper=D)
        seed = check_int(config.get("seed", 0), "seed", lower=0)
        bound = check_scalar(config.get("init_bound", 0.02), "init_bound", lower=0)
        return {"r": r, "d": d, "seed": seed, "init_bound": bound}

    @classmethod
    def build_shared(cls, shapes, *, key, dtype, r, d, seed, init_bound, **_):
        return {"theta": jax.random.uniform(key, (d,), dtype, -init_bound, init_bound)}

    @classmethod
    def build(cls, w, *, key, index, shapes, r, d, seed, **_):
        off = _uni_layout(shapes, r)
        idx, val = isometric_projection(int(off[-1]), d, seed)
        m, n = shapes[index]
        lo = off[index]
        sl = slice(lo, lo + r * n), slice(lo + r * n, off[index + 1])
        dt = w.dtype
        ia, ib = idx[sl[0]].reshape(r, n), idx[sl[1]].reshape(m, r)
        va, vb = val[sl[0]].reshape(r, n), val[sl[1]].reshape(m, r)
        return cls(
            (m, n), jnp.asarray(ia), jnp.asarray(va, dt), jnp.asarray(ib), jnp.asarray(vb, dt)
        )

    @classmethod
    def num_params(cls, shapes, *, d, **_):
        """``d``: one vector for the whole model."""
        return d


@register_method("vera")
class VeRALinear(ProjectedLoRALinear):
    """VeRA: ``Delta W = diag(lambda_b) B diag(lambda_d) A`` (frozen shared random ``A, B``;
    Kopiczko et al. 2024, arXiv 2310.11454, eq. (1))."""

    options = ("r", "d_initial")

    @classmethod
    def complete_config(cls, config, shapes):
        # VeRA's r may exceed a layer's size (A, B are random, not factors of it), but not D.
        r = check_int(config.get("r", 256), "r", lower=1)
        d0 = check_scalar(config.get("d_initial", 0.1), "d_initial")
        return {"r": r, "d_initial": d0}

    @classmethod
    def _bases(cls, shapes, key, r):
        m_max = max(m for m, _ in shapes)
        n_max = max(n for _, n in shapes)
        return kaiming_uniform_bases(r, m_max, n_max, key=jax.random.fold_in(key, 1))

    @classmethod
    def build_shared(cls, shapes, *, key, dtype, r, d_initial, **_):
        parts = [p for m, _ in shapes for p in (jnp.zeros(m, dtype), jnp.full(r, d_initial, dtype))]
        return {"theta": jnp.concatenate(parts)}

    @classmethod
    def build(cls, w, *, shared_key, index, shapes, r, **_):
        a, b = cls._bases(shapes, shared_key, r)
        ia, va, ib, vb = vera_projection(shapes, a.astype(w.dtype), b.astype(w.dtype))[index]
        return cls(w.shape, ia, va, ib, vb)

    @classmethod
    def num_params(cls, shapes, *, r, **_):
        """``sum_l (m_l + r)``."""
        return sum(m + r for m, _ in shapes)
