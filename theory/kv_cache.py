"""Decode-time cache and state accounting of GQA, MLA and Mamba2 hybrids, exact in the config.

Counts are elements (multiply by 2 for bf16 bytes). Sources: Yang, Rezagholizadeh et al. 2025,
*Zebra-Llama* (arXiv 2505.17272; NeurIPS 2025 as X-EcoMLA hybrid), Sec. 3 and Table 1 (KV size 3.9%,
2% and 2.73% for the 1B, 3B and 8B hybrids); the per-layer formulas are read from the authors'
inference code (cache tensors of shape ``(batch, max_seqlen, kv_lora_rank + qk_rope_head_dim)`` for
MLA; ``(nheads, headdim, d_state)`` SSM state and ``(conv channels, d_conv)`` conv state for Mamba2)
and DeepSeek-V2 (arXiv 2405.04434, Sec. 2.1, Table 1):

    GQA per token        2 L n_kv d_h
    hybrid per token     N_MLA (r_kv + d_rope)              (Mamba2 layers: nothing per token)
    Mamba2 per sequence  N_M2 [n_h d_h d_state + d_conv (d_inner + 2 d_xb)]

The published percentages are the per-token ratio (the T -> infinity limit); the Mamba2 state is
left out of them. :func:`state_fraction` includes it at a context T, :func:`break_even_context`
is the T at which the Mamba2 state equals the MLA cache (derived here from the formulas above).
"""

from __future__ import annotations

import dataclasses
import math

from _core.validation import check_instance, check_int

__all__ = [
    "LlamaConfig",
    "HybridConfig",
    "LLAMA",
    "ZEBRA",
    "gqa_cache_per_token",
    "mla_cache_per_token",
    "mamba2_state",
    "kv_fraction",
    "state_fraction",
    "break_even_context",
]


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """The GQA base model's shape: layers, query heads, KV heads, head dim, hidden size.

    The Llama-3 shapes that Zebra-Llama (Yang et al. 2025, Sec. 3) starts from.
    """

    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int

    def __post_init__(self):
        for f in dataclasses.fields(self):
            check_int(getattr(self, f.name), f.name, lower=1)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"`num_kv_heads` must divide num_heads={self.num_heads}; got {self.num_kv_heads}."
            )


@dataclasses.dataclass(frozen=True)
class HybridConfig:
    """A hybrid made from ``base``: ``num_mla`` MLA layers (latent ``kv_rank``, RoPE key
    ``rope_dim``), the other layers Mamba2 (``d_state``, ``d_conv``, expand 1, ngroups = n_h).

    Zebra-Llama's hybrid (Yang et al. 2025, Sec. 3, Table 1), shapes as in the authors' code.
    """

    base: LlamaConfig
    num_mla: int
    kv_rank: int
    rope_dim: int
    d_state: int
    d_conv: int = 4

    def __post_init__(self):
        check_instance(self.base, "base", LlamaConfig)
        check_int(self.num_mla, "num_mla", lower=0, upper=self.base.num_layers)
        kv_dim = 2 * self.base.num_kv_heads * self.base.head_dim
        check_int(self.kv_rank, "kv_rank", lower=1, upper=min(kv_dim, self.base.hidden_size))
        check_int(self.rope_dim, "rope_dim", lower=0, upper=self.base.head_dim)
        check_int(self.d_state, "d_state", lower=1)
        check_int(self.d_conv, "d_conv", lower=1)

    @property
    def num_mamba(self) -> int:
        return self.base.num_layers - self.num_mla


#: public base configurations (Hugging Face config.json of meta-llama/Llama-3.2-1B-Instruct,
#: Llama-3.2-3B-Instruct, Llama-3.1-8B-Instruct)
LLAMA = {
    "1B": LlamaConfig(16, 32, 8, 64, 2048),
    "3B": LlamaConfig(28, 24, 8, 128, 3072),
    "8B": LlamaConfig(32, 32, 8, 128, 4096),
}
#: the official hybrid settings of Table 1's headline rows (AMD-Hybrid-Models configs):
#: 1B 4MLA-12M2 (r_kv 128, d_rope 32), 3B 6MLA-22M2 (128, 64), 8B 8MLA-24M2 (160, 64);
#: Mamba2 d_state = head_dim
ZEBRA = {
    "1B": HybridConfig(LLAMA["1B"], 4, 128, 32, 64),
    "3B": HybridConfig(LLAMA["3B"], 6, 128, 64, 128),
    "8B": HybridConfig(LLAMA["8B"], 8, 160, 64, 128),
}


def gqa_cache_per_token(cfg: LlamaConfig) -> int:
    """``2 L n_kv d_h``: keys and values of every layer (GQA, Ainslie et al. 2023).

    >>> gqa_cache_per_token(LlamaConfig(16, 32, 8, 64, 2048))  # 2 L n_kv d_h
    16384
    """
    check_instance(cfg, "cfg", LlamaConfig)
    return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim


def mla_cache_per_token(cfg: HybridConfig) -> int:
    """``N_MLA (r_kv + d_rope)``: the joint KV latent and the shared RoPE key (DeepSeek-V2, Sec.
    2.1.3; Zebra-Llama cache layout).

    >>> base = LlamaConfig(16, 32, 8, 64, 2048)
    >>> mla_cache_per_token(HybridConfig(base, 8, 128, 32, 64))  # N_MLA (r_kv + d_rope)
    1280
    """
    check_instance(cfg, "cfg", HybridConfig)
    return cfg.num_mla * (cfg.kv_rank + cfg.rope_dim)


def mamba2_state(cfg: HybridConfig) -> int:
    """``N_M2 [n_h d_h d_state + d_conv (d_inner + 2 d_xb)]``, d_inner = n_h d_h, d_xb = n_kv d_h
    (Zebra-Llama's Mamba2 with headdim = d_h, ngroups = n_h, x and B at KV width; Yang et al.
    2025, Sec. 3, and the Mamba2 state shapes of the authors' inference code).

    >>> base = LlamaConfig(32, 32, 8, 128, 4096)
    >>> mamba2_state(HybridConfig(base, 8, 128, 64, 64))  # 24 (32 128 64 + 4 (4096 + 2 1024))
    6881280
    """
    b = check_instance(cfg, "cfg", HybridConfig).base
    ssm = b.num_heads * b.head_dim * cfg.d_state
    conv = cfg.d_conv * (b.num_heads * b.head_dim + 2 * b.num_kv_heads * b.head_dim)
    return cfg.num_mamba * (ssm + conv)


def kv_fraction(cfg: HybridConfig) -> float:
    """The headline KV ratio ``N_MLA (r_kv + d_rope) / (2 L n_kv d_h)`` (Zebra-Llama Table 1).

    >>> base = LlamaConfig(16, 32, 8, 64, 2048)
    >>> kv_fraction(HybridConfig(base, 8, 128, 32, 64))  # 1280 / 16384
    0.078125
    """
    return mla_cache_per_token(cfg) / gqa_cache_per_token(cfg.base)


def state_fraction(cfg: HybridConfig, context: int) -> float:
    """All decode state of the hybrid at ``context`` tokens (MLA cache + Mamba2 state) over the
    base's GQA cache at the same context (derived here).

    >>> base = LlamaConfig(32, 32, 8, 128, 4096)
    >>> state_fraction(HybridConfig(base, 8, 128, 64, 64), 4096)
    0.049072265625
    """
    check_instance(cfg, "cfg", HybridConfig)
    T = check_int(context, "context", lower=1)
    return (mla_cache_per_token(cfg) * T + mamba2_state(cfg)) / (gqa_cache_per_token(cfg.base) * T)


def break_even_context(cfg: HybridConfig) -> float:
    """Context T at which the Mamba2 state equals the MLA cache, ``state / per-token cache``
    (derived here); ``inf`` without MLA layers.

    >>> base = LlamaConfig(32, 32, 8, 128, 4096)
    >>> break_even_context(HybridConfig(base, 8, 128, 64, 64))
    4480.0
    """
    per_tok = mla_cache_per_token(cfg)
    return math.inf if per_tok == 0 else mamba2_state(cfg) / per_tok
