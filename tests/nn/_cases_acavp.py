"""Valid calls of :mod:`nn.acavp` for the bad-input harness (``tests/_bad_input.py``)."""

import jax
import numpy as np
from _bad_input import Case

from nn import acavp as A

KEY = jax.random.key(0)
X = np.random.default_rng(0).uniform(size=(2, 3, 8, 8)).astype(np.float32)
CNN = A.SmallCNN((2, 2, 2, 2), key=KEY)

CASES = {
    "nn.acavp.affine_matrix": Case(
        A.affine_matrix,
        dict(
            theta=0.1,
            scale=np.array([0.8, 0.9]),
            shear=np.array([0.05, 0.0]),
            translate=np.array([1.0, -1.0]),
            center=(3.5, 3.5),
        ),  # fmt: skip
    ),
    "nn.acavp.warp_affine": Case(A.warp_affine, dict(x=X, matrix=np.eye(3) * 1.0)),
    "nn.acavp.acavp_transform": Case(
        A.acavp_transform,
        dict(
            x=X,
            theta=0.1,
            scale=np.array([0.8, 0.8]),
            shear=np.zeros(2),
            translate=np.zeros(2),
            gain=np.ones((3, 8, 8)),
            additive=np.zeros((3, 8, 8)),
        ),  # fmt: skip
    ),
    "nn.acavp.ACAVPPrompt": Case(A.ACAVPPrompt, dict(shape=(3, 8, 8))),
    "nn.acavp.PaddingPrompt": Case(A.PaddingPrompt, dict(shape=(3, 8, 8), width=2, key=KEY)),
    "nn.acavp.EVPPrompt": Case(A.EVPPrompt, dict(shape=(3, 8, 8), inner=4)),
    "nn.acavp.frame_mask": Case(A.frame_mask, dict(shape=(3, 8, 8), width=2)),
    "nn.acavp.first_k_label_map": Case(A.first_k_label_map, dict(n_target=4, n_source=10)),
    "nn.acavp.frequency_label_map": Case(
        A.frequency_label_map,
        dict(
            source_pred=np.array([1, 0, 1]), target=np.array([0, 1, 0]), n_target=2, n_source=3
        ),  # fmt: skip
    ),
    "nn.acavp.SmallCNN": Case(A.SmallCNN, dict(channels=(2, 2), n_classes=3, key=KEY)),
    "nn.acavp.Prompted": Case(
        A.Prompted, dict(prompt=A.ACAVPPrompt((3, 8, 8)), backbone=CNN, label_map=np.arange(3))
    ),
    "nn.acavp.LinearProbe": Case(A.LinearProbe, dict(backbone=CNN, n_classes=3, key=KEY)),
}
