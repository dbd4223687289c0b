"""Parameter-efficient adapters on any equinox model: inject, named adapters, merge, save/load.

``adapted = inject(model, "lora", targets=["q_proj", "v_proj"], key=key, r=8)`` adapts the
selected layers (``nn.Linear``, ``eqx.nn.Linear`` -- e.g. ``eqx.nn.MultiheadAttention``'s
projections --, ``eqx.nn.Conv1d/2d/3d``, ``nn.Embedding``, ``eqx.nn.Embedding``; globs on the
pytree path, see :func:`target_paths`) and keeps each layer itself intact; ``nn.split(adapted)``
gives ``(trainable, frozen)`` by the adapted model's own mask, so optax only ever sees adapter
leaves. ``inject(adapted, ..., name="b")`` adds a second named adapter; ``adapted.set_active``,
``adapted.disable()`` / ``with disabled(adapted)``, :func:`unload`, :func:`merge` (PEFT's
``merge_and_unload``); ``dropout=`` on the adapter branch. ``save_adapter`` / ``load_adapter``
write and read ``.safetensors`` files with a JSON config beside them.

Methods (``METHODS``): "lora" (with rsLoRA), "polar", "unilora", "vera", "tied_lora", "vblora",
"ravan", "moore". TFB (:func:`tfb_bayesianize`) and Curvature Tuning (:func:`ct_steer`,
:func:`ct_trainable`) act on a trained adapter and on activations.
"""

from ._core import (
    METHODS,
    Adapted,
    AdaptedLayer,
    AdapterLayer,
    AdapterSpec,
    delta_weights,
    disabled,
    inject,
    merge,
    stable_rank,
    target_paths,
    unload,
)
from ._curvature import (
    CTActivation,
    CTLinear,
    CTTrainable,
    ct_gap_bound,
    ct_steer,
    ct_trainable,
    ctu,
)
from ._io import load_adapter, read_header, save_adapter
from ._lora import LoRALinear, lora_scale
from ._moore import MoORELinear, householder_apply, householder_matrix
from ._polar import PoLARLinear, polar_optimizer, stiefel_mask
from ._ravan import RavanLinear, fedavg, ravan_aggregate, ravan_select_heads
from ._tfb import (
    TFBLoRALinear,
    TFBSearchResult,
    expected_calibration_error,
    tfb_bayesianize,
    tfb_refactor,
    tfb_search_sigma,
)
from ._tied import TiedLoRALinear
from ._unilora import (
    ProjectedLoRALinear,
    UniLoRALinear,
    VeRALinear,
    isometric_projection,
    kaiming_uniform_bases,
    project,
    project_transpose,
    vera_projection,
)
from ._vblora import VBLoRALinear, topk_mixture_weights


def num_params(method: str, shapes, **config) -> int:
    """The trainable count of ``method`` on layers of ``(out, in)`` ``shapes`` (its formula)."""
    from _core.validation import check_choice, check_int

    check_choice(method, "method", METHODS)
    if not isinstance(shapes, list | tuple) or not shapes:
        raise TypeError(f"`shapes` must be a non-empty list of (out, in) pairs; got {shapes!r}.")
    for s in shapes:
        if not isinstance(s, list | tuple) or len(s) != 2:
            raise ValueError(f"`shapes` must hold (out, in) pairs; got {s!r} in {shapes!r}.")
    shapes = [tuple(check_int(d, "shapes", lower=1) for d in s) for s in shapes]
    config = METHODS[method].check_config(config, shapes)
    return int(METHODS[method].num_params(shapes, **config))


__all__ = [
    "METHODS",
    "AdapterLayer",
    "AdaptedLayer",
    "Adapted",
    "AdapterSpec",
    "delta_weights",
    "inject",
    "target_paths",
    "merge",
    "unload",
    "disabled",
    "stable_rank",
    "num_params",
    "save_adapter",
    "load_adapter",
    "read_header",
    "LoRALinear",
    "lora_scale",
    "PoLARLinear",
    "polar_optimizer",
    "stiefel_mask",
    "ProjectedLoRALinear",
    "UniLoRALinear",
    "VeRALinear",
    "TiedLoRALinear",
    "VBLoRALinear",
    "isometric_projection",
    "vera_projection",
    "kaiming_uniform_bases",
    "project",
    "project_transpose",
    "topk_mixture_weights",
    "RavanLinear",
    "fedavg",
    "ravan_aggregate",
    "ravan_select_heads",
    "MoORELinear",
    "householder_apply",
    "householder_matrix",
    "TFBLoRALinear",
    "TFBSearchResult",
    "expected_calibration_error",
    "tfb_bayesianize",
    "tfb_refactor",
    "tfb_search_sigma",
    "CTActivation",
    "CTLinear",
    "CTTrainable",
    "ct_gap_bound",
    "ct_steer",
    "ct_trainable",
    "ctu",
]
