"""Exact parameter counts of MixPrompt's prompting module (Hao et al., NeurIPS 2025, OpenReview
jt9iMeQQvM), derived here from the official code (``semseg/models/Mixprompt.py``, described in
``docs/papers/mixprompt.md#as-implemented-here``) and checked against counted parameters of
:mod:`nn.mixprompt` (``tests/nn/test_mixprompt.py``) and against the paper's ablation table.

One ADA module on ``C`` channels with rank ``r = C / rank_ratio`` and ``n`` sub-spaces:
``2 (C r + r)`` (two down-projections) ``+ (r C + C)`` (up-projection) ``+ n^2`` (the mixing
matrix) ``+ 2 C`` (its LayerNorm); at ``rank_ratio = 4`` the first three terms are
``0.75 C^2 + 1.5 C + n^2``.
"""

from __future__ import annotations

from _core.validation import check_bool, check_choice, check_int

__all__ = [
    "ada_params",
    "patch_embed_params",
    "block_params",
    "seg_head_params",
    "mixprompt_params",
    "resnet50_stem_layer1_params",
    "paper_trainable_params",
]


def _c(v, name):
    return check_int(v, name, lower=1, upper=1 << 20)


def _chans(channels):
    if not isinstance(channels, tuple | list) or not channels:
        raise TypeError(f"`channels` must be a non-empty tuple of ints; got {channels!r}.")
    return tuple(_c(c, "channels") for c in channels)


def ada_params(channels, rank_ratio=4, subspaces=4, mix="rgb", norm=True) -> int:
    """Parameters of one ADA module (the module formula, derived here from the official code,
    ``docs/papers/mixprompt.md#as-implemented-here``); ``mix="none"`` has no ``Omega``.

    >>> ada_params(64)  # 0.75 C^2 + 1.5 C + n^2 + 2 C at C = 64, n = 4
    3312
    """
    c, q, n = _c(channels, "channels"), _c(rank_ratio, "rank_ratio"), _c(subspaces, "subspaces")
    mix = check_choice(mix, "mix", ("rgb", "aux", "both", "none"))
    norm = check_bool(norm, "norm")
    if c % q or (c // q) % n:
        raise ValueError(f"`rank_ratio`={q} and `subspaces`={n} must divide channels={c}.")
    r = c // q
    return 2 * (c * r + r) + (r * c + c) + (0 if mix == "none" else n * n) + (2 * c if norm else 0)


def patch_embed_params(in_channels, out_channels, kernel=3, norm=True) -> int:
    """``k x k`` convolution with bias, then LayerNorm: ``k^2 C_in C_out + C_out + 2 C_out``
    (derived here, ``docs/papers/mixprompt.md#as-implemented-here``).

    >>> patch_embed_params(3, 64)  # 9 * 3 * 64 + 64 + 128
    1920
    """
    a, b, k = _c(in_channels, "in_channels"), _c(out_channels, "out_channels"), _c(kernel, "kernel")
    return k * k * a * b + b + (2 * b if check_bool(norm, "norm") else 0)


def block_params(channels, expansion=4) -> int:
    """:class:`nn.mixprompt.Block`: depthwise ``3 x 3`` with bias (``10 C``), LayerNorm (``2 C``),
    ``C -> eC -> C`` linears: ``2 e C^2 + e C + 13 C`` (derived here,
    ``docs/papers/mixprompt.md#as-implemented-here``).

    >>> block_params(64)
    33856
    """
    c, e = _c(channels, "channels"), _c(expansion, "expansion")
    return 2 * e * c * c + e * c + 13 * c


def seg_head_params(channels, embed, num_classes) -> int:
    """:class:`nn.mixprompt.SegHead`: ``sum_i (C_i E + E) + (S E^2 + E) + (E K + K)`` (derived
    here, ``docs/papers/mixprompt.md#as-implemented-here``).

    >>> seg_head_params((8, 16), 4, 3)  # (36 + 68) + (2 * 16 + 4) + (12 + 3)
    155
    """
    ch, e, k = _chans(channels), _c(embed, "embed"), _c(num_classes, "num_classes")
    return sum(c * e + e for c in ch) + len(ch) * e * e + e + e * k + k


def mixprompt_params(
    channels,
    num_classes,
    *,
    in_channels=3,
    extractor_depth=1,
    expansion=4,
    extractor="pretrained",
    rank_ratio=4,
    subspaces=4,
    mix="rgb",
    norm=True,
    head_embed=16,
) -> dict[str, int]:
    """Trainable parameters of :func:`nn.mixprompt.mixprompt` by part (``total`` their sum):
    extractor (stage-1 embed and ``extractor_depth`` blocks, or the embed alone for
    ``extractor="embed"``), ``proj`` (``C_1^2 + C_1``), one ADA per stage, prompt-path patch
    embeds for stages ``>= 2``, head (derived here,
    ``docs/papers/mixprompt.md#as-implemented-here``).

    >>> mixprompt_params((16, 32), 5)["total"]
    10349
    """
    ch = _chans(channels)
    choice = check_choice(extractor, "extractor", ("pretrained", "random", "embed"))
    head_embed = _c(head_embed, "head_embed")
    depth, expansion = _c(extractor_depth, "extractor_depth"), _c(expansion, "expansion")
    ext = patch_embed_params(in_channels, ch[0])
    if choice != "embed":
        ext += depth * block_params(ch[0], expansion)
    parts = {
        "extractor": ext,
        "proj": ch[0] * ch[0] + ch[0],
        "adapters": sum(ada_params(c, rank_ratio, subspaces, mix, norm) for c in ch),
        "prompt_embeds": sum(
            patch_embed_params(a, b) for a, b in zip(ch[:-1], ch[1:], strict=True)
        ),
        "head": seg_head_params(ch, head_embed, num_classes),
    }
    parts["total"] = sum(parts.values())
    return parts


def resnet50_stem_layer1_params() -> int:
    """ResNet-50 stem (conv 7x7 3->64, BN) and layer1 (three bottlenecks 64-64-256, the first with
    a 1x1 projection shortcut), BatchNorm affine weights counted: 9,536 + 215,808 = 225,344 (He et
    al. 2016, arXiv 1512.03385, Table 1; the official MixPrompt extractor).

    >>> resnet50_stem_layer1_params()
    225344
    """
    stem = 7 * 7 * 3 * 64 + 2 * 64

    def bottleneck(cin, proj):
        p = cin * 64 + 128 + 9 * 64 * 64 + 128 + 64 * 256 + 512
        return p + (cin * 256 + 512 if proj else 0)

    return stem + bottleneck(64, True) + 2 * bottleneck(256, False)


def paper_trainable_params(num_classes=41) -> dict[str, int]:
    """The official MixPrompt's trainable parameters on MiT-B5 (``C = 64, 128, 320, 512``;
    ADA ``r = 4, n = 4``, prompt LayerNorms; prompt-path ``3 x 3 / 2`` patch embeds for stages
    2-4; ResNet-50 stem + layer1 and a linear 256 -> 64; SegFormer head with embedding 768 --
    ``linear_c1..4``, bias-free 1x1 fuse conv + BatchNorm, ``linear_pred`` 768 -> 150 -- and the
    final 1x1 conv 150 -> ``num_classes``; NYU: 41), with the two ablation rows: ``"full"``,
    ``"without_extractor"`` (extractor and its linear removed) and ``"without_mixed_prompting"``
    (the four ADA modules removed: the reading under which the paper's 5.4M is reproduced;
    dropping only ``Omega`` removes 64 parameters).

    >>> round(paper_trainable_params()["without_mixed_prompting"] / 1e6, 1)  # the paper's 5.4M
    5.4
    """
    k = check_int(num_classes, "num_classes", lower=1, upper=10_000)
    ch, e = (64, 128, 320, 512), 768
    adas = sum(ada_params(c) for c in ch)
    embeds = sum(patch_embed_params(a, b) for a, b in zip(ch[:-1], ch[1:], strict=True))
    ext = resnet50_stem_layer1_params() + 256 * 64 + 64
    head = sum(c * e + e for c in ch) + 4 * e * e + 2 * e + e * 150 + 150 + 150 * k + k
    full = adas + embeds + ext + head
    return {
        "full": full,
        "without_extractor": full - ext,
        "without_mixed_prompting": full - adas,
        "adapters": adas,
        "prompt_embeds": embeds,
        "extractor": ext,
        "head": head,
    }
