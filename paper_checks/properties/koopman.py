"""The LoRA objective of Jeong, Ryu, Yun & Wornell 2025 (arXiv 2507.07222) and its nesting."""

import jax.numpy as jnp
import numpy as np

from dynamics import koopman
from dynamics.koopman import FiniteChain
from paper_checks import wrap

from .._properties import prop

PAPER = "Jeong, Ryu, Yun & Wornell 2025 (arXiv 2507.07222)"


#: the LoRA objective's cross term counted once: a bug both moment-form properties must catch
CROSS_TERM_ONCE = wrap(
    "dynamics.koopman._objective.lora_from_moments",
    lambda f: lambda Mf, Mg, T, **kw: f(Mf, Mg, T / 2, **kw),
    "the cross term -2 tr T counted once",
    name="cross_term_once",
)


@prop(
    "koopman.hs_identity",
    paper=PAPER,
    statement="For tabular features on any finite chain (stationary or not) and any rank k, the "
    "population LoRA objective is L(F, G) = ||K~ - F~ G~^T||_F^2 - ||K~||_F^2 with "
    "F~ = D0^{1/2} F, G~ = D1^{1/2} G (so its minimiser is the top-k SVD of K~).",
    where="Sec. 3.1 (L_lora, Eq. 4; identity derived here, docs/papers/koopman_lora.md)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "n": st.integers(2, 9),
            "k": st.integers(1, 6),
            "seed": st.integers(0, 2**31 - 1),
            "nonstationary": st.booleans(),
        }
    ),
    mutants=[CROSS_TERM_ONCE],
)
def _hs(ex) -> float:
    rng = np.random.default_rng(ex["seed"])
    n, k = ex["n"], ex["k"]
    P = rng.dirichlet(np.ones(n), size=n)
    c = FiniteChain(P, rng.dirichlet(np.ones(n)) if ex["nonstationary"] else None)
    F, G = rng.standard_normal((n, k)), rng.standard_normal((n, k))
    Ft, Gt = np.sqrt(c.rho0)[:, None] * F, np.sqrt(c.rho1)[:, None] * G
    Kt = c.koopman_matrix
    want = np.sum((Kt - Ft @ Gt.T) ** 2) - np.sum(Kt**2)
    got = float(koopman.lora_population(jnp.asarray(F), jnp.asarray(G), c.kernel, c.rho0))
    return float(1.0 - abs(got - want) / (1e-12 * max(1.0, abs(want))))


def _naive(f, g, estimator):
    """Direct double sum: -2/B sum_b f_b.g_b + mean over pairs (b, b') of (f_b . g_b')^2, the
    pairs b != b' for the unbiased estimator (Jeong et al. 2025, Sec. 3.1)."""
    B = f.shape[0]
    cross = (f @ g.T) ** 2
    if estimator == "unbiased":
        second = (cross.sum() - np.trace(cross)) / (B * (B - 1))
    else:
        second = cross.sum() / B**2
    return -2 * np.mean(np.sum(f * g, 1)) + second


@prop(
    "koopman.joint_nesting_sum",
    paper="Ryu et al. 2024, NestedLoRA (arXiv 2402.03655), used by " + PAPER,
    statement="The jointly nested minibatch objective with weights w equals sum_l w_l times the "
    "plain objective of the first l + 1 features, for the unbiased and the plug-in "
    "estimator, any batch and rank.",
    where="NestedLoRA Sec. 3 (joint nesting masks m, W); Jeong et al. Sec. 3.1",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "B": st.integers(2, 12),
            "k": st.integers(1, 5),
            "seed": st.integers(0, 2**31 - 1),
            "estimator": st.sampled_from(["unbiased", "plugin"]),
        }
    ),
    mutants=[
        wrap(
            "dynamics.koopman._objective.nesting_masks",
            lambda f: (
                lambda k, weights=None: (
                    f(k, weights)[0],
                    jnp.maximum(f(k, weights)[0][:, None], f(k, weights)[0][None, :]),
                )
            ),
            "W_ij = m_{min(i, j)} instead of m_{max(i, j)}",
            name="mask_min_index",
        )
    ],
)
def _joint(ex) -> float:
    rng = np.random.default_rng(ex["seed"])
    B, k, est = ex["B"], ex["k"], ex["estimator"]
    f, g = rng.standard_normal((B, k)), rng.standard_normal((B, k))
    w = rng.random(k) + 0.1
    got = float(
        koopman.lora_loss(
            jnp.asarray(f), jnp.asarray(g), nesting="jnt", estimator=est, weights=jnp.asarray(w)
        )
    )
    want = sum(w[l] * _naive(f[:, : l + 1], g[:, : l + 1], est) for l in range(k))
    # the size of the terms summed: sum_l w_l (2 mean |f_b . g_b| + mean (f_b . g_b')^2) at most
    scale = np.sum(w) * (
        2 * np.mean(np.abs(f * g).sum(1)) + np.mean((np.abs(f) @ np.abs(g).T) ** 2)
    )
    return float(1.0 - abs(got - want) / (1e-13 * scale))


@prop(
    "koopman.moment_form",
    paper=PAPER,
    statement="The plug-in minibatch LoRA objective equals its moment form -2 tr T + tr(M_f M_g) "
    "with M_f = F^T F / B, M_g = G^T G / B, T = F^T G / B, for any batch, rank and nesting "
    "(none or joint with any weights).",
    where="Sec. 3.1 (L_lora, Eq. 4, in second moments); NestedLoRA Sec. 3",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "B": st.integers(1, 12),
            "k": st.integers(1, 5),
            "seed": st.integers(0, 2**31 - 1),
            "nesting": st.sampled_from([None, "jnt"]),
        }
    ),
    mutants=[CROSS_TERM_ONCE],
)
def _moments(ex) -> float:
    rng = np.random.default_rng(ex["seed"])
    B, k = ex["B"], ex["k"]
    f, g = rng.standard_normal((B, k)), rng.standard_normal((B, k))
    kw = {} if ex["nesting"] is None else {"nesting": "jnt", "weights": jnp.asarray(rng.random(k))}
    got = float(koopman.lora_loss(jnp.asarray(f), jnp.asarray(g), estimator="plugin", **kw))
    want = float(
        koopman.lora_from_moments(
            jnp.asarray(f.T @ f / B), jnp.asarray(g.T @ g / B), jnp.asarray(f.T @ g / B), **kw
        )
    )
    scale = 2 * np.mean(np.abs(f * g).sum(1)) + np.mean((np.abs(f) @ np.abs(g).T) ** 2) + 1e-300
    return float(1.0 - abs(got - want) / (1e-12 * scale))
