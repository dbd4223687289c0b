"""Valid calls of the Zebra-Llama additions to :mod:`nn` for the bad-input harness
(``tests/_bad_input.py``): layer selection, composition, cached decoding."""

import jax
import jax.numpy as jnp
import numpy as np
from _bad_input import Case

from nn import hybrid as HY
from nn import mamba2 as M2
from nn import mla as ML

KEY = jax.random.key(0)
_T = HY.HybridLM(5, 8, 2, 1, 4, ("gqa",) * 2, mlp_hidden=8, key=KEY)
_MLA = HY.hybrid_from_teacher(_T, ("mla",) * 2, kv_rank=4, key=KEY)
_M2 = HY.hybrid_from_teacher(_T, ("mamba2",) * 2, key=KEY)
_X = jnp.asarray(np.random.default_rng(0).normal(size=(1, 3, 8)), jnp.float32)

CASES = {
    "nn.hybrid.select_mla_layers": Case(
        HY.select_mla_layers, dict(scores=np.array([0.3, -0.1, 0.2, 0.5]), num_mla=2)
    ),
    "nn.hybrid.compose_hybrid": Case(
        HY.compose_hybrid, dict(mla_model=_MLA, mamba2_model=_M2, kinds=("mla", "mamba2"))
    ),
    "nn.mla.gqa_decode": Case(ML.gqa_decode, dict(layer=_T.layers[0].mixer, x=_X)),
    "nn.mamba2.mamba2_decode": Case(M2.mamba2_decode, dict(layer=_M2.layers[0].mixer, u=_X)),
}
