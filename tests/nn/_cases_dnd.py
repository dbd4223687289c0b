"""Valid calls of :mod:`nn.dnd` for the bad-input harness (``tests/_bad_input.py``)."""

import jax
import numpy as np
from _bad_input import Case

from nn import dnd as D

KEY = jax.random.key(0)
_g = np.random.default_rng(0)
# dims multiples of the chunk: no NaN padding in the valid calls' results
FACTORS = [(_g.normal(size=(2, 8)), _g.normal(size=(4, 2)) * 0.1)]
SHAPES = [(4, 8)]
TOKENS = np.asarray(D.tokenize(FACTORS, 4))  # (3, 4, 6)
STACK = np.stack([np.stack([TOKENS, TOKENS * 1.1 + 0.01])] * 2)  # (D=2, J=2, T, h, w)
TARGET = TOKENS.copy()
TARGET[-1, :2, 2:4] = np.nan  # a padded corner, as tokens of a non-divisible layer carry
PRED = TOKENS + 0.1

CASES = {
    "nn.dnd.tile_shape": Case(D.tile_shape, dict(r=2, chunk=8)),
    "nn.dnd.num_tiles": Case(D.num_tiles, dict(shapes=SHAPES, chunk=4)),
    "nn.dnd.tokenize": Case(D.tokenize, dict(factors=FACTORS, chunk=4)),
    "nn.dnd.detokenize": Case(D.detokenize, dict(tokens=TOKENS, shapes=SHAPES, chunk=4)),
    "nn.dnd.token_mask": Case(D.token_mask, dict(tokens=TOKENS)),
    "nn.dnd.criterion_weight": Case(D.criterion_weight, dict(tokens=STACK)),
    "nn.dnd.dnd_loss": Case(D.dnd_loss, dict(pred=PRED, target=TARGET, weight=np.ones(3))),
    "nn.dnd.ConditionEncoder": Case(D.ConditionEncoder, dict(dim=3, shape=(2, 3), key=KEY)),
    "nn.dnd.HyperConvLayer": Case(
        D.HyperConvLayer, dict(shape_in=(3, 2, 3), shape_out=(2, 4, 4), k=3, key=KEY)
    ),
    "nn.dnd.HyperConvDecoder": Case(
        D.HyperConvDecoder, dict(features=[(3, 2, 3), (2, 4, 4)], k=3, key=KEY)
    ),
    "nn.dnd.DnDGenerator": Case(
        D.DnDGenerator,
        dict(
            dim=3,
            prompts=4,
            n_tiles=2,
            tile=(4, 6),
            hidden=((3, 3),),
            enc_shape=(2, 2),
            k=3,
            key=KEY,
        ),
    ),  # fmt: skip
}
