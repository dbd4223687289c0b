"""Valid calls of :mod:`theory.nonlinear_laplacian_floor` for the bad-input harness
(``tests/_bad_input.py``)."""

import numpy as np
from _bad_input import Case

from theory import nonlinear_laplacian_floor as F
from theory.nonlinear_laplacian import EtaLaw

CASES = {
    "theory.nonlinear_laplacian_floor.beta_floor": Case(F.beta_floor, dict(prior="sparse_nnpca")),
    "theory.nonlinear_laplacian_floor.floor_equation": Case(
        F.floor_equation, dict(beta=0.7, prior=EtaLaw.point(1.0))
    ),
    "theory.nonlinear_laplacian_floor.half_normal_m": Case(
        F.half_normal_m, dict(tau=np.array([-3.0, 0.0, 2.0]))
    ),
    "theory.nonlinear_laplacian_floor.extremal_log_kernel": Case(
        F.extremal_log_kernel, dict(t=np.array([-1.0, 2.0]), prior="sparse_nnpca")
    ),
}
