"""Exact statements of Drag-and-Drop LLMs' parameter tokenizer (Liang et al. 2025, arXiv
2506.16406; official ``LoraTokenizer2D_Qwen`` / ``with_scales_wrapper``, ``docs/papers/dnd.md``)."""

import jax.numpy as jnp
import numpy as np

from nn import dnd as D
from paper_checks import patch, wrap

from .._properties import prop

PAPER = "Liang et al. 2025 (Drag-and-Drop LLMs, arXiv 2506.16406); docs/papers/dnd.md"


#: (rank, chunk, layer shapes (d_out, d_in)): few, so that the tokenizer compiles a handful of
#: times per run; widths below, at and above the chunk, multiples of it and not, 1 to 3 layers
_CONFIGS = (
    (1, 2, ((3, 5),)),
    (2, 4, ((4, 8), (7, 3))),
    (3, 6, ((1, 9),)),
    (2, 2, ((5, 5), (2, 1), (6, 4))),
    (1, 4, ((9, 4),)),
)


def _factors_strategy(st):
    return st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "config": st.sampled_from(range(len(_CONFIGS))),
            "log_scale": st.floats(-3.0, 3.0),
            "constant": st.booleans(),
        }
    )


def _factors(ex):
    """LoRA factors ``(A (r, d_in), B (d_out, r))``; with ``constant`` the last B is all one
    value (LoRA's zero-initialised B, a chunk with zero standard deviation)."""
    g = np.random.default_rng(ex["seed"])
    r, _, shapes = _CONFIGS[ex["config"]]
    s = 10.0 ** ex["log_scale"]
    out = []
    for d_out, d_in in shapes:
        a = s * g.standard_normal((r, d_in)) + g.standard_normal()
        b = s * g.standard_normal((d_out, r))
        out.append((a, b))
    if ex["constant"]:
        # a dyadic value: the chunk's mean is then exact and its std exactly 0
        out[-1] = (out[-1][0], np.full_like(out[-1][1], g.integers(-8, 9) / 4))
    return out


def _chunks_zero_padded(m, chunk):  # a plausible bug: padding with zeros instead of NaN
    r, d = m.shape
    n = -(-d // chunk)
    m = jnp.pad(m, ((0, 0), (0, n * chunk - d)))
    return m.reshape(r, n, chunk).transpose(1, 0, 2)


@prop(
    "dnd.tokenizer_roundtrip",
    paper=PAPER,
    statement="detokenize(tokenize(f, c), shapes, c) returns the LoRA factors f to float64 "
    "round-off, for any rank, any even chunk width, any layer shapes (multiples of the chunk or "
    "not), any scale, and constant chunks (zero standard deviation).",
    where="official LoraTokenizer2D_Qwen (tokenize / detokenize); docs/papers/dnd.md",
    strategy=_factors_strategy,
    mutants=[
        wrap(
            "nn.dnd._decode_scales",
            lambda f: lambda tile: (lambda ms: (ms[0], ms[1] * 1.001))(f(tile)),
            "the standard deviation decoded 0.1 % too large",
            name="sigma_decoded_off",
        ),
        wrap(
            "nn.dnd._unchunk",
            lambda f: lambda tiles, d: jnp.roll(f(tiles, d), 1, axis=-1),
            "the chunks reassembled one column out of place",
            name="unchunk_shifted",
        ),
    ],
)
def _roundtrip(ex) -> float:
    f = _factors(ex)
    _, c, shapes = _CONFIGS[ex["config"]]
    back = D.detokenize(D.tokenize(f, c), list(shapes), c)
    err, scale = 0.0, 0.0
    for (a, b), (a2, b2) in zip(f, back, strict=True):
        err = max(err, float(np.max(np.abs(np.asarray(a2) - a))), float(np.max(np.abs(b2 - b))))
        scale = max(scale, float(np.max(np.abs(a))), float(np.max(np.abs(b))))
    return 1.0 - err / (1e-12 * (scale + 1.0))


@prop(
    "dnd.token_layout",
    paper=PAPER,
    statement="tokenize gives num_tiles(shapes, c) = sum ceil(d_in/c) + ceil(d_out/c) tiles of "
    "shape (r + 2, c + 2); each holds (x - mu)/sigma of its chunk (sample std over valid entries, "
    "1 when 0), NaN exactly at the padding, and the codes m' = 8 mu, s' = log(0.9 sigma + 0.1) + "
    "1.6 in its last two columns and alternately along its last two rows.",
    where="official LoraTokenizer2D_Qwen / with_scales_wrapper; docs/papers/dnd.md",
    strategy=_factors_strategy,
    mutants=[
        patch(
            "nn.dnd._chunks",
            _chunks_zero_padded,
            "chunks padded with zeros instead of NaN (padding counted in mu and sigma)",
            name="zero_padding",
        ),
        patch("nn.dnd.STD_BIAS", 1.5, "the std code's bias 1.5 instead of 1.6", name="std_bias"),
    ],
)
def _layout(ex) -> float:
    f = _factors(ex)
    r, c, shapes = _CONFIGS[ex["config"]]
    tokens = np.asarray(D.tokenize(f, c))
    blocks = []  # reference: the chunks of A and of B^T, NumPy
    for a, b in f:
        for m in (a, b.T):
            for j in range(0, m.shape[1], c):
                blocks.append(m[:, j : j + c])
    want_n = sum(-(-i // c) + -(-o // c) for o, i in shapes)
    if tokens.shape != (want_n, r + 2, c + 2) or len(blocks) != want_n:
        return -1.0
    worst = 0.0
    for tile, blk in zip(tokens, blocks, strict=True):
        k = blk.shape[1]
        mu = blk.mean()
        sd = blk.std(ddof=1) if blk.size > 1 else np.nan
        sd = 1.0 if not np.isfinite(sd) or sd == 0 else sd
        mc, sc = 8.0 * mu, np.log(0.9 * sd + 0.1) + 1.6
        if not (np.all(np.isnan(tile[:r, k:c])) and not np.any(np.isnan(tile[:r, :k]))):
            return -1.0
        codes = np.where(np.arange(c + 2) % 2 == 0, mc, sc)
        errs = [
            np.abs(tile[:r, :k] - (blk - mu) / sd).max() / (1 + np.abs(blk - mu).max() / sd),
            np.abs(tile[:r, c] - mc).max() / (1 + abs(mc)),
            np.abs(tile[:r, c + 1] - sc).max() / (1 + abs(sc)),
            np.abs(tile[r:] - codes).max() / (1 + abs(mc) + abs(sc)),
        ]
        worst = max(worst, *errs)
    return 1.0 - worst / 1e-12


@prop(
    "dnd.weighted_loss",
    paper=PAPER,
    statement="The criterion weight of tile t is mean_d (mean_{e in t} s_e / mean_e s_e) with s_e "
    "the std over a dataset's checkpoints (valid entries only), and the loss is "
    "mean_e w_t(e) (M (pred - target))^2 with M = ~isnan(target), for any datasets, checkpoints, "
    "tiles and padding.",
    where="official criterion_weight_for_0.5B.py, decoderonly.py::criterion; docs/papers/dnd.md",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "config": st.sampled_from(range(len(_CONFIGS))),
            "datasets": st.integers(1, 3),
            "checkpoints": st.integers(2, 4),
            "spread": st.floats(0.01, 10.0),
            "log_scale": st.floats(-3.0, 3.0),
            "constant": st.just(False),
        }
    ),
    mutants=[
        wrap(
            "nn.dnd.criterion_weight",
            lambda f: lambda tokens: f(jnp.nan_to_num(tokens)),
            "the padding counted as zeros in the per-tile std",
            name="padding_in_weight",
        ),
        wrap(
            "nn.dnd.dnd_loss",
            lambda f: lambda pred, target, weight: f(pred, target, jnp.ones_like(weight)),
            "the per-tile weight ignored",
            name="weight_ignored",
        ),
    ],
)
def _loss(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    _, c, _ = _CONFIGS[ex["config"]]
    base = np.asarray(D.tokenize(_factors(ex), c))  # (T, h, w), NaN at padding
    D_, J = ex["datasets"], ex["checkpoints"]
    tokens = base + ex["spread"] * g.random((D_, J, 1, 1, 1)) * g.standard_normal(
        (D_, J, *base.shape)
    )  # checkpoints that move by different amounts per dataset (NaN stays NaN)
    s = np.std(tokens, axis=1, ddof=1)  # (D, T, h, w)
    valid = ~np.isnan(base)
    w_want = np.mean(
        [
            [s[d][t][valid[t]].mean() / s[d][valid].mean() for t in range(base.shape[0])]
            for d in range(D_)
        ],
        axis=0,
    )
    w_got = np.asarray(D.criterion_weight(tokens))
    pred = g.standard_normal(base.shape)
    diff = np.where(valid, pred - np.nan_to_num(base), 0.0)
    loss_want = np.mean(w_want[:, None, None] * diff**2)
    loss_got = float(D.dnd_loss(pred, base, w_got))
    err = max(
        float(np.max(np.abs(w_got - w_want) / np.abs(w_want))),
        abs(loss_got - loss_want) / abs(loss_want),
    )
    return 1.0 - err / 1e-10
