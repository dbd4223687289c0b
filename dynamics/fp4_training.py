"""FP4 training dynamics: the gradient-to-noise ratio step by step, the sqrt(3) crossing, and the
switch to quantisation-aware finetuning (QAF).

Source: Chmiel, Fishman, Banner & Soudry, "FP4 All the Way", NeurIPS 2025 (arXiv 2505.19115),
Sec. 4 (threshold ``|g| / (sigma_q sqrt d) = sqrt(3)``, :mod:`theory.fp4`), Fig. 5 (ratio monitored
during training; switching to higher-precision gradients when it crosses the threshold closes the
gap) and Sec. 5.2 (QAF: forward kept in FP4, backward in high precision).

QAF schedule (paper Sec. 5.2, "Quantization Aware Fine-tuning"): "During this stage, we reset the
learning rate and apply a short warmup (40 iterations) followed by a cosine decay schedule with an
initial peak learning rate". :func:`train_fp4` runs this with ``qaf_optimizer``, initialised fresh
at the switch step, e.g. ``optax.adamw(optax.warmup_cosine_decay_schedule(0.0, peak, 40,
qaf_steps))``. The paper does not say whether the optimiser state (Adam moments) is reset with the
learning rate. We reset it (a fresh ``qaf_optimizer.init``): the warm-up from zero is what makes a
fresh second-moment estimate safe (its first steps are tiny), and the moments accumulated in FP4
training carry the SR noise variance that the high-precision QAF gradients no longer have (the
ratio of Fig. 5 rises after the switch), so they would mis-scale the first QAF steps. The Fig. 5
threshold experiment itself states no learning-rate change at the switch; ``qaf_optimizer=None``
(the default) keeps the training optimiser and its state across the switch.

Measurement (one-sample estimate of the SR noise, unbiased for ``E|eps|^2``): at every step both the
FP4 gradient ``g_q`` (the :class:`nn.quant.QuantMatmul` recipe) and the high-precision gradient
``g_hp`` of the *same* forward pass (same FP4 forward, exact backward and update GEMMs) are
computed, and ``rho_t = |g_hp| / |g_q - g_hp|`` with global norms over all trainable leaves. The
crossing is the first step at which the mean of the last ``window`` ratios falls below the
threshold.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.core import Tracer
from tqdm.auto import tqdm

import nn
from _core.validation import (
    NumericalError,
    as_array,
    batch_source,
    check_bool,
    check_callable,
    check_choice,
    check_int,
    check_key,
    check_model,
    check_scalar,
    check_transform,
)
from nn.quant import QuantMatmul
from theory.fp4 import SQRT3

__all__ = ["MODES", "FP4TrainResult", "detect_crossing", "gradient_pair", "train_fp4"]

MODES = ("fqt", "backward", "none")
"""``"fqt"``: the paper's fully quantised recipe (QAF counterpart: FP4 forward, exact backward);
``"backward"``: exact forward, FP4 backward (Sec. 4's setting, counterpart: exact);
``"none"``: no quantisation (``rho`` is infinite)."""


def _configs(mode, fmt):
    fqt = QuantMatmul.fqt(fmt)  # checks `fmt` whichever mode uses it
    if mode == "fqt":
        return fqt, QuantMatmul.qaf(fmt)
    if mode == "backward":
        return QuantMatmul.backward_only(fmt), None
    return None, None


def _check_call(model, loss_fn, key):
    check_model(model)
    check_callable(loss_fn, "loss_fn")
    check_key(key)


def _finite_tree(tree, what):
    """Raise :class:`NumericalError` when a leaf of ``tree`` is NaN or infinite (concrete leaves
    only: under ``jit``/``vmap`` nothing can be raised)."""
    bad = [
        i for i, g in enumerate(jax.tree.leaves(tree))
        if eqx.is_inexact_array(g) and not isinstance(g, Tracer)
        and not bool(jnp.isfinite(g).all())
    ]  # fmt: skip
    if bad:
        raise NumericalError(
            f"{what} is not finite (leaves {bad}); check `loss_fn`, the model's parameters and "
            "the learning rate.",
            leaves=bad,
        )


def _check(mode, threshold, window):
    check_choice(mode, "mode", tuple(MODES))
    check_scalar(threshold, "threshold", lower=0.0, upper=1e100, closed="right")
    check_int(window, "window", lower=1, upper=10**9)


def detect_crossing(ratios, threshold=SQRT3, window=10):
    """First index ``t`` with ``mean(ratios[t - window + 1 : t + 1]) < threshold``, or None;
    ``ratios`` are gradient-to-noise ratios, >= 0 (+inf at a step without quantisation noise).

    The switch rule of Chmiel et al. 2025, Sec. 4 and Fig. 5: move to higher precision once the
    gradient-to-noise ratio falls below sqrt(3). The moving-average window is chosen here (the
    paper does not state one).

    Examples
    --------
    >>> detect_crossing([3.0, 2.0, 1.0, 1.0], window=2)  # mean(2, 1) = 1.5 < sqrt(3) first at t = 2
    2
    >>> detect_crossing([3.0, 2.0, np.inf], window=2) is None  # inf: a step without noise
    True
    """
    _check("none", threshold, window)
    r = as_array(ratios, "ratios", ndim=1, finite="nan", lower=0.0)  # +inf: no noise
    if len(r) < window:
        return None
    m = np.convolve(r, np.ones(window) / window, mode="valid")
    hit = np.flatnonzero(m < threshold)
    return None if hit.size == 0 else int(hit[0] + window - 1)


def _norm(tree):
    return optax.tree.norm(tree)


@functools.lru_cache(maxsize=32)
def _step_fn(loss_fn, optimizer, q_cfg, hp_cfg):
    # cached so that runs differing only in seed, data or switch rule share one compiled step
    @eqx.filter_jit
    def step(tr, fr, opt_state, batch, key, use_hp):
        def f(t, cfg):
            return loss_fn(nn.set_matmul(nn.combine(t, fr), cfg), batch, key=key)

        loss, g_hp = eqx.filter_value_and_grad(lambda t: f(t, hp_cfg))(tr)
        if q_cfg is None:
            g_q = g_hp
        else:
            _, g_q = eqx.filter_value_and_grad(lambda t: f(t, q_cfg))(tr)
        gn = _norm(g_hp)
        en = _norm(jax.tree.map(lambda a, b: a - b, g_q, g_hp))
        g = jax.tree.map(lambda a, b: jnp.where(use_hp, a, b), g_hp, g_q)
        updates, opt_state = optimizer.update(g, opt_state, tr)
        return eqx.apply_updates(tr, updates), opt_state, loss, gn, en

    return step


def gradient_pair(model, loss_fn, batch, *, key, fmt="nvfp4", mode="fqt"):
    """``(g_q, g_hp)``: FP4-recipe and high-precision gradients of one batch from the same
    forward."""
    _check(mode, SQRT3, 1)
    _check_call(model, loss_fn, key)
    tr, fr = nn.split(model)
    q_cfg, hp_cfg = _configs(mode, fmt)
    try:
        g_q, g_hp = _pair(tr, fr, loss_fn, batch, key, q_cfg, hp_cfg)
    except (TypeError, ValueError) as err:  # raised while tracing the user's loss on the batch
        raise type(err)(f"`loss_fn` failed on `model` and `batch`: {err}") from err
    _finite_tree(g_hp, "the high-precision gradient")
    _finite_tree(g_q, "the FP4 gradient")
    return g_q, g_hp


@eqx.filter_jit
def _pair(tr, fr, loss_fn, batch, key, q_cfg, hp_cfg):
    def grad(cfg):
        return eqx.filter_grad(
            lambda t: loss_fn(nn.set_matmul(nn.combine(t, fr), cfg), batch, key=key)
        )(tr)

    return (grad(q_cfg) if q_cfg is not None else grad(hp_cfg)), grad(hp_cfg)


@dataclasses.dataclass(frozen=True)
class FP4TrainResult:
    """Per-step ``losses``, ``grad_norms`` ``|g_hp|``, ``noise_norms`` ``|g_q - g_hp|``, ``ratios``;
    ``crossing_step`` (first windowed crossing of ``threshold``, or None), ``switch_step`` (first
    step updated with high-precision gradients, or None), final ``model`` and ``opt_state`` (the
    state of the optimiser in use at the end: ``qaf_optimizer``'s after a switch with one)."""

    model: object
    opt_state: object
    losses: np.ndarray
    grad_norms: np.ndarray
    noise_norms: np.ndarray
    threshold: float
    window: int
    crossing_step: int | None
    switch_step: int | None
    mode: str

    @property
    def ratios(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return self.grad_norms / self.noise_norms

    def summary(self) -> str:
        rows = [
            ("mode", self.mode),
            ("steps", len(self.losses)),
            ("final loss", f"{self.losses[-1]:.6g}" if len(self.losses) else "-"),
            ("threshold", f"{self.threshold:.4f}"),
            ("crossing step", self.crossing_step),
            ("switch step", self.switch_step),
        ]
        return (
            "FP4TrainResult\n" + "-" * 40 + "\n" + "\n".join(f"{k:<20}{v!s:>20}" for k, v in rows)
        )


def train_fp4(
    model,
    loss_fn,
    batches,
    optimizer,
    steps,
    *,
    key,
    fmt="nvfp4",
    mode="fqt",
    switch="threshold",
    threshold=SQRT3,
    window=10,
    qaf_optimizer=None,
    progress=True,
) -> FP4TrainResult:
    """Train with FP4 gradients, monitoring ``rho_t`` and optionally switching to high precision.

    Parameters
    ----------
    model : an :mod:`nn` model whose ``Linear`` layers get the FP4 ``matmul`` (their own hooks are
        overwritten).
    loss_fn, batches, optimizer, steps, key : as :func:`nn.train` (step ``t`` uses ``fold_in(key,
    t)``).
    fmt : ``"nvfp4"``, ``"mxfp4"`` or a :class:`nn.quant.BlockFormat`.
    mode : see :data:`MODES`.
    switch : ``"threshold"`` (switch to the high-precision gradient from the step after the
        windowed ratio first falls below ``threshold``: the paper's remedy), an int step, or None.
    threshold, window : the crossing rule (:func:`detect_crossing`).
    qaf_optimizer : None (keep ``optimizer`` and its state across the switch) or an
        ``optax.GradientTransformation`` initialised fresh at the switch step and used from there
        on: the paper's QAF learning-rate reset (module docstring). Its schedule counts from 0 at
        the switch, so a warm-up starting at 0 leaves the weights unchanged by the switch step.
    """
    _check(mode, threshold, window)
    _check_call(model, loss_fn, key)
    steps = check_int(steps, "steps", lower=0, upper=10**9)
    if isinstance(switch, str):
        check_choice(switch, "switch", ("threshold",))
    elif switch is not None:
        switch = check_int(switch, "switch", lower=0, upper=10**9)
    if qaf_optimizer is not None:
        check_transform(qaf_optimizer, "qaf_optimizer")
    check_transform(optimizer, "optimizer")
    progress = check_bool(progress, "progress")
    get = batch_source(batches)
    q_cfg, hp_cfg = _configs(mode, fmt)
    tr, fr = nn.split(nn.set_matmul(model, None))
    opt_state = optimizer.init(tr)
    step = _step_fn(loss_fn, optimizer, q_cfg, hp_cfg)
    losses, gns, ens = [], [], []
    crossing = switch_step = None
    use_hp = False

    def begin_high_precision(t):
        nonlocal use_hp, switch_step, opt_state, step
        use_hp, switch_step = True, t
        if qaf_optimizer is not None:
            opt_state = qaf_optimizer.init(tr)
            step = _step_fn(loss_fn, qaf_optimizer, q_cfg, hp_cfg)

    if switch == 0:
        begin_high_precision(0)
    for t in tqdm(range(steps), disable=None if progress else True, leave=False):
        tr, opt_state, loss, gn, en = step(
            tr, fr, opt_state, get(t), jax.random.fold_in(key, t), jnp.asarray(use_hp)
        )
        losses.append(float(loss))
        gns.append(float(gn))
        ens.append(float(en))
        if not np.isfinite([losses[-1], gns[-1], ens[-1]]).all():
            raise NumericalError(
                f"the loss or a gradient norm is not finite at step {t} (loss {losses[-1]:.3g}, "
                f"|g_hp| {gns[-1]:.3g}, |g_q - g_hp| {ens[-1]:.3g}); lower the learning rate or "
                "check `loss_fn`.",
                step=t,
                losses=np.asarray(losses),
            )
        if crossing is None and len(gns) >= window and mode != "none":
            r = np.asarray(gns[-window:]) / np.maximum(np.asarray(ens[-window:]), 1e-300)
            if r.mean() < threshold:
                crossing = t
        if not use_hp and (
            (switch == "threshold" and crossing is not None)
            or (isinstance(switch, int) and t + 1 >= switch)
        ):
            begin_high_precision(t + 1)
    _finite_tree(tr, "the trained model after the last step")
    final = nn.set_matmul(
        nn.combine(tr, fr),
        q_cfg.replace(bwd_g=None, bwd_w=None, upd_g=None, upd_x=None) if q_cfg else None,
    )
    return FP4TrainResult(
        model=final,
        opt_state=opt_state,
        losses=np.asarray(losses),
        grad_norms=np.asarray(gns),
        noise_norms=np.asarray(ens),
        threshold=float(threshold),
        window=window,
        crossing_step=crossing,
        switch_step=switch_step,
        mode=mode,
    )
