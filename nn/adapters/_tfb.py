"""TFB: training-free Bayesianization of a trained LoRA (Shi et al. 2025, arXiv 2412.05723).

Given a trained LoRA ``(B, A)`` with scaling ``s`` (official code ``modelwrappers/tfblora.py``):

1. re-factor with the thin SVD ``B = U diag(d) V^T``: ``B' = U diag(d)``, ``A' = V^T A``, so
   ``B' A' = B A`` (:func:`tfb_refactor`);
2. put the posterior ``q(A'_ij) = N(A'_ij, (sigma / d_i)^2)`` on ``A'`` only (``B'`` stays fixed).

Then ``Delta W = s B'(A' + E) = s BA + s U (diag(d) E)`` and ``vec(Delta W) ~ N(vec(s BA),
s^2 sigma^2 (I_n (x) U U^T))``: an isotropic Gaussian of variance ``s^2 sigma^2`` on
``col(B) (x) R^n`` and zero outside (derived here; tested by Monte Carlo). The law depends
only on ``BA`` and ``col(B)``: it is invariant to the gauge ``(B, A) -> (BG, G^{-1} A)``.

The single ``sigma`` is chosen by :func:`tfb_search_sigma`: the largest ``sigma`` in
``[sigma_min, sigma_max]`` whose deviation of an anchor metric from the ``sigma = 0`` model stays
within ``tol``, by bisection (the code returns the first violating midpoint; we return the
feasible end ``low`` and say so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    _is_tracer,
    as_array,
    call_scalar,
    check_callable,
    check_finite_result,
    check_int,
    check_scalar,
)

from ._core import Adapted, AdaptedLayer, AdapterLayer, _real_array, register_method

__all__ = [
    "tfb_refactor",
    "TFBLoRALinear",
    "tfb_bayesianize",
    "tfb_search_sigma",
    "TFBSearchResult",
    "expected_calibration_error",
]


def tfb_refactor(b, a):
    """``(B', A', d)``: ``B' = U diag(d)``, ``A' = V^T A``, thin SVD ``B = U diag(d) V^T`` (TFB
    step 1, ``docs/papers/adapters_tfb.md``).

    >>> b, a = jnp.array([[0.0, 1.0], [2.0, 0.0]]), jnp.array([[1.0, 2.0], [3.0, 4.0]])
    >>> b2, a2, d = tfb_refactor(b, a)
    >>> d.tolist(), bool(jnp.allclose(b2 @ a2, b @ a))
    ([2.0, 1.0], True)
    """
    b = _real_array(b, "b", ndim=2, min_size=1)
    a = _real_array(a, "a", ndim=2, shape=(b.shape[1], None), min_size=1)
    u, d, vt = jnp.linalg.svd(b, full_matrices=False)
    out = (u * d, vt @ a, d)
    if not _is_tracer(d):
        for part, what in zip(out, ("B'", "A'", "d"), strict=True):
            check_finite_result(part, f"tfb_refactor's {what}")
    return out


@register_method("tfb")
class TFBLoRALinear(AdapterLayer):
    """LoRA layer with the TFB posterior on ``A'`` (arXiv 2412.05723;
    ``docs/papers/adapters_tfb.md``): each call with ``key`` draws one ``E``.

    Without ``key`` the layer returns the posterior mean (the trained LoRA). Everything in it is
    frozen (TFB trains nothing) and stored in adapter files; ``sigma`` is a scalar array, so it
    can be traced.
    """

    Bp: jax.Array
    Ap: jax.Array
    d: jax.Array
    sigma: jax.Array
    scale: float = eqx.field(static=True)

    frozen = ("Bp", "Ap", "d", "sigma")
    saved = ("Bp", "Ap", "d", "sigma")

    @classmethod
    def check_config(cls, config, shapes):
        raise ValueError("`method` 'tfb' is built from a trained LoRA: use tfb_bayesianize.")

    @classmethod
    def num_params(cls, shapes, **_):
        return 0

    def _arrays(self):
        return self.Bp, self.Ap, self.d / self.sigma

    def delta_weight(self, ctx):
        bp, ap, _ = self._arrays()
        return self.scale * (bp @ ap)

    def _noise(self, key, ap, d_over_sigma):
        # B's numerical rank as in numpy.linalg.matrix_rank (d_i <= d_max max(m, r) eps is 0): a
        # zero singular value (e.g. a layer still at B = 0) has a zero column of B' and carries
        # no noise, so the law stays on col(B). Unmasked, sigma / 0 times that column is NaN,
        # and a round-off d_i ~ 1e-16 would put variance sigma^2 along a direction outside col(B).
        d = self.d[:, None]
        tol = jnp.max(self.d, initial=0.0) * max(self.Bp.shape) * jnp.finfo(d.dtype).eps
        ok = d > tol
        z = jax.random.normal(key, ap.shape, ap.dtype)
        return jnp.where(ok, z / jnp.where(ok, d_over_sigma[:, None], 1.0), 0.0)

    def sample_delta_weight(self, *, key):
        """One draw of ``s B'(A' + E)``, ``E_ij ~ N(0, (sigma / d_i)^2)`` (``E_i = 0`` where
        ``d_i`` is zero at B's numerical rank)."""
        bp, ap, d = self._arrays()
        return self.scale * (bp @ (ap + self._noise(key, ap, d)))

    def delta(self, x, ctx, *, key=None):
        bp, ap, d = self._arrays()
        if key is not None:
            ap = ap + self._noise(key, ap, d)
        return self.scale * ((x @ ap.T) @ bp.T)


def tfb_bayesianize(adapted: Adapted, sigma: float, *, name: str | None = None) -> Adapted:
    """Turn the LoRA adapter ``name`` (default: the active one) of a trained ``adapted`` into TFB
    layers with std ``sigma`` (TFB, ``docs/papers/adapters_tfb.md``).

    The TFB adapter trains nothing; call the model with ``key=`` to sample (one draw of the noise
    per call and layer; a layer called without a key draws from ``fold_in(key, i)``).

    >>> import nn
    >>> from nn.adapters import inject
    >>> mlp = nn.MLP(4, 2, 3, 1, key=jax.random.key(0))
    >>> a = inject(mlp, "lora", "layers.0", key=jax.random.key(1), r=2)
    >>> a = eqx.tree_at(lambda m: m.layers()["layers.0"].B, a, jnp.eye(3, 2))  # a trained B
    >>> t, x = tfb_bayesianize(a, 0.1), jnp.ones(4)
    >>> bool(jnp.allclose(t(x), a(x)))  # without a key: the posterior mean, the trained LoRA
    True
    >>> lay = t.layers()["layers.0"]
    >>> e = lay.sample_delta_weight(key=jax.random.key(2)) - lay.delta_weight({})
    >>> bool(jnp.all(abs(e[2]) < 1e-6)), bool(jnp.all(e[:2] != 0))  # noise in col(B) only
    (True, True)
    """
    if not isinstance(adapted, Adapted):
        raise ValueError(
            f"`adapted` must be a LoRA-adapted model (inject(..., 'lora')); got "
            f"{type(adapted).__name__}."
        )
    name = adapted._one(name)
    spec = adapted.spec_of(name)
    if spec.method != "lora":
        raise ValueError(
            f"`adapted` must be a LoRA-adapted model (inject(..., 'lora')); adapter "
            f"{name!r} is {spec.method!r}."
        )
    if _is_tracer(sigma):
        sigma_arr = sigma  # traced (inside jit): the caller validated it
    else:
        sigma_arr = check_scalar(sigma, "sigma", lower=0)

    def conv(n):
        if not isinstance(n, AdaptedLayer) or name not in n.adapters:
            return n
        lo = n.adapters[name]
        bp, ap, d = tfb_refactor(lo.B, lo.A)
        layer = TFBLoRALinear(lo.shape, bp, ap, d, jnp.asarray(sigma_arr, bp.dtype), lo.scale)
        return AdaptedLayer(n.base, {**n.adapters, name: layer}, n.target)

    model = jax.tree.map(conv, adapted.model, is_leaf=lambda n: isinstance(n, AdaptedLayer))
    new = dataclasses.replace(spec, method="tfb", train=(), dropout=0.0)
    specs = tuple(new if s.name == name else s for s in adapted.specs)
    return Adapted(model, adapted.banks, specs, adapted.active, adapted.enabled)


@dataclasses.dataclass(frozen=True)
class TFBSearchResult:
    """Outcome of :func:`tfb_search_sigma`: ``sigma`` (the feasible end), the bracket, history."""

    sigma: float
    low: float
    high: float
    tol: float
    sigmas: np.ndarray
    metrics: np.ndarray

    def summary(self) -> str:
        lines = [
            "TFB sigma search",
            "-" * 40,
            f"{'sigma (feasible)':<22}{self.sigma:>18.6g}",
            f"{'bracket width':<22}{self.high - self.low:>18.3g}",
            f"{'tolerance':<22}{self.tol:>18.3g}",
            f"{'evaluations':<22}{len(self.sigmas):>18d}",
        ]
        return "\n".join(lines)

    def __repr__(self):
        return f"TFBSearchResult(sigma={self.sigma:.4g}, evaluations={len(self.sigmas)})"


def tfb_search_sigma(
    metric: Callable[[float], float],
    *,
    sigma_max: float,
    tol: float,
    sigma_min: float = 1e-3,
    iters: int = 10,
) -> TFBSearchResult:
    """Largest ``sigma`` with ``metric(sigma) <= tol`` by bisection (TFB, Alg. 1).

    ``metric(sigma)`` is the deviation of the anchor-set metric from the ``sigma = 0`` model
    (e.g. the relative NLL change against the model's own predictions); it should be
    nondecreasing in ``sigma`` (use common random numbers and antithetic draws). If
    ``metric(sigma_max) <= tol`` the answer is ``sigma_max``; the returned ``sigma`` is always
    feasible, within ``(sigma_max - sigma_min) / 2^iters`` of the threshold.

    >>> tfb_search_sigma(lambda s: s, sigma_max=1.0, tol=0.25).sigma <= 0.25  # always feasible
    True
    """
    metric = check_callable(metric, "metric")
    sigma_max = check_scalar(sigma_max, "sigma_max", lower=0, closed="neither")
    sigma_min = check_scalar(sigma_min, "sigma_min", lower=0)
    if sigma_min > sigma_max:
        raise ValueError(
            f"`sigma_max` must be at least `sigma_min` = {sigma_min}; got sigma_max = {sigma_max}."
        )
    tol = check_scalar(tol, "tol", lower=0)
    iters = check_int(iters, "iters", lower=1, upper=200)  # 2^-200: past float64 resolution
    sig, met = [sigma_max], [call_scalar(metric, sigma_max, "metric")]
    if not np.isfinite(met[0]):
        raise ValueError(f"`metric` returned {met[0]} at sigma = {sigma_max}.")
    if met[0] <= tol:
        return TFBSearchResult(sigma_max, sigma_max, sigma_max, tol, np.array(sig), np.array(met))
    low, high = sigma_min, sigma_max
    for _ in range(iters):
        mid = 0.5 * (low + high)
        v = call_scalar(metric, mid, "metric")
        if not np.isfinite(v):
            raise ValueError(f"`metric` returned {v} at sigma = {mid}.")
        sig.append(mid)
        met.append(v)
        if v > tol:
            high = mid
        else:
            low = mid
    return TFBSearchResult(low, low, high, tol, np.array(sig), np.array(met))


def expected_calibration_error(probs, labels, *, bins: int = 15) -> float:
    """ECE with ``bins`` equal-width confidence bins (Guo et al. 2017, eq. (3)).

    ``probs (N, C)`` predicted probabilities, ``labels (N,)`` integer classes.

    >>> probs = np.array([[0.9, 0.1], [0.9, 0.1]])  # confidence 0.9, accuracy 0.5
    >>> round(expected_calibration_error(probs, np.array([0, 1])), 6)
    0.4
    """
    probs = as_array(probs, "probs", ndim=2, min_size=1, lower=0.0, upper=1.0)
    total = probs.sum(axis=1)
    if np.abs(total - 1.0).max() > 1e-3:
        worst = total[np.abs(total - 1.0).argmax()]
        raise ValueError(
            f"`probs` must have rows summing to 1 (probabilities over the classes); got a row "
            f"summing to {worst:g}."
        )
    C = probs.shape[1]
    as_array(labels, "labels", shape=(probs.shape[0],), dtype=np.float64, lower=0, upper=C - 1)
    labels = np.asarray(labels)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"`labels` must hold integer classes; got dtype {labels.dtype}.")
    bins = check_int(bins, "bins", lower=1, upper=10**6)
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(conf, edges[1:-1], right=True), 0, bins - 1)
    # sum_b (n_b / N) |acc_b - conf_b| = sum_b |sum_{i in b} (correct_i - conf_i)| / N
    gap = np.bincount(which, weights=correct - conf, minlength=bins)
    return float(np.abs(gap).sum() / len(conf))
