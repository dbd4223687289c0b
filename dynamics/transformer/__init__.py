"""Small-initialisation Transformer training dynamics: condensation, then rank collapse.

Simulators for Chen & Luo 2025 (NeurIPS 2025 oral, arXiv 2510.06954), float64 JAX:

* :class:`SmallInitTransformer` — the one-layer softmax-attention + tanh model of Def. 3, with
  :func:`exp_loss`, data sets :func:`gaussian_task` and :func:`anchor_task`, and training by
  :func:`gradient_flow` (adaptive, diffrax) or :func:`gradient_descent` (optax), giving a
  :class:`FlowPath`.
* :func:`effective_flow` — the stage-1 effective dynamics (Eq. 7) through its finite-time blow-up,
  an :class:`EffectiveFlow`; :func:`key_query_flow` — the stage-2 linear key-query flow (Prop. 3).
* :func:`escape_time` and :func:`rank_collapse` — the full model against the two stages.

The statements these are checked against (conserved quantities, energy inequality, blow-up bound,
condensation metrics, the stage-2 closed form and ranks) are in :mod:`theory.transformer`.

>>> import jax
>>> X, y = gaussian_task(16, 4, 6, rng=0)
>>> model = SmallInitTransformer.init(6, 1e-2, key=jax.random.key(0))
>>> path = gradient_flow(model, X, y, t1=2e3)          # doctest: +SKIP
"""

from ._effective import EffectiveFlow, effective_flow, key_query_flow
from ._link import EscapeResult, RankCollapseResult, escape_time, rank_collapse
from ._model import (
    PARAMS,
    FlowPath,
    SmallInitTransformer,
    anchor_task,
    exp_loss,
    gaussian_task,
    gradient_descent,
    gradient_flow,
)

__all__ = [
    "PARAMS",
    "SmallInitTransformer",
    "exp_loss",
    "gaussian_task",
    "anchor_task",
    "FlowPath",
    "gradient_flow",
    "gradient_descent",
    "EffectiveFlow",
    "effective_flow",
    "key_query_flow",
    "EscapeResult",
    "escape_time",
    "RankCollapseResult",
    "rank_collapse",
]
