"""Valid calls of :mod:`nn.unet` for the bad-input harness (``tests/_bad_input.py``)."""

import jax
import numpy as np
from _bad_input import Case

from nn import unet as U

KEY = jax.random.key(0)
IMG = np.random.default_rng(0).standard_normal((2, 3, 4, 4))

CASES = {
    "nn.unet.Conv2d": Case(U.Conv2d, dict(in_channels=2, out_channels=3, kernel_size=3, key=KEY)),
    "nn.unet.ConvBlock": Case(U.ConvBlock, dict(in_channels=2, out_channels=3, key=KEY)),
    "nn.unet.TransposeConvBlock": Case(
        U.TransposeConvBlock, dict(in_channels=2, out_channels=3, key=KEY)
    ),
    "nn.unet.UNet": Case(U.UNet, dict(in_channels=2, out_channels=2, channels=2, key=KEY)),
    "nn.unet.instance_norm": Case(U.instance_norm, dict(x=IMG)),
}
