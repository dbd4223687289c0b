"""Learning σ from datasets of instances (Ma & Kunisky 2025, Sec. 4, "learning from data").

As in the official ``learning_from_data``: a dataset of planted (label 1) and null (label 0)
observations Ŷ, the statistic λ_max(Ŷ + diag(σ_θ(Ŷ1))) (differentiable through ``eigvalsh``), an
affine head to a logit, binary cross-entropy, AdamW. Differences, stated: σ_θ is the monotone
one-hidden-layer MLP of :func:`spectral.sigmas.monotone_mlp` (monotone and bounded by
construction, so no cumulative-maximum repair is needed), and the learned σ's asymptotic β* is
computed exactly afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm import tqdm

from _core.validation import (
    as_array,
    as_generator,
    check_int,
    check_key,
    check_memory,
    check_scalar,
)

from ._models import planted_submatrix
from ._sigmas import monotone_mlp
from ._theory import as_prior, critical_threshold

__all__ = ["make_dataset", "LearnedSigma", "learn_sigma"]


def _check_split(data, name):
    """``(Ys, labels)``: Ys (count, n, n) finite, labels (count,) in {0, 1}."""
    if not isinstance(data, tuple | list) or len(data) != 2:
        raise TypeError(
            f"`{name}` must be a pair (Ys, labels) as from make_dataset; got {type(data).__name__}."
        )
    Ys = as_array(data[0], name, ndim=3, min_size=1, lower=-1e100, upper=1e100)
    y = as_array(data[1], name, shape=(Ys.shape[0],))
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(f"`{name}` labels must be 0 or 1.")
    return Ys, y


def make_dataset(count: int, n: int, beta: float, *, rng=None):
    """``count`` observations Ŷ (n×n planted at ``beta`` or null), labels Bernoulli(1/2).

    The datasets of Ma & Kunisky 2025, Sec. 4 ("learning from data"; official code)."""
    count = check_int(count, "count", lower=2)
    n = check_int(n, "n", lower=2)
    check_memory(float(count) * n * n + 2 * n * n, "`count`, `n`", what="count n x n matrices")
    gen = as_generator(rng)
    labels = gen.random(count) < 0.5
    Ys = np.stack([planted_submatrix(n, beta if lab else 0.0, rng=gen).Y for lab in labels])
    return Ys, labels.astype(np.float64)


def _sigma_jax(p, t):
    amp, slope = jax.nn.softplus(p["v"]), jax.nn.softplus(p["w"])
    return jnp.sum(amp * jnp.tanh(t[..., None] * slope + p["b"]), axis=-1)


def _logits(p, Ys):
    d = Ys.sum(-1)
    L = Ys + jax.vmap(jnp.diag)(_sigma_jax(p, d))
    lam = jnp.linalg.eigvalsh(L)[:, -1]
    return p["scale"] * lam + p["offset"]


@jax.jit
def _epoch(p, state, Y, y, idx, w, lr, weight_decay):
    """One epoch of AdamW steps on the minibatches ``Y[idx[s]]`` (rows weighted by ``w[s]``, 0
    on the last batch's padding), run by :func:`nn.fit`: ``(p, state, last batch's loss)``."""
    import nn

    def loss(p, b):
        i, wb = b
        bce = optax.sigmoid_binary_cross_entropy(_logits(p, Y[i]), y[i])
        return jnp.sum(wb * bce) / jnp.sum(wb)

    opt = optax.adamw(lr, weight_decay=weight_decay)
    p, state, losses = nn.fit(loss, opt, p, (idx, w), opt_state=state)
    return p, state, losses[-1]


@dataclass(frozen=True, eq=False)
class LearnedSigma:
    """The learned σ (a :func:`monotone_mlp`), its test accuracy, β* and the loss history.

    Ma & Kunisky 2025, Sec. 4 (learning from data), with the differences stated in the module."""

    sigma: object
    params: dict
    train_accuracy: float
    test_accuracy: float
    beta_star: float
    losses: np.ndarray

    def summary(self) -> str:
        return (
            f"learned sigma: {self.sigma!r}\n train accuracy {self.train_accuracy:.3f}, "
            f"test accuracy {self.test_accuracy:.3f}, asymptotic beta* {self.beta_star:.6f}"
        )


def learn_sigma(
    train,
    test,
    *,
    units: int = 8,
    epochs: int = 100,
    batch: int = 200,
    lr: float = 0.01,
    weight_decay: float = 0.01,
    prior="planted_submatrix",
    key,
) -> LearnedSigma:
    """Fit σ_θ on ``train = (Ys, labels)``; report accuracy on ``test`` and β*(σ_θ).

    Ma & Kunisky 2025, Sec. 4 (learning from data), with the differences stated in the module
    docstring. ``key`` is a JAX PRNG key (initialisation and batch order).

    >>> train, test = make_dataset(32, 20, 3.0, rng=0), make_dataset(32, 20, 3.0, rng=1)
    >>> r = learn_sigma(train, test, units=2, epochs=10, batch=32, lr=0.3, key=jax.random.key(0))
    >>> r.test_accuracy, r.losses.shape, bool(r.losses[-1] < r.losses[0] / 10)  # beta = 3 > 1
    (1.0, (10,), True)
    """
    units = check_int(units, "units", lower=1, upper=10_000)
    epochs = check_int(epochs, "epochs", lower=1, upper=1_000_000)
    batch = check_int(batch, "batch", lower=1)
    lr = check_scalar(lr, "lr", lower=0.0, upper=1e3, closed="right")
    weight_decay = check_scalar(weight_decay, "weight_decay", lower=0.0, upper=1e3)
    key = check_key(key)
    as_prior(prior)  # fail before training, not after it
    data = [_check_split(train, "train"), _check_split(test, "test")]
    if data[0][0].shape[1:] != data[1][0].shape[1:]:
        raise ValueError(
            f"`test` matrices must have the shape of `train`'s "
            f"{data[0][0].shape[1:]}; got {data[1][0].shape[1:]}."
        )
    with jax.enable_x64(True):
        (Ytr, ytr), (Yte, yte) = [(jnp.asarray(Y), jnp.asarray(y)) for Y, y in data]
        k1, k2 = jax.random.split(key)
        p = {
            "v": jax.random.normal(k1, (units,)) * 0.1,
            "w": jax.random.normal(k2, (units,)) * 0.1 - 0.5,
            "b": jnp.linspace(-1.0, 1.0, units),
            "scale": jnp.float64(5.0),
            "offset": jnp.float64(-10.0),
        }
        state = optax.adamw(lr, weight_decay=weight_decay).init(p)
        m = Ytr.shape[0]
        nb = -(-m // batch)
        w = jnp.asarray((np.arange(nb * batch) < m).reshape(nb, batch), jnp.float64)
        losses = []
        for e in tqdm(range(epochs), desc="learning sigma", leave=False, disable=None):
            perm = jax.random.permutation(jax.random.fold_in(key, e), m)
            idx = jnp.pad(perm, (0, nb * batch - m)).reshape(nb, batch)  # pads weigh 0
            p, state, val = _epoch(p, state, Ytr, ytr, idx, w, lr, weight_decay)
            losses.append(float(val))

        def acc(Y, y):
            return float(jnp.mean((_logits(p, Y) > 0) == (y > 0.5)))

        tr, te = acc(Ytr, ytr), acc(Yte, yte)
        pn = {k: np.asarray(v) for k, v in p.items()}
    sig = monotone_mlp(pn["v"], pn["w"], pn["b"])
    return LearnedSigma(sig, pn, tr, te, critical_threshold(sig, prior), np.array(losses))
