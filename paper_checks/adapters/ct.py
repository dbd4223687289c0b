"""Curvature Tuning claim (Hu, Leyang et al. 2025, arXiv 2502.07783): steering the ReLU curvature
against a linear probe."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import nn
import nn.adapters as ad
from paper_checks._registry import Measurement, claim
from paper_checks._stats import mean_se
from paper_checks.adapters._base import D_IN, D_OUT, WIDTH, pretrained

CT = "Hu, Leyang et al. 2025 (Curvature Tuning, arXiv 2502.07783)"


# Curvature Tuning (CT)
@jax.jit
def _ct_features(mlp, x, beta):
    """Hidden features of a ReLU ``nn.MLP`` with every ReLU replaced by ``phi_{beta, 1/2}``."""
    h = x
    for lin in mlp.layers[:-1]:
        h = ad.ctu(lin(h), beta, 0.5)
    return h


def _probe_acc(ftr, ytr, fte, yte, lam=1e-3):
    """Ridge linear probe on one-hot labels (closed form), accuracy on (fte, yte)."""
    ftr1 = jnp.concatenate([ftr, jnp.ones((len(ftr), 1))], 1)
    fte1 = jnp.concatenate([fte, jnp.ones((len(fte), 1))], 1)
    yoh = jax.nn.one_hot(ytr, D_OUT)
    w = jnp.linalg.solve(ftr1.T @ ftr1 + lam * len(ftr) * jnp.eye(ftr1.shape[1]), ftr1.T @ yoh)
    return np.asarray(jnp.argmax(fte1 @ w, 1) == yte)


@functools.cache
def ct_runs(scale: str = "quick"):
    """Steering CT: a linear probe on the frozen pretrained backbone for each beta."""
    with jax.enable_x64(True):
        _, student, _ = pretrained(scale)
        other = nn.MLP(D_IN, D_OUT, WIDTH, 2, activation=jax.nn.relu, key=jax.random.key(77))
        n = 512 if scale == "quick" else 4096
        x = jax.random.normal(jax.random.key(30), (3 * n, D_IN))
        y = jnp.argmax(other(x), -1)  # a new task the backbone was not trained for
        tr, va, te = slice(0, n), slice(n, 2 * n), slice(2 * n, 3 * n)
        betas = np.round(np.arange(0.70, 1.0, 0.01), 2).tolist() + [1.0]
        val, test = [], []
        for b in betas:
            f = _ct_features(student, x, jnp.asarray(b))
            val.append(_probe_acc(f[tr], y[tr], f[va], y[va]).mean())
            test.append(_probe_acc(f[tr], y[tr], f[te], y[te]))
        best = int(np.argmax(val))
        return {"betas": np.array(betas), "val": np.array(val),
                "test": np.array([t.mean() for t in test]), "best": best,
                "diff": test[best].astype(float) - test[-1].astype(float)}


@claim("adapters.ct_vs_probe", paper=CT,
       statement="Steering the ReLU curvature (one beta picked on validation) improves over a "
                 "linear probe on the frozen backbone, training nothing in it.",
       where="Sec. 4, Table 1 (CT vs linear probing)")
def _check_ct(scale: str) -> Measurement:
    r = ct_runs(scale)
    mu, se = mean_se(r["diff"])
    return Measurement(
        measured={"acc_probe": float(r["test"][-1]), "acc_ct": float(r["test"][r["best"]]),
                  "beta": float(r["betas"][r["best"]])},
        expected={"acc_ct - acc_probe": "> 0"},
        tolerance={"2 SE (paired)": 2 * se},
        passed=bool(mu > 0),
        detail=f"ridge probe on the pretrained MLP's features, new 4-class task; beta grid "
               f"0.70..0.99 and 1 (= probe); gain {mu:.3g} +- {se:.2g}",
    )
