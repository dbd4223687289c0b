"""Merging an adapter into the dense weights changes no output (every mergeable method)."""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import nn
import nn.adapters as ad
from paper_checks import scaled, wrap

from .._properties import prop

PAPER = "Hu et al. 2022 (LoRA, Eq. 3) and the adapter papers of the set"
# one shape per method (a compiled program each): the statement is algebraic in the values,
# which the search varies; vblora's vector length divides the layer sizes
WIDTH = 8
CONFIG = {
    "lora": dict(r=2),
    "polar": dict(r=2),
    "unilora": dict(r=2, d=13),
    "vera": dict(r=4),
    "tied_lora": dict(r=2),
    "vblora": dict(r=2, num_vectors=6, vector_length=2),
    "ravan": dict(r=2, heads=2),
}
TOL = 1e-11  # float64 round-off of two summation orders, relative to max |y|


def _instance(st):
    return st.fixed_dictionaries(
        {
            "method": st.sampled_from(sorted(CONFIG)),
            "move": st.floats(1e-3, 10.0),
            "seed": st.integers(0, 2**16),
        }
    )


@prop(
    "adapters.merge_equals_unmerged",
    paper=PAPER,
    statement="For every mergeable adapter, the merged model W0 + delta_W gives the adapted "
    "model's outputs to float64 round-off, whatever the adapter's trained values.",
    where="LoRA Sec. 4.1 (no inference latency: W = W0 + BA); each method's delta_W",
    strategy=_instance,
    mutants=[
        wrap(
            "nn.adapters._lora.LoRALinear.delta_weight",
            scaled(1.01),
            "the merged LoRA update 1 % too large (a doubled scale factor would be 100 %)",
            name="lora_merge_scale",
        )
    ],
)
def _merge(ex) -> float:
    with jax.enable_x64(True):
        a = _adapted(ex["method"])
        y, ym = _outputs(a, jax.random.key(ex["seed"]), jnp.float64(ex["move"]))
    y, ym = np.asarray(y), np.asarray(ym)
    scale = max(float(np.max(np.abs(y))), 1e-300)
    return float(1.0 - np.max(np.abs(ym - y)) / (TOL * scale))


@functools.cache
def _adapted(method):
    """A float64 tanh MLP with ``method`` injected in both layers (frozen parts fixed per shape)."""
    key = jax.random.key(0)
    base = nn.MLP(WIDTH, WIDTH, WIDTH, 1, activation=jnp.tanh, dtype=jnp.float64, key=key)
    return ad.inject(base, method, key=jax.random.fold_in(key, 1), **CONFIG[method])


@eqx.filter_jit
def _outputs(a, key, move):
    """Adapted and merged outputs on 7 random inputs, every trainable leaf moved by ``move``
    times a standard normal off its initial value: one compiled program per adapted model."""
    trainable, frozen = nn.split(a)
    leaves, tree = jax.tree.flatten(trainable)
    keys = jax.random.split(key, len(leaves) + 1)
    moved = [
        x + move * jax.random.normal(k, x.shape, x.dtype)
        for x, k in zip(leaves, keys[1:], strict=True)
    ]
    a = nn.combine(jax.tree.unflatten(tree, moved), frozen)
    x = jax.random.normal(keys[0], (7, WIDTH), jnp.float64)
    return a(x), ad.merge(a)(x)


CT_PAPER = "Hu et al. 2025, Curvature Tuning (arXiv 2502.07783)"
_X = np.linspace(-30.0, 30.0, 200_001)  # includes 0, where the c = 0 gap is attained


@prop(
    "adapters.ct_gap_bound",
    paper=CT_PAPER,
    statement="The CT activation stays within (1 - beta)[c / (beta e) + (1 - c) ln 2] of ReLU "
    "everywhere (derived here; tight at c = 0, where the gap (1 - beta) ln 2 sits at x = 0).",
    where="Sec. 3 (phi_{beta,c}); the bound derived here, docs/papers/adapters_curvature.md",
    strategy=lambda st: st.fixed_dictionaries(
        {"beta": st.floats(0.5, 0.999), "c": st.floats(0.0, 1.0)}
    ),
    mutants=[
        wrap(
            "nn.adapters._curvature.ct_gap_bound",
            scaled(0.9),
            "the gap bound 10 % low",
            name="ct_bound_10pct_low",
        )
    ],
)
def _ct_gap(ex) -> float:
    with jax.enable_x64(True):
        phi = np.asarray(ad.ctu(jnp.asarray(_X), ex["beta"], ex["c"]))
    gap = float(np.max(np.abs(phi - np.maximum(_X, 0.0))))
    bound = ad.ct_gap_bound(ex["beta"], ex["c"])
    return float(1.0 - gap / (bound * (1 + 1e-12) + 1e-300))  # 1e-12: float64 round-off of phi


def _stiefel(p, r, rng):
    q, rr = np.linalg.qr(rng.standard_normal((p, r)))
    return q * np.sign(np.diag(rr))


@prop(
    "adapters.polar_stable_rank",
    paper="PoLAR 2025 (arXiv 2506.03133)",
    statement="With Stiefel factors X (m x r), Y (n x r), Delta W = X Theta Y^T has the stable "
    "rank and Frobenius norm of Theta (derived here: equal nonzero singular values), and "
    "1 <= sr <= r; the zero matrix has sr 0.",
    where="Sec. 2 (stable rank), Sec. 3 (X Theta Y^T); identity derived here, "
    "docs/papers/adapters_polar.md",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "r": st.integers(1, 8),
            "extra_rows": st.integers(0, 8),
            "extra_cols": st.integers(0, 8),
            "log10_spread": st.floats(0.0, 6.0),
            "seed": st.integers(0, 2**31 - 1),
        }
    ),
    mutants=[
        wrap(
            "nn.adapters._core.stable_rank",
            lambda f: (
                lambda m: (
                    jnp.sum(jnp.asarray(m) ** 2) / jnp.max(jnp.sum(jnp.asarray(m) ** 2, axis=-2))
                )
            ),
            "||M||_2^2 taken as the largest squared column norm",
            name="sr_column_norm",
        )
    ],
)
def _polar_sr(ex) -> float:
    rng = np.random.default_rng(ex["seed"])
    r = ex["r"]
    m, n = r + ex["extra_rows"], r + ex["extra_cols"]
    x, y = _stiefel(m, r, rng), _stiefel(n, r, rng)
    # Theta's singular values spread over up to 6 decades: the identity is spectral
    theta = rng.standard_normal((r, r)) * 10.0 ** (-ex["log10_spread"] * rng.uniform(size=r))
    dw = x @ theta @ y.T
    with jax.enable_x64(True):
        sr_dw, sr_theta = float(ad.stable_rank(dw)), float(ad.stable_rank(theta))
        sr_zero = float(ad.stable_rank(np.zeros((m, n))))
    fro = abs(np.linalg.norm(dw) - np.linalg.norm(theta)) / np.linalg.norm(theta)
    return float(
        min(
            1.0 - abs(sr_dw - sr_theta) / (1e-10 * sr_theta),
            1.0 - fro / 1e-12,
            (sr_dw - (1 - 1e-12)) / r,
            (r + 1e-12 - sr_dw) / r,
            1.0 if sr_zero == 0.0 else -1.0,
        )
    )


@prop(
    "adapters.unilora_isometry",
    paper="Uni-LoRA 2025 (arXiv 2506.00799)",
    statement="Uni-LoRA's projection P (D x d, one nonzero 1/sqrt(n_j) per row, balanced groups) "
    "is an isometry: P^T P = I_d and ||P theta|| = ||theta||, for every 1 <= d <= D and seed "
    "(and P is a function of the seed).",
    where="the isometric projection (abstract; official code generate_index; "
    "docs/papers/adapters_unilora.md)",
    strategy=lambda st: st.fixed_dictionaries(
        {"D": st.integers(1, 400), "d": st.integers(1, 400), "seed": st.integers(0, 2**31 - 1)}
    ),
    mutants=[
        wrap(
            "nn.adapters._unilora.isometric_projection",
            lambda f: lambda *a, **k: (f(*a, **k)[0], f(*a, **k)[1] ** 2),
            "values 1/n_j instead of 1/sqrt(n_j)",
            name="value_not_sqrt",
        )
    ],
)
def _unilora(ex) -> float:
    D = ex["D"]
    d = min(ex["d"], D)
    idx, val = ad.isometric_projection(D, d, ex["seed"])
    p = np.zeros((D, d))
    p[np.arange(D), idx] = val
    counts = np.bincount(idx, minlength=d)
    theta = np.random.default_rng(ex["seed"]).standard_normal(d)
    norm_err = abs(np.linalg.norm(theta[idx] * val) - np.linalg.norm(theta))  # P theta, a gather
    return float(
        min(
            1.0 - float(np.max(np.abs(p.T @ p - np.eye(d)))) / 1e-14,
            1.0 if np.all((p != 0).sum(axis=1) == 1) else -1.0,  # one nonzero per row
            1.0 if set(np.unique(counts)) <= {D // d, D // d + 1} else -1.0,  # balanced groups
            1.0 - norm_err / (1e-13 * np.linalg.norm(theta)),
            1.0 if np.array_equal(ad.isometric_projection(D, d, ex["seed"])[0], idx) else -1.0,
        )
    )


@prop(
    "adapters.tfb_refactor",
    paper="TFB 2025 (arXiv 2412.05723)",
    statement="TFB's re-factorisation of a trained LoRA, B' = U diag(d), A' = V^T A from the thin "
    "SVD B = U diag(d) V^T, keeps the update (B'A' = BA) and makes B' column-orthogonal with "
    "B'^T B' = diag(d^2), for every shape and rank.",
    where="Sec. 3 (re-factorisation before the posterior on A'); docs/papers/adapters_tfb.md",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "r": st.integers(1, 8),
            "m": st.integers(1, 16),
            "n": st.integers(1, 16),
            "seed": st.integers(0, 2**31 - 1),
        }
    ),
    mutants=[
        wrap(
            "nn.adapters._tfb.tfb_refactor",
            lambda f: lambda b, a: (lambda bp, ap, d: (bp / d, d[:, None] * ap, d))(*f(b, a)),
            "diag(d) put on A' instead of B' (B' = U): BA kept, B'^T B' = I",
            name="scale_on_a",
        )
    ],
)
def _tfb(ex) -> float:
    rng = np.random.default_rng(ex["seed"])
    b, a = rng.standard_normal((ex["m"], ex["r"])), rng.standard_normal((ex["r"], ex["n"]))
    with jax.enable_x64(True):
        bp, ap, d = (np.asarray(x) for x in ad.tfb_refactor(b, a))
    ba = b @ a
    err_ba = np.max(np.abs(bp @ ap - ba)) / np.max(np.abs(ba))
    err_gram = np.max(np.abs(bp.T @ bp - np.diag(d**2))) / np.max(d) ** 2
    return float(min(1.0 - err_ba / 1e-12, 1.0 - err_gram / 1e-12))


@prop(
    "adapters.ct_at_zero",
    paper=CT_PAPER,
    statement="The CT activation phi_{beta,c}(x) = c x sigmoid(beta x / (1 - beta)) + "
    "(1 - c)(1 - beta) softplus(x / (1 - beta)) takes the value (1 - c)(1 - beta) ln 2 at 0 "
    "with slope 1/2 there, for every 0 <= beta < 1 and 0 <= c <= 1 (derived here).",
    where="Sec. 3 (phi_{beta,c})",
    strategy=lambda st: st.fixed_dictionaries(
        {"beta": st.floats(0.0, 0.999), "c": st.floats(0.0, 1.0)}
    ),
    mutants=[
        wrap(
            "nn.adapters._curvature.ctu",
            lambda f: lambda x, beta, c: f(x, beta, 1 - c),
            "the two branches' weights c and 1 - c swapped",
            name="mix_swapped",
        )
    ],
)
def _ct_zero(ex) -> float:
    beta, c = ex["beta"], ex["c"]
    with jax.enable_x64(True):
        x0 = jnp.asarray(0.0, jnp.float64)
        value = float(ad.ctu(x0, beta, c))
        slope = float(jax.grad(lambda x: ad.ctu(x, beta, c))(x0))
    return float(
        min(
            1.0 - abs(value - (1 - c) * (1 - beta) * math.log(2)) / 1e-15,
            1.0 - abs(slope - 0.5) / 1e-13,
        )
    )
