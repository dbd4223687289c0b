r"""Simulators for the last iterate of constant-step SGD (Attia et al. 2025, arXiv 2507.11274).

* :func:`expected_excess_risk` -- :math:`E[F(w_T)] - F_\star` on a grid of horizons, exactly for
  quadratic finite sums (second-moment recursion, one eigendecomposition for every ``T``) or by
  vectorised JAX Monte Carlo for any instance, with standard errors.
* :func:`expected_quadratic_form` -- exact :math:`E[(w_T-w_\star)^\top W (w_T-w_\star)]`.
* :func:`worst_start_excess_risk` -- exact worst case over start points of a realizable quadratic.
* :func:`simulate_iterates` -- whole paths (small ``T``), for pathwise checks such as Fejér
  monotonicity.
* :func:`continual_learning` -- average loss and forgetting of continual linear regression under
  random task orderings, with and without replacement.
* :func:`simulate_divergence` -- the same simulator without the stepsize check, to show what
  happens at and beyond :math:`\eta = 2/\beta`.
* :func:`pep_worst_case` -- performance-estimation SDP for the worst case over finite sums.

Implementation in private modules (:mod:`._simulate` the simulators, :mod:`._instances` the
instances, :mod:`._exact`, :mod:`._mc`, :mod:`._kernel`, :mod:`._pep`), re-exported here.
"""

from __future__ import annotations

from ._instances import (
    ContinualTasks,
    FiniteSum,
    QuadraticSum,
    ar1,
    commuting,
    continual_tasks,
    gaussian_design,
    kaczmarz,
    least_squares,
    logistic_separable,
    random_continual_tasks,
    rare_curvature,
    separable_data,
    squared_hinge,
)
from ._kernel import padded_dim
from ._pep import PEPResult, pep_worst_case, pepit_worst_case
from ._simulate import (
    ContinualCurve,
    RiskCurve,
    continual_learning,
    expected_excess_risk,
    expected_quadratic_form,
    simulate_divergence,
    simulate_iterates,
    worst_start_excess_risk,
)

__all__ = [
    "RiskCurve",
    "ContinualCurve",
    "expected_excess_risk",
    "expected_quadratic_form",
    "worst_start_excess_risk",
    "simulate_iterates",
    "simulate_divergence",
    "continual_learning",
    "pep_worst_case",
    "pepit_worst_case",
    "PEPResult",
    "QuadraticSum",
    "FiniteSum",
    "ContinualTasks",
    "least_squares",
    "gaussian_design",
    "kaczmarz",
    "continual_tasks",
    "random_continual_tasks",
    "rare_curvature",
    "ar1",
    "commuting",
    "logistic_separable",
    "squared_hinge",
    "separable_data",
    "padded_dim",
]
