"""theorylab.nn: a small, batch-native JAX NN core on equinox + optax.

Modules (all act on arrays with arbitrary leading batch axes; ``__call__`` takes ``key=None``):
:class:`Linear` (weight ``(out, in)``, a static ``matmul`` hook), :class:`MLP`, :class:`Embedding`,
:class:`RMSNorm`, :func:`causal_attention`, :class:`CausalSelfAttention` (``num_heads=1`` = single
head), :class:`TransformerBlock`, :class:`TransformerLM`. Optimisers: use ``optax`` directly.
Training: :func:`fit` (pure ``lax.scan`` loop, vmappable), :func:`train` (jitted step, tqdm
progress), :func:`make_step`, :func:`evaluate`, :func:`save` / :func:`load` (exact round trip),
:func:`lm_loss`, :func:`cross_entropy`.
Data: :class:`MarkovCorpus` (synthetic tokens with a known loss floor). FP4 formats and
quantised matmuls: :mod:`nn.quant`. Attention variants: :mod:`nn.hopfield` (modern Hopfield
attention), :mod:`nn.mla`, :mod:`nn.mamba2`, :mod:`nn.hybrid` (MLA/Mamba2 hybrids);
:mod:`nn.unet` (MRI reconstruction U-Net); visual prompts :mod:`nn.acavp`, RGB-D prompting
:mod:`nn.mixprompt`, prompt-to-LoRA generation :mod:`nn.dnd`. Every public module of this folder
is a submodule, loaded on first use.

Trainable vs frozen
-------------------
What trains is a boolean mask kept *beside* the model (an equinox filter spec), never a wrapper
inside it, so every layer (equinox's own included) keeps working::

    mask = nn.trainable_mask(model, frozen=lambda m: (m.embed, m.blocks[0]))
    trainable, frozen = nn.split(model, mask)     # eqx.partition(model, mask)
    opt_state = optax.adamw(1e-3, weight_decay=0.1).init(trainable)
    model = nn.combine(trainable, frozen)

An adapted model (:func:`nn.adapters.inject`) carries its own mask (adapter leaves only), so
``nn.split(adapted)`` needs none. :func:`train` and :func:`make_step` differentiate and update only
``trainable``: the optimiser never sees frozen arrays, so weight decay cannot reach them. (Filtering
by ``eqx.is_inexact_array`` alone would hand the frozen base to AdamW, which decays it.)

Quantised matmul hook
---------------------
``Linear.matmul`` is ``None`` (plain ``x @ W.T``) or a hashable callable ``matmul(x, W, *, key)``;
:func:`set_matmul` sets it on every ``Linear`` of a model, e.g. ``set_matmul(lm,
nn.quant.QuantMatmul(...))``.
"""

import importlib
import pkgutil

from ._data import MarkovCorpus
from ._layers import (
    MLP,
    CausalSelfAttention,
    Embedding,
    Linear,
    RMSNorm,
    TransformerBlock,
    TransformerLM,
    causal_attention,
    default_float,
    set_matmul,
    uniform_fan_in,
)
from ._train import (
    TrainResult,
    cross_entropy,
    evaluate,
    fit,
    lm_loss,
    load,
    make_step,
    save,
    train,
)
from ._tree import combine, count_params, split, trainable_mask

# every public module or package of this folder, loaded on first use
_SUBMODULES = tuple(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))

__all__ = [
    *_SUBMODULES,
    "Linear",
    "MLP",
    "Embedding",
    "RMSNorm",
    "causal_attention",
    "CausalSelfAttention",
    "TransformerBlock",
    "TransformerLM",
    "default_float",
    "uniform_fan_in",
    "set_matmul",
    "trainable_mask",
    "split",
    "combine",
    "count_params",
    "fit",
    "train",
    "make_step",
    "evaluate",
    "TrainResult",
    "save",
    "load",
    "lm_loss",
    "cross_entropy",
    "MarkovCorpus",
]


def __getattr__(name):  # PEP 562: submodules load on first use
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
