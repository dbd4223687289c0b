"""Valid calls of :mod:`dynamics.mixprompt` for the bad-input harness (``tests/_bad_input.py``)."""

import jax
import numpy as np
from _bad_input import Case

from dynamics import mixprompt as D
from nn import mixprompt as M

KEY = jax.random.key(0)
BB = M.Backbone((16, 16, 16), 3, (1, 1, 1), 2, key=KEY)
DEPTH = np.random.default_rng(0).uniform(0.2, 1.0, (2, 8, 8))
LAB = np.array([[0, 1], [2, 3]])
DATA = [D.target_data(4, 2, 2, 8, seed=s) for s in range(2)]

CASES = {
    "dynamics.mixprompt.rgbd_scenes": Case(D.rgbd_scenes, dict(n=3, size=8, rng=0)),
    "dynamics.mixprompt.depth_sensor": Case(D.depth_sensor, dict(depth=DEPTH, rng=0)),
    "dynamics.mixprompt.depth_channels": Case(D.depth_channels, dict(depth=DEPTH)),
    "dynamics.mixprompt.confusion_matrix": Case(
        D.confusion_matrix, dict(pred=LAB, target=LAB, num_classes=4)
    ),
    "dynamics.mixprompt.miou": Case(D.miou, dict(pred=LAB, target=LAB, num_classes=4)),
    "dynamics.mixprompt.target_data": Case(
        D.target_data, dict(n_train=3, n_val=2, n_test=2, size=8, seed=0)
    ),
    "dynamics.mixprompt.build": Case(D.build, dict(method="dplnet", backbone=BB, key=KEY)),
    "dynamics.mixprompt.pretrain_backbone": Case(
        D.pretrain_backbone,
        heavy=True,
        kwargs=dict(channels=(16, 16, 16), depths=(1, 1, 1), size=8, n_train=8, steps=1, seed=0),
    ),
    "dynamics.mixprompt.adapt": Case(
        D.adapt,
        heavy=True,
        kwargs=dict(method="rgb_frozen", backbone=BB, datasets=DATA, lrs=(1e-3,), steps=1),
    ),
    "dynamics.mixprompt.adapt_group": Case(
        D.adapt_group,
        heavy=True,
        kwargs=dict(
            methods=("mixprompt", "mixprompt_nomix"),
            backbone=BB,
            datasets=DATA,
            lrs=(1e-3,),
            steps=1,
        ),  # fmt: skip
    ),
}

NOT_ENTRY_POINTS = {
    "dynamics.mixprompt.Scenes": "result",
    "dynamics.mixprompt.Split": "result",
    "dynamics.mixprompt.AdaptResult": "result",
}
