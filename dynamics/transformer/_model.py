"""The one-layer softmax-attention + tanh model of Chen & Luo 2025 (Def. 3), its data sets, and its
gradient flow (diffrax, adaptive) and gradient descent (optax), in float64 JAX."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
from jax.core import Tracer

import nn
from _core.validation import (
    ConvergenceError,
    NumericalError,
    as_array,
    as_generator,
    check_choice,
    check_int,
    check_memory,
    check_scalar,
)

__all__ = [
    "SmallInitTransformer",
    "exp_loss",
    "gaussian_task",
    "anchor_task",
    "FlowPath",
    "gradient_flow",
    "gradient_descent",
]

PARAMS = ("W_Q", "W_K", "W_V", "W1", "W2")


class SmallInitTransformer(eqx.Module):
    """``f(X) = sigma(softmax(X_s W_Q W_K^T X^T / sqrt(d)) X W_V W1) W2``: the last-token output of
    Chen & Luo 2025, Def. 3 / Eqs. 1–3 (one head, no residual, no LayerNorm, ``sigma = tanh``).

    Weights ``W_Q, W_K, W_V, W1`` are ``(d, d)`` and ``W2`` is ``(d,)``, stored as plain arrays in
    the paper's right-multiplication convention (``nn.Linear`` stores ``(out, in)`` and adds a bias,
    which this model does not have). ``activation="linear"`` drops ``tanh``, as the paper's stage-2
    analysis and App. B.2 do. Calling it on ``X`` of shape ``(..., s, d)`` returns ``(...,)``; only
    the last query row of the attention is computed, since only ``f_s`` enters the loss.
    """

    W_Q: jax.Array
    W_K: jax.Array
    W_V: jax.Array
    W1: jax.Array
    W2: jax.Array
    activation: str = eqx.field(static=True, default="tanh")

    @classmethod
    def init(cls, d: int, eps: float, *, key, activation: str = "tanh") -> SmallInitTransformer:
        """Every entry i.i.d. ``N(0, eps^2)`` (Chen & Luo 2025, Sec. 3), float64.

        ``key`` is a JAX PRNG key; the five matrices use ``fold_in(key, i)``, i = 0..4 in the order
        ``W_Q, W_K, W_V, W1, W2``.
        """
        d = check_int(d, "d", lower=1)
        eps = check_scalar(eps, "eps", lower=0.0, upper=1e100, closed="right")
        check_choice(activation, "activation", ("tanh", "linear"))
        with jax.enable_x64(True):
            shapes = [(d, d)] * 4 + [(d,)]
            ws = [
                eps * jax.random.normal(jax.random.fold_in(key, i), sh, jnp.float64)
                for i, sh in enumerate(shapes)
            ]
            return cls(*ws, activation=activation)

    @classmethod
    def from_arrays(cls, W_Q, W_K, W_V, W1, W2, *, activation="tanh") -> SmallInitTransformer:
        """Build the model from given weights (validated, cast to float64)."""
        W1 = as_array(W1, "W1", ndim=2)
        d = W1.shape[0]
        ws = [
            as_array(w, n, shape=(d, d))
            for w, n in ((W_Q, "W_Q"), (W_K, "W_K"), (W_V, "W_V"), (W1, "W1"))
        ]
        ws.append(as_array(W2, "W2", shape=(d,)))
        check_choice(activation, "activation", ("tanh", "linear"))
        with jax.enable_x64(True):
            return cls(*[jnp.asarray(w, jnp.float64) for w in ws], activation=activation)

    @property
    def d(self) -> int:
        return self.W1.shape[0]

    def __call__(self, X):
        d = X.shape[-1]
        q = X[..., -1:, :] @ self.W_Q  # (..., 1, d)
        logits = (q @ self.W_K.T) @ jnp.swapaxes(X, -1, -2) / math.sqrt(d)  # (..., 1, s)
        attn = jax.nn.softmax(logits, axis=-1) @ X @ self.W_V  # (..., 1, d)
        h = attn @ self.W1
        if self.activation == "tanh":
            h = jnp.tanh(h)
        return (h @ self.W2)[..., 0]

    def numpy(self) -> dict:
        """The weights as a dict of float64 NumPy arrays."""
        return {k: np.asarray(getattr(self, k)) for k in PARAMS}


def exp_loss(model: SmallInitTransformer, X, y):
    """``L = (1/n) sum_i exp(-y_i f(X_i))`` (Chen & Luo 2025, Eq. 3).

    Examples
    --------
    >>> X, y = gaussian_task(16, 4, 6, rng=0)
    >>> model = SmallInitTransformer.init(6, 1e-3, key=jax.random.key(0))
    >>> with jax.enable_x64(True):
    ...     loss = exp_loss(model, X, y)
    >>> round(float(loss), 6)  # small init: f = O(eps^3), so L = mean(exp(0)) = 1
    1.0
    """
    if any(isinstance(a, Tracer) for a in jax.tree.leaves((model, X, y))):
        return _exp_loss(model, X, y)  # under jit or grad: the checks need concrete values
    _check_model(model)
    X, y = _check_data(X, y, model.d)
    with jax.enable_x64(True):
        loss = float(_exp_loss(_f64_model(model), f64(X), f64(y)))
    if not np.isfinite(loss):
        raise NumericalError(
            f"the exponential loss overflows float64 (some margin -y f(X) > 709); got {loss}.",
            loss=loss,
        )
    return loss


def _exp_loss(model, X, y):
    return jnp.mean(jnp.exp(-y * model(X)))


def _f64_model(model):
    return jax.tree.map(lambda a: f64(a) if eqx.is_array(a) else a, model)


def _check_start(model, X, y):
    """Raise :class:`NumericalError` when the loss or its gradient is not finite at ``model``
    (inputs so large that the logits or the exponential overflow): a flow from there would only
    shrink its steps to ``max_steps``."""
    with jax.enable_x64(True):
        m, Xj, yj = _f64_model(model), f64(X), f64(y)
        loss, g = eqx.filter_value_and_grad(_exp_loss)(m, Xj, yj)
        finite = bool(jnp.isfinite(loss)) and all(
            bool(jnp.isfinite(getattr(g, k)).all()) for k in PARAMS
        )
    if not finite:
        raise NumericalError(
            f"the exponential loss or its gradient is not finite at the initial point (loss "
            f"{float(loss):.3g}); the data or weights are too large for float64.",
            loss=float(loss),
        )


def _check_data(X, y, d=None):
    X = as_array(X, "X", ndim=3)
    if min(X.shape) < 1:
        raise ValueError(f"`X` must have shape (n, s, d) with n, s, d >= 1; got {X.shape}.")
    if d is not None and X.shape[2] != d:
        raise ValueError(f"`X` must have last axis d = {d} (the model width); got shape {X.shape}.")
    y = as_array(y, "y", shape=(X.shape[0],))
    if not np.all(np.abs(y) == 1.0):
        bad = y[np.abs(y) != 1.0][:3]
        raise ValueError(f"`y` must hold labels in {{-1, +1}}; got values such as {bad.tolist()}.")
    return X, y


def _check_model(model):
    """A :class:`SmallInitTransformer` with finite weights of consistent shapes (one built
    directly, not by ``init``/``from_arrays``, is checked here)."""
    if not isinstance(model, SmallInitTransformer):
        raise TypeError(f"`model` must be a SmallInitTransformer; got {type(model).__name__}.")
    d = np.shape(model.W1)[0] if np.ndim(model.W1) == 2 else 0
    for k in PARAMS:
        w = getattr(model, k)
        want = (d,) if k == "W2" else (d, d)
        if not hasattr(w, "dtype") or np.dtype(w.dtype).kind != "f" or np.shape(w) != want:
            raise ValueError(f"`model`.{k} must be a float array of shape {want}; got {w!r:.60}.")
        if not np.all(np.isfinite(np.asarray(w))):
            raise ValueError(f"`model`.{k} must be finite; got NaN or infinite value(s).")
    return model


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def gaussian_task(n: int, s: int, d: int, *, labels: str = "random", rng=None):
    """Synthetic binary task: tokens ``X_ij ~ N(0, I_d)`` and labels in {±1}, the
    theorems' setting (``docs/papers/linearized_transformer.md#departures-and-why``).

    ``labels="random"``: i.i.d. Rademacher. ``labels="bilinear"``: ``y_i = sign(X_is B Xbar_i^T)``
    for a random Gaussian ``B``, a rule only the attention logits can express.
    Returns ``(X, y)`` with shapes ``(n, s, d)`` and ``(n,)``.

    Examples
    --------
    >>> X, y = gaussian_task(8, 3, 2, labels="bilinear", rng=0)
    >>> X.shape, y.shape, set(y.tolist()) <= {-1.0, 1.0}
    ((8, 3, 2), (8,), True)
    """
    n, s, d = (check_int(v, k, lower=1) for v, k in ((n, "n"), (s, "s"), (d, "d")))
    check_memory(2.0 * n * s * d, "`n`, `s`, `d`", what="the task's tokens")
    check_choice(labels, "labels", ("random", "bilinear"))
    g = as_generator(rng)
    X = g.standard_normal((n, s, d))
    if labels == "random":
        y = g.choice([-1.0, 1.0], size=n)
    else:
        B = g.standard_normal((d, d))
        score = np.einsum("ik,kl,il->i", X[:, -1], B, X.mean(axis=1))
        y = np.where(score >= 0, 1.0, -1.0)
    return X, y


def anchor_task(n: int, *, s: int = 10, n_keys: int = 20, d: int = 16, rng=None):
    """Binary version of the anchor-function task (Chen & Luo 2025, Sec. 5.1; Zhang et al. 2024c).

    Anchors are tokens ``{1, 2, 3, 4}``, keys ``{5, ..., 4 + n_keys}``. Each sequence of length
    ``s`` has exactly one anchor ``a`` in its first ``s - 1`` positions, the other positions are
    uniform keys. The paper's target is the key after the anchor shifted by ``a`` (a multi-class
    next-token label); the binary label used here is its parity, ``y = +1`` if
    ``(key after anchor) + a`` is even, else ``-1``. Tokens are embedded by a frozen Gaussian token
    embedding plus a frozen Gaussian positional embedding (each entry ``N(0, 1/2)``, so ``X`` has
    unit-variance entries as in :func:`gaussian_task`).

    Returns ``(X, y)`` with shapes ``(n, s, d)`` and ``(n,)``.

    Examples
    --------
    >>> X, y = anchor_task(5, rng=0)  # s = 10 tokens embedded in d = 16
    >>> X.shape, sorted(set(y.tolist()))
    ((5, 10, 16), [-1.0, 1.0])
    """
    n = check_int(n, "n", lower=1)
    s = check_int(s, "s", lower=2)
    n_keys = check_int(n_keys, "n_keys", lower=1)
    d = check_int(d, "d", lower=1)
    check_memory(
        2.0 * (n * s * d + (5 + n_keys) * d), "`n`, `s`, `n_keys`, `d`", what="the embedded tokens"
    )
    g = as_generator(rng)
    vocab = 5 + n_keys
    tokens = g.integers(5, vocab, size=(n, s))
    pos = g.integers(0, s - 1, size=n)
    anchor = g.integers(1, 5, size=n)
    tokens[np.arange(n), pos] = anchor
    target = tokens[np.arange(n), pos + 1] + anchor
    y = np.where(target % 2 == 0, 1.0, -1.0)
    emb = g.standard_normal((vocab, d)) / np.sqrt(2.0)
    pemb = g.standard_normal((s, d)) / np.sqrt(2.0)
    return emb[tokens] + pemb[None], y


# --------------------------------------------------------------------------------------------
# gradient flow and gradient descent
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowPath:
    """A training trajectory of :class:`SmallInitTransformer`, sampled at times ``t``.

    ``weights[name]`` is the stack ``(len(t), ...)`` of that weight (names ``W_Q, W_K, W_V, W1,
    W2``), ``loss`` the exponential loss at each sample, ``num_steps`` the solver / GD steps taken,
    ``stop_time`` the time a stopping event fired (``None`` if it did not), ``method`` the method.
    """

    t: np.ndarray
    weights: dict = field(repr=False)
    loss: np.ndarray = field(repr=False)
    num_steps: int
    stop_time: float | None
    method: str
    activation: str = "tanh"

    def model(self, i: int = -1) -> SmallInitTransformer:
        """The model at sample ``i``."""
        return SmallInitTransformer.from_arrays(
            *(self.weights[k][i] for k in PARAMS), activation=self.activation
        )

    def summary(self) -> str:
        rows = [
            ("method", self.method),
            ("samples", f"{self.t.size}"),
            ("t range", f"[{self.t[0]:.4g}, {self.t[-1]:.4g}]"),
            ("steps", f"{self.num_steps}"),
            ("stop time", "-" if self.stop_time is None else f"{self.stop_time:.6g}"),
            ("loss first/last", f"{self.loss[0]:.6g} / {self.loss[-1]:.6g}"),
        ]
        w = max(len(r[0]) for r in rows)
        return "\n".join(f"{a:<{w}}  {b}" for a, b in rows)


def f64(a):
    return None if a is None else jnp.asarray(a, jnp.float64)


def _field(t, model, args):
    X, y = args
    g = eqx.filter_grad(_exp_loss)(model, X, y)
    return jax.tree.map(jnp.negative, g)


def _norms(m):
    return jnp.stack([jnp.linalg.norm(getattr(m, k)) for k in PARAMS])


def _norm_event(t, y, args, **kwargs):
    # the watched weight is a traced index, so every choice shares one compiled solver
    return _norms(y)[args[3]] - args[2]


@eqx.filter_jit
def _solve_flow(model, X, y, ts, rtol, atol, max_steps, factor, index):
    term = diffrax.ODETerm(lambda t, m, a: _field(t, m, a[:2]))
    # always the same event (level +inf when no stop is asked): one compiled solver per shape
    level = factor * _norms(model)[index]  # factor = +inf: no stop
    event = diffrax.Event(_norm_event, root_finder=optx.Newton(rtol=1e-12, atol=1e-14))
    sol = diffrax.diffeqsolve(
        term,
        diffrax.Tsit5(),
        ts[0],
        ts[-1],
        None,
        model,
        args=(X, y, level, index),
        saveat=diffrax.SaveAt(ts=ts, t1=True),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        event=event,
        throw=False,
    )
    ok = sol.result == diffrax.RESULTS.successful
    fired = sol.event_mask
    return sol.ys, sol.ts, sol.stats["num_steps"], ok, fired


@eqx.filter_jit
def _losses(ys, X, y):
    return jax.vmap(lambda m: _exp_loss(m, X, y))(ys)


def _path(ys, t, X, y, num_steps, stop_time, method, activation):
    with jax.enable_x64(True):
        loss = np.asarray(_losses(ys, f64(X), f64(y)))  # on the untrimmed stack: one shape
    weights = {k: np.asarray(getattr(ys, k)) for k in PARAMS}
    keep = np.isfinite(t) & np.all(np.isfinite(weights["W_V"]).reshape(t.size, -1), axis=1)
    weights = {k: v[keep] for k, v in weights.items()}
    if not np.all(np.isfinite(loss[keep])):
        raise NumericalError(
            "the exponential loss overflows float64 along the path (some margin -y f(X) > 709)",
            loss=loss[keep],
        )
    return FlowPath(
        t=np.asarray(t)[keep],
        weights=weights,
        loss=loss[keep],
        num_steps=int(num_steps),
        stop_time=stop_time,
        method=method,
        activation=activation,
    )


def gradient_flow(
    model,
    X,
    y,
    t1,
    *,
    ts=None,
    n_save: int = 201,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_steps: int = 1_000_000,
    stop_factor: float | None = None,
    stop_weight: str = "W_V",
) -> FlowPath:
    """Gradient flow ``dtheta/dt = -grad L(theta)`` of the exponential loss (Chen & Luo 2025,
    Sec. 3), solved adaptively (diffrax ``Tsit5`` with a PID step-size controller, float64).

    Parameters
    ----------
    model : SmallInitTransformer, the initial point.
    X, y : data, ``(n, s, d)`` and ``(n,)`` with labels ±1.
    t1 : float > 0, final time (gradient-flow time, not rescaled).
    ts : increasing times in ``[0, t1]`` to save at (default: ``0`` then ``n_save - 1`` log-spaced
        times up to ``t1``, since stage 1 takes ``Theta(1/eps)``).
    rtol, atol : step-size controller tolerances.
    stop_factor, stop_weight : if ``stop_factor`` is given, stop when the Frobenius norm of the
        weight ``stop_weight`` (one of ``W_Q, W_K, W_V, W1, W2``) first reaches ``stop_factor``
        times its initial value (``W_V``: the escape event of stage 1; ``W_Q``: the growth of the
        key-query weights in stage 2), located by Newton root finding; later samples are dropped
        and ``FlowPath.stop_time`` is the event time (its state is the last sample).

    Returns
    -------
    FlowPath
    """
    _check_model(model)
    X, y = _check_data(X, y, model.d)
    t1 = check_scalar(t1, "t1", lower=0.0, upper=1e100, closed="right")
    check_scalar(rtol, "rtol", lower=0.0, upper=1.0, closed="right")
    check_scalar(atol, "atol", lower=0.0, upper=1.0, closed="right")
    max_steps = check_int(max_steps, "max_steps", lower=1, upper=10**7)
    check_choice(stop_weight, "stop_weight", PARAMS)
    if stop_factor is not None:
        stop_factor = check_scalar(stop_factor, "stop_factor", lower=1.0, closed="neither")
    if ts is None:
        n_save = check_int(n_save, "n_save", lower=2, upper=10**6)
        ts = np.concatenate([[0.0], np.geomspace(t1 * 1e-4, t1, n_save - 1)])
    else:
        ts = as_array(ts, "ts", ndim=1, min_size=2)
        check_memory(ts.size * (4 * model.d**2 + model.d), "`ts`", what="the saved weights")
        if ts.size < 2 or np.any(np.diff(ts) <= 0) or ts[0] < 0 or ts[-1] > t1 * (1 + 1e-12):
            raise ValueError("`ts` must be strictly increasing, at least 2 times, within [0, t1].")
    _check_start(model, X, y)
    with jax.enable_x64(True):
        ys, t_out, nsteps, ok, fired = _solve_flow(
            model,
            f64(X),
            f64(y),
            f64(ts),
            f64(rtol),
            f64(atol),
            max_steps,
            f64(np.inf if stop_factor is None else stop_factor),
            jnp.asarray(PARAMS.index(stop_weight)),
        )
    t_out = np.asarray(t_out)
    stop_time = None
    if bool(fired):
        # diffrax saves the event state in the first `ts` slot after it, and inf afterwards
        stop_time = float(np.max(t_out[np.isfinite(t_out)]))
    elif not bool(ok):
        raise ConvergenceError(
            f"gradient flow did not reach t1 = {t1:g} within max_steps = "
            f"{max_steps} (or its solution overflowed); raise `max_steps` or lower `t1`.",
            num_steps=int(nsteps),
        )
    else:  # drop the duplicate t1 save
        t_out = t_out.copy()
        t_out[-1] = np.inf  # trimmed in _path
    return _path(ys, t_out, X, y, nsteps, stop_time, "gradient_flow (Tsit5, PID)", model.activation)


@eqx.filter_jit
def _gd_scan(model, X, y, lr, n_chunks, every):
    """``n_chunks`` saves of :func:`nn.fit` runs of ``every`` full-batch ``optax.sgd(lr)`` steps."""
    opt = optax.sgd(lr)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def loss(m, _):
        return _exp_loss(m, X, y)

    def chunk(carry, _):
        p, st, _ = nn.fit(loss, opt, carry[0], frozen=static, opt_state=carry[1], length=every)
        return (p, st), p

    _, saved = jax.lax.scan(chunk, (params, opt.init(params)), None, length=n_chunks)
    return eqx.combine(saved, static)


def gradient_descent(model, X, y, lr: float, steps: int, *, save_every: int = 1) -> FlowPath:
    """Full-batch gradient descent ``theta <- theta - lr grad L`` (``optax.sgd``), the
    explicit-Euler discretisation of :func:`gradient_flow`; sample ``k`` is at time
    ``t = k * save_every * lr``.

    ``steps`` must be a multiple of ``save_every``. The first sample is the initial point.
    """
    _check_model(model)
    X, y = _check_data(X, y, model.d)
    lr = check_scalar(lr, "lr", lower=0.0, upper=1e100, closed="right")
    steps = check_int(steps, "steps", lower=1, upper=10**9)
    save_every = check_int(save_every, "save_every", lower=1, upper=steps)
    if steps % save_every:
        raise ValueError(f"`steps` ({steps}) must be a multiple of `save_every` ({save_every}).")
    _check_start(model, X, y)
    with jax.enable_x64(True):
        Xj, yj = jnp.asarray(X), jnp.asarray(y)
        saved = _gd_scan(model, Xj, yj, f64(lr), steps // save_every, save_every)
        ys = jax.tree.map(
            lambda a, b: jnp.concatenate([a[None], b]) if eqx.is_array(a) else a, model, saved
        )
    t = lr * save_every * np.arange(steps // save_every + 1)
    finite = np.all([np.isfinite(np.asarray(getattr(ys, k))).all() for k in PARAMS])
    if not finite:
        raise NumericalError(
            f"gradient descent diverged (non-finite weights) with lr = {lr:g}; lower `lr`.",
            lr=lr,
        )
    return _path(ys, t, X, y, steps, None, f"gradient_descent (lr={lr:g})", model.activation)
