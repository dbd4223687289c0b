"""Layer rankings compared with RSM at an equal shielded budget of ``k`` adapters
(``docs/papers/aegisguard.md#as-implemented-here``; the TSDP baselines as TEESlice implements
them).

Scores are "shield the highest first" (:func:`top_k`):

* :func:`magnitude_scores` -- ``||s B_l A_l||_F``, TEESlice's "large magnitude" (``tdsc``) rule
  on adapters;
* :func:`depth_scores` -- ``"shallow"`` shields the first layers (Serdab), ``"deep"`` the last
  (DarkneTZ);
* :func:`probe_scores` -- the one-shot noise probe without the bandit: mean ``dL_i`` over
  ``draws`` noise draws per layer, the same noise rule as RSM (isolates the value of the bandit);
* :func:`random_expected` and :func:`oracle` read a table of attack accuracies over every subset
  (:func:`dynamics.aegisguard.attack.subset_masks`): the exact mean over all ``C(L, k)`` subsets
  (the expectation of a uniformly random choice, no Monte Carlo error) and the exhaustive
  minimum (the best any ranking can do at budget ``k``; chosen on the same attack, so
  optimistic).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    as_array,
    check_choice,
    check_int,
    check_key,
    check_scalar,
    to_array,
)

from .bandit import _probe
from .victim import check_data, check_layer_vector, check_victim

__all__ = [
    "magnitude_scores",
    "depth_scores",
    "probe_scores",
    "top_k",
    "random_expected",
    "oracle",
]


def magnitude_scores(model, As, Bs):
    """``||scale B_l A_l||_F`` per layer (``scale`` the LoRA ``alpha / r``): the "Large magnitude"
    baseline of ``docs/papers/aegisguard.md``.

    Examples
    --------
    >>> from dynamics.aegisguard.victim import ResMLP, adapted_model, adapter_arrays
    >>> model = adapted_model(ResMLP(4, 4, 1, 2, key=jax.random.key(0)), 1, key=jax.random.key(1))
    >>> As, Bs = adapter_arrays(model)
    >>> s = magnitude_scores(model, As, (jnp.ones_like(Bs[0]), *Bs[1:]))  # ||1 A_0||_F = 2 ||A_0||
    >>> bool(abs(s[0] - 2 * jnp.linalg.norm(As[0])) < 1e-5), s[1:].tolist()
    (True, [0.0, 0.0])
    """
    As, Bs = check_victim(model, As, Bs)
    scale = next(iter(model.layers().values())).scale
    return jnp.stack([jnp.linalg.norm(scale * (b @ a)) for a, b in zip(As, Bs, strict=True)])


def depth_scores(n_layers: int, which: str = "deep"):
    """Scores that shield the deepest (``"deep"``) or shallowest (``"shallow"``) layers first.

    Examples
    --------
    >>> top_k(depth_scores(4), 2).tolist(), top_k(depth_scores(4, "shallow"), 2).tolist()
    ([False, False, True, True], [True, True, False, False])
    """
    n_layers = check_int(n_layers, "n_layers", lower=1, upper=4096)
    check_choice(which, "which", ("deep", "shallow"))
    d = jnp.arange(n_layers, dtype=float)
    return d if which == "deep" else -d


def probe_scores(model, As, Bs, X, y, *, draws: int = 32, rho: float = 0.5, key):
    """Mean ``dL_i`` over ``draws`` independent one-layer noise probes on ``(X, y)``."""
    As, Bs = check_victim(model, As, Bs)
    X, y = check_data(model, X, y)
    draws = check_int(draws, "draws", lower=1, upper=10**3)
    rho = check_scalar(rho, "rho", lower=0, upper=100, closed="neither")
    check_key(key)
    return _probe_mean(model, As, Bs, X, y, jnp.asarray(rho), jax.random.split(key, draws))


@eqx.filter_jit
def _probe_mean(model, As, Bs, X, y, rho, keys):
    return jnp.mean(jax.vmap(lambda k: _probe(model, As, Bs, X, y, rho, k))(keys), axis=0)


def top_k(scores, k: int):
    """Bool mask of the ``k`` highest ``scores`` (ties to the lower index); traceable.

    Examples
    --------
    >>> top_k(jnp.array([0.3, 0.9, 0.3, 0.1]), 2).tolist()  # ties go to the lower index
    [True, True, False, False]
    """
    shape = scores.shape if hasattr(scores, "shape") else to_array(scores, "scores").shape
    scores = check_layer_vector(scores, "scores", shape[0] if len(shape) == 1 else -1)
    k = check_int(k, "k", lower=0, upper=scores.shape[-1])
    order = jnp.argsort(-scores, axis=-1, stable=True)
    ranks = jnp.argsort(order, axis=-1)
    return ranks < k


def _by_size(acc_table, k):
    acc = as_array(acc_table, "acc_table", lower=0, upper=1)
    L = int(round(np.log2(max(acc.shape[-1], 1)))) if acc.ndim else 0
    if acc.ndim < 1 or acc.shape[-1] < 2 or 2**L != acc.shape[-1]:
        raise ValueError(f"`acc_table` must have 2^L entries on its last axis; got {acc.shape}.")
    k = check_int(k, "k", lower=0, upper=L)
    size = np.array([bin(j).count("1") for j in range(2**L)])
    return acc[..., size == k]


def random_expected(acc_table, k: int):
    """Exact mean attack accuracy over every shielded set of size ``k`` (last axis).

    Examples
    --------
    >>> acc = np.array([0.9, 0.5, 0.7, 0.2])  # attack accuracy shielding none, {0}, {1}, {0, 1}
    >>> round(float(random_expected(acc, 1)), 6)  # mean of 0.5 and 0.7
    0.6
    """
    return _by_size(acc_table, k).mean(-1)


def oracle(acc_table, k: int):
    """Lowest attack accuracy over every shielded set of size ``k`` (exhaustive search).

    Examples
    --------
    >>> acc = np.array([0.9, 0.5, 0.7, 0.2])  # attack accuracy shielding none, {0}, {1}, {0, 1}
    >>> float(oracle(acc, 1)), float(oracle(acc, 2))
    (0.5, 0.2)
    """
    return _by_size(acc_table, k).min(-1)
