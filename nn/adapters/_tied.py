"""Tied-LoRA (Renduchintala, Konuk & Kuchaiev, NAACL 2024, arXiv 2311.09578).

``Delta W_l = diag(u_l) B[:m] diag(v_l) A[:, :n]`` with ``A (r, n_max)``, ``B (m_max, r)`` **tied
across all layers** (``adapted.shared``) and per-layer scaling vectors ``u_l in R^m``,
``v_l in R^r``. ``train_ab=True`` trains the tied ``A, B`` too (bilinear in the parameters, not a
projection); ``train_ab=False`` freezes them and is then the one-nonzero projection of VeRA
(:func:`nn.adapters.vera_projection`; tested in ``tests/nn/adapters/test_unilora.py``).
Init [unverified against the paper's variant table]: ``A, B`` Kaiming-uniform, ``u = 0`` (so
``Delta W = 0`` at step 0), ``v = 1``. Count ``sum_l (m_l + r)`` plus ``r (m_max + n_max)`` when
``train_ab``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._core import AdapterLayer, _check_rank, register_method
from ._unilora import kaiming_uniform_bases

__all__ = ["TiedLoRALinear"]


@register_method("tied_lora")
class TiedLoRALinear(AdapterLayer):
    """Tied-LoRA layer (arXiv 2311.09578): trainable ``u (out,)``, ``v (r,)``; tied ``A, B`` in
    ``shared``."""

    u: jax.Array
    v: jax.Array

    options = ("r", "train_ab")

    @classmethod
    def complete_config(cls, config, shapes):
        r = _check_rank(config.get("r", 8), shapes)
        train_ab = config.get("train_ab", True)
        if not isinstance(train_ab, bool):
            raise TypeError(f"`train_ab` must be a bool; got {train_ab!r}.")
        return {"r": r, "train_ab": train_ab}

    @classmethod
    def build_shared(cls, shapes, *, key, dtype, r, train_ab, **_):
        m_max = max(m for m, _ in shapes)
        n_max = max(n for _, n in shapes)
        a, b = kaiming_uniform_bases(r, m_max, n_max, key=jax.random.fold_in(key, 1), dtype=dtype)
        return {"A": a, "B": b}

    @classmethod
    def frozen_shared(cls, config):
        return () if config["train_ab"] else ("A", "B")

    @classmethod
    def build(cls, w, *, r, **_):
        return cls(w.shape, jnp.zeros(w.shape[0], w.dtype), jnp.ones(r, w.dtype))

    @classmethod
    def num_params(cls, shapes, *, r, train_ab, **_):
        """``sum_l (m_l + r)`` (+ ``r (m_max + n_max)`` when the tied bases train)."""
        tied = r * (max(m for m, _ in shapes) + max(n for _, n in shapes)) if train_ab else 0
        return sum(m + r for m, _ in shapes) + tied

    def _ab(self, ctx):
        m, n = self.shape
        return ctx["A"][:, :n], ctx["B"][:m]

    def delta_weight(self, ctx):
        a, b = self._ab(ctx)
        return (self.u[:, None] * b * self.v[None, :]) @ a

    def delta(self, x, ctx, *, key=None):
        a, b = self._ab(ctx)
        return (((x @ a.T) * self.v) @ b.T) * self.u
