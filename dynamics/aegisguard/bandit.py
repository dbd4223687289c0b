"""RSM, RL-based Sensitivity Measurement (``docs/papers/aegisguard.md``; equations from a digest of
the paper, [3rd, unverified]): a multi-armed bandit over the adapters whose policy parameters are
one score ``s_l`` per layer.

Each round: (1) :func:`sample_layers` picks ``n_select`` layers, which alone train this round
(IST-style sparse tuning; ``masked`` updates, so an unselected layer does not move);
(2) :func:`probe` perturbs the down-projection ``A_i <- A_i + E_i``, ``E_i ~ N(0, sigma_i^2 I)``,
of each selected layer and measures ``dL_i = L(perturbed) - L`` on a minibatch;
(3) :func:`reward`; (4) :func:`score_update` ``s_i += mu r_i sigma(s_i)(1 - sigma(s_i))`` on the
selected layers. The deployment shields the top-``k`` layers by ``s``.

Choices the digests leave open, each an explicit option:

* ``reward``: ``"literal"`` ``r_i = sgn(dL_i)(e^{dL_i} - mean_{j in S_t} e^{dL_j})`` as the digest
  writes it, or ``"intent"`` without the sign (G3 of ``docs/papers/aegisguard.md``: the literal form
  can reward a layer whose perturbation lowered the loss); the mean is over the probed set ``S_t``.
* ``sampler``: ``"mixture"`` -- without replacement with ``p_i ~ (1 - eps)/L + eps sigma(s_i)``
  (Gumbel top-k, exactly sampling without replacement) -- or ``"pool"`` -- a uniform candidate
  pool of ``2 n_select`` layers, keep the ``n_select`` highest scores (the two readings of the
  digests).
* noise scale (G5): ``sigma_i = rho * RMS(A_i)`` (relative to the layer's own A; ``rho`` given).
* initial scores 0 (``sigma = 1/2``); ``mu = 0.5``, ``n_select = 3``, ``period = 20`` steps
  (Sec. 8.1).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import nn
from _core.validation import check_choice, check_int, check_key, check_scalar

from .victim import (
    _batch,
    _ce,
    adapter_arrays,
    check_data,
    check_layer_vector,
    check_model,
    check_victim,
)

__all__ = [
    "REWARDS",
    "SAMPLERS",
    "reward",
    "score_update",
    "sample_layers",
    "probe",
    "rsm_train",
    "rsm_posthoc",
]

REWARDS = ("literal", "intent")
SAMPLERS = ("mixture", "pool")


def reward(dL, selected, variant: str = "literal"):
    """RSM reward of the probed layers (zero elsewhere); ``dL``, ``selected`` of shape ``(L,)``.

    Examples
    --------
    >>> dL, sel = jnp.array([0.0, 0.5, -0.5]), jnp.array([False, True, True])
    >>> [round(float(r), 4) for r in reward(dL, sel)]  # sign: rewards a loss drop too
    [0.0, 0.5211, 0.5211]
    >>> [round(float(r), 4) for r in reward(dL, sel, "intent")]  # e^dL - mean over the probed set
    [0.0, 0.5211, -0.5211]
    """
    check_choice(variant, "variant", REWARDS)
    dL = check_layer_vector(dL, "dL")
    selected = check_layer_vector(selected, "selected", dL.shape[0], kind="b")
    return _reward(dL, selected, variant)


def _reward(dL, sel, variant):
    e = jnp.exp(jnp.where(sel, dL, 0.0))
    base = jnp.sum(jnp.where(sel, e, 0.0)) / jnp.maximum(jnp.sum(sel), 1)
    r = e - base
    if variant == "literal":
        r = jnp.sign(dL) * r
    return jnp.where(sel, r, 0.0)


def score_update(s, r, selected, mu: float = 0.5):
    """``s_i + mu r_i sigma(s_i)(1 - sigma(s_i))`` on the selected layers (gradient ascent on
    ``r_i sigma(s_i)``, a gradient-bandit preference step).

    Examples
    --------
    >>> s = score_update(jnp.zeros(2), jnp.ones(2), jnp.array([True, False]))
    >>> s.tolist()  # mu r sigma(0)(1 - sigma(0)) = 0.5 / 4, on the selected layer only
    [0.125, 0.0]
    """
    mu = check_scalar(mu, "mu", lower=0, upper=1e3)
    s = check_layer_vector(s, "s")
    r = check_layer_vector(r, "r", s.shape[0])
    selected = check_layer_vector(selected, "selected", s.shape[0], kind="b")
    return _score_update(s, r, selected, mu)


def _score_update(s, r, sel, mu):
    g = jax.nn.sigmoid(s)
    return jnp.where(sel, s + mu * r * g * (1 - g), s)


def sample_layers(s, n_select: int, *, key, sampler: str = "mixture", eps: float = 0.5):
    """Bool mask of the ``n_select`` layers trained and probed this round (see module doc).

    Examples
    --------
    >>> sel = sample_layers(jnp.zeros(5), 2, key=jax.random.key(0))
    >>> sel.shape, int(sel.sum())
    ((5,), 2)
    """
    s = check_layer_vector(s, "s")
    n_select = check_int(n_select, "n_select", lower=1, upper=s.shape[-1])
    check_choice(sampler, "sampler", SAMPLERS)
    eps = check_scalar(eps, "eps", lower=0, upper=1)
    check_key(key)
    return _sample(s, n_select, key, sampler, eps)


def _top(v, n):
    return jnp.zeros(v.shape, bool).at[jax.lax.top_k(v, n)[1]].set(True)


def _sample(s, n, key, sampler, eps):
    L = s.shape[-1]
    g = jax.random.gumbel(key, (L,))
    if sampler == "mixture":
        p = (1 - eps) / L + eps * jax.nn.sigmoid(s)
        return _top(jnp.log(p) + g, n)
    pool = _top(g, min(2 * n, L))
    return _top(jnp.where(pool, s, -jnp.inf), n)


def _noise_sigma(As, rho):
    return jnp.stack([rho * jnp.sqrt(jnp.mean(a**2)) for a in As])


def probe(model, As, Bs, X, y, *, rho: float = 0.5, key):
    """``dL_i`` for every layer ``i``: the loss change on ``(X, y)`` when ``A_i`` alone gets
    Gaussian noise of std ``rho * RMS(A_i)`` (one draw per layer; ``fold_in(key, i)``).

    Examples
    --------
    >>> from dynamics.aegisguard.victim import ResMLP, adapted_model
    >>> model = adapted_model(ResMLP(4, 4, 1, 2, key=jax.random.key(0)), 1, key=jax.random.key(1))
    >>> X, y = jax.random.normal(jax.random.key(2), (8, 4)), jnp.zeros(8, int)
    >>> dL = probe(model, *adapter_arrays(model), X, y, key=jax.random.key(3))
    >>> dL.shape, float(jnp.abs(dL).max())  # B = 0: noise on A alone leaves the loss unchanged
    ((3,), 0.0)
    """
    As, Bs = check_victim(model, As, Bs)
    X, y = check_data(model, X, y)
    rho = check_scalar(rho, "rho", lower=0, upper=100, closed="neither")
    check_key(key)
    return _probe(model, As, Bs, X, y, jnp.asarray(rho), key)


@eqx.filter_jit
def _probe(model, As, Bs, X, y, rho, key):
    base = _ce(model, As, Bs, X, y)
    sig = _noise_sigma(As, rho)
    out = []
    for i, a in enumerate(As):
        e = sig[i] * jax.random.normal(jax.random.fold_in(key, i), a.shape, a.dtype)
        pert = tuple(a + e if j == i else aj for j, aj in enumerate(As))
        out.append(_ce(model, pert, Bs, X, y) - base)
    return jnp.stack(out)


def rsm_train(
    model,
    X,
    y,
    *,
    steps: int = 400,
    period: int = 20,
    n_select: int = 3,
    mu: float = 0.5,
    rho: float = 0.5,
    variant: str = "literal",
    sampler: str = "mixture",
    eps: float = 0.5,
    batch: int = 128,
    lr: float = 1e-2,
    key,
):
    """RSM-guided LoRA fine-tuning (victim (b) of ``docs/papers/aegisguard.md``).

    ``steps // period`` rounds of: sample ``n_select`` layers, ``period`` Adam steps on their
    adapters only, probe them on a fresh minibatch, reward, score update. Returns
    ``(As, Bs, scores, rounds_trained)``; traceable (``vmap`` over replicates).
    """
    check_model(model)
    X, y = check_data(model, X, y)
    steps = check_int(steps, "steps", lower=1, upper=10**5)
    period = check_int(period, "period", lower=1, upper=steps)
    L = len(adapter_arrays(model)[0])
    n_select = check_int(n_select, "n_select", lower=1, upper=L)
    mu = check_scalar(mu, "mu", lower=0, upper=1e3)
    rho = check_scalar(rho, "rho", lower=0, upper=100, closed="neither")
    check_choice(variant, "variant", REWARDS)
    check_choice(sampler, "sampler", SAMPLERS)
    eps = check_scalar(eps, "eps", lower=0, upper=1)
    batch = check_int(batch, "batch", lower=1, upper=10**5)
    lr = check_scalar(lr, "lr", lower=0, upper=10, closed="neither")
    check_key(key)
    cfg = (steps // period, period, n_select, variant, sampler, batch)
    hp = tuple(jnp.asarray(v) for v in (mu, rho, eps, lr))
    return _rsm_train(model, X, y, cfg, hp, key)


@eqx.filter_jit
def _rsm_train(model, X, y, cfg, hp, key):
    rounds, period, n_sel, variant, sampler, batch = cfg
    mu, rho, eps, lr = hp
    params = adapter_arrays(model)
    L = len(params[0])

    def selected_adam(sel):  # Adam (state over every layer), applied to the selected layers only
        def keep(u, _):
            return tuple(tuple(jnp.where(sel[i], x, 0.0) for i, x in enumerate(g)) for g in u)

        return optax.chain(optax.adam(lr), optax.stateless(keep))

    def one_round(carry, t):
        p, st, s, count = carry
        kt = jax.random.fold_in(key, t)
        sel = _sample(s, n_sel, jax.random.fold_in(kt, 0), sampler, eps)

        def loss(p, j):
            As, Bs = p
            return _ce(model, As, Bs, *_batch(jax.random.fold_in(kt, 1000 + j), X, y, batch))

        p, st, _ = nn.fit(loss, selected_adam(sel), p, jnp.arange(period), opt_state=st)
        xb, yb = _batch(jax.random.fold_in(kt, 1), X, y, batch)
        dL = _probe(model, *p, xb, yb, rho, jax.random.fold_in(kt, 2))
        s = _score_update(s, _reward(dL, sel, variant), sel, mu)
        return (p, st, s, count + sel), None

    init = (
        params,
        selected_adam(jnp.ones(L, bool)).init(params),
        jnp.zeros(L),
        jnp.zeros(L, jnp.int32),
    )
    (params, _, s, count), _ = jax.lax.scan(one_round, init, jnp.arange(rounds))
    return params[0], params[1], s, count


def rsm_posthoc(
    model,
    As,
    Bs,
    X,
    y,
    *,
    rounds: int = 20,
    n_select: int = 3,
    mu: float = 0.5,
    rho: float = 0.5,
    variant: str = "literal",
    sampler: str = "mixture",
    eps: float = 0.5,
    batch: int = 128,
    key,
):
    """The bandit alone on a trained victim (no training between rounds; the G4 control of
    ``docs/papers/aegisguard.md``
    that separates measurement from the self-fulfilling selection). Returns the scores."""
    As, Bs = check_victim(model, As, Bs)
    X, y = check_data(model, X, y)
    rounds = check_int(rounds, "rounds", lower=1, upper=10**4)
    n_select = check_int(n_select, "n_select", lower=1, upper=len(As))
    mu = check_scalar(mu, "mu", lower=0, upper=1e3)
    rho = check_scalar(rho, "rho", lower=0, upper=100, closed="neither")
    check_choice(variant, "variant", REWARDS)
    check_choice(sampler, "sampler", SAMPLERS)
    eps = check_scalar(eps, "eps", lower=0, upper=1)
    batch = check_int(batch, "batch", lower=1, upper=10**5)
    check_key(key)
    cfg = (rounds, n_select, variant, sampler, batch)
    hp = tuple(jnp.asarray(v) for v in (mu, rho, eps))
    return _rsm_posthoc(model, As, Bs, X, y, cfg, hp, key)


@eqx.filter_jit
def _rsm_posthoc(model, As, Bs, X, y, cfg, hp, key):
    rounds, n_sel, variant, sampler, batch = cfg
    mu, rho, eps = hp

    def one_round(s, t):
        kt = jax.random.fold_in(key, t)
        sel = _sample(s, n_sel, jax.random.fold_in(kt, 0), sampler, eps)
        xb, yb = _batch(jax.random.fold_in(kt, 1), X, y, batch)
        dL = _probe(model, As, Bs, xb, yb, rho, jax.random.fold_in(kt, 2))
        return _score_update(s, _reward(dL, sel, variant), sel, mu), None

    s, _ = jax.lax.scan(one_round, jnp.zeros(len(As)), jnp.arange(rounds))
    return s
