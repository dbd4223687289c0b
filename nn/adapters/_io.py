"""Adapter files: ``name.safetensors`` (the arrays) with ``name.json`` (the config) beside it.

The JSON config holds the format id and version, the adapter's name, method and
hyperparameters, the dotted paths, kinds and ``(out, fan_in)`` shapes of the adapted layers, the
extra trainable base paths, the dropout rate and the raw bits of the PRNG key. The safetensors
file holds only what cannot be rebuilt: the adapter's trainable arrays (``adapter.<layer
path>.<field>``, ``shared.<name>``, ``model.<base path>`` for ``train=`` leaves) and, for TFB, its
posterior arrays. Loading re-runs :func:`inject` on the user's base model with the recorded key,
so every frozen random array (VeRA / Tied-LoRA bases, Uni-LoRA's projection, Ravan's heads,
MoORE's SVD) is regenerated bit-identically instead of stored, then fills in the stored arrays,
checking names, shapes and dtypes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from ._core import Adapted, _check_adapted, _getter, _is_slot, _path_str, inject

__all__ = ["save_adapter", "load_adapter", "read_header", "FORMAT", "VERSION"]

FORMAT = "theorylab-adapter"
VERSION = 2
_KEYS = ("name", "method", "config", "targets", "kinds", "shapes", "train", "dropout", "key_data")


def _paths(path) -> tuple[Path, Path]:
    if not isinstance(path, str | os.PathLike) or not isinstance(os.fspath(path), str):
        raise TypeError(
            f"`path` must be a str or path-like; got {path!r} of type {type(path).__name__}."
        )
    p = Path(path)
    if p.suffix != ".safetensors":
        raise ValueError(f"`path` must name a .safetensors file; got {str(path)!r}.")
    return p, p.with_suffix(".json")


def _entries(adapted: Adapted, name: str) -> list:
    """``[(file key, getter)]`` of what the file of adapter ``name`` holds; ``getter(a)`` reads
    the array from an :class:`Adapted` (or its mask) of the same structure."""
    solo = adapted.set_active(name)
    mask = solo.trainable_mask()
    out = []
    for pk, leaf in jax.tree_util.tree_flatten_with_path(solo.model, is_leaf=_is_slot)[0]:
        p, g = _path_str(pk), _getter(pk)
        if not _is_slot(leaf):
            get = lambda a, g=g: g(a.model)  # noqa: E731
            if get(mask) is True:
                out.append((f"model.{p}", get))
            continue
        layer = leaf.adapters.get(name)
        for f in () if layer is None else layer.saved_fields():
            if getattr(layer, f) is not None:
                out.append(
                    (f"adapter.{p}.{f}", lambda a, g=g, f=f: getattr(g(a.model).adapters[name], f))
                )
        for qk, _ in jax.tree_util.tree_flatten_with_path(leaf.base)[0]:
            h = _getter(qk)
            get = lambda a, g=g, h=h: h(g(a.model).base)  # noqa: E731
            if get(mask) is True:
                out.append((f"model.{p}.{_path_str(qk)}", get))
    for k in solo.banks[name]:
        if mask.banks[name][k] is True:
            out.append((f"shared.{k}", lambda a, k=k: a.banks[name][k]))
    return out


def save_adapter(path: str | os.PathLike, adapted: Adapted, *, name: str | None = None) -> None:
    """Write adapter ``name`` (default: the active one) of ``adapted`` to ``path`` (a
    ``.safetensors`` file) and its config to the ``.json`` file beside it."""
    _check_adapted(adapted)
    name = adapted._one(name)
    tensors, config = _paths(path)
    spec = adapted.spec_of(name).to_dict()
    header = {"format": FORMAT, "version": VERSION, **spec}
    arrays = {k: np.array(get(adapted), order="C") for k, get in _entries(adapted, name)}
    save_file(arrays, str(tensors), metadata={"format": FORMAT, "version": str(VERSION)})
    config.write_text(json.dumps(header, indent=1, sort_keys=True))


def read_header(path) -> dict:
    """The JSON config of the adapter file ``path`` (``ValueError`` naming the path if absent,
    unreadable, or not a theorylab adapter config of this version)."""
    tensors, config = _paths(path)
    for f in (tensors, config):
        if f.is_dir():
            raise ValueError(f"`path` {str(f)!r} is a directory; give the .safetensors file.")
        if not f.is_file():
            raise ValueError(f"adapter file {str(f)!r} does not exist.")
    try:
        header = json.loads(config.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"adapter config {str(config)!r} is not valid JSON: {err}.") from None
    if (
        not isinstance(header, dict)
        or header.get("format") != FORMAT
        or header.get("version") != VERSION
    ):
        got = (
            header
            if not isinstance(header, dict)
            else {k: header.get(k) for k in ("format", "version")}
        )
        raise ValueError(
            f"adapter config {str(config)!r} must be a {FORMAT} config of version "
            f"{VERSION}; got {got}."
        )
    missing = [k for k in _KEYS if k not in header]
    if missing:
        raise ValueError(f"adapter config {str(config)!r} lacks {missing}.")
    return header


def load_adapter(path: str | os.PathLike, model, *, name: str | None = None) -> Adapted:
    """Rebuild the adapter saved at ``path`` on ``model`` (the base it was trained on, or an
    :class:`Adapted` model to which it is added under ``name``; default the saved name).

    Raises ``ValueError`` naming the path if a file is missing or a directory, if the config is
    not a valid adapter config, or if ``model``'s layers or the stored arrays do not have the
    recorded shapes.
    """
    from . import tfb_bayesianize

    spec = read_header(path)
    tensors, config = _paths(path)
    name = spec["name"] if name is None else name
    key = jax.random.wrap_key_data(jnp.asarray(spec["key_data"], dtype=jnp.uint32))
    method = "lora" if spec["method"] == "tfb" else spec["method"]
    try:
        fresh = inject(
            model,
            method,
            targets=list(spec["targets"]),
            key=key,
            name=name,
            train=list(spec["train"]) or None,
            dropout=spec["dropout"],
            **spec["config"],
        )
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"`model` does not match the adapter config {str(config)!r}: {err}"
        ) from None
    got = fresh.spec_of(name)
    if [list(s) for s in got.shapes] != [list(s) for s in spec["shapes"]] or list(
        got.kinds
    ) != list(spec["kinds"]):
        raise ValueError(
            f"`model` does not match the adapter {str(config)!r}: layers {list(got.kinds)} of "
            f"shapes {[list(s) for s in got.shapes]}, file {spec['kinds']} {spec['shapes']}."
        )
    if spec["method"] == "tfb":
        fresh = tfb_bayesianize(fresh, 0.0, name=name)
    try:
        stored = load_file(str(tensors))
    except (SafetensorError, OSError) as err:
        raise ValueError(
            f"adapter file {str(tensors)!r} is not a safetensors file: {err}."
        ) from None
    entries = _entries(fresh, name)
    want = {k: get(fresh) for k, get in entries}
    if sorted(want) != sorted(stored):
        raise ValueError(
            f"{str(tensors)!r} holds arrays {sorted(stored)} but the adapter has {sorted(want)}."
        )
    for k, leaf in want.items():
        if stored[k].shape != leaf.shape or stored[k].dtype != leaf.dtype:
            raise ValueError(
                f"array {k!r} in {str(tensors)!r} has shape {stored[k].shape} and "
                f"dtype {stored[k].dtype}; the adapter needs {leaf.shape} and "
                f"{leaf.dtype}."
            )
    return eqx.tree_at(
        lambda a: [get(a) for _, get in entries],
        fresh,
        [jnp.asarray(stored[k]) for k, _ in entries],
    )
