"""Method-independent adapter machinery: inject, named adapters, masks, merge, unload.

:func:`inject` returns an :class:`Adapted` module holding

* ``model``: the user's model, every targeted layer replaced by an :class:`AdaptedLayer` that keeps
  the layer itself (``base``, untouched, so any equinox layer keeps working) and a dict of named
  adapters (``adapters[name]``, an :class:`AdapterLayer` of the method's parameters);
* ``banks``: per adapter name, the arrays its layers share (Uni-LoRA's single vector, VeRA's
  bases, VB-LoRA's vector bank);
* ``specs`` (static): per adapter name, the method, configuration, target paths, shapes and the
  PRNG key, from which :func:`nn.adapters.load_adapter` rebuilds every frozen array;
* ``active`` and ``enabled`` (static): which adapters act, and whether any does.

What trains is a mask beside the model (:meth:`Adapted.trainable_mask`; ``nn.split(adapted)``
uses it): the active adapters' own parameters and the base leaves named by ``train=``; the base
and every inactive adapter stay frozen. The PEFT workflow in JAX terms: ``inject(..., name=...)``
adds a named adapter (PEFT ``add_adapter``), :meth:`Adapted.set_active` (``set_adapter``),
:meth:`Adapted.disable` / :func:`disabled` (``disable_adapter``), :func:`unload` and
:func:`merge` (``merge_and_unload``); each returns a new module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
from collections.abc import Sequence
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.validation import as_array, check_choice, check_int, check_key, check_scalar

from ._targets import Target, target_of

__all__ = [
    "AdapterLayer",
    "AdaptedLayer",
    "Adapted",
    "AdapterSpec",
    "inject",
    "merge",
    "unload",
    "disabled",
    "delta_weights",
    "target_paths",
    "stable_rank",
    "METHODS",
    "register_method",
]

METHODS: dict[str, Any] = {}
DEFAULT = "default"


def register_method(name: str):
    """Class decorator registering an adapter method under ``name`` (used by inject and load)."""

    def deco(cls):
        old = METHODS.get(name)
        same = old is not None and (old.__module__, old.__qualname__) == (
            cls.__module__,
            cls.__qualname__,
        )
        if old is not None and not same:
            raise ValueError(f"adapter method {name!r} is registered twice")
        cls.method = name
        if not same:  # a module imported twice (pytest's importlib mode) keeps the first class
            METHODS[name] = cls
        return cls

    return deco


class AdapterLayer(eqx.Module):
    """One method's parameters for one layer seen as ``W (out, fan_in)`` (``shape``).

    Subclasses define ``build(w, *, key, bias, index, shapes, shared_key, **config)``
    (classmethod; ``w`` the layer's matrix), ``delta_weight(ctx)`` (the ``(out, fan_in)`` update,
    a closed form of the parameters) and, where cheaper than ``x @ delta_weight.T``,
    ``delta(x, ctx, key=None)``; ``x`` is ``(..., fan_in)``. ``ctx`` is the dict of shared arrays
    plus the call context (e.g. ``task``). ``frozen`` names the fields that never train,
    ``frozen_shared(config)`` the shared arrays that never train, ``saved`` the fields an adapter
    file stores (default: the trainable ones; frozen ones are regenerated from the key).
    A method with ``replaces_base`` computes the whole layer output in ``forward``.
    ``options`` names the hyperparameters the method accepts; :meth:`check_config` rejects any
    other before the method's own :meth:`complete_config` validates them.
    """

    shape: tuple = eqx.field(static=True)
    method: ClassVar[str] = "abstract"
    mergeable: ClassVar[bool] = True
    replaces_base: ClassVar[bool] = False
    context_keys: ClassVar[tuple] = ()
    frozen: ClassVar[tuple] = ()
    saved: ClassVar[tuple | None] = None
    options: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def check_config(cls, config: dict, shapes: list) -> dict:
        """Validate and complete the hyperparameters (defaults filled in)."""
        unknown = sorted(set(config) - set(cls.options))
        if unknown:
            raise ValueError(
                f"`config` of method {cls.method!r} takes the options {list(cls.options)}; got "
                f"unknown option(s) {unknown}."
            )
        return cls.complete_config(config, shapes)

    @classmethod
    def complete_config(cls, config: dict, shapes: list) -> dict:
        """The method's checks and defaults on known options (default: none)."""
        return config

    @classmethod
    def build_shared(cls, shapes, *, key, dtype, **config) -> dict:
        """Arrays shared by all adapted layers (default: none), of the weights' ``dtype``."""
        return {}

    @classmethod
    def frozen_shared(cls, config: dict) -> tuple:
        """Names of the shared arrays that never train."""
        return ()

    def delta_weight(self, ctx):  # pragma: no cover - abstract
        raise NotImplementedError

    def delta(self, x, ctx, *, key=None):
        return x @ self.delta_weight(ctx).T

    def trainable_mask(self):
        """Bool pytree over this layer: True at inexact arrays of fields not in ``frozen``."""
        return jax.tree_util.tree_map_with_path(
            lambda p, x: eqx.is_inexact_array(x) and p[0].name not in self.frozen, self
        )

    def saved_fields(self) -> tuple:
        if self.saved is not None:
            return self.saved
        return tuple(
            f.name
            for f in dataclasses.fields(self)
            if not f.metadata.get("static") and f.name not in self.frozen
        )


class AdaptedLayer(eqx.Module):
    """A targeted layer: the user's ``base`` layer, unchanged, and its named ``adapters``."""

    base: Any
    adapters: dict
    target: Target = eqx.field(static=True)


def _is_slot(n) -> bool:
    return isinstance(n, AdaptedLayer)


def _dropout(x, p, key):
    keep = jax.random.bernoulli(key, 1.0 - p, x.shape)
    return jnp.where(keep, x / (1.0 - p), jnp.zeros_like(x))


class _Bound(eqx.Module):
    """An adapted layer bound to its adapters' contexts (built at call time)."""

    slot: AdaptedLayer
    ctxs: dict
    key: Any
    active: tuple = eqx.field(static=True)
    dropout: tuple = eqx.field(static=True)

    def __call__(self, x, *, key=None, **kwargs):
        slot, t = self.slot, self.slot.target
        names = [n for n in self.active if n in slot.adapters]
        base = slot.base if key is None else (lambda z, **kw: slot.base(z, key=key, **kw))
        if not names:
            return base(x, **kwargs)
        key = self.key if key is None else key
        xm = t.inputs(slot.base, x)
        repl = [n for n in names if slot.adapters[n].replaces_base]
        if len(repl) > 1:
            raise ValueError(f"adapters {repl} both replace the same base layer; activate one.")
        if repl:
            y = t.outputs(slot.adapters[repl[0]].forward(xm, self.ctxs[repl[0]], key=key))
        else:
            y = base(x, **kwargs)
        drop = dict(self.dropout)
        delta = None
        for n in names:
            if n in repl:
                continue
            xi = xm
            if drop[n] > 0 and key is not None:
                xi = _dropout(xm, drop[n], jax.random.fold_in(key, 1))
            d = slot.adapters[n].delta(xi, self.ctxs[n], key=key)
            delta = d if delta is None else delta + d
        return y if delta is None else y + t.outputs(delta).astype(y.dtype)


@dataclasses.dataclass(frozen=True)
class AdapterSpec:
    """Static description of one named adapter: enough to rebuild every frozen array from seeds.

    ``targets`` are the dotted paths of the adapted layers, ``kinds`` their target kinds,
    ``shapes`` their ``(out, fan_in)``, ``train`` the extra trainable base paths (globs),
    ``key_data`` the raw bits of the PRNG key given to :func:`inject`, ``config`` the method's
    hyperparameters (JSON-serialisable), ``dropout`` the adapter dropout rate.
    """

    method: str
    config: tuple
    targets: tuple
    shapes: tuple
    train: tuple
    key_data: tuple
    name: str = DEFAULT
    kinds: tuple = ()
    dropout: float = 0.0

    @property
    def config_dict(self) -> dict:
        return dict(self.config)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["config"] = dict(self.config)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


class Adapted(eqx.Module):
    """A model with named adapters (see :func:`inject`). Call it like the model.

    Keyword ``task`` (or any keyword in an active method's ``context_keys``) goes to the adapter
    layers instead of the model (MoORE's task id). ``key=`` goes to the model as usual; adapter
    dropout uses the key each layer receives, or, for a layer called without one (an equinox
    layer inside ``vmap``), ``fold_in(key, i)`` for the ``i``-th adapted layer (then shared by the
    vmapped positions). Without a key there is no dropout (evaluation mode).
    """

    model: Any
    banks: dict
    specs: tuple = eqx.field(static=True)
    active: tuple = eqx.field(static=True)
    enabled: bool = eqx.field(static=True, default=True)

    # -------------------------------------------------------------- names and the active adapter

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    def spec_of(self, name: str) -> AdapterSpec:
        for s in self.specs:
            if s.name == name:
                return s
        raise ValueError(f"`name` must be one of the adapters {list(self.names)}; got {name!r}.")

    def _one(self, name=None) -> str:
        if name is not None:
            self.spec_of(name)
            return name
        if len(self.active) != 1:
            raise ValueError(
                f"{len(self.active)} adapters are active {list(self.active)}: pass "
                "`name` to choose one."
            )
        return self.active[0]

    @property
    def spec(self) -> AdapterSpec:
        """The spec of the single active adapter."""
        return self.spec_of(self._one())

    @property
    def shared(self) -> dict:
        """The shared arrays of the single active adapter."""
        return self.banks[self._one()]

    def set_active(self, *names: str) -> Adapted:
        """The model with adapters ``names`` active (their updates add up) and enabled."""
        if not names:
            raise ValueError("`names` must name at least one adapter.")
        for n in names:
            self.spec_of(n)
        if len(set(names)) < len(names):  # an adapter active twice would add its update twice
            raise ValueError(f"`names` must name each adapter once; got {list(names)}.")
        return Adapted(self.model, self.banks, self.specs, tuple(names), True)

    def disable(self) -> Adapted:
        """The model with every adapter off (the base model's outputs); :meth:`enable` undoes."""
        return Adapted(self.model, self.banks, self.specs, self.active, False)

    def enable(self) -> Adapted:
        return Adapted(self.model, self.banks, self.specs, self.active, True)

    # -------------------------------------------------------------- masks and calls

    def trainable_mask(self):
        """Bool pytree over ``self``: the active adapters' trainable leaves, their trainable
        shared arrays and the base leaves matching their ``train`` globs."""
        active = set(self.active)
        pats = tuple(p for s in self.specs if s.name in active for p in s.train)

        def plain(prefix, tree):
            def leaf(path, x):
                s = ".".join(filter(None, [prefix, _path_str(path)]))
                return eqx.is_inexact_array(x) and bool(pats) and _match(pats, s)

            return jax.tree_util.tree_map_with_path(leaf, tree)

        def node(path, n):
            if not _is_slot(n):
                return plain(_path_str(path), n)
            ads = {
                k: a.trainable_mask() if k in active else jax.tree.map(lambda _: False, a)
                for k, a in n.adapters.items()
            }
            return AdaptedLayer(plain(_path_str(path), n.base), ads, n.target)

        model = jax.tree_util.tree_map_with_path(node, self.model, is_leaf=_is_slot)
        banks = {}
        for k, bank in self.banks.items():
            spec = self.spec_of(k)
            fz = METHODS[spec.method].frozen_shared(spec.config_dict)
            banks[k] = {
                b: eqx.is_inexact_array(v) and k in active and b not in fz for b, v in bank.items()
            }
        return Adapted(model, banks, self.specs, self.active, self.enabled)

    def bind(self, *, key=None, **context):
        """The model with adapted layers bound to their shared arrays and ``context``."""
        active = self.active if self.enabled else ()
        ctxs = {n: {**self.banks[n], **context} for n in active}
        drop = tuple((s.name, s.dropout) for s in self.specs)
        count = iter(range(10**9))

        def bind_one(n):
            if not _is_slot(n):
                return n
            i = next(count)
            k = None if key is None else jax.random.fold_in(key, i)
            return _Bound(n, ctxs, k, active, drop)

        return jax.tree.map(bind_one, self.model, is_leaf=_is_slot)

    def __call__(self, *args, **kwargs):
        keys = {
            k for s in self.specs if s.name in self.active for k in METHODS[s.method].context_keys
        }
        context = {k: kwargs.pop(k) for k in list(kwargs) if k in keys}
        return self.bind(key=kwargs.get("key"), **context)(*args, **kwargs)

    def layers(self, name: str | None = None) -> dict[str, AdapterLayer]:
        """The adapter ``name``'s layers (default: the single active adapter) by dotted path."""
        name = self._one(name)
        return {
            p: n.adapters[name]
            for p, n in _flatten(self.model, _is_slot)
            if _is_slot(n) and name in n.adapters
        }


def disabled(adapted: Adapted) -> contextlib.AbstractContextManager:
    """``with disabled(adapted) as base: ...``: the model with every adapter off (``adapted`` is
    checked at the call, not only on entering the context)."""
    _check_adapted(adapted)
    return contextlib.nullcontext(adapted.disable())


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


def _path_str(path) -> str:
    return ".".join(_key_str(k) for k in path)


def _flatten(tree, is_leaf):
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_leaf)
    return [(_path_str(path), node) for path, node in flat]


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


def _is_target(n) -> bool:
    return _is_slot(n) or target_of(n) is not None


def _targets(model):
    """``[(path, path_keys, base layer, Target, slot or None)]`` of every adaptable layer."""
    flat = jax.tree_util.tree_flatten_with_path(model, is_leaf=_is_target)[0]
    out = []
    for p, n in flat:
        if _is_slot(n):
            out.append((_path_str(p), p, n.base, n.target, n))
        elif _is_target(n):
            out.append((_path_str(p), p, n, target_of(n), None))
    return out


def target_paths(model) -> dict[str, str]:
    """``{dotted path: kind}`` of every adaptable layer of ``model`` (the names ``targets``
    matches; kinds "linear", "conv", "embedding")."""
    if isinstance(model, Adapted):
        model = model.model
    if not isinstance(model, eqx.Module):
        raise TypeError(f"`model` must be an equinox Module; got {type(model).__name__}.")
    return {p: t.kind for p, _, _, t, _ in _targets(model)}


def _match(patterns: Sequence[str], path: str) -> bool:
    last = path.rsplit(".", 1)[-1]
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(last, p) for p in patterns)


def _as_patterns(x, name) -> tuple[str, ...]:
    if x is None:
        return ()
    if isinstance(x, str):
        x = [x]
    if not isinstance(x, list | tuple):
        raise TypeError(f"`{name}` must be a string or a list of strings; got {x!r}.")
    x = tuple(x)
    if not x or not all(isinstance(p, str) and p for p in x):
        raise ValueError(f"`{name}` must be a non-empty string or list of strings; got {x!r}.")
    return x


def _check_adapted(adapted, who="adapted"):
    if not isinstance(adapted, Adapted):
        raise TypeError(f"`{who}` must be an Adapted model; got {type(adapted).__name__}.")


def inject(
    model,
    method: str,
    targets: str | Sequence[str] = "all-linear",
    *,
    key,
    name: str | None = None,
    train=None,
    dropout: float = 0.0,
    **config,
) -> Adapted:
    """Add adapter ``name`` of ``method`` to the selected layers of ``model``.

    Parameters
    ----------
    model : any equinox model (or an :class:`Adapted` one, to add a second named adapter).
        Adaptable layers: :class:`nn.Linear`, ``eqx.nn.Linear`` (e.g. the projections of
        ``eqx.nn.MultiheadAttention``), ``eqx.nn.Conv1d/2d/3d`` (``groups = 1``),
        :class:`nn.Embedding`, ``eqx.nn.Embedding`` (see :func:`target_paths`).
    method : str
        One of ``nn.adapters.METHODS``: "lora", "polar", "unilora", "vera", "tied_lora",
        "vblora", "ravan", "moore".
    targets : "all-linear", a glob, or a list of globs
        Matched against each layer's dotted path (``"blocks.0.attn.q_proj"``) and its last
        component (``"q_proj"``). "all-linear" takes every linear layer (not convolutions or
        embeddings). Every pattern must match.
    key : PRNG key (keyword-only); layer ``i`` (in path order) uses ``fold_in(key, i)``.
    name : the adapter's name (default "default"). Injecting into an :class:`Adapted` model needs
        a new ``name``: a second adapter is only ever added on purpose. The active adapter is not
        changed by adding one (PEFT's ``add_adapter``); use :meth:`Adapted.set_active`.
    train : glob or list of globs, optional
        Base paths left trainable while this adapter is active (e.g. ``"head.*"``).
    dropout : adapter dropout rate (PEFT ``lora_dropout``) on the adapter branch's input, applied
        when the model is called with a key.
    **config
        The method's hyperparameters (``r``, ``alpha``, ...; see each method's class).
    """
    if not isinstance(method, str) or method not in METHODS:
        check_choice(method, "method", tuple(METHODS))
    cls = METHODS[method]
    check_key(key)
    old = model if isinstance(model, Adapted) else None
    if old is not None:
        if name is None:
            raise ValueError(
                f"`model` already holds adapter(s) {list(old.names)}; pass `name` to add another "
                "(a second inject on adapted layers is never implicit)."
            )
        if name in old.names:
            raise ValueError(f"`name` {name!r} is already an adapter of `model`; choose a new one.")
        model = old.model
    elif any(_is_slot(n) for n in jax.tree.leaves(model, is_leaf=_is_slot)):
        raise ValueError(
            "`model` contains adapted layers but is not an Adapted model: pass the "
            "Adapted model itself (with a new `name`)."
        )
    name = DEFAULT if name is None else name
    if not isinstance(name, str) or not name or "." in name:
        raise ValueError(f"`name` must be a non-empty string without dots; got {name!r}.")
    dropout = check_scalar(dropout, "dropout", lower=0, upper=1, closed="left")
    if dropout > 0 and (cls.replaces_base or method == "tfb"):
        raise ValueError(f"`dropout` is not defined for {method!r}; got {dropout}.")
    found = _targets(model)
    if not found:
        raise ValueError("`model` contains no adaptable layer (Linear, Conv, Embedding).")
    if targets == "all-linear":
        chosen = [t for t in found if t[3].kind == "linear"]
        if not chosen:
            raise ValueError(
                "`model` has no linear layer for targets='all-linear'; the "
                f"adaptable layers are {target_paths(model)}."
            )
    else:
        if targets is None:
            raise TypeError("`targets` must be 'all-linear', a glob or a list of globs; got None.")
        pats = _as_patterns(targets, "targets")
        for p in pats:
            if not any(_match([p], t[0]) for t in found):
                raise ValueError(
                    f"`targets` pattern {p!r} matches no adaptable layer; the adaptable layers "
                    f"are {target_paths(model)}."
                )
        chosen = [t for t in found if _match(pats, t[0])]
    train_pats = _as_patterns(train, "train")
    weights = [tg.weight(b) for _, _, b, tg, _ in chosen]
    shapes = tuple(tuple(int(s) for s in w.shape) for w in weights)
    config = cls.check_config(config, list(shapes))
    skey = jax.random.fold_in(key, 2**31 - 1)
    dtype = jnp.result_type(*(w.dtype for w in weights))
    shared = cls.build_shared(shapes, key=skey, dtype=dtype, **config)
    new = []
    for i, ((_, _, b, tg, slot), w) in enumerate(zip(chosen, weights, strict=True)):
        layer = cls.build(
            w,
            key=jax.random.fold_in(key, i),
            bias=tg.bias(b),
            index=i,
            shapes=shapes,
            shared_key=skey,
            **config,
        )
        if slot is None:
            new.append(AdaptedLayer(b, {name: layer}, tg))
        else:
            new.append(AdaptedLayer(slot.base, {**slot.adapters, name: layer}, tg))
    getters = [_getter(p) for _, p, _, _, _ in chosen]
    model = eqx.tree_at(lambda m: [g(m) for g in getters], model, new)
    spec = AdapterSpec(
        method=method,
        config=tuple(sorted(config.items())),
        targets=tuple(t[0] for t in chosen),
        shapes=shapes,
        train=train_pats,
        key_data=_key_bits(key),
        name=name,
        kinds=tuple(t[3].kind for t in chosen),
        dropout=dropout,
    )
    if old is None:
        return Adapted(model, {name: shared}, (spec,), (name,), True)
    return Adapted(model, {**old.banks, name: shared}, (*old.specs, spec), old.active, old.enabled)


def _key_bits(key) -> tuple:
    if jnp.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return tuple(int(v) for v in np.asarray(key).ravel())


def merge(adapted: Adapted, **context):
    """Fold the active adapters into the dense weights and drop all adapter machinery.

    Returns the plain model (PEFT's ``merge_and_unload``) whose outputs equal ``adapted``'s:
    ``W = W0 + sum_a delta_weight_a`` written back in each layer's own layout, with
    ``delta_weight`` the same closed form the unmerged forward uses. A disabled model merges to
    the base (:func:`unload`).
    """
    _check_adapted(adapted)
    active = adapted.active if adapted.enabled else ()
    for n in active:
        cls = METHODS[adapted.spec_of(n).method]
        if not cls.mergeable:
            raise ValueError(
                f"adapter {n!r} uses {cls.method!r}, whose weight depends on the "
                "input: not mergeable."
            )
    ctxs = {n: {**adapted.banks[n], **context} for n in active}

    def fold(slot):
        if not _is_slot(slot):
            return slot
        t, w = slot.target, slot.target.weight(slot.base)
        ds = [slot.adapters[n].delta_weight(ctxs[n]) for n in active if n in slot.adapters]
        if not ds:
            return slot.base
        return t.with_weight(slot.base, w + sum(ds[1:], ds[0]).astype(w.dtype))

    return jax.tree.map(fold, adapted.model, is_leaf=_is_slot)


def unload(adapted: Adapted):
    """The base model: every adapted layer back to its original, adapters dropped (PEFT
    ``unload``)."""
    _check_adapted(adapted)
    return jax.tree.map(lambda n: n.base if _is_slot(n) else n, adapted.model, is_leaf=_is_slot)


def delta_weights(adapted: Adapted, *, name: str | None = None, **context) -> dict:
    """The ``(out, fan_in)`` update of every layer of adapter ``name`` (default: the active one),
    each method's ``Delta W`` as its module states it.

    >>> import nn
    >>> a = inject(nn.MLP(4, 2, 3, 1, key=jax.random.key(0)), "lora", key=jax.random.key(1), r=2)
    >>> {p: dw.shape for p, dw in delta_weights(a).items()}  # (out, fan_in)
    {'layers.0': (3, 4), 'layers.1': (2, 3)}
    >>> a = eqx.tree_at(lambda m: m.layers()["layers.0"].B, a, jnp.eye(3, 2))  # B = 0 at init
    >>> dw, x = delta_weights(a)["layers.0"], jnp.arange(4.0)
    >>> bool(jnp.allclose(a.layers()["layers.0"].delta(x, {}), dw @ x))  # the unmerged branch
    True
    """
    _check_adapted(adapted)
    name = adapted._one(name)
    ctx = {**adapted.banks[name], **context}
    return {p: layer.delta_weight(ctx) for p, layer in adapted.layers(name).items()}


def stable_rank(m) -> jax.Array:
    """``sr(M) = ||M||_F^2 / ||M||_2^2`` over the last two axes (PoLAR, arXiv 2506.03133, Sec. 2).

    ``1 <= sr(M) <= rank(M)``; the zero matrix gets 0 (never NaN).

    >>> float(stable_rank(jnp.diag(jnp.array([2.0, 1.0]))))  # (4 + 1) / 4
    1.25
    """
    m = jnp.asarray(as_array(m, "m"))
    if m.ndim < 2 or 0 in m.shape[-2:]:
        raise ValueError(f"`m` must be a non-empty matrix (ndim >= 2); got shape {m.shape}.")
    s = jnp.linalg.svd(m, compute_uv=False)
    top = s[..., :1]
    ratio = s / jnp.where(top > 0, top, 1.0)  # scaled by the top value: no overflow at 1e300
    return jnp.where(top[..., 0] > 0, jnp.sum(ratio**2, axis=-1), 0.0)


def _real_array(x, name, **checks) -> jax.Array:
    """``x`` as a JAX array of its own float dtype (ints become float), validated by
    :func:`as_array` (``checks``): fully when concrete, dtype and shape only when traced."""
    as_array(x, name, **checks)
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(float)


def _check_rank(r, shapes, name="r"):
    r = check_int(r, name, lower=1)
    for m, n in shapes:
        if r > min(m, n):
            raise ValueError(
                f"`{name}` must be at most min(out, in) = {min(m, n)} for a layer of shape "
                f"({m}, {n}); got {r}."
            )
    return r
