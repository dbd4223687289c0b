"""Teacher training and hybrid distillation at small scale (the Zebra-Llama pipeline, arXiv
2505.17272, Sec. 3.2-3.3, on a synthetic language with a known entropy rate).

- :class:`Order2Markov`: tokens from a random order-2 Markov chain, P(x_t | x_{t-2}, x_{t-1}) with
  rows ~ Dirichlet(concentration); :attr:`Order2Markov.entropy_rate` is the exact cross-entropy
  floor (the stationary law of the pair chain (a, b) -> (b, c)).
- :func:`train_lm`: next-token training of a :class:`nn.hybrid.HybridLM` (Adam).
- :func:`kl_to_teacher`: mean per-token KL(p_teacher || p_student) (the KD objective, T = 1).
- :func:`ild`: intermediate-layer distillation: each student mixer is fed the teacher's layer input
  and trained to match the teacher's mixer output and layer output with the un-squared per-token
  L2 norm summed over layers (the authors' code; their text says MSE), mixers only.
- :func:`distill`: end-to-end KL training of the whole student.
- :func:`layer_sensitivity`: SMART's per-layer score, the KL reduction when one layer of the
  all-Mamba2 ILD model is taken from the all-MLA ILD model (feeds
  :func:`nn.hybrid.select_mla_layers`).
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from scipy.special import xlogy

import nn
from _core.runtime import FAST_COMPILE, fast_compile
from _core.validation import (
    ConvergenceError,
    as_array,
    check_finite_result,
    check_instance,
    check_int,
    check_key,
    check_memory,
    check_scalar,
)
from nn.hybrid import HybridLM, compose_hybrid

__all__ = [
    "Order2Markov",
    "train_lm",
    "kl_to_teacher",
    "ild",
    "distill",
    "lm_ce",
    "layer_sensitivity",
    "logits_by_layer",
]


@dataclasses.dataclass(frozen=True, eq=False)
class Order2Markov:
    """Order-2 Markov chain over ``V`` tokens: ``P[a, b]`` is the law of the next token after
    ``(a, b)``. ``sample(key, batch, length)`` starts from the pair chain's stationary law."""

    P: np.ndarray

    def __post_init__(self):
        P = as_array(self.P, "P", ndim=3, lower=0.0)
        V = P.shape[0]
        if V < 2 or P.shape != (V, V, V):
            raise ValueError(f"`P` must have shape (V, V, V) with V >= 2; got shape {P.shape}.")
        worst = float(np.max(np.abs(P.sum(-1) - 1.0)))
        if worst > 1e-9:
            raise ValueError(
                f"`P`: every row P[a, b] must sum to 1; the worst is off by {worst:.3g}."
            )
        object.__setattr__(self, "P", P)

    @classmethod
    def random(cls, seed: int, vocab_size: int, *, concentration: float = 0.1) -> Order2Markov:
        V = check_int(vocab_size, "vocab_size", lower=2)
        c = check_scalar(concentration, "concentration", lower=0.0, closed="neither")
        P = np.random.default_rng(seed).dirichlet(np.full(V, c), size=(V, V))
        P = np.maximum(P, 1e-12)
        return cls(P / P.sum(-1, keepdims=True))

    @functools.cached_property
    def pair_stationary(self) -> np.ndarray:
        """Stationary law pi(a, b) of the pair chain, by power iteration (capped, checked)."""
        V = self.P.shape[0]
        pi = np.full((V, V), 1.0 / V**2)
        for _ in range(10_000):
            new = np.einsum("ab,abc->bc", pi, self.P)
            if np.abs(new - pi).sum() < 1e-14:
                return new
            pi = new
        raise ConvergenceError(
            "`P`: the pair chain's power iteration did not converge in 10000 steps (a periodic "
            "or reducible chain, e.g. from zero probabilities).",
            residual=float(np.abs(new - pi).sum()),
        )

    @property
    def entropy_rate(self) -> float:
        """``-sum pi(a, b) P(c | a, b) log P(c | a, b)`` (nats/token), the CE floor; a zero
        probability contributes 0 (``0 log 0 = 0``)."""
        return float(0.0 - np.sum(self.pair_stationary[..., None] * xlogy(self.P, self.P)))

    def sample(self, batch: int, length: int, *, key):
        """Integer tokens ``(batch, length)``."""
        key = check_key(key)
        batch, length = _check_sizes(batch=batch, length=length)
        V = self.P.shape[0]
        k0, ks = jax.random.split(key)
        with np.errstate(divide="ignore"):  # log 0 = -inf: a token never drawn
            logP = np.log(self.P)
        pair = jax.random.choice(k0, V * V, (batch,), p=jnp.asarray(self.pair_stationary.ravel()))
        return _sample2(
            jnp.asarray(logP, jnp.float32),
            pair // V,
            pair % V,
            jax.random.split(ks, length - 2),
        )


@jax.jit
def _sample2(logP, a, b, keys):
    def step(ab, k):
        a, b = ab
        c = jax.random.categorical(k, logP[a, b])
        return (b, c), c

    _, cs = jax.lax.scan(step, (a, b), keys)
    return jnp.concatenate([a[None], b[None], cs], 0).T.astype(jnp.int32)


_MAX = dict(steps=1_000_000, batch=100_000, length=100_000)


def _check_sizes(**sizes):
    """``steps``, ``batch``, ``length`` as bounded ints (length >= 3: two start tokens and one
    drawn), and their product within memory."""
    out = [
        check_int(v, k, lower=3 if k == "length" else 1, upper=_MAX[k]) for k, v in sizes.items()
    ]
    check_memory(int(np.prod(out)), ", ".join(f"`{k}`" for k in sizes), itemsize=4)
    return out


def _check_lm(model, name):
    return check_instance(model, name, HybridLM)


def _check_tokens(tokens, model, name="tokens", min_len=1):
    """Integer tokens ``(B, T)`` with ``T >= min_len`` inside the model's vocabulary."""
    if isinstance(tokens, str | bytes) or tokens is None:
        raise TypeError(f"`{name}` must be an integer array; got {tokens!r}.")
    arr = np.asarray(tokens)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"`{name}` must be an integer array; got dtype {arr.dtype}.")
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < min_len:
        raise ValueError(
            f"`{name}` must have shape (batch, T) with T >= {min_len}; got shape {arr.shape}."
        )
    V = model.embed.weight.shape[0]
    if arr.min() < 0 or arr.max() >= V:
        raise ValueError(
            f"`{name}` must lie in [0, {V}) (the vocabulary); got [{arr.min()}, {arr.max()}]."
        )
    return jnp.asarray(arr)


def lm_ce(model, tokens):
    """Mean next-token cross-entropy (nats) on ``tokens (B, T + 1)``."""
    tokens = _check_tokens(tokens, _check_lm(model, "model"), min_len=2)
    return _lm_ce_compiled(model, tokens)


def _lm_ce(model, tokens):
    logits = model(tokens[..., :-1])
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, tokens[..., 1:]))


_lm_ce_compiled = eqx.filter_jit(_lm_ce)


def kl_to_teacher(teacher, student, tokens):
    """Mean per-token ``KL(p_teacher || p_student)`` (nats) on ``tokens (B, T)``: the KD objective
    at T = 1 (Zebra-Llama's SFT-KD stage, Sec. 3.3; ``docs/papers/hybrid.md``)."""
    tokens = _check_tokens(tokens, _check_lm(teacher, "teacher"))
    _check_student(teacher, _check_lm(student, "student"))
    return _kl_by_layer(teacher, student, tokens)


def _kl_by_layer(teacher, student, tokens):
    """:func:`_kl` with each model run by :func:`_logits_by_layer`."""
    return _kl(
        functools.partial(_logits_by_layer, teacher),
        functools.partial(_logits_by_layer, student),
        tokens,
    )


def logits_by_layer(model, tokens):
    """``model(tokens)``, logits ``(B, T, vocab)`` of ``tokens (B, T)``, one compiled program per
    layer: a program depends only on the layer's kind and shapes, so the 2^L placements of a hybrid
    (:func:`nn.hybrid.compose_hybrid`) share two layer programs, where a whole-model program
    compiles once per placement."""
    return _logits_by_layer(model, _check_tokens(tokens, _check_lm(model, "model")))


def _logits_by_layer(model, tokens):
    x = _apply(model.embed, tokens)
    for layer in model.layers:
        x = _apply(layer, x)
    return _head(model.norm, model.head, x)


@eqx.filter_jit
def _apply(module, x):
    return module(x)


@eqx.filter_jit
def _head(norm, head, x):
    return head(norm(x))


def _kl(teacher, student, tokens):
    """The KD objective on callables ``tokens -> logits``."""
    lt = jax.nn.log_softmax(teacher(tokens), -1)
    ls = jax.nn.log_softmax(student(tokens), -1)
    return jnp.mean(jnp.sum(jnp.exp(lt) * (lt - ls), -1))


def _fit(model, loss, batches, lr, mask=None, args=()):
    """Adam on ``loss(model, batch, *args)`` over the batches ``batches[t]``; ``mask`` selects the
    trained leaves (default every inexact array). Returns the model and the loss trace."""
    mask = eqx.is_inexact_array if mask is None else mask
    params, static = eqx.partition(model, mask)
    fit = _fit_compiled if fast_compile() else _fit_plain
    params, losses = fit(loss, params, static, batches, float(lr), args)
    check_finite_result(np.asarray(losses), "the training loss", lr=lr)
    return eqx.combine(params, static), np.asarray(losses)


def _fit_program(loss, params, static, batches, lr, args):
    """:func:`nn.fit` under one jit: ``loss`` a module-level function, ``lr`` a static float and
    the models arguments, so one program serves every call of the same shapes and rate (an eager
    ``nn.fit`` compiles its scan anew at each call)."""
    params, _, losses = nn.fit(
        lambda m, b: loss(m, b, *args), optax.adam(lr), params, batches, frozen=static
    )
    return params, losses


#: at :data:`_core.runtime.FAST_COMPILE`: compiling these one-off programs dominates their short
#: runs (issue 46: teacher, ILD and KD of the hybrid toy 41.5 -> 38.8 CPU-s); ILD's loss trace is
#: bit for bit the -O2 one, KD's moves by rounding. Not where JAX already compiles at -O0
#: (:func:`_core.runtime.fast_compile` is then empty)
_fit_compiled = eqx.filter_jit(  # pyright: ignore[reportCallIssue]  (jit keywords pass through)
    _fit_program, compiler_options=FAST_COMPILE
)
_fit_plain = eqx.filter_jit(_fit_program)


def _check_student(teacher, student, *, layerwise=False):
    """``student`` reads the teacher's vocabulary (and, ``layerwise``, has its depth and width:
    ILD feeds student layer l the teacher's layer-l input)."""
    (vt, dt), (vs, ds) = teacher.embed.weight.shape, student.embed.weight.shape
    if vs != vt:
        raise ValueError(f"`student` must have the teacher's vocabulary of {vt}; got {vs}.")
    if layerwise and (len(student.layers) != len(teacher.layers) or ds != dt):
        raise ValueError(
            f"`student` must have the teacher's {len(teacher.layers)} layers of width {dt} "
            f"(each is fed the teacher's layer input); got {len(student.layers)} of width {ds}."
        )


def _check_run(corpus, steps, batch, length, lr, key, **models):
    for name, m in models.items():
        _check_lm(m, name)
    check_instance(corpus, "corpus", Order2Markov)
    for name, m in models.items():
        if corpus.P.shape[0] > m.embed.weight.shape[0]:
            raise ValueError(
                f"`corpus` must draw tokens inside the vocabulary of `{name}` "
                f"({m.embed.weight.shape[0]}); got a corpus of {corpus.P.shape[0]} tokens."
            )
    steps, batch, length = _check_sizes(steps=steps, batch=batch, length=length)
    lr = check_scalar(lr, "lr", lower=0.0, closed="neither")
    return steps, batch, length, lr, check_key(key)


def train_lm(model, corpus: Order2Markov, *, steps, batch, length, lr=3e-3, key):
    """Next-token training (Adam, constant ``lr``); returns ``(model, losses)``."""
    steps, batch, length, lr, key = _check_run(corpus, steps, batch, length, lr, key, model=model)
    toks = corpus.sample(steps * batch, length + 1, key=key).reshape(steps, batch, length + 1)
    return _fit(model, _lm_ce, toks, lr)


def _mixer_mask(student):
    """Only the token mixers train (ILD): a filter spec over the student."""
    spec = jax.tree.map(lambda _: False, student)
    for i, layer in enumerate(student.layers):
        spec = eqx.tree_at(
            lambda s, i=i: s.layers[i].mixer, spec, jax.tree.map(eqx.is_inexact_array, layer.mixer)
        )
    return spec


def _ild_loss(s, tk, teacher):
    xin, amix, yout = teacher.layer_io(tk)
    tot = 0.0
    for i, layer in enumerate(s.layers):
        a, y = layer.parts(xin[i])
        tot += jnp.mean(jnp.linalg.norm(y - yout[i], axis=-1))
        tot += jnp.mean(jnp.linalg.norm(a - amix[i], axis=-1))
    return tot


def _kd_loss(s, tk, teacher):
    return _kl(teacher, s, tk)


def ild(teacher, student, corpus: Order2Markov, *, steps, batch, length, lr=1e-3, key):
    """Intermediate-layer distillation (teacher-forced per layer, mixers only):
    loss = sum_l [mean_t ||y^S_l - y^T_l||_2 + mean_t ||a^S_l - a^T_l||_2] with a the mixer output
    and y the layer output, the student's layer l fed the teacher's layer-l input."""
    steps, batch, length, lr, key = _check_run(
        corpus, steps, batch, length, lr, key, teacher=teacher, student=student
    )
    _check_student(teacher, student, layerwise=True)
    toks = corpus.sample(steps * batch, length, key=key).reshape(steps, batch, length)
    return _fit(student, _ild_loss, toks, lr, _mixer_mask(student), (teacher,))


def distill(teacher, student, corpus: Order2Markov, *, steps, batch, length, lr=1e-3, key):
    """End-to-end KD: Adam on ``KL(p_teacher || p_student)``, all student parameters (Zebra-Llama's
    stage 2, Sec. 3.3; ``docs/papers/hybrid.md``)."""
    steps, batch, length, lr, key = _check_run(
        corpus, steps, batch, length, lr, key, teacher=teacher, student=student
    )
    _check_student(teacher, student)
    toks = corpus.sample(steps * batch, length, key=key).reshape(steps, batch, length)
    return _fit(student, _kd_loss, toks, lr, args=(teacher,))


def layer_sensitivity(teacher, mla_model, mamba2_model, tokens):
    """Per layer i: ``KL(all Mamba2) - KL(Mamba2 with layer i MLA)`` to ``teacher`` on ``tokens
    (B, T)`` (nats/token), the models composed by :func:`nn.hybrid.compose_hybrid`. Zebra-Llama's
    sensitivity score (Sec. 3.4, as a digest of the paper gives it,
    ``docs/papers/hybrid.md#open-readings-as-options``): the KL reduction that making
    layer i MLA buys; larger is more useful as MLA."""
    tokens = _check_tokens(tokens, _check_lm(teacher, "teacher"))
    _check_lm(mla_model, "mla_model")
    L = len(_check_lm(mamba2_model, "mamba2_model").layers)
    base = ["mamba2"] * L
    kl0 = float(_kl_by_layer(teacher, compose_hybrid(mla_model, mamba2_model, base), tokens))
    out = []
    for i in range(L):
        kinds = base[:i] + ["mla"] + base[i + 1 :]
        out.append(
            kl0
            - float(_kl_by_layer(teacher, compose_hybrid(mla_model, mamba2_model, kinds), tokens))
        )
    return np.array(out)
