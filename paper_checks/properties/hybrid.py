"""Exact statements of the Zebra-Llama hybrid's layers (Yang et al. 2025, arXiv 2505.17272):
absorbed and cached MLA, the chunked SSD scan, and the KV-cache accounting."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from nn import mamba2 as M2
from nn import mla as ML
from nn.hybrid import HybridLM
from paper_checks import patch, wrap
from theory import kv_cache as KV

from .._properties import prop

PAPER = "Yang et al. 2025 (Zebra-Llama, arXiv 2505.17272); DeepSeek-AI 2024 (DeepSeek-V2)"
_F64 = jnp.float64


@eqx.filter_jit
def _mla(layer, x, absorbed):
    return layer(x, absorbed=absorbed)


#: (H, G, nope, rope, kv_rank, q_rank): few, so that each jitted path compiles a handful of
#: times per run; together they cover grouped and full heads, NoPE-only and RoPE-only queries,
#: rank-1 and full-rank latents and a low-rank query
_MLA_CONFIGS = (
    (1, 1, 2, 0, 1, None),
    (2, 1, 0, 2, 2, None),
    (2, 2, 2, 2, 6, 2),
    (4, 2, 2, 2, 3, None),
    (4, 1, 1, 2, 2, 3),
)


@prop(
    "hybrid.mla_absorbed_decode",
    paper=PAPER,
    statement="Absorbed MLA (W^UK folded into the query, W^UV applied after the latent sum) equals "
    "the naive MLA that materialises keys and values, and cached one-token decoding on the latent "
    "cache equals the prefill, for any head and KV-head count, latent and query rank, RoPE width "
    "and length.",
    where="DeepSeek-V2 Sec. 2.1.2 (weight absorption), Sec. 2.1.3 (decoupled RoPE); Zebra-Llama "
    "Sec. 3",
    strategy=lambda st: st.fixed_dictionaries(
        {"seed": st.integers(0, 2**31 - 1), "config": st.sampled_from(range(len(_MLA_CONFIGS)))}
    ),
    mutants=[
        wrap(
            "nn.mla.MLA.attend_latent",
            lambda f: lambda self, qc, qr, c, kr, q_pos: f(self, qc, qr, c, kr, q_pos + 1),
            "the latent path's causal mask one position late (sees the next token)",
            name="latent_mask_late",
        ),
        wrap(
            "nn.mla.MLA._up",
            lambda f: lambda self: (lambda uk, uv: (uk, uv[:, ::-1]))(*f(self)),
            "the absorbed path reads the value up-projection W^UV's rows in reverse order",
            name="absorbed_wuv_reversed",
        ),
    ],
)
def _mla_exact(ex) -> float:
    H, G, nope, rope, r, q_rank = _MLA_CONFIGS[ex["config"]]
    d = 6
    key = jax.random.key(ex["seed"])
    m = ML.MLA(
        d, H, G, kv_rank=r, nope_dim=nope, v_dim=2, rope_dim=rope, q_rank=q_rank, dtype=_F64,
        key=key,
    )  # fmt: skip
    x = jax.random.normal(jax.random.fold_in(key, 1), (2, 5, d), _F64)
    naive = np.asarray(_mla(m, x, False))
    scale = float(np.max(np.abs(naive))) + 1e-300
    err_abs = float(np.max(np.abs(np.asarray(_mla(m, x, True)) - naive)))
    err_dec = float(np.max(np.abs(np.asarray(ML.mla_decode(m, x)) - naive)))
    return 1.0 - max(err_abs, err_dec) / (1e-11 * scale)


@jax.jit
def _scan(x, dt, A, B, C, state):
    return M2.ssd_scan(x, dt, A, B, C, state=state)


@functools.partial(jax.jit, static_argnums=5)
def _chunked(x, dt, A, B, C, chunk):
    return M2.ssd_chunked(x, dt, A, B, C, chunk=chunk)


def _chunks_reset(x, dt, A, B, C, chunk=16):
    """A plausible bug: each chunk scanned from a zero state (no state carried across chunks)."""
    T = x.shape[-3]
    ys = [
        M2.ssd_scan(x[..., i : i + chunk, :, :], dt[..., i : i + chunk, :], A,
                    B[..., i : i + chunk, :, :], C[..., i : i + chunk, :, :])[0]
        for i in range(0, T, chunk)
    ]  # fmt: skip
    return jnp.concatenate(ys, axis=-3)


@prop(
    "hybrid.ssd_chunked_scan",
    paper=PAPER,
    statement="The chunked state-space-dual evaluation equals the sequential SSD recurrence for "
    "any length (multiples of the chunk or not), chunk size, heads and state size; and the "
    "recurrence's final state continues it exactly: scanning x[:a] then x[a:] from that state "
    "equals scanning x.",
    where="Dao & Gu 2024 (Mamba-2) Sec. 6, the SSD algorithm; Zebra-Llama Sec. 3",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "T": st.sampled_from([1, 3, 7, 12]),
            "chunk": st.sampled_from([1, 2, 4, 5]),
            "split": st.sampled_from([0, 1, 3]),
            "H": st.sampled_from([1, 2]),
            "dt_scale": st.floats(0.0, 2.0),
        }
    ),
    mutants=[
        patch(
            "nn.mamba2.ssd_chunked",
            _chunks_reset,
            "no state carried from one chunk to the next",
            name="chunk_state_dropped",
        ),
        wrap(
            "nn.mamba2.ssd_scan",
            lambda f: lambda x, dt, A, B, C, state=None: f(x, dt, A, B, C),
            "the initial state ignored (the scan always starts from zero)",
            name="initial_state_ignored",
        ),
    ],
)
def _ssd(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    T, H, P, N = ex["T"], ex["H"], 2, 3
    x = g.standard_normal((T, H, P))
    dt = ex["dt_scale"] * g.random((T, H))
    A = -g.random(H) * 2.0
    B, C = g.standard_normal((2, T, H, N))
    y = np.asarray(_scan(x, dt, A, B, C, np.zeros((H, P, N)))[0])
    yc = np.asarray(_chunked(x, dt, A, B, C, ex["chunk"]))
    a = min(ex["split"], T - 1)
    h0 = g.standard_normal((H, P, N))
    y_all, s_all = _scan(x, dt, A, B, C, h0)
    y1, s1 = _scan(x[:a], dt[:a], A, B[:a], C[:a], h0) if a else (None, h0)
    y2, s2 = _scan(x[a:], dt[a:], A, B[a:], C[a:], s1)
    both = np.asarray(y2) if a == 0 else np.concatenate([np.asarray(y1), np.asarray(y2)])
    scale = float(np.max(np.abs(np.asarray(y_all)))) + float(np.max(np.abs(y))) + 1e-300
    err = max(
        float(np.max(np.abs(yc - y))),
        float(np.max(np.abs(both - np.asarray(y_all)))),
        float(np.max(np.abs(np.asarray(s2) - np.asarray(s_all)))),
    )
    return 1.0 - err / (1e-11 * scale)


@prop(
    "hybrid.kv_fraction_counted",
    paper=PAPER,
    statement="The KV-cache fraction N_MLA (r_kv + d_rope) / (2 L n_kv d_h) equals the per-token "
    "cache counted on a built hybrid (the latent and RoPE key each MLA layer emits, over the keys "
    "and values each layer of the all-GQA teacher emits), for any depth, MLA count, heads, head "
    "width, latent rank and RoPE width.",
    where="Zebra-Llama Table 1 (KV size); DeepSeek-V2 Sec. 2.1.3 (cache layout)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "layers": st.integers(1, 4),
            "num_mla": st.integers(0, 4),
            "heads": st.sampled_from([(2, 1), (2, 2), (4, 2)]),
            "head_dim": st.sampled_from([2, 4]),
            "kv_rank": st.integers(1, 8),
            "rope_half": st.integers(0, 2),
        }
    ),
    mutants=[
        wrap(
            "theory.kv_cache.mla_cache_per_token",
            lambda f: lambda cfg: cfg.num_mla * cfg.kv_rank,
            "the shared RoPE key left out of the MLA cache",
            name="rope_key_uncounted",
        ),
        wrap(
            "theory.kv_cache.gqa_cache_per_token",
            lambda f: lambda cfg: f(cfg) // 2,
            "the GQA cache counts keys only (the factor 2 dropped)",
            name="gqa_values_uncounted",
        ),
    ],
)
def _kv(ex) -> float:
    L, (H, G), dh = ex["layers"], ex["heads"], ex["head_dim"]
    n_mla = min(ex["num_mla"], L)
    rope = min(2 * ex["rope_half"], dh)
    d = 8
    r = min(
        ex["kv_rank"], d, G * (2 * dh - rope)
    )  # MLA: r_kv <= n_kv (nope + v) = n_kv (2 d_h - rope)
    counted_mla, counted_gqa = _counted(L, n_mla, H, G, dh, r, rope, d)
    cfg = KV.HybridConfig(KV.LlamaConfig(L, H, G, dh, d), n_mla, r, rope, d_state=dh)
    got = KV.kv_fraction(cfg)
    want = counted_mla / counted_gqa
    return 1.0 - abs(got - want) / 1e-15


@functools.cache
def _counted(L, n_mla, H, G, dh, r, rope, d):
    """Per-token cache entries of a built hybrid's MLA layers and of its all-GQA teacher."""
    kinds = ["mla"] * n_mla + ["mamba2"] * (L - n_mla)
    common = dict(mlp_hidden=1, kv_rank=r, rope_dim=rope, rope_theta=10000.0)
    key = jax.random.key(0)
    teacher = HybridLM(2, d, H, G, dh, ["gqa"] * L, **common, key=key)
    hybrid = HybridLM(2, d, H, G, dh, kinds, **common, key=key)
    x = jnp.ones((1, d))
    pos = jnp.arange(1)
    counted_gqa = sum(
        int(lay.mixer.k_proj(x).size + lay.mixer.v_proj(x).size) for lay in teacher.layers
    )
    counted_mla = sum(
        int(sum(a.size for a in lay.mixer.latent(x, pos)))
        for lay, kind in zip(hybrid.layers, kinds, strict=True)
        if kind == "mla"
    )
    return counted_mla, counted_gqa
