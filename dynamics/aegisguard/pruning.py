"""SAC, Shielded-Adapter Compression (``docs/papers/aegisguard.md``; [3rd, unverified]): progressive
structured pruning of the *shielded* adapters' output groups during fine-tuning.

* Element importance (first-order Taylor): ``I = |theta * dL/dtheta|`` (absolute value, no
  smoothing over steps: the digests leave both open), aggregated over the rows of ``B`` of each
  output group of ``group`` units (groups stand in for attention heads, Sec. 8.4 Q5). Pruning a
  group zeroes its rows of ``B``: its outputs are neither produced in the enclave nor sent back.
* Schedule, at prune event ``t`` of ``T`` (every ``period`` steps):
  ``q_i(t) = (R_total - R_t) / ((T - t + delta) sigma(s_i)) * (1 - alpha + alpha t / T)`` groups
  for shielded layer ``i`` (``R_total`` the target number of groups, ``R_t`` those pruned so far,
  ``s_i`` the RSM score). Fractions carry over between events; a layer keeps at least one group;
  the last event prunes whatever of ``R_total`` is left, in layer order (so the target is met
  exactly; a choice made here).
* Between events every adapter keeps training (Adam); pruned rows stay zero.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import nn
from _core.validation import check_int, check_key, check_scalar

from .victim import _batch, _ce, check_data, check_layer_vector, check_victim

__all__ = ["group_importance", "sac_quota", "sac_prune"]


def group_importance(model, As, Bs, X, y, group: int = 4):
    """Per layer, ``sum |B * dL/dB|`` over each output group of ``group`` rows (a list): the
    first-order Taylor importance of ``docs/papers/aegisguard.md#as-implemented-here``.

    Examples
    --------
    >>> from dynamics.aegisguard.victim import ResMLP, adapted_model, adapter_arrays
    >>> model = adapted_model(ResMLP(4, 4, 1, 2, key=jax.random.key(0)), 1, key=jax.random.key(1))
    >>> X, y = jax.random.normal(jax.random.key(2), (8, 4)), jnp.zeros(8, int)
    >>> imp = group_importance(model, *adapter_arrays(model), X, y, group=2)
    >>> [g.shape for g in imp], float(sum(g.sum() for g in imp))  # |B dL/dB| = 0 at B = 0
    ([(2,), (2,), (1,)], 0.0)
    """
    As, Bs = check_victim(model, As, Bs)
    X, y = check_data(model, X, y)
    group = check_int(group, "group", lower=1, upper=4096)
    for b in Bs:
        if b.shape[0] % group:
            raise ValueError(f"`group` must divide every output width; got {group} for {b.shape}.")
    return _importance(model, As, Bs, X, y, group)


@eqx.filter_jit
def _importance(model, As, Bs, X, y, group):
    gB = jax.grad(lambda bs: _ce(model, As, bs, X, y))(Bs)
    return [
        jnp.abs(b * g).reshape(-1, group, b.shape[1]).sum((1, 2))
        for b, g in zip(Bs, gB, strict=True)
    ]


def sac_quota(remaining, t, T, scores, *, alpha: float = 0.5, delta: float = 1.0):
    """``(R_total - R_t) / ((T - t + delta) sigma(s_i)) * (1 - alpha + alpha t / T)`` per layer.

    Examples
    --------
    >>> q = sac_quota(10, 0, 4, jnp.zeros(2))  # 10 / ((4 - 0 + 1) sigma(0)) * (1 - 1/2)
    >>> [round(float(v), 6) for v in q]
    [2.0, 2.0]
    """
    remaining = check_scalar(remaining, "remaining", lower=0, upper=1e9)
    T = check_int(T, "T", lower=1, upper=10**6)
    t = check_int(t, "t", lower=0, upper=T - 1)
    scores = check_layer_vector(scores, "scores")
    alpha = check_scalar(alpha, "alpha", lower=0, upper=1)
    delta = check_scalar(delta, "delta", lower=0, upper=1e6, closed="neither")
    return _quota(remaining, t, T, scores, alpha, delta)


def _quota(remaining, t, T, s, alpha, delta):
    return remaining / ((T - t + delta) * jax.nn.sigmoid(s)) * (1 - alpha + alpha * t / T)


def sac_prune(
    model,
    As,
    Bs,
    X,
    y,
    shielded,
    scores,
    *,
    ratio: float = 0.3,
    group: int = 4,
    steps: int = 100,
    period: int = 20,
    alpha: float = 0.5,
    delta: float = 1.0,
    batch: int = 128,
    lr: float = 1e-2,
    key,
):
    """Fine-tune for ``steps`` while pruning ``round(ratio * G)`` of the ``G`` output groups of
    the ``shielded`` layers on the schedule above. Returns ``(As, Bs, keep)`` with ``keep`` a
    list of bool arrays, one per layer (its surviving groups; all True off the shielded set).
    Traceable (``vmap`` over replicates)."""
    As, Bs = check_victim(model, As, Bs)
    X, y = check_data(model, X, y)
    shielded = check_layer_vector(shielded, "shielded", len(As), kind="b")
    scores = check_layer_vector(scores, "scores", len(As))
    ratio = check_scalar(ratio, "ratio", lower=0, upper=1, closed="left")
    group = check_int(group, "group", lower=1, upper=4096)
    steps = check_int(steps, "steps", lower=1, upper=10**5)
    period = check_int(period, "period", lower=1, upper=steps)
    alpha = check_scalar(alpha, "alpha", lower=0, upper=1)
    delta = check_scalar(delta, "delta", lower=0, upper=1e6, closed="neither")
    batch = check_int(batch, "batch", lower=1, upper=10**5)
    lr = check_scalar(lr, "lr", lower=0, upper=10, closed="neither")
    check_key(key)
    for b in Bs:
        if b.shape[0] % group:
            raise ValueError(f"`group` must divide every output width; got {group} for {b.shape}.")
    cfg = (group, steps // period, period, batch)
    hp = tuple(jnp.asarray(v) for v in (ratio, alpha, delta, lr))
    return _sac(model, As, Bs, X, y, shielded, scores, cfg, hp, key)


def _expand(keep, b, group):
    return jnp.repeat(keep, group)[:, None].astype(b.dtype)


@eqx.filter_jit
def _sac(model, As, Bs, X, y, shielded, s, cfg, hp, key):
    group, T, period, batch = cfg
    ratio, alpha, delta, lr = hp
    n_groups = [b.shape[0] // group for b in Bs]
    total = jnp.sum(jnp.asarray(n_groups) * shielded)
    target = jnp.round(ratio * total)
    L = len(As)

    def adam_pruned(keep):
        # Adam, with pruned output groups of B held at zero: their update is -B (the same
        # projection-as-update as optax.keep_params_nonnegative)
        def hold(u, p):
            rows = (jnp.repeat(k, group)[:, None] for k in keep)
            return u[0], tuple(
                jnp.where(r, ub, -b) for r, ub, b in zip(rows, u[1], p[1], strict=True)
            )

        return optax.chain(optax.adam(lr), optax.stateless(hold))

    def event(keep, carry_q, pruned, imp, t):
        remaining = target - pruned
        q = carry_q + jnp.where(shielded, _quota(remaining, t, T, s, alpha, delta), 0.0)
        last = t == T - 1
        new_keep = list(keep)
        for i in range(L):
            alive = jnp.sum(keep[i])
            want = jnp.where(last, remaining, jnp.floor(q[i]))
            n = jnp.clip(jnp.minimum(want, remaining), 0, alive - 1) * shielded[i]
            # rank surviving groups by importance; prune the n lowest
            v = jnp.where(keep[i], imp[i], jnp.inf)
            r = jnp.argsort(jnp.argsort(v))
            new_keep[i] = keep[i] & (r >= n)
            q = q.at[i].add(-n)
            remaining = remaining - n
            pruned = pruned + n
        return tuple(new_keep), jnp.where(last, 0.0, q), pruned

    def one_round(carry, t):
        p, st, keep, q, pruned = carry
        kt = jax.random.fold_in(key, t)

        def loss(p, j):
            As, Bs = p
            return _ce(model, As, Bs, *_batch(jax.random.fold_in(kt, 1000 + j), X, y, batch))

        p, st, _ = nn.fit(loss, adam_pruned(keep), p, jnp.arange(period), opt_state=st)
        xb, yb = _batch(jax.random.fold_in(kt, 1), X, y, batch)
        imp = _importance(model, *p, xb, yb, group)
        keep, q, pruned = event(keep, q, pruned, imp, t)
        Bm = tuple(b * _expand(k, b, group) for b, k in zip(p[1], keep, strict=True))
        return ((p[0], Bm), st, keep, q, pruned), None

    keep0 = tuple(jnp.ones(g, bool) for g in n_groups)
    params = (As, Bs)
    init = (params, adam_pruned(keep0).init(params), keep0, jnp.zeros(L), jnp.zeros(()))
    (params, _, keep, _, _), _ = jax.lax.scan(one_round, init, jnp.arange(T))
    return params[0], params[1], list(keep)
