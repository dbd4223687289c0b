"""Valid call of :func:`dynamics.distill.layer_sensitivity` for the bad-input harness."""

import jax
import numpy as np
from _bad_input import Case

from dynamics import distill as D
from nn.hybrid import HybridLM, hybrid_from_teacher

KEY = jax.random.key(0)
_T = HybridLM(5, 8, 2, 1, 4, ("gqa",) * 2, mlp_hidden=8, key=KEY)

CASES = {
    "dynamics.distill.layer_sensitivity": Case(
        D.layer_sensitivity,
        dict(
            teacher=_T,
            mla_model=hybrid_from_teacher(_T, ("mla",) * 2, kv_rank=4, key=KEY),
            mamba2_model=hybrid_from_teacher(_T, ("mamba2",) * 2, key=KEY),
            tokens=np.array([[0, 1, 4, 2]]),
        ),
    ),
}
