"""MoORE (arXiv 2506.14436): mixture of orthogonal rank-one experts.

With the thin SVD ``W0 = U diag(sigma) V^T`` (``k = min(m, n)``), the layer computes
``y = U diag(g(x, t)) V^T R x + b`` (official code ``moe_peft/common/lora_linear.py``, class
``MoORE``, in column form):

* ``R = H_r ... H_1``, ``H_i = I - 2 u_i u_i^T / ||u_i||^2`` (Householder, HRA-style); the vectors
  are created in identical consecutive pairs, so ``R = I`` at init;
* ``g(x, t) = ReLU(sigma + W_task e_t + W_up W_gate x)`` with task embedding ``e_t``
  (``T x d_t``), ``W_task`` (``k x d_t``, init 0), ``W_gate`` (``E x n``, Kaiming-uniform),
  ``W_up`` (``k x E``, init 0); hence ``g = sigma`` and the layer equals the base at init.

The effective weight ``W_eff = sum_j g_j u_j (R^T v_j)^T`` keeps ``col(W_eff) subset col(W0)`` and
has singular values exactly ``g`` (the experts ``u_j (R^T v_j)^T`` are Frobenius-orthonormal);
derived here, tested in ``tests/nn/adapters/test_moore.py``. It replaces the base map (no
residual ``W0 x``) and depends on the input, so it is not mergeable.
Count per layer ``r n + E n + k E + k d_t + T d_t``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from _core.validation import _is_tracer, check_int

from ._core import AdapterLayer, _real_array, register_method

__all__ = ["MoORELinear", "householder_apply", "householder_matrix"]


def householder_apply(u, x):
    """``R x`` for ``R = H_r ... H_1`` (``H_1`` first); rows ``u (r, n)``, ``x (..., n)``
    (Householder reflections, ``docs/papers/adapters_moore.md``).

    >>> householder_apply(jnp.array([[1.0, 0.0]]), jnp.array([3.0, 4.0])).tolist()  # reflect e_1
    [-3.0, 4.0]
    """
    u = _real_array(u, "u", ndim=2, min_size=1)
    x = _real_array(x, "x")
    if x.ndim < 1 or x.shape[-1] != u.shape[-1]:
        raise ValueError(
            f"`x` must end in the length of the rows of `u` ({u.shape[-1]}); got shape {x.shape}."
        )
    u = u / jnp.max(jnp.abs(u), axis=-1, keepdims=True)  # scaled first: no overflow in the norm
    norm = jnp.linalg.norm(u, axis=-1, keepdims=True)
    if not _is_tracer(norm) and not bool(jnp.all(norm > 0)):
        raise ValueError(f"`u` must have non-zero rows; got {u}.")
    un = u / norm

    def step(z, v):
        return z - 2.0 * (z @ v)[..., None] * v, None

    z, _ = jax.lax.scan(step, x, un)
    return z


def householder_matrix(u):
    """The ``n x n`` orthogonal matrix ``R = H_r ... H_1`` (``docs/papers/adapters_moore.md``).

    >>> householder_matrix(jnp.array([[1.0, 0.0]])).tolist()  # I - 2 e_1 e_1^T
    [[-1.0, 0.0], [0.0, 1.0]]
    """
    u = _real_array(u, "u", ndim=2, min_size=1)
    return householder_apply(u, jnp.eye(u.shape[-1], dtype=u.dtype)).T


@register_method("moore")
class MoORELinear(AdapterLayer):
    """MoORE layer (arXiv 2506.14436; ``docs/papers/adapters_moore.md``): frozen ``U, sigma, V`` and
    base ``bias``; trainable Householder rows, router,
    task embedding. It computes the whole layer output (``replaces_base``)."""

    U: jax.Array
    sigma: jax.Array
    V: jax.Array
    bias: jax.Array | None
    householder: jax.Array
    w_gate: jax.Array
    w_up: jax.Array
    w_task: jax.Array
    task_embed: jax.Array

    mergeable = False
    replaces_base = True
    context_keys = ("task",)
    frozen = ("U", "sigma", "V", "bias")

    options = ("r", "num_experts", "task_dim", "num_tasks")

    @classmethod
    def complete_config(cls, config, shapes):
        r = check_int(config.get("r", 8), "r", lower=0)
        if r % 2:
            raise ValueError(f"`r` (Householder reflections) must be even (paired init); got {r}.")
        e = check_int(config.get("num_experts", 128), "num_experts", lower=1)
        dt_ = check_int(config.get("task_dim", 64), "task_dim", lower=1)
        t = check_int(config.get("num_tasks", 1), "num_tasks", lower=1)
        return {"r": r, "num_experts": e, "task_dim": dt_, "num_tasks": t}

    @classmethod
    def build(cls, w0, *, key, bias, r, num_experts, task_dim, num_tasks, **_):
        m, n = w0.shape
        dt = w0.dtype
        u, s, vt = jnp.linalg.svd(w0, full_matrices=False)
        k = s.shape[0]
        kh, kg, ke = jax.random.split(key, 3)
        half = jax.random.normal(kh, (r // 2, n), dt)
        hh = jnp.repeat(half, 2, axis=0)  # identical pairs: H H = I, so R = I at init
        lim = 1 / math.sqrt(n)
        gate = jax.random.uniform(kg, (num_experts, n), dt, -lim, lim)
        return cls(
            (m, n),
            u,
            s,
            vt.T,
            bias,
            hh,
            gate,
            jnp.zeros((k, num_experts), dt),
            jnp.zeros((k, task_dim), dt),
            jax.random.normal(ke, (num_tasks, task_dim), dt),
        )

    @classmethod
    def num_params(cls, shapes, *, r, num_experts, task_dim, num_tasks, **_):
        e = num_experts
        return sum(
            r * n + e * n + min(m, n) * (e + task_dim) + num_tasks * task_dim for m, n in shapes
        )

    def gates(self, x, task):
        """``g(x, t) = ReLU(sigma + W_task e_t + W_up W_gate x)``, shape ``(..., k)``."""
        e = jnp.take(self.task_embed, jnp.asarray(task), axis=0)
        pre = self.sigma + e @ self.w_task.T + (x @ self.w_gate.T) @ self.w_up.T
        return jax.nn.relu(pre)

    def effective_weight(self, x, task=0):
        """``W_eff(x, t) = U diag(g) V^T R`` for one input ``x (n,)``."""
        g = self.gates(x, task)
        r = householder_matrix(self.householder) if self.householder.shape[0] else None
        vt = self.V.T
        vtr = vt if r is None else vt @ r
        return (self.U * g) @ vtr

    def delta_weight(self, ctx):
        raise ValueError("MoORE's weight depends on the input; use effective_weight(x, task).")

    def forward(self, x, ctx, *, key=None):
        task = ctx.get("task", 0)
        if task is None:
            task = 0
        z = x
        if self.householder.shape[0]:
            # R as one n x n matrix (r n^2 flops, once per call) when the batch has at least n
            # rows: one matmul instead of r sequential rank-one steps, whose loop and its
            # transpose dominate training small layers (same R x up to round-off)
            if math.prod(x.shape[:-1]) >= x.shape[-1]:
                z = x @ householder_matrix(self.householder).T
            else:
                z = householder_apply(self.householder, x)
        g = self.gates(x, task)
        y = (g * (z @ self.V)) @ self.U.T
        return y if self.bias is None else y + self.bias
