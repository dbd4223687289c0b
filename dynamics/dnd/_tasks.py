"""The toy task family of ``docs/papers/dnd.md#small-scale-experiment``: tasks whose unlabeled
inputs identify them.

Task ``tau`` has a latent ``theta in R^k``; its inputs are ``x ~ N(M theta, I_d)`` (the
identifiable family) or ``x ~ N(0, I_d)`` (the negative control: prompts carry no task
information) and its targets are ``y = f0(x) + sum_j theta_j tanh(u_j . x)``, with ``f0`` the
frozen base network. Derived here, standing in for DnD's datasets, whose
unlabeled prompts reveal the dataset through their distribution.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer

import nn
from _core.validation import as_array, check_bool, check_int, check_key, check_scalar

__all__ = ["TaskFamily", "task_family", "sample_inputs", "task_targets"]

DTYPE = jnp.float32


@dataclasses.dataclass(frozen=True)
class TaskFamily:
    """A family of regression tasks on one frozen base network.

    ``base`` the frozen ``nn.MLP`` f0 (``dim -> width -> width -> 1``, tanh); ``M (dim, k)`` the
    input shift; ``U (k, dim)`` the task features; ``theta_train (n_train, k)`` and
    ``theta_test (n_test, k)`` the latents; ``identifiable`` whether inputs depend on ``theta``.
    """

    base: nn.MLP
    M: jax.Array
    U: jax.Array
    theta_train: jax.Array
    theta_test: jax.Array
    identifiable: bool

    @property
    def dim(self) -> int:
        return int(self.M.shape[0])

    def __repr__(self):
        return (
            f"TaskFamily(train={self.theta_train.shape[0]}, test={self.theta_test.shape[0]}, "
            f"dim={self.dim}, identifiable={self.identifiable})"
        )


def task_family(
    n_train: int,
    n_test: int,
    *,
    identifiable: bool = True,
    dim: int = 8,
    latent: int = 3,
    width: int = 20,
    shift: float = 1.0,
    key,
) -> TaskFamily:
    """Draw a family: ``theta ~ N(0, I_k)`` for ``n_train`` training and ``n_test`` held-out
    tasks, ``M ~ shift N(0, 1/k)``, ``u_j ~ N(0, I_d / d)``, and a random frozen base MLP."""
    n_train = check_int(n_train, "n_train", lower=2, upper=10_000)
    n_test = check_int(n_test, "n_test", lower=2, upper=10_000)
    identifiable = check_bool(identifiable, "identifiable")
    dim = check_int(dim, "dim", lower=1, upper=4096)
    latent = check_int(latent, "latent", lower=1, upper=4096)
    width = check_int(width, "width", lower=1, upper=4096)
    shift = check_scalar(shift, "shift", lower=0, upper=1e3)
    check_key(key)
    ks = jax.random.split(_rbg(key), 5)
    base = nn.MLP(dim, 1, width, 2, activation=jnp.tanh, dtype=DTYPE, key=ks[0])
    M = shift * jax.random.normal(ks[1], (dim, latent), DTYPE) / math.sqrt(latent)
    U = jax.random.normal(ks[2], (latent, dim), DTYPE) / math.sqrt(dim)
    tr = jax.random.normal(ks[3], (n_train, latent), DTYPE)
    te = jax.random.normal(ks[4], (n_test, latent), DTYPE)
    return TaskFamily(base, M, U, tr, te, identifiable)


def _rbg(key):
    """A counter-based ``"rbg"`` key drawn from ``key``: the same distributions, but XLA's
    RngBitGenerator compiles in a fraction of a second where threefry on large shapes takes
    seconds on CPU."""
    return jax.random.wrap_key_data(jax.random.bits(key, (4,), jnp.uint32), impl="rbg")


def _shift_matrix(family: TaskFamily):
    """``M`` for the identifiable family, zero for the negative control."""
    return family.M if family.identifiable else jnp.zeros_like(family.M)


def _bounded(x, name, what):
    """``x`` as a float32 array, finite and at most 1e6 in magnitude (float32 work downstream)."""
    if isinstance(x, jax.Array) and not isinstance(x, Tracer):
        x = np.asarray(x)
    x = as_array(x, name, min_size=1, lower=-1e6, upper=1e6)
    if x.ndim < 1:
        raise ValueError(f"`{name}` must be {what}; got a scalar.")
    return jnp.asarray(x, DTYPE)


def _theta(family, theta):
    theta = _bounded(theta, "theta", "(..., k) latents")
    if theta.shape[-1] != family.M.shape[1]:
        raise ValueError(
            f"`theta` must have last axis {family.M.shape[1]} (the latent size); got shape "
            f"{tuple(theta.shape)}."
        )
    return theta


def _check_family(family):
    if not isinstance(family, TaskFamily):
        raise TypeError(f"`family` must be a TaskFamily; got {type(family).__name__}.")


def sample_inputs(family: TaskFamily, theta, n: int, *, key) -> jax.Array:
    """``n`` unlabeled inputs of each task ``theta (..., k)``: ``(..., n, dim)``."""
    _check_family(family)
    theta = _theta(family, theta)
    n = check_int(n, "n", lower=1, upper=10**6)
    check_key(key)
    z = jax.random.normal(_rbg(key), (*theta.shape[:-1], n, family.dim), DTYPE)
    return z + (theta @ _shift_matrix(family).T)[..., None, :]


def task_targets(family: TaskFamily, theta, X) -> jax.Array:
    """The toy task family of ``docs/papers/dnd.md#small-scale-experiment`` (derived here): ``y =
    f0(x) + sum_j theta_j tanh(u_j . x)`` for inputs ``X (..., n, dim)`` of tasks
    ``theta (..., k)``: ``(..., n)``."""
    _check_family(family)
    theta = _theta(family, theta)
    X = _bounded(X, "X", "(..., n, dim) inputs")
    try:
        np.broadcast_shapes(X.shape[:-2], theta.shape[:-1])
        batch_ok = True
    except ValueError:
        batch_ok = False
    if X.ndim != theta.ndim + 1 or X.shape[-1] != family.dim or not batch_ok:
        raise ValueError(
            f"`X` must have shape (..., n, {family.dim}) matching `theta` {tuple(theta.shape)}; "
            f"got {tuple(X.shape)}."
        )
    feats = jnp.tanh(X @ family.U.T)  # (..., n, k)
    return family.base(X)[..., 0] + jnp.einsum("...nk,...k->...n", feats, theta)
