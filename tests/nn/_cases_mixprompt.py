"""Valid calls of :mod:`nn.mixprompt` for the bad-input harness (``tests/_bad_input.py``)."""

import jax
import numpy as np
from _bad_input import Case

from nn import mixprompt as M

KEY = jax.random.key(0)
_g = np.random.default_rng(0)
BB = M.Backbone((16, 16), 3, (1, 1), 2, key=KEY)
U = _g.standard_normal((2, 8))
X = _g.standard_normal((2, 4, 4, 8))

CASES = {
    "nn.mixprompt.PatchEmbed": Case(M.PatchEmbed, dict(in_channels=3, out_channels=4, key=KEY)),
    "nn.mixprompt.Block": Case(M.Block, dict(channels=4, key=KEY)),
    "nn.mixprompt.Backbone": Case(
        M.Backbone, dict(channels=(4, 8), in_channels=3, depths=(1, 1), expansion=2, key=KEY)
    ),
    "nn.mixprompt.SegHead": Case(M.SegHead, dict(channels=(4, 8), embed=4, num_classes=3, key=KEY)),
    "nn.mixprompt.split_subspaces": Case(M.split_subspaces, dict(u=U, n=4)),
    "nn.mixprompt.merge_subspaces": Case(M.merge_subspaces, dict(s=U.reshape(2, 4, 2))),
    "nn.mixprompt.mix_subspaces": Case(M.mix_subspaces, dict(u=U, omega=np.eye(2))),
    "nn.mixprompt.MixedPromptAdapter": Case(
        M.MixedPromptAdapter, dict(channels=16, rank_ratio=4, subspaces=2, key=KEY)
    ),
    "nn.mixprompt.inject": Case(M.inject, dict(x=X, p=X)),
    "nn.mixprompt.mixprompt": Case(M.mixprompt, dict(backbone=BB, num_classes=3, key=KEY)),
    "nn.mixprompt.RGBSegmenter": Case(M.RGBSegmenter, dict(backbone=BB, num_classes=3, key=KEY)),
    "nn.mixprompt.two_branch": Case(M.two_branch, dict(backbone=BB, num_classes=3, key=KEY)),
}

NOT_ENTRY_POINTS = {
    "nn.mixprompt.MixPrompt": "a model built by nn.mixprompt.mixprompt",
    "nn.mixprompt.TwoBranch": "a model built by nn.mixprompt.two_branch",
}
