"""Valid calls of :mod:`dynamics.mri.metrics` and :mod:`dynamics.mri.tta` for the bad-input
harness (``tests/_bad_input.py``); the adaptation loops are heavy (slow exhaustive test only)."""

import jax
import numpy as np
from _bad_input import Case

from dynamics import mri
from dynamics.mri import metrics as ME
from dynamics.mri import tta as T
from nn.unet import UNet

KEY = jax.random.key(0)
_g = np.random.default_rng(0)
REF = np.abs(_g.standard_normal((2, 8, 8))) + 0.5
REC = REF + 0.1 * _g.standard_normal((2, 8, 8))
UN = UNet(2, 2, 2, 1, dtype=T.DTYPE, key=KEY)
MASK = mri.cartesian_mask((8, 8), 2.0, 0.25, key=KEY)
Y = (_g.standard_normal((2, 8, 8)) + 1j * _g.standard_normal((2, 8, 8))) * np.asarray(MASK)
TGT = _g.standard_normal((2, 8, 8)) + 0j
SRC = mri.cohort("source", 1, 2, (8, 8), key=KEY)
D2M = T.init_d2sa(UN, 2, key=KEY)
_LOOP = dict(max_iters=3, window=1, key=KEY)

CASES = {
    "dynamics.mri.metrics.psnr": Case(ME.psnr, dict(x=REC, ref=REF)),
    "dynamics.mri.metrics.psnr_normalized": Case(ME.psnr_normalized, dict(x=REC, ref=REF)),
    "dynamics.mri.metrics.ssim": Case(ME.ssim, dict(x=REC, ref=REF, win_size=3)),
    "dynamics.mri.metrics.hfen": Case(ME.hfen, dict(x=REC, ref=REF)),
    "dynamics.mri.tta.pretrain": Case(
        T.pretrain, dict(cohort=SRC, channels=2, pools=1, steps=2, batch=2, key=KEY), heavy=True
    ),
    "dynamics.mri.tta.to_channels": Case(T.to_channels, dict(x=Y)),
    "dynamics.mri.tta.to_complex": Case(T.to_complex, dict(out=_g.standard_normal((3, 2, 4, 4)))),
    "dynamics.mri.tta.ssl_masks": Case(
        T.ssl_masks, dict(mask=MASK, n_slices=2, ssl="ssdu", key=KEY)
    ),
    "dynamics.mri.tta.stop_iteration": Case(
        T.stop_iteration, dict(errors=np.linspace(1, 0, 9) ** 2, window=2)
    ),
    "dynamics.mri.tta.DiffusionBlock": Case(T.DiffusionBlock, dict(channels=4, ratio=2, key=KEY)),
    "dynamics.mri.tta.FilmINR": Case(T.FilmINR, dict(channels=2, latent_dim=3, width=4, key=KEY)),
    "dynamics.mri.tta.D2SAModel": Case(
        T.D2SAModel, dict(unet=UN, inr=D2M.inr, latents=D2M.latents), targets=()
    ),
    "dynamics.mri.tta.init_d2sa": Case(
        T.init_d2sa, dict(unet=UN, n_slices=2, latent_dim=3, key=KEY)
    ),
    "dynamics.mri.tta.no_adaptation": Case(T.no_adaptation, dict(unet=UN, y=Y, mask=MASK)),
    "dynamics.mri.tta.single_shot": Case(
        T.single_shot, dict(unet=UN, y=Y, mask=MASK, target=TGT, **_LOOP), heavy=True
    ),
    "dynamics.mri.tta.d2sa": Case(
        T.d2sa, dict(unet=UN, y=Y, mask=MASK, target=TGT, epochs=1, **_LOOP), heavy=True
    ),
}
NOT_ENTRY_POINTS = {"dynamics.mri.tta.Adapted": "result type the adaptation loops build"}
