"""A synthetic corpus with a known loss floor: tokens from a random first-order Markov chain."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import xlogy

from _core.validation import as_array

__all__ = ["MarkovCorpus"]


@dataclasses.dataclass(frozen=True, eq=False)
class MarkovCorpus:
    """Random Markov chain over ``vocab_size`` tokens, rows ``P[i] ~ Dirichlet(concentration)``.

    ``batch(key, batch_size, length)`` samples sequences started from the stationary law;
    ``entropy_rate`` (nats/token) is the cross-entropy floor of any next-token predictor.

    >>> c = MarkovCorpus.random(8, key=jax.random.key(0))
    >>> c.batch(2, 5, key=jax.random.key(1)).shape
    (2, 5)
    """

    P: np.ndarray

    def __post_init__(self):
        P = as_array(self.P, "P", ndim=2, lower=0.0, upper=1.0)
        if P.shape[0] != P.shape[1] or P.shape[0] < 2:
            raise ValueError(f"`P` must be a square (V, V) matrix with V >= 2; got {P.shape}.")
        if np.abs(P.sum(axis=1) - 1.0).max() > 1e-8:
            raise ValueError(
                f"`P` must be row-stochastic (rows summing to 1); got row sums off by up to "
                f"{np.abs(P.sum(axis=1) - 1.0).max():.3g}."
            )
        object.__setattr__(self, "P", P)

    @classmethod
    def random(cls, vocab_size: int, *, key, concentration: float = 0.2) -> MarkovCorpus:
        if not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
        if not concentration > 0:
            raise ValueError(f"concentration must be > 0, got {concentration!r}")
        with jax.enable_x64(True):
            alpha = jnp.full((vocab_size, vocab_size), float(concentration), jnp.float64)
            P = np.asarray(jax.random.dirichlet(key, alpha), np.float64)
        P = np.maximum(P, 1e-12)
        return cls(P / P.sum(1, keepdims=True))

    @functools.cached_property
    def stationary(self) -> np.ndarray:
        w, v = np.linalg.eig(self.P.T)
        pi = np.real(v[:, np.argmin(np.abs(w - 1))])
        return pi / pi.sum()

    @property
    def entropy_rate(self) -> float:
        return float(-np.sum(self.stationary[:, None] * xlogy(self.P, self.P)))

    def batch(self, batch_size: int, length: int, *, key):
        """Integer tokens ``(batch_size, length)``."""
        with np.errstate(divide="ignore"):  # log 0 = -inf: a transition never taken
            logP = jnp.asarray(np.log(self.P), jnp.float32)
        k0, ks = jax.random.split(key)
        x0 = jax.random.choice(k0, self.P.shape[0], (batch_size,), p=jnp.asarray(self.stationary))
        return _sample(logP, x0, jax.random.split(ks, length - 1))


@jax.jit
def _sample(logP, x0, keys):
    def step(x, k):
        nxt = jax.random.categorical(k, logP[x])
        return nxt, nxt

    _, xs = jax.lax.scan(step, x0, keys)
    return jnp.concatenate([x0[None], xs], 0).T.astype(jnp.int32)
