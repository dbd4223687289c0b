"""LoRA (Hu et al. 2022, arXiv 2106.09685), rsLoRA scaling (Kalajdzievskaya 2023, arXiv 2312.03732).

``h = W0 x + s B A x`` with ``A in R^{r x n}``, ``B in R^{m x r}`` and ``s = alpha / r`` (rsLoRA:
``s = alpha / sqrt(r)``). Init as PEFT's default: ``A ~ U(-1/sqrt(n), 1/sqrt(n))`` (Kaiming-uniform
with a = sqrt(5)), ``B = 0``, so the update is zero at step 0; ``init="gaussian"`` draws
``A ~ N(0, 1/r^2)`` (PEFT ``init_lora_weights="gaussian"``). Trainable count ``r (m + n)``.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from _core.validation import check_choice, check_int, check_scalar

from ._core import AdapterLayer, _check_rank, register_method

__all__ = ["LoRALinear", "lora_scale"]


def lora_scale(r: int, alpha: float, rslora: bool = False) -> float:
    """``alpha / r`` (LoRA, Hu et al. 2022, Sec. 4.1) or ``alpha / sqrt(r)`` (rsLoRA, Thm 3.2).

    >>> lora_scale(8, 16.0), lora_scale(4, 16.0, rslora=True)
    (2.0, 8.0)
    """
    r = check_int(r, "r", lower=1)
    alpha = check_scalar(alpha, "alpha", lower=0, closed="neither")
    if not isinstance(rslora, bool):
        raise TypeError(f"`rslora` must be a bool; got {rslora!r}.")
    return alpha / math.sqrt(r) if rslora else alpha / r


@register_method("lora")
class LoRALinear(AdapterLayer):
    """LoRA on one layer (Hu et al. 2022, Sec. 4.1): ``A (r, fan_in)`` and ``B (out, r)``
    trainable."""

    A: jax.Array
    B: jax.Array
    scale: float = eqx.field(static=True)

    options = ("r", "alpha", "rslora", "init")

    @classmethod
    def complete_config(cls, config, shapes):
        r = _check_rank(config.get("r", 8), shapes)
        alpha = check_scalar(config.get("alpha", float(r)), "alpha", lower=0, closed="neither")
        rslora = config.get("rslora", False)
        if not isinstance(rslora, bool):
            raise TypeError(f"`rslora` must be a bool; got {rslora!r}.")
        init = check_choice(config.get("init", "kaiming"), "init", ("kaiming", "gaussian"))
        return {"r": r, "alpha": alpha, "rslora": rslora, "init": init}

    @classmethod
    def build(cls, w, *, key, r, alpha, rslora, init, **_):
        (m, n), dt = w.shape, w.dtype
        if init == "kaiming":
            a = jax.random.uniform(key, (r, n), dt, -1 / math.sqrt(n), 1 / math.sqrt(n))
        else:
            a = jax.random.normal(key, (r, n), dt) / r
        return cls((m, n), a, jnp.zeros((m, r), dt), lora_scale(r, alpha, rslora))

    @classmethod
    def num_params(cls, shapes, *, r, **_):
        """``sum_l r (m_l + n_l)``."""
        return sum(r * (m + n) for m, n in shapes)

    def delta_weight(self, ctx):
        return self.scale * (self.B @ self.A)

    def delta(self, x, ctx, *, key=None):
        return self.scale * ((x @ self.A.T) @ self.B.T)
