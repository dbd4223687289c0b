"""Exact statements of MixPrompt's prompting module (Hao et al., NeurIPS 2025, OpenReview
jt9iMeQQvM; official ``Mixprompt.py``, ``docs/papers/mixprompt.md``)."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import nn
from nn import mixprompt as M
from paper_checks import patch, wrap
from theory import mixprompt as TM

from .._properties import prop

PAPER = "Hao et al. 2025 (MixPrompt, NeurIPS 2025); docs/papers/mixprompt.md"


@prop(
    "mixprompt.param_formula_counted",
    paper=PAPER,
    statement="The closed-form trainable-parameter count of theory.mixprompt equals the "
    "parameters counted on the built MixPrompt model, for any stage widths and depths, MLP "
    "expansion, classes, rank ratio, sub-spaces, mixing branch, prompt norm, extractor and head "
    "width.",
    where="Table 3 ablation (parameter counts); docs/papers/mixprompt.md Q7 (derived here)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "stages": st.integers(1, 3),
            "width": st.sampled_from([4, 8]),
            "depth": st.integers(1, 2),
            "expansion": st.integers(1, 3),
            "classes": st.integers(2, 5),
            "rank_ratio": st.sampled_from([1, 2]),
            "subspaces": st.sampled_from([1, 2]),
            "mix": st.sampled_from(["rgb", "aux", "both", "none"]),
            "norm": st.booleans(),
            "extractor": st.sampled_from(["pretrained", "random", "embed"]),
            "head_embed": st.integers(1, 6),
        }
    ),
    mutants=[
        wrap(
            "theory.mixprompt.ada_params",
            lambda f: lambda c, *a, **k: f(c, *a, **k) - c // (a[0] if a else 4),
            "one down-projection bias left out of the ADA count",
            name="ada_bias_missing",
        ),
        wrap(
            "theory.mixprompt.block_params",
            lambda f: lambda c, e=4: f(c, 4),
            "the extractor's blocks counted at expansion 4 whatever the backbone's",
            name="block_expansion_fixed",
        ),
    ],
)
def _params(ex) -> float:
    chans = tuple(ex["width"] * 2**i for i in range(ex["stages"]))
    kw = dict(
        rank_ratio=ex["rank_ratio"], subspaces=ex["subspaces"], mix=ex["mix"], norm=ex["norm"],
        extractor=ex["extractor"], head_embed=ex["head_embed"],
    )  # fmt: skip
    counted = _counted(chans, ex["depth"], ex["expansion"], ex["classes"], tuple(kw.items()))
    formula = TM.mixprompt_params(
        chans, ex["classes"], extractor_depth=ex["depth"], expansion=ex["expansion"], **kw
    )["total"]
    return 1.0 if counted == formula else -1.0


@functools.cache
def _counted(chans, depth, expansion, classes, kw):
    bb = M.Backbone(chans, 3, (depth,) * len(chans), expansion, key=jax.random.key(0))
    return nn.count_params(M.mixprompt(bb, classes, key=jax.random.key(1), **dict(kw)))


@prop(
    "mixprompt.subspace_mixing",
    paper=PAPER,
    statement="The sub-spaces are the n contiguous chunks of u: merge(split(u, n)) = u exactly, "
    "and mixing gives chunk k = sum_j Omega_kj chunk j, for any width divisible by n, any n, any "
    "batch shape and any Omega.",
    where="official Mixprompt.py (ADA: torch.chunk / stack / Linear(n, n) / transpose / reshape)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "n": st.sampled_from([1, 2, 3, 4]),
            "chunk": st.sampled_from([1, 2, 5]),
            "batch": st.sampled_from([(), (3,), (2, 2)]),
        }
    ),
    mutants=[
        patch(
            "nn.mixprompt.merge_subspaces",
            lambda s: s.reshape((*s.shape[:-2], -1)),
            "merge without the transpose (channels scrambled)",
            name="merge_no_transpose",
        ),
        wrap(
            "nn.mixprompt.mix_subspaces",
            lambda f: lambda u, omega: f(u, jnp.asarray(omega).T),
            "Omega applied transposed (chunk k = sum_j Omega_jk chunk j)",
            name="omega_transposed",
        ),
    ],
)
def _mixing(ex) -> float:
    g = np.random.default_rng(ex["seed"])
    n, c = ex["n"], ex["chunk"]
    u = g.standard_normal((*ex["batch"], n * c))
    omega = g.standard_normal((n, n))
    trip = np.asarray(M.merge_subspaces(M.split_subspaces(u, n)))
    if not np.array_equal(trip, u):
        return -1.0
    chunks = [u[..., j * c : (j + 1) * c] for j in range(n)]
    want = np.concatenate([sum(omega[k, j] * chunks[j] for j in range(n)) for k in range(n)], -1)
    got = np.asarray(M.mix_subspaces(u, omega))
    scale = np.abs(omega).sum() * np.abs(u).max() + 1e-300
    return 1.0 - float(np.max(np.abs(got - want))) / (1e-13 * scale)


@prop(
    "mixprompt.adapter_formula",
    paper=PAPER,
    statement="The ADA module computes p = LN(W_up(mix(W_r h + b_r) + W_x e + b_x) + b_up) with "
    "the mixing on the branch(es) its option names (none: DPLNet's down-add-up), for any width, "
    "rank ratio, sub-spaces and norm option.",
    where="official Mixprompt.py (class ADA); docs/papers/mixprompt.md Q6",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "seed": st.integers(0, 2**31 - 1),
            "config": st.sampled_from([(8, 2, 2), (8, 1, 4), (12, 2, 3), (4, 1, 1)]),
            "mix": st.sampled_from(["rgb", "aux", "both", "none"]),
            "norm": st.booleans(),
        }
    ),
    mutants=[
        wrap(
            "nn.mixprompt.mix_subspaces",
            lambda f: lambda u, omega: f(u, jnp.asarray(omega).T),
            "Omega applied transposed",
            name="omega_transposed",
        )
    ],
)
def _adapter(ex) -> float:
    c, q, n = ex["config"]
    key = jax.random.key(ex["seed"])
    ada = M.MixedPromptAdapter(c, q, n, ex["mix"], ex["norm"], dtype=jnp.float64, key=key)
    g = np.random.default_rng(ex["seed"])
    if ada.omega is not None:  # a general Omega (the init's is a random one too)
        ada = eqx.tree_at(lambda a: a.omega, ada, jnp.asarray(g.standard_normal((n, n))))
    h, e = g.standard_normal((2, 2, 3, 3, c))
    got = np.asarray(ada(h, e))
    lin = lambda L, x: x @ np.asarray(L.weight).T + np.asarray(L.bias)  # noqa: E731
    u, v = lin(ada.down_rgb, h), lin(ada.down_aux, e)
    om = None if ada.omega is None else np.asarray(ada.omega)

    def mix(x):
        d = x.shape[-1] // n
        ch = [x[..., j * d : (j + 1) * d] for j in range(n)]
        return np.concatenate([sum(om[k, j] * ch[j] for j in range(n)) for k in range(n)], -1)

    if ex["mix"] in ("rgb", "both"):
        u = mix(u)
    if ex["mix"] in ("aux", "both"):
        v = mix(v)
    p = lin(ada.up, u + v)
    if ex["norm"]:
        mu, var = p.mean(-1, keepdims=True), p.var(-1, keepdims=True)
        p = (p - mu) / np.sqrt(var + 1e-6) * np.asarray(ada.norm.weight) + np.asarray(ada.norm.bias)
    return 1.0 - float(np.max(np.abs(got - p))) / (1e-10 * (1 + np.abs(p).max()))
