"""Exact statements of modern Hopfield attention (Masumura & Taki 2025, arXiv 2511.20698): the
reduction to attention, the unrolled hidden state, and cached decoding."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from nn import hopfield as HF
from paper_checks import wrap

from .._properties import prop

PAPER = "Masumura & Taki 2025 (NeurIPS 2025, arXiv 2511.20698)"
#: (H, Tq, Tk, dh): few, so that the jitted layer compiles a handful of times per run
_SHAPES = ((1, 3, 3, 2), (2, 2, 5, 3), (2, 4, 4, 1), (1, 1, 4, 2))


@functools.partial(jax.jit, static_argnames=("causal", "init"))
def _attn(q, k, v, h_prev, alpha_prime, *, causal, init="first"):
    return HF.hopfield_attention(q, k, v, h_prev, alpha_prime=alpha_prime, causal=causal, init=init)


def _softmax_attention(q, k, v, causal):
    """Reference: ``softmax(q k^T / sqrt(dh) + mask) v`` with the query rows at the last ``Tq``
    positions (Vaswani et al. 2017), written in NumPy."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        tq, tk = q.shape[-2], k.shape[-2]
        allowed = np.arange(tk)[None, :] <= (tk - tq + np.arange(tq))[:, None]
        s = np.where(allowed, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def _qkv(g, shape, n=1):
    H, tq, tk, dh = shape
    return (g.standard_normal((n, H, tq, dh)), g.standard_normal((n, H, tk, dh)),
            g.standard_normal((n, H, tk, dh)))  # fmt: skip


@prop(
    "mha.alpha_zero_is_attention",
    paper=PAPER,
    statement="With alpha' = 0 modern Hopfield attention is softmax attention: the carried state "
    "h_{n-1}, whatever it holds, drops out and softmax(S_n) V is returned, for any heads, query "
    "and key lengths, head width, causal or not.",
    where="Sec. 3, MHA update h_n = alpha' h_{n-1} + (1 - alpha') S_n at alpha' = 0",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "shape": st.sampled_from(range(len(_SHAPES))),
            "causal": st.booleans(),
            "h_scale": st.floats(0.0, 10.0),
        }
    ),
    mutants=[
        wrap(
            "nn.hopfield.hidden_update",
            lambda f: lambda h_prev, s, a: f(s, h_prev, a),
            "the weights alpha' and 1 - alpha' swapped (the carried state kept at alpha' = 0)",
            name="weights_swapped",
        )
    ],
)
def _alpha_zero(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    shape = _SHAPES[ex["shape"]]
    q, k, v = _qkv(g, shape)
    h_prev = ex["h_scale"] * g.standard_normal((1, shape[0], shape[1], shape[2]))
    out, _ = _attn(q, k, v, h_prev, 0.0, causal=ex["causal"])
    want = _softmax_attention(q, k, v, ex["causal"])
    return 1.0 - float(np.max(np.abs(np.asarray(out) - want))) / (1e-12 * np.max(np.abs(v)))


@prop(
    "mha.hidden_state_concat",
    paper=PAPER,
    statement="Derived here: after n layers the hidden state is h_n = sum_m w_m S_m with w_1 = "
    "alpha'^{n-1} (init 'first') or (1 - alpha') alpha'^{n-1} (init 'zero') and w_m = "
    "(1 - alpha') alpha'^{n-m} for m >= 2, so layer n's output is ordinary attention with the "
    "concatenated queries [sqrt(w_m) q_m]_m and keys [sqrt(w_m) k_m]_m of all layers so far.",
    where="Sec. 3, MHA update unrolled (derived here; this property is its check)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "shape": st.sampled_from(range(len(_SHAPES))),
            "layers": st.integers(1, 5),
            "alpha_prime": st.floats(0.0, 1.0),
            "init": st.sampled_from(["first", "zero"]),
            "causal": st.booleans(),
        }
    ),
    mutants=[
        wrap(
            "nn.hopfield.hidden_update",
            lambda f: lambda h_prev, s, a: a * h_prev + s,
            "the update h = alpha' h + S without the (1 - alpha') factor (RealFormer-style)",
            name="no_one_minus_alpha",
        )
    ],
)
def _concat(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    shape, n, a = _SHAPES[ex["shape"]], ex["layers"], ex["alpha_prime"]
    q, k, v = _qkv(g, shape, n)
    h = None
    for m in range(n):
        out, h = _attn(q[m], k[m], v[n - 1], h, a, causal=ex["causal"], init=ex["init"])
    w = [(1 - a) * a ** (n - 1 - m) for m in range(n)]
    if ex["init"] == "first":
        w[0] = a ** (n - 1)
    r = np.sqrt(np.array(w))[:, None, None, None]
    dh = shape[3]
    # concatenate along the feature axis; rescale so the reference's 1/sqrt(n dh) is 1/sqrt(dh)
    qc = np.concatenate(list(r * q), axis=-1) * np.sqrt(n)
    kc = np.concatenate(list(r * k), axis=-1)
    want = _softmax_attention(qc, kc, v[n - 1], ex["causal"])
    err = float(np.max(np.abs(np.asarray(out) - want)))
    return 1.0 - err / (1e-11 * np.max(np.abs(v)) * dh)


@eqx.filter_jit
def _prefill(lm, tokens):
    return lm(tokens)


#: (layers, alpha'): few, as alpha' is a static field of the model
_LMS = ((1, 0.0), (2, 0.5), (3, 0.8), (3, 1.0))


@functools.cache
def _lm(which, seed):
    """One of 16 weight draws per configuration (building a model costs more than decoding)."""
    layers, a = _LMS[which]
    key = jax.random.key(seed)
    return HF.hopfield_lm(11, 8, 2, layers, 6, alpha_prime=a, alpha=0.5, dtype=jnp.float64, key=key)


@prop(
    "mha.decode_equals_prefill",
    paper=PAPER,
    statement="Cached one-token decoding of an MHA language model (K/V caches per layer, the "
    "hidden row passed up the stack) gives the logits of the full prefill pass, at every "
    "position, for any depth and alpha' in [0, 1].",
    where="Sec. 3 (MHA in decoder LMs); docs/papers/mha.md",
    strategy=lambda st: st.fixed_dictionaries(
        {"seed": st.integers(0, 2**31 - 1), "lm": st.sampled_from(range(len(_LMS)))}
    ),
    mutants=[
        wrap(
            "nn.hopfield.HopfieldAttention.decode_step",
            lambda f: lambda self, x_t, h_row, kc, vc, t: f(self, x_t, h_row, kc, vc, t + 1),
            "the decoded token written to and attending from the next cache slot",
            name="cache_slot_late",
        )
    ],
)
def _decode(ex) -> float:
    lm = _lm(ex["lm"], ex["seed"] % 16)
    tokens = jax.random.randint(jax.random.key(ex["seed"]), (2, 6), 0, 11)
    full = np.asarray(_prefill(lm, tokens))
    err = float(np.max(np.abs(np.asarray(HF.decode(lm, tokens)) - full)))
    return 1.0 - err / (1e-11 * np.max(np.abs(full)))
