"""MixPrompt: mixed prompting of a frozen RGB segmentation backbone with an auxiliary modality
(Hao et al., NeurIPS 2025, OpenReview jt9iMeQQvM; mechanism from the official code
``xiaoshideta/MixPrompt``, ``semseg/models/Mixprompt.py``, described in
``docs/papers/mixprompt.md#as-implemented-here``), at CPU scale.

Every module acts on channels-last images ``(..., H, W, C)`` with arbitrary leading batch axes.

* :class:`PatchEmbed` -- overlapping patch embedding: ``3 x 3`` convolution, stride 2, then a
  channel LayerNorm (SegFormer's ``OverlapPatchEmbed`` at ``3 x 3 / 2``);
* :class:`Block` -- a small ConvNeXt-style block ``x + W_2 GELU(W_1 LN(dwconv_3x3(x)))`` standing
  in for MiT's transformer blocks (a CPU-scale choice);
* :class:`Backbone` -- hierarchical RGB encoder: per stage a :class:`PatchEmbed`, ``blocks``
  blocks and a LayerNorm; resolutions ``1/2, 1/4, ...``;
* :class:`SegHead` -- SegFormer's all-MLP head: per-stage linear to ``embed``, bilinear upsampling
  to stage-1 resolution, concatenation, linear fuse + ReLU (BatchNorm left out), linear
  classifier, bilinear upsampling to the input size;
* :func:`split_subspaces` / :func:`merge_subspaces` / :func:`mix_subspaces` -- the official ADA's
  ``stack(chunk(u, n, -1), -1)``, ``Omega`` on the last axis, ``transpose(-1, -2).reshape``;
* :class:`MixedPromptAdapter` -- the ADA module: down-project RGB and auxiliary tokens to
  ``C / rank_ratio``, mix the RGB branch across ``subspaces`` contiguous sub-spaces with an
  ``n x n`` matrix, add, up-project, LayerNorm (eps 1e-6); :func:`inject` adds the prompt to the
  stage's tokens before the stage's frozen blocks;
* :class:`MixPrompt` (built by :func:`mixprompt`) -- frozen backbone, auxiliary extractor
  (a copy of the backbone's pretrained stage-1 embed and blocks plus a linear map, or random /
  a fresh embed for ablations and the DPLNet-style baseline), one adapter per stage, prompt-path
  patch embeds for stages ``>= 2`` applied to the previous stage's prompt, and the head; only the
  non-backbone parts train (:meth:`MixPrompt.trainable_mask`);
* :class:`RGBSegmenter` -- RGB-only baseline (backbone frozen or fine-tuned) and
  :class:`TwoBranch` -- CMX-style two-branch fusion (two trainable backbone copies, per-stage
  linear fusion of the concatenated features).

All models are called as ``model(rgb, aux)`` (``aux`` ignored by :class:`RGBSegmenter`) and return
logits ``(..., H, W, num_classes)``. Stochastic depth of the official frozen MiT is not reproduced
(the blocks here have none).
"""

from __future__ import annotations

import copy

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import (
    as_array,
    check_bool,
    check_choice,
    check_instance,
    check_int,
    check_key,
)

from ._layers import Linear, default_float, uniform_fan_in

__all__ = [
    "PatchEmbed",
    "Block",
    "Backbone",
    "SegHead",
    "split_subspaces",
    "merge_subspaces",
    "mix_subspaces",
    "MixedPromptAdapter",
    "inject",
    "MixPrompt",
    "mixprompt",
    "RGBSegmenter",
    "TwoBranch",
    "two_branch",
]

_MAX_C = 4096
_MIX = ("rgb", "aux", "both", "none")
_EXTRACTORS = ("pretrained", "random", "embed")


def _image(x, name, c):
    """Shape check of a channels-last image ``(..., H, W, c)`` (tracers allowed)."""
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) < 3 or shape[-1] != c:
        raise ValueError(f"`{name}` must have shape (..., H, W, {c}); got {_shape(x)}.")
    return jnp.asarray(x)


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else type(x).__name__


class LayerNorm(eqx.Module):
    """LayerNorm over the last (channel) axis with affine weight and bias."""

    weight: jax.Array
    bias: jax.Array
    eps: float = eqx.field(static=True)

    def __init__(self, dim, eps=1e-6, *, dtype=None):
        dtype = default_float(dtype)
        self.weight = jnp.ones((dim,), dtype)
        self.bias = jnp.zeros((dim,), dtype)
        self.eps = eps

    def __call__(self, x):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.var(x, -1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + self.eps) * self.weight + self.bias


def _depthwise(x, w):
    """Depthwise ``3 x 3`` convolution (cross-correlation, zero padding) of ``x (..., H, W, C)``
    with ``w (3, 3, C)`` as a sum of nine shifted products (XLA's grouped convolution is slow
    on CPU)."""
    h, wd = x.shape[-3:-1]
    pad = [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)]
    xp = jnp.pad(x, pad)
    return sum(xp[..., i : i + h, j : j + wd, :] * w[i, j] for i in range(3) for j in range(3))


def _conv_s2(x, w):
    """``3 x 3`` stride-2 convolution (cross-correlation, zero padding 1) of ``x (..., H, W, Cin)``
    with ``w (3, 3, Cin, Cout)``, as nine strided slices and one matmul (im2col; fast on CPU in
    both directions); ``H, W`` even."""
    h, wd = x.shape[-3] // 2, x.shape[-2] // 2
    pad = [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)]
    xp = jnp.pad(x, pad)
    cols = [xp[..., i : i + 2 * h : 2, j : j + 2 * wd : 2, :] for i in range(3) for j in range(3)]
    return jnp.concatenate(cols, -1) @ w.reshape(-1, w.shape[-1])


class PatchEmbed(eqx.Module):
    """``3 x 3`` stride-2 convolution (bias) then LayerNorm (SegFormer ``OverlapPatchEmbed``,
    Xie et al. 2021, arXiv 2105.15203, at patch 3 / stride 2); weights U(+-1/sqrt(9 Cin))."""

    weight: jax.Array
    bias: jax.Array
    norm: LayerNorm

    def __init__(self, in_channels, out_channels, *, dtype=None, key):
        cin = check_int(in_channels, "in_channels", lower=1, upper=_MAX_C)
        cout = check_int(out_channels, "out_channels", lower=1, upper=_MAX_C)
        check_key(key)
        dtype = default_float(dtype)
        init = uniform_fan_in(9 * cin)
        kw, kb = jax.random.split(key)
        self.weight = init(kw, (3, 3, cin, cout), dtype)
        self.bias = init(kb, (cout,), dtype)
        self.norm = LayerNorm(cout, 1e-5, dtype=dtype)

    def __call__(self, x, *, key=None):
        x = _image(x, "x", self.weight.shape[2])
        return self.norm(_conv_s2(x, self.weight) + self.bias)


class Block(eqx.Module):
    """``x + W_2 GELU(W_1 LN(dwconv_3x3(x)))`` (ConvNeXt-style, Liu et al. 2022, arXiv
    2201.03545, at CPU scale; the stand-in for MiT blocks)."""

    dw: jax.Array
    dw_bias: jax.Array
    norm: LayerNorm
    fc1: Linear
    fc2: Linear

    def __init__(self, channels, expansion=2, *, dtype=None, key):
        c = check_int(channels, "channels", lower=1, upper=_MAX_C)
        e = check_int(expansion, "expansion", lower=1, upper=8)
        check_key(key)
        dtype = default_float(dtype)
        k0, k1, k2, k3 = jax.random.split(key, 4)
        self.dw = uniform_fan_in(9)(k0, (3, 3, 1, c), dtype)
        self.dw_bias = uniform_fan_in(9)(k1, (c,), dtype)
        self.norm = LayerNorm(c, 1e-6, dtype=dtype)
        self.fc1 = Linear(c, e * c, dtype=dtype, key=k2)
        self.fc2 = Linear(e * c, c, dtype=dtype, key=k3)

    def __call__(self, x, *, key=None):
        x = _image(x, "x", self.dw.shape[-1])
        h = _depthwise(x, self.dw[:, :, 0]) + self.dw_bias
        return x + self.fc2(jax.nn.gelu(self.fc1(self.norm(h))))


def _channels(channels):
    if not isinstance(channels, tuple | list) or not 1 <= len(channels) <= 6:
        raise TypeError(f"`channels` must be a tuple of 1 to 6 ints; got {channels!r}.")
    return tuple(check_int(c, "channels", lower=1, upper=_MAX_C) for c in channels)


class Backbone(eqx.Module):
    """Hierarchical encoder (MiT's stage layout, Xie et al. 2021): stage ``i`` is
    :class:`PatchEmbed` (``C_{i-1} -> C_i``, stride 2), ``depths[i]`` :class:`Block` s (MLP
    ``expansion``) and a LayerNorm. The deep last stage mirrors MiT-B5's depths (3, 6, 40, 3),
    where most parameters sit in the low-resolution stages. :meth:`embed` and :meth:`stage` are
    the two halves of a stage, between which a prompt is injected."""

    embeds: tuple
    stages: tuple
    norms: tuple

    def __init__(
        self,
        channels=(16, 32, 64),
        in_channels=3,
        depths=(1, 1, 4),
        expansion=4,
        *,
        dtype=None,
        key,
    ):
        chans = _channels(channels)
        cin = check_int(in_channels, "in_channels", lower=1, upper=_MAX_C)
        if not isinstance(depths, tuple | list) or len(depths) != len(chans):
            raise TypeError(f"`depths` must be a tuple of {len(chans)} ints; got {depths!r}.")
        depths = tuple(check_int(d, "depths", lower=1, upper=64) for d in depths)
        e = check_int(expansion, "expansion", lower=1, upper=8)
        check_key(key)
        ke, kb = jax.random.split(key)
        ins = (cin, *chans[:-1])
        self.embeds = tuple(
            PatchEmbed(a, b, dtype=dtype, key=kk)
            for a, b, kk in zip(ins, chans, jax.random.split(ke, len(chans)), strict=True)
        )
        self.stages = tuple(
            tuple(
                Block(c, e, dtype=dtype, key=kk)
                for kk in jax.random.split(jax.random.fold_in(kb, i), d)
            )
            for i, (c, d) in enumerate(zip(chans, depths, strict=True))
        )
        self.norms = tuple(LayerNorm(c, 1e-6, dtype=dtype) for c in chans)

    @property
    def channels(self):
        return tuple(e.weight.shape[-1] for e in self.embeds)

    def embed(self, i, x):
        return self.embeds[i](x)

    def stage(self, i, x):
        for blk in self.stages[i]:
            x = blk(x)
        return self.norms[i](x)

    def __call__(self, x, *, key=None):
        feats = []
        for i in range(len(self.embeds)):
            x = self.stage(i, self.embed(i, x))
            feats.append(x)
        return feats


def _interp(n_in, n_out):
    """``(n_out, n_in)`` bilinear interpolation matrix, half-pixel centres, edges clamped
    (PyTorch ``F.interpolate(mode="bilinear", align_corners=False)``, SegFormer's resize)."""
    src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, n_in - 1)
    w = src - lo
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.arange(n_out), lo), 1 - w)
    np.add.at(m, (np.arange(n_out), hi), w)
    return m


def _resize(x, hw):
    """Bilinear resize of ``x (..., h, w, C)`` to ``hw`` (separable, one einsum)."""
    ry = jnp.asarray(_interp(x.shape[-3], hw[0]), x.dtype)
    rx = jnp.asarray(_interp(x.shape[-2], hw[1]), x.dtype)
    return jnp.einsum("Hh,...hwc,Ww->...HWc", ry, x, rx)


class SegHead(eqx.Module):
    """SegFormer all-MLP decoder (Xie et al. 2021, Sec. 3.2; official ``heads/segformer.py``):
    ``linear_c_i`` to ``embed``, upsample to stage 1, concatenate (deepest first), linear fuse +
    ReLU, ``linear_pred``; logits upsampled bilinearly to ``out_size`` (BatchNorm and dropout
    of the fuse layer left out)."""

    linears: tuple
    fuse: Linear
    pred: Linear

    def __init__(self, channels, embed=16, num_classes=4, *, dtype=None, key):
        chans = _channels(channels)
        e = check_int(embed, "embed", lower=1, upper=_MAX_C)
        k = check_int(num_classes, "num_classes", lower=2, upper=1024)
        check_key(key)
        keys = jax.random.split(key, len(chans) + 2)
        self.linears = tuple(
            Linear(c, e, dtype=dtype, key=kk)
            for c, kk in zip(chans, keys[: len(chans)], strict=True)
        )
        self.fuse = Linear(len(chans) * e, e, dtype=dtype, key=keys[-2])
        self.pred = Linear(e, k, dtype=dtype, key=keys[-1])

    def __call__(self, feats, out_size, *, key=None):
        hw = feats[0].shape[-3:-1]
        ups = [_resize(lin(f), hw) for lin, f in zip(self.linears, feats, strict=True)]
        h = jax.nn.relu(self.fuse(jnp.concatenate(ups[::-1], -1)))
        return _resize(self.pred(h), out_size)


# ------------------------------------------------------------------------------- sub-spaces
def split_subspaces(u, n):
    """``u (..., r)`` as ``(..., r / n, n)``: ``n`` contiguous chunks stacked on the last axis
    (official ADA: ``torch.stack(torch.chunk(u, n, dim=-1), dim=-1)``).

    Examples
    --------
    >>> s = split_subspaces(jnp.arange(6.0), 2)  # chunks [0, 1, 2] and [3, 4, 5] side by side
    >>> s.shape, s[:, 1].tolist()
    ((3, 2), [3.0, 4.0, 5.0])
    """
    n = check_int(n, "n", lower=1, upper=_MAX_C)
    as_array(u, "u")
    shape = getattr(u, "shape", None)
    if shape is None or len(shape) < 1 or 0 in shape or shape[-1] % n:
        raise ValueError(f"`u` must have a last axis divisible by n={n}; got shape {_shape(u)}.")
    u = jnp.asarray(u)
    return jnp.stack(jnp.split(u, n, axis=-1), axis=-1)


def merge_subspaces(s):
    """Inverse of :func:`split_subspaces`: ``(..., d, n) -> (..., n d)`` by swapping the last two
    axes then reshaping (official ADA: ``transpose(-1, -2).reshape``)."""
    as_array(s, "s")
    shape = getattr(s, "shape", None)
    if shape is None or len(shape) < 2 or 0 in shape:
        raise ValueError(f"`s` must have a non-empty shape (..., d, n); got {_shape(s)}.")
    s = jnp.swapaxes(jnp.asarray(s), -1, -2)
    return s.reshape((*s.shape[:-2], -1))


def mix_subspaces(u, omega):
    """Information mixing across sub-spaces: ``u^k <- sum_j Omega_kj u^j`` for the ``n``
    contiguous chunks ``u^j`` of ``u (..., r)``, ``omega (n, n)`` (official ADA's bias-free
    ``nn.Linear(n, n)`` on the stacked axis).

    Examples
    --------
    >>> swap = jnp.array([[0.0, 1.0], [1.0, 0.0]])
    >>> mix_subspaces(jnp.arange(4.0), swap).tolist()  # the chunks [0, 1] and [2, 3] swapped
    [2.0, 3.0, 0.0, 1.0]
    """
    as_array(omega, "omega")
    shape = getattr(omega, "shape", None)
    if shape is None or len(shape) != 2 or shape[0] != shape[1] or shape[0] < 1:
        raise ValueError(f"`omega` must be a square (n, n) matrix; got shape {_shape(omega)}.")
    return merge_subspaces(split_subspaces(u, shape[0]) @ jnp.asarray(omega).T)


def inject(x, p):
    """Prompt injection: the stage's RGB tokens plus the prompt, ``x + p`` (once per stage, before
    the stage's blocks; official ``Mixprompt.py``)."""
    as_array(x, "x")
    as_array(p, "p")
    if getattr(p, "shape", None) != getattr(x, "shape", None):
        raise ValueError(f"`p` must have the shape of `x` {_shape(x)}; got {_shape(p)}.")
    return jnp.asarray(x) + jnp.asarray(p)


class MixedPromptAdapter(eqx.Module):
    """The ADA module of MixPrompt (official ``Mixprompt.py``, class ``ADA``):

    ``p = LN(W_up (mix(W_r h + b_r) + W_x e + b_x) + b_up)`` with ``W_r, W_x`` of shape
    ``(C / rank_ratio, C)``, ``mix`` the sub-space mixing (:func:`mix_subspaces`) with ``Omega``
    of shape ``(subspaces, subspaces)`` on the branch(es) named by ``mix`` (``"rgb"``: the
    official default; ``"none"``: no ``Omega``, DPLNet's down-add-up), LayerNorm eps 1e-6 when
    ``norm``. ``Omega`` is initialised U(+-1/sqrt(n)) (PyTorch ``nn.Linear``'s Kaiming-uniform).
    """

    down_rgb: Linear
    down_aux: Linear
    up: Linear
    omega: jax.Array | None
    norm: LayerNorm | None
    mix: str = eqx.field(static=True)

    def __init__(
        self, channels, rank_ratio=4, subspaces=4, mix="rgb", norm=True, *, dtype=None, key
    ):
        c = check_int(channels, "channels", lower=1, upper=_MAX_C)
        r = check_int(rank_ratio, "rank_ratio", lower=1, upper=c)
        n = check_int(subspaces, "subspaces", lower=1, upper=c)
        self.mix = check_choice(mix, "mix", _MIX)
        norm = check_bool(norm, "norm")
        check_key(key)
        if c % r:
            raise ValueError(f"`rank_ratio` must divide channels={c}; got {r}.")
        if (c // r) % n:
            raise ValueError(
                f"`subspaces` must divide the rank C / rank_ratio = {c // r}; got {n}."
            )
        dtype = default_float(dtype)
        k = jax.random.split(key, 4)
        self.down_rgb = Linear(c, c // r, dtype=dtype, key=k[0])
        self.down_aux = Linear(c, c // r, dtype=dtype, key=k[1])
        self.up = Linear(c // r, c, dtype=dtype, key=k[2])
        self.omega = None if mix == "none" else uniform_fan_in(n)(k[3], (n, n), dtype)
        self.norm = LayerNorm(c, 1e-6, dtype=dtype) if norm else None

    def __call__(self, h, e, *, key=None):
        c = self.down_rgb.in_features
        h, e = _image(h, "h", c), _image(e, "e", c)
        u, v = self.down_rgb(h), self.down_aux(e)
        if self.mix in ("rgb", "both"):
            u = mix_subspaces(u, self.omega)
        if self.mix in ("aux", "both"):
            v = mix_subspaces(v, self.omega)
        p = self.up(u + v)
        return p if self.norm is None else self.norm(p)


def _backbone(backbone):
    return check_instance(backbone, "backbone", Backbone)


class MixPrompt(eqx.Module):
    """Frozen RGB :class:`Backbone` prompted with an auxiliary image (see :func:`mixprompt`).

    Stage ``i``: ``x <- embed_i(x)``; auxiliary tokens ``a_1 = proj(extractor(aux))``,
    ``a_i = prompt_embed_i(p_{i-1})`` for ``i >= 2``; ``p_i = ADA_i(x, a_i)``;
    ``x <- stage_i(inject(x, p_i))``; the head reads the stage outputs.
    """

    backbone: Backbone
    extractor: tuple
    proj: Linear
    prompt_embeds: tuple
    adapters: tuple
    head: SegHead

    def __call__(self, rgb, aux, *, key=None):
        rgb = _image(rgb, "rgb", self.backbone.embeds[0].weight.shape[2])
        aux = _image(aux, "aux", self.extractor[0].weight.shape[2])
        a = aux
        for layer in self.extractor:
            a = layer(a)
        a = self.proj(a)
        x, feats, p = rgb, [], None
        for i, ada in enumerate(self.adapters):
            x = self.backbone.embed(i, x)
            if i:
                a = self.prompt_embeds[i - 1](p)
            p = ada(x, a)
            x = self.backbone.stage(i, inject(x, p))
            feats.append(x)
        return self.head(feats, rgb.shape[-3:-1])

    def trainable_mask(self):
        """True at every floating leaf except the backbone's (the official ``requires_grad =
        False`` on MiT)."""
        mask = jax.tree.map(eqx.is_inexact_array, self)
        return eqx.tree_at(
            lambda m: m.backbone, mask, replace_fn=lambda b: jax.tree.map(lambda _: False, b)
        )


def mixprompt(
    backbone,
    num_classes,
    *,
    rank_ratio=4,
    subspaces=4,
    mix="rgb",
    norm=True,
    extractor="pretrained",
    head_embed=16,
    key,
):
    """Build :class:`MixPrompt` around a pretrained ``backbone`` (kept frozen).

    Parameters
    ----------
    backbone : :class:`Backbone`, pretrained on RGB; the new layers take its dtype.
    num_classes : int, classes of the target task.
    rank_ratio, subspaces, mix, norm : of every :class:`MixedPromptAdapter` (official: 4, 4,
        ``"rgb"``, True).
    extractor : ``"pretrained"`` (a copy of the backbone's stage-1 embed and blocks, the
        "early layers of a pretrained RGB feature extractor", official: ResNet-50 stem + layer1),
        ``"random"`` (the same layers freshly initialised: the paper's extractor ablation) or
        ``"embed"`` (a fresh :class:`PatchEmbed` only: DPLNet's auxiliary stem). The auxiliary
        image has the backbone's input channels (depth replicated, as in the official loader).
    head_embed : int, :class:`SegHead` embedding.
    key : PRNG key.
    """
    bb = _backbone(backbone)
    k = check_int(num_classes, "num_classes", lower=2, upper=1024)
    choice = check_choice(extractor, "extractor", _EXTRACTORS)
    e = check_int(head_embed, "head_embed", lower=1, upper=_MAX_C)
    check_key(key)
    chans, dt = bb.channels, bb.embeds[0].weight.dtype
    ks = jax.random.split(key, 2 * len(chans) + 4)
    cin = bb.embeds[0].weight.shape[2]
    if choice == "pretrained":
        ext = (copy.deepcopy(bb.embeds[0]), *copy.deepcopy(bb.stages[0]))
    elif choice == "random":
        ex = bb.stages[0][0].fc1.out_features // chans[0]
        fresh = Backbone((chans[0],), cin, (len(bb.stages[0]),), ex, dtype=dt, key=ks[0])
        ext = (fresh.embeds[0], *fresh.stages[0])
    else:
        ext = (PatchEmbed(cin, chans[0], dtype=dt, key=ks[0]),)
    adapters = tuple(
        MixedPromptAdapter(c, rank_ratio, subspaces, mix, norm, dtype=dt, key=kk)
        for c, kk in zip(chans, ks[1 : 1 + len(chans)], strict=True)
    )
    embeds = tuple(
        PatchEmbed(a, b, dtype=dt, key=kk)
        for a, b, kk in zip(chans[:-1], chans[1:], ks[1 + len(chans) : 2 * len(chans)], strict=True)
    )
    return MixPrompt(
        bb,
        ext,
        Linear(chans[0], chans[0], dtype=dt, key=ks[-2]),
        embeds,
        adapters,
        SegHead(chans, e, k, dtype=dt, key=ks[-1]),
    )


class RGBSegmenter(eqx.Module):
    """RGB-only baseline: ``head(backbone(rgb))``; the backbone trains only when ``finetune``.
    The head takes the backbone's dtype."""

    backbone: Backbone
    head: SegHead
    finetune: bool = eqx.field(static=True)

    def __init__(self, backbone, num_classes, finetune=False, head_embed=16, *, key):
        self.backbone = _backbone(backbone)
        self.finetune = check_bool(finetune, "finetune")
        k = check_int(num_classes, "num_classes", lower=2, upper=1024)
        e = check_int(head_embed, "head_embed", lower=1, upper=_MAX_C)
        check_key(key)
        dt = self.backbone.embeds[0].weight.dtype
        self.head = SegHead(self.backbone.channels, e, k, dtype=dt, key=key)

    def __call__(self, rgb, aux=None, *, key=None):
        rgb = _image(rgb, "rgb", self.backbone.embeds[0].weight.shape[2])
        return self.head(self.backbone(rgb), rgb.shape[-3:-1])

    def trainable_mask(self):
        mask = jax.tree.map(eqx.is_inexact_array, self)
        if self.finetune:
            return mask
        return eqx.tree_at(
            lambda m: m.backbone, mask, replace_fn=lambda b: jax.tree.map(lambda _: False, b)
        )


class TwoBranch(eqx.Module):
    """Two-branch fusion (CMX-style, Zhang et al. 2023, arXiv 2203.04838, simplified): an RGB
    and an auxiliary backbone, both trainable, features fused per stage by a linear map of their
    concatenation, ``f_i = W_i [x_i; a_i] + b_i``, read by the head (no cross-branch feedback)."""

    rgb: Backbone
    aux: Backbone
    fuse: tuple
    head: SegHead

    def __call__(self, rgb, aux, *, key=None):
        rgb = _image(rgb, "rgb", self.rgb.embeds[0].weight.shape[2])
        aux = _image(aux, "aux", self.aux.embeds[0].weight.shape[2])
        fx, fa = self.rgb(rgb), self.aux(aux)
        feats = [f(jnp.concatenate([x, a], -1)) for f, x, a in zip(self.fuse, fx, fa, strict=True)]
        return self.head(feats, rgb.shape[-3:-1])


def two_branch(backbone, num_classes, *, head_embed=16, key):
    """:class:`TwoBranch` with both branches initialised from the pretrained ``backbone``
    (CMX initialises both encoders from the same ImageNet weights); the fusion layers and head
    take the backbone's dtype."""
    bb = _backbone(backbone)
    k = check_int(num_classes, "num_classes", lower=2, upper=1024)
    e = check_int(head_embed, "head_embed", lower=1, upper=_MAX_C)
    check_key(key)
    chans, dt = bb.channels, bb.embeds[0].weight.dtype
    ks = jax.random.split(key, len(chans) + 1)
    fuse = tuple(Linear(2 * c, c, dtype=dt, key=kk) for c, kk in zip(chans, ks[:-1], strict=True))
    head = SegHead(chans, e, k, dtype=dt, key=ks[-1])
    return TwoBranch(copy.deepcopy(bb), copy.deepcopy(bb), fuse, head)
