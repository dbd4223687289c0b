"""Valid calls of :mod:`dynamics.aegisguard` for the bad-input harness (``tests/_bad_input.py``)."""

import jax
import numpy as np
from _bad_input import Case

from dynamics.aegisguard import attack as A
from dynamics.aegisguard import bandit as RL
from dynamics.aegisguard import baselines as BL
from dynamics.aegisguard import pruning as P
from dynamics.aegisguard import victim as V

KEY = jax.random.key(0)
TASK = V.planted_task(key=KEY, n_blocks=1, n_train=32, n_test=8)
M = V.adapted_model(TASK.backbone, key=KEY)
AS, BS = V.train_victim(M, TASK.X_train, TASK.y_train, steps=3, key=KEY)
X, Y = np.asarray(TASK.X_train), np.asarray(TASK.y_train)
SH = np.array([True, False, False])
VIEW = A.expose(M, AS, BS, SH)
DL = np.array([0.3, 0.05, -0.02])
ON = np.array([True, True, False])
VIC = dict(model=M, As=AS, Bs=BS)

CASES = {
    "dynamics.aegisguard.victim.ResMLP": Case(
        V.ResMLP, dict(d_in=4, width=8, n_blocks=1, n_classes=3, key=KEY)
    ),
    "dynamics.aegisguard.victim.planted_task": Case(
        V.planted_task, dict(key=KEY, n_blocks=1, n_train=16, n_test=8, planted_rank=1)
    ),
    "dynamics.aegisguard.victim.adapted_model": Case(
        V.adapted_model, dict(backbone=TASK.backbone, r=2, key=KEY)
    ),
    "dynamics.aegisguard.victim.accuracy": Case(V.accuracy, dict(**VIC, X=X, y=Y)),
    "dynamics.aegisguard.victim.train_victim": Case(
        V.train_victim, dict(model=M, X=X, y=Y, steps=2, batch=8, lr=0.01, key=KEY), heavy=True
    ),
    "dynamics.aegisguard.attack.expose": Case(A.expose, dict(**VIC, shielded=SH)),
    "dynamics.aegisguard.attack.query_labels": Case(A.query_labels, dict(**VIC, X=X)),
    "dynamics.aegisguard.attack.attack": Case(
        A.attack,
        dict(view=VIEW, X_query=X[:8], y_query=Y[:8], epochs=1, batch=4, key=KEY),
        heavy=True,
    ),
    "dynamics.aegisguard.attack.subset_masks": Case(A.subset_masks, dict(n_layers=3)),
    "dynamics.aegisguard.attack.subset_index": Case(A.subset_index, dict(mask=SH)),
    "dynamics.aegisguard.attack.leakage": Case(
        A.leakage, dict(acc=0.5, acc_black_box=0.4, acc_white_box=0.8)
    ),
    "dynamics.aegisguard.attack.recover_adapter": Case(
        A.recover_adapter, dict(X=np.eye(3) + 0.1, Y=np.ones((3, 2)))
    ),
    "dynamics.aegisguard.bandit.reward": Case(RL.reward, dict(dL=DL, selected=ON)),
    "dynamics.aegisguard.bandit.score_update": Case(
        RL.score_update, dict(s=DL, r=DL, selected=ON, mu=0.5)
    ),
    "dynamics.aegisguard.bandit.sample_layers": Case(
        RL.sample_layers, dict(s=DL, n_select=2, key=KEY, eps=0.5)
    ),
    "dynamics.aegisguard.bandit.probe": Case(RL.probe, dict(**VIC, X=X, y=Y, rho=0.5, key=KEY)),
    "dynamics.aegisguard.bandit.rsm_train": Case(
        RL.rsm_train, dict(model=M, X=X, y=Y, steps=4, period=2, batch=8, key=KEY), heavy=True
    ),
    "dynamics.aegisguard.bandit.rsm_posthoc": Case(
        RL.rsm_posthoc, dict(**VIC, X=X, y=Y, rounds=2, batch=8, key=KEY), heavy=True
    ),
    "dynamics.aegisguard.baselines.magnitude_scores": Case(BL.magnitude_scores, VIC),
    "dynamics.aegisguard.baselines.depth_scores": Case(BL.depth_scores, dict(n_layers=3)),
    "dynamics.aegisguard.baselines.probe_scores": Case(
        BL.probe_scores, dict(**VIC, X=X, y=Y, draws=2, key=KEY), heavy=True
    ),
    "dynamics.aegisguard.baselines.top_k": Case(BL.top_k, dict(scores=DL, k=2)),
    "dynamics.aegisguard.baselines.random_expected": Case(
        BL.random_expected, dict(acc_table=np.linspace(0.2, 0.9, 8), k=1)
    ),
    "dynamics.aegisguard.baselines.oracle": Case(
        BL.oracle, dict(acc_table=np.linspace(0.2, 0.9, 8), k=2)
    ),
    "dynamics.aegisguard.pruning.group_importance": Case(
        P.group_importance, dict(**VIC, X=X, y=Y, group=4)
    ),
    "dynamics.aegisguard.pruning.sac_quota": Case(
        P.sac_quota, dict(remaining=5.0, t=1, T=4, scores=DL, alpha=0.5, delta=1.0)
    ),
    "dynamics.aegisguard.pruning.sac_prune": Case(
        P.sac_prune,
        dict(**VIC, X=X, y=Y, shielded=SH, scores=DL, steps=4, period=2, batch=8, key=KEY),
        heavy=True,
    ),
}

NOT_ENTRY_POINTS = {
    "dynamics.aegisguard.victim.Task": "built by planted_task",
    "dynamics.aegisguard.attack.ExposedView": "built by expose",
}
