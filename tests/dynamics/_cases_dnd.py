"""Valid calls of :mod:`dynamics.dnd` for the bad-input harness (``tests/_bad_input.py``)."""

import jax
import jax.numpy as jnp
import numpy as np
from _bad_input import Case

from dynamics import dnd as DD

KEY = jax.random.key(0)
FAM = DD.task_family(2, 2, width=6, key=KEY)
THETA = np.asarray(FAM.theta_train)
X = np.asarray(DD.sample_inputs(FAM, THETA, 4, key=KEY))
CK = DD.collect_checkpoints(FAM, THETA, steps=2, keep=2, horizon=4, n_points=8, batch=4, key=KEY)
POOLS = np.asarray(DD.sample_inputs(FAM, THETA, 6, key=KEY))
FIT = DD.train_generator(CK.factors, POOLS, prompts=4, steps=2, batch=2, hidden=(), key=KEY)
TPL = CK.template
X0, Y0 = X[0], np.asarray(DD.task_targets(FAM, THETA, X))[0]


def _four():
    return jnp.ones(4)


CASES = {
    "dynamics.dnd.task_family": Case(DD.task_family, dict(n_train=2, n_test=2, width=4, key=KEY)),
    "dynamics.dnd.sample_inputs": Case(
        DD.sample_inputs, dict(family=FAM, theta=THETA, n=3, key=KEY)
    ),
    "dynamics.dnd.task_targets": Case(DD.task_targets, dict(family=FAM, theta=THETA, X=X)),
    "dynamics.dnd.lora_template": Case(DD.lora_template, dict(base=FAM.base, r=2, key=KEY)),
    "dynamics.dnd.factors_of": Case(DD.factors_of, dict(adapted=TPL)),
    "dynamics.dnd.with_factors": Case(
        DD.with_factors, dict(adapted=TPL, factors=DD.factors_of(TPL))
    ),
    "dynamics.dnd.collect_checkpoints": Case(
        DD.collect_checkpoints,
        dict(family=FAM, theta=THETA, steps=2, keep=2, horizon=4, n_points=8, batch=4, key=KEY),
        heavy=True,
    ),
    "dynamics.dnd.train_generator": Case(
        DD.train_generator,
        dict(factors=CK.factors, pools=POOLS, prompts=4, steps=2, batch=2, hidden=(), key=KEY),
        heavy=True,
    ),
    "dynamics.dnd.generate_tokens": Case(DD.generate_tokens, dict(fit=FIT, prompts=POOLS[0, :4])),
    "dynamics.dnd.adapter_mse": Case(
        DD.adapter_mse, dict(template=TPL, factors=CK.checkpoint(0, 0), X=X0, y=Y0)
    ),
    "dynamics.dnd.evaluate_heldout": Case(
        DD.evaluate_heldout,
        dict(family=FAM, checkpoints=CK, fit=FIT, gens=2, n_eval=8, pool=6, key=KEY),
        heavy=True,
    ),
    "dynamics.dnd.timed": Case(DD.timed, dict(f=_four, warmup=1, repeats=1)),
}

NOT_ENTRY_POINTS = {
    "dynamics.dnd.TaskFamily": "built by task_family",
    "dynamics.dnd.Checkpoints": "result of collect_checkpoints",
    "dynamics.dnd.GeneratorFit": "result of train_generator",
    "dynamics.dnd.HeldOut": "result of evaluate_heldout",
}
