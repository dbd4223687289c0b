"""Koopman operator SVD by low-rank approximation (Jeong, Ryu, Yun & Wornell, NeurIPS 2025,
arXiv 2507.07222; NestedLoRA, Ryu et al. ICML 2024).

* systems with exact answers: :class:`FiniteChain`, :class:`OrnsteinUhlenbeck`,
  :class:`NoisyLogisticMap`, :class:`PrinzLangevin`, and :class:`Lorenz63` (none known);
* the objective: :func:`lora_loss` (U-statistic or plug-in; joint / sequential nesting),
  :func:`lora_population`, :func:`lora_from_moments`, :func:`nesting_masks`;
* baselines: :func:`vamp2_loss`, :func:`vampe_loss`, :func:`dpnet_loss`;
* read-out: :func:`cca_readout` (singular values/functions, Koopman matrix, eigenpairs, forecasts)
  and :func:`edmd_readout`;
* metrics: :func:`relative_singular_value_errors`, :func:`principal_angles`,
  :func:`directed_hausdorff`, :func:`forecast_rmse`;
* training: :func:`fit_koopman` -> :class:`KoopmanModel`.
"""

from ._baselines import dpnet_from_moments, dpnet_loss, vamp2_from_moments, vamp2_loss, vampe_loss
from ._metrics import (
    directed_hausdorff,
    forecast_rmse,
    principal_angles,
    relative_singular_value_errors,
)
from ._objective import (
    ESTIMATORS,
    NESTINGS,
    lora_from_moments,
    lora_loss,
    lora_population,
    nesting_masks,
)
from ._readout import EDMDReadout, KoopmanReadout, cca_readout, edmd_readout
from ._systems import (
    FiniteChain,
    Lorenz63,
    NoisyLogisticMap,
    OrnsteinUhlenbeck,
    PrinzLangevin,
    make_pairs,
)
from ._train import LOSSES, Encoders, KoopmanModel, fit_koopman, fit_koopman_batch

__all__ = [
    "FiniteChain",
    "OrnsteinUhlenbeck",
    "NoisyLogisticMap",
    "PrinzLangevin",
    "Lorenz63",
    "make_pairs",
    "NESTINGS",
    "ESTIMATORS",
    "nesting_masks",
    "lora_from_moments",
    "lora_loss",
    "lora_population",
    "vamp2_loss",
    "vampe_loss",
    "dpnet_loss",
    "vamp2_from_moments",
    "dpnet_from_moments",
    "KoopmanReadout",
    "cca_readout",
    "EDMDReadout",
    "edmd_readout",
    "relative_singular_value_errors",
    "principal_angles",
    "directed_hausdorff",
    "forecast_rmse",
    "LOSSES",
    "Encoders",
    "KoopmanModel",
    "fit_koopman",
    "fit_koopman_batch",
]
