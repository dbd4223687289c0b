"""Method-independent adapter machinery: inject, bind, merge, counting, stable rank.

An adapted model is an :class:`Adapted` module holding

* ``model``: the user's model in which every targeted :class:`nn.Linear` is replaced by an
  :class:`AdapterLayer` (its base layer wrapped in :class:`nn.Frozen`), and every other floating
  array wrapped in :class:`nn.Frozen` (except the ones selected by ``train=``);
* ``shared``: a dict of arrays shared by all adapted layers (Uni-LoRA's single vector, VeRA's
  shared bases, VB-LoRA's vector bank), trainable or :class:`nn.Frozen`;
* ``spec``: static metadata (method, its configuration, target paths, seeds) from which
  :func:`nn.adapters.load_adapter` rebuilds the frozen parts bit-identically.

Calling ``Adapted`` binds each adapter layer to ``shared`` (and to an optional context such as a
task id) and runs the model, so ``nn.split`` / ``nn.train`` work on it unchanged: optax only ever
sees the trainable leaves.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from collections.abc import Sequence
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import nn as _nn
from theory._validation import check_choice, check_int

__all__ = [
    "AdapterLayer",
    "Adapted",
    "AdapterSpec",
    "inject",
    "merge",
    "delta_weights",
    "linear_paths",
    "stable_rank",
    "METHODS",
    "register_method",
]

METHODS: dict[str, Any] = {}


def register_method(name: str):
    """Class decorator registering an adapter method under ``name`` (used by inject and load)."""

    def deco(cls):
        if name in METHODS:
            raise ValueError(f"adapter method {name!r} is registered twice")
        cls.method = name
        METHODS[name] = cls
        return cls

    return deco


class AdapterLayer(eqx.Module):
    """Base class of an adapted :class:`nn.Linear`: ``y = base(x) + delta(x)``.

    Subclasses define ``build(base, *, key, ctx, **config)`` (classmethod), ``delta_weight(ctx)``
    (the ``(out, in)`` update, a closed-form function of the parameters) and, where cheaper than
    ``x @ delta_weight.T``, ``delta(x, ctx)``. ``ctx`` is the dict of shared arrays plus the call
    context (for instance ``task``).
    """

    base: _nn.Frozen
    method: ClassVar[str] = "abstract"
    mergeable: ClassVar[bool] = True
    context_keys: ClassVar[tuple] = ()

    @classmethod
    def check_config(cls, config: dict, linears: list) -> dict:
        """Validate and complete the hyperparameters (defaults filled in)."""
        return config

    @classmethod
    def build_shared(cls, shapes, *, key, dtype, **config) -> dict:
        """Arrays shared by all adapted layers (default: none), of the weights' ``dtype``."""
        return {}

    @property
    def linear(self) -> _nn.Linear:
        return self.base.value

    @property
    def shape(self) -> tuple[int, int]:
        return (self.linear.out_features, self.linear.in_features)

    def delta_weight(self, ctx):  # pragma: no cover - abstract
        raise NotImplementedError

    def delta(self, x, ctx, *, key=None):
        return x @ self.delta_weight(ctx).T

    def forward(self, x, ctx, *, key=None):
        return self.base(x, key=key) + self.delta(x, ctx, key=key)


class _Bound(eqx.Module):
    """An adapter layer bound to its shared arrays and call context (built at call time)."""

    layer: AdapterLayer
    ctx: dict

    def __call__(self, x, *, key=None):
        return self.layer.forward(x, self.ctx, key=key)


def _is_adapter(n) -> bool:
    return isinstance(n, AdapterLayer)


def _shared_values(shared):
    return {k: _nn.value(v) for k, v in shared.items()}


@dataclasses.dataclass(frozen=True)
class AdapterSpec:
    """Static description of an adapter: enough to rebuild every frozen array from seeds.

    ``targets`` are the dotted paths of the adapted layers, ``shapes`` their ``(out, in)``,
    ``train`` the extra trainable paths, ``key_data`` the raw bits of the PRNG key given to
    :func:`inject`, ``config`` the method's hyperparameters (JSON-serialisable).
    """

    method: str
    config: tuple
    targets: tuple
    shapes: tuple
    train: tuple
    key_data: tuple

    @property
    def config_dict(self) -> dict:
        return dict(self.config)

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        d["config"] = dict(self.config)
        return json.dumps(d, sort_keys=True)


class Adapted(eqx.Module):
    """A model with adapters injected (see :func:`inject`). Call it like the model.

    Extra keyword ``task`` (or any keyword listed in the method's ``context_keys``) is passed to
    the adapter layers instead of the model (MoORE's task id).
    """

    model: Any
    shared: dict
    spec: AdapterSpec = eqx.field(static=True)

    def bind(self, **context):
        """The model with adapter layers bound to ``shared`` and ``context``: a plain callable."""
        ctx = {**_shared_values(self.shared), **context}
        return jax.tree.map(
            lambda n: _Bound(n, ctx) if _is_adapter(n) else n, self.model, is_leaf=_is_adapter
        )

    def __call__(self, *args, **kwargs):
        keys = METHODS[self.spec.method].context_keys
        context = {k: kwargs.pop(k) for k in list(kwargs) if k in keys}
        return self.bind(**context)(*args, **kwargs)

    def layers(self) -> dict[str, AdapterLayer]:
        """The adapter layers by dotted path."""
        out = {}
        for path, node in _flatten(self.model, _is_adapter):
            if _is_adapter(node):
                out[path] = node
        return out


# ---------------------------------------------------------------------------- paths and targets


def _key_str(k) -> str:
    if isinstance(k, jax.tree_util.GetAttrKey):
        return k.name
    if isinstance(k, jax.tree_util.SequenceKey):
        return str(k.idx)
    if isinstance(k, jax.tree_util.DictKey):
        return str(k.key)
    if isinstance(k, jax.tree_util.FlattenedIndexKey):
        return str(k.key)
    return str(k)


def _flatten(tree, is_leaf):
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)
    return [(".".join(_key_str(k) for k in path), node) for path, node in flat]


def _getter(path_keys):
    def get(tree):
        for k in path_keys:
            if isinstance(k, jax.tree_util.GetAttrKey):
                tree = getattr(tree, k.name)
            elif isinstance(k, jax.tree_util.SequenceKey):
                tree = tree[k.idx]
            elif isinstance(k, jax.tree_util.DictKey):
                tree = tree[k.key]
            else:
                raise TypeError(f"cannot follow path key {k!r}")
        return tree

    return get


def _is_linear(n) -> bool:
    return isinstance(n, _nn.Linear)


def linear_paths(model) -> list[str]:
    """Dotted paths of every :class:`nn.Linear` in ``model`` (the names ``targets`` matches)."""
    return [p for p, n in _flatten(model, _is_linear) if _is_linear(n)]


def _match(patterns: Sequence[str], path: str) -> bool:
    last = path.rsplit(".", 1)[-1]
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(last, p) for p in patterns)


def _as_patterns(x, name) -> tuple[str, ...]:
    if x is None:
        return ()
    if isinstance(x, str):
        x = [x]
    x = tuple(x)
    if not x or not all(isinstance(p, str) and p for p in x):
        raise ValueError(f"`{name}` must be a non-empty string or list of strings; got {x!r}.")
    return x


def inject(model, method: str, targets="all-linear", *, key, train=None, **config) -> Adapted:
    """Replace the selected :class:`nn.Linear` layers of ``model`` by adapter layers.

    Parameters
    ----------
    model : equinox module containing :class:`nn.Linear` layers (e.g. :class:`nn.MLP`,
        :class:`nn.TransformerLM`).
    method : str
        One of ``nn.adapters.METHODS``: "lora", "polar", "unilora", "vera", "tied_lora",
        "vblora", "ravan", "moore".
    targets : "all-linear", a glob, or a list of globs
        Matched against each Linear's dotted path (``"blocks.0.attn.q_proj"``) and against its
        last component (``"q_proj"``); see :func:`linear_paths`. Every pattern must match.
    key : PRNG key (keyword-only); layer ``i`` (in path order) uses ``fold_in(key, i)``.
    train : glob or list of globs, optional
        Paths of other floating arrays left trainable (e.g. ``"head.*"``); all others are frozen.
    **config
        The method's hyperparameters (``r``, ``alpha``, ...; see each method's class).

    Returns
    -------
    Adapted
        ``nn.count_params(adapted)`` is the trainable count; ``adapted(x)`` the adapted forward.
    """
    if method not in METHODS:
        check_choice(method, "method", METHODS)
    cls = METHODS[method]
    flat = jax.tree_util.tree_flatten_with_path(model, is_leaf=_is_linear)[0]
    lin = [(".".join(_key_str(k) for k in p), p, n) for p, n in flat if _is_linear(n)]
    if not lin:
        raise ValueError("`model` contains no nn.Linear layer to adapt.")
    if targets == "all-linear":
        chosen = lin
    else:
        pats = _as_patterns(targets, "targets")
        for p in pats:
            if not any(_match([p], s) for s, _, _ in lin):
                raise ValueError(
                    f"`targets` pattern {p!r} matches no nn.Linear; the Linear paths are "
                    f"{[s for s, _, _ in lin]}."
                )
        chosen = [t for t in lin if _match(pats, t[0])]
    train_pats = _as_patterns(train, "train")
    config = cls.check_config(config, [n for _, _, n in chosen])
    shapes = tuple((n.out_features, n.in_features) for _, _, n in chosen)
    skey = jax.random.fold_in(key, 2**31 - 1)
    dtype = jnp.result_type(*(_nn.value(n.weight).dtype for _, _, n in chosen))
    shared = cls.build_shared(shapes, key=skey, dtype=dtype, **config)
    layers = [
        cls.build(
            n, key=jax.random.fold_in(key, i), shared_key=skey, index=i, shapes=shapes, **config
        )
        for i, (_, _, n) in enumerate(chosen)
    ]
    getters = [_getter(p) for _, p, _ in chosen]
    model = eqx.tree_at(lambda m: [g(m) for g in getters], model, layers)

    def freeze_leaf(path, leaf):
        if not eqx.is_inexact_array(leaf):
            return leaf
        s = ".".join(_key_str(k) for k in path)
        return leaf if train_pats and _match(train_pats, s) else _nn.Frozen(leaf)

    def freeze(path, node):
        if _is_adapter(node) or isinstance(node, _nn.Frozen):
            return node
        return freeze_leaf(path, node)

    model = jax.tree_util.tree_map_with_path(
        freeze, model, is_leaf=lambda n: _is_adapter(n) or isinstance(n, _nn.Frozen)
    )
    spec = AdapterSpec(
        method=method,
        config=tuple(sorted(config.items())),
        targets=tuple(s for s, _, _ in chosen),
        shapes=shapes,
        train=train_pats,
        key_data=_key_bits(key),
    )
    return Adapted(model, shared, spec)


def _key_bits(key) -> tuple:
    if jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return tuple(int(v) for v in np.asarray(key).ravel())


def _merged_linear(layer: AdapterLayer, ctx):
    base = layer.linear
    w = _nn.value(base.weight)
    return eqx.tree_at(lambda m: m.weight, base, w + layer.delta_weight(ctx).astype(w.dtype))


def merge(adapted: Adapted, **context):
    """Fold every update into its dense weight and drop all adapter machinery.

    Returns the plain model (every :class:`nn.Frozen` wrapper removed, as PEFT's
    ``merge_and_unload``) whose outputs equal ``adapted``'s: ``W = W0 + delta_weight`` with
    ``delta_weight`` the same closed form the unmerged forward uses.
    """
    if not isinstance(adapted, Adapted):
        raise TypeError(f"`adapted` must be an Adapted model; got {type(adapted).__name__}.")
    cls = METHODS[adapted.spec.method]
    if not cls.mergeable:
        raise ValueError(
            f"`adapted` uses {cls.method!r}, whose weight depends on the input: not mergeable."
        )
    ctx = {**_shared_values(adapted.shared), **context}
    model = jax.tree.map(
        lambda n: _merged_linear(n, ctx) if _is_adapter(n) else n,
        adapted.model,
        is_leaf=_is_adapter,
    )
    return _nn.unfreeze(model)


def delta_weights(adapted: Adapted, **context) -> dict[str, jax.Array]:
    """The ``(out, in)`` update of every adapted layer, by dotted path."""
    ctx = {**_shared_values(adapted.shared), **context}
    return {p: layer.delta_weight(ctx) for p, layer in adapted.layers().items()}


def stable_rank(m) -> jax.Array:
    """``sr(M) = ||M||_F^2 / ||M||_2^2`` over the last two axes (PoLAR, arXiv 2506.03133, Sec. 2).

    ``1 <= sr(M) <= rank(M)``; the zero matrix gets 0 (never NaN).
    """
    m = jnp.asarray(m)
    if m.ndim < 2:
        raise ValueError(f"`m` must be a matrix (ndim >= 2); got shape {m.shape}.")
    s = jnp.linalg.svd(m, compute_uv=False)
    top = s[..., 0] ** 2
    fro = jnp.sum(s**2, axis=-1)
    return jnp.where(top > 0, fro / jnp.where(top > 0, top, 1.0), 0.0)


def _check_rank(r, linears, name="r"):
    r = check_int(r, name, lower=1)
    for lin in linears:
        k = min(lin.out_features, lin.in_features)
        if r > k:
            raise ValueError(
                f"`{name}` must be at most min(out, in) = {k} for a layer of shape "
                f"({lin.out_features}, {lin.in_features}); got {r}."
            )
    return r

