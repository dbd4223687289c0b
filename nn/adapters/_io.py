"""Self-describing adapter files: ``save_adapter`` / ``load_adapter``.

One ``.npz`` file holds a JSON header (format id and version, method, configuration, the dotted
paths and ``(out, in)`` shapes of the adapted layers, the extra trainable paths and the raw bits of
the PRNG key) and the **trainable** arrays only, keyed by their dotted path. Loading re-runs
:func:`inject` on the user's base model with the recorded key, so every frozen random array (VeRA /
Tied-LoRA bases, Uni-LoRA's projection, Ravan's heads, MoORE's SVD) is regenerated bit-identically
instead of stored, then fills in the trainable arrays, checking names, shapes and dtypes.
"""

from __future__ import annotations

import json
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import nn as _nn

from ._core import Adapted, _flatten, inject

__all__ = ["save_adapter", "load_adapter", "FORMAT", "VERSION"]

FORMAT = "theorylab-adapter"
VERSION = 1


def _trainable_arrays(adapted):
    trainable, _ = _nn.split(adapted)
    return {p: a for p, a in _flatten(trainable, None) if a is not None}


def save_adapter(path: str | os.PathLike, adapted: Adapted) -> None:
    """Write the adapter of ``adapted`` (header + trainable arrays) to ``path`` (``.npz``)."""
    if not isinstance(adapted, Adapted):
        raise TypeError(f"`adapted` must be an Adapted model; got {type(adapted).__name__}.")
    header = {"format": FORMAT, "version": VERSION, "spec": json.loads(adapted.spec.to_json())}
    arrays = {k: np.asarray(v) for k, v in _trainable_arrays(adapted).items()}
    with open(path, "wb") as f:
        np.savez(f, __header__=np.asarray(json.dumps(header)), **arrays)


def read_header(path) -> dict:
    """The JSON header of an adapter file."""
    with np.load(path, allow_pickle=False) as z:
        if "__header__" not in z:
            raise ValueError(f"`path` {str(path)!r} is not a theorylab adapter file (no header).")
        return json.loads(str(z["__header__"]))


def load_adapter(path: str | os.PathLike, model) -> Adapted:
    """Rebuild the adapted model from ``model`` (the same base the adapter was trained on).

    Raises ``ValueError`` if the file's format or version is unknown, or if ``model``'s adapted
    layers, or the stored arrays, do not have the recorded shapes.
    """
    header = read_header(path)
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise ValueError(
            f"`path` must be a {FORMAT} file of version {VERSION}; got format "
            f"{header.get('format')!r}, version {header.get('version')!r}."
        )
    spec = header["spec"]
    key = jax.random.wrap_key_data(jnp.asarray(spec["key_data"], dtype=jnp.uint32))
    fresh = inject(
        model, spec["method"], targets=list(spec["targets"]), key=key,
        train=list(spec["train"]) or None, **spec["config"],
    )
    got = [list(s) for s in fresh.spec.shapes]
    if got != [list(s) for s in spec["shapes"]]:
        raise ValueError(
            f"`model` does not match the adapter: layer shapes {got}, file {spec['shapes']}."
        )
    trainable, frozen = _nn.split(fresh)
    with np.load(path, allow_pickle=False) as z:
        stored = {k: z[k] for k in z.files if k != "__header__"}
    names = [p for p, a in _flatten(trainable, None) if a is not None]
    if sorted(names) != sorted(stored):
        raise ValueError(
            f"`path` holds arrays {sorted(stored)} but the adapter has {sorted(names)}."
        )
    leaves, treedef = jax.tree_util.tree_flatten(trainable)
    new = []
    for name, leaf in zip(names, leaves, strict=True):
        arr = stored[name]
        if arr.shape != leaf.shape or arr.dtype != leaf.dtype:
            raise ValueError(
                f"array {name!r} in `path` has shape {arr.shape} and dtype {arr.dtype}; the "
                f"adapter needs {leaf.shape} and {leaf.dtype}."
            )
        new.append(jnp.asarray(arr))
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, new), frozen)
