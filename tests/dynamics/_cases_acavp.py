"""Valid calls of :mod:`dynamics.acavp` for the bad-input harness (``tests/_bad_input.py``)."""

import jax
import numpy as np
from _bad_input import Case

from dynamics import acavp as A
from nn.acavp import SmallCNN

KEY = jax.random.key(0)
X = np.random.default_rng(0).uniform(size=(2, 3, 8, 8)).astype(np.float32)
CNN = SmallCNN((2, 2), key=KEY)
TASK = A.target_task("geo", 0)

CASES = {
    "dynamics.acavp.apply_ops": Case(
        A.apply_ops,
        dict(
            images=X, ops=np.array([3, 9]), levels=np.array([5, 30]), signs=np.array([1.0, -1.0])
        ),  # fmt: skip
    ),
    "dynamics.acavp.trivial_augment": Case(A.trivial_augment, dict(images=X, key=KEY)),
    "dynamics.acavp.digits": Case(A.digits, {}),
    "dynamics.acavp.render": Case(A.render, dict(images=np.ones((2, 8, 8)) * 0.5, size=10.0)),
    "dynamics.acavp.source_task": Case(A.source_task, dict(seed=1)),
    "dynamics.acavp.target_task": Case(A.target_task, dict(name="colour", seed=1)),
    "dynamics.acavp.build": Case(A.build, dict(method="acavp", backbone=CNN, key=KEY)),
    "dynamics.acavp.pretrain": Case(A.pretrain, dict(seed=0, steps=2, batch=4), heavy=True),
    "dynamics.acavp.adapt": Case(
        A.adapt,
        dict(backbone=CNN, method="pad", task=TASK, seeds=2, lrs=(0.1,), steps=2, batch=4),
        heavy=True,
    ),
}

NOT_ENTRY_POINTS = {
    "dynamics.acavp.AdaptResult": "result of adapt",
    "dynamics.acavp.Task": "built by source_task / target_task",
}
