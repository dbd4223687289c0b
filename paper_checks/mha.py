"""Claims of Masumura & Taki 2025 (NeurIPS 2025, arXiv 2511.20698): modern Hopfield attention (MHA),
attention logits carried across layers as a Hopfield hidden state (:mod:`nn.hopfield`).

- ``mha.exact_reductions``: alpha' = 0 is vanilla attention, no parameter is added, cached decoding
  equals the prefill, alpha' in {0, 1} stays finite under the causal mask.
- ``mha.rank_collapse``: in a pure-attention stack at initialisation the hidden state turns
  Dong et al.'s doubly exponential token collapse into the slower law derived in
  :mod:`theory.rank_collapse` (decrements growing by -log10 alpha' per layer). The laws are
  derived here (no number of the paper), so the rules are two-valued. The law does not see an
  update ``h = alpha' h + S`` without the ``(1 - alpha')`` factor (RealFormer-style): once the
  tokens collapse the new scores are nearly constant across keys and the inherited ``S_1`` part
  has the same weight either way (second difference 0.308 -> 0.309, depth-3 gap 3.59 -> 3.62
  decades at quick, seed 0). The claim therefore also checks that the carried state is the
  paper's EMA of the scores, computed from the layer's queries and keys (max deviation 0 of the
  largest score, float64; under the mutant ``no_one_minus_alpha`` 98.7, seed 0).
- ``mha.skipfree_vit``: the paper's skip-free ViT experiment on scikit-learn's ``load_digits``:
  vanilla loses accuracy with depth, MHA keeps it. Calibration here (d 32, 4 heads, Adam 1e-3,
  batch 32, 400 steps, 3-4 seeds): vanilla 0.77-0.87 at depth 2 and chance (0.10) from depth 4 on;
  MHA alpha' = 0.5 and 0.8 are also at chance at depths 6 and 8, and alpha' = 0.8 trains in one
  seed of three at depth 4 (0.44). The claim is therefore registered at depths (2, 4) with
  alpha' = 0.8, the most favourable setting found. The paper's effect (CIFAR-10, depth 4: MHA
  85.74 % against vanilla 57.38 %, vanilla 63.72 % at depth 2) is registered as the same gaps
  in accuracy (+0.28, +0.06; both tasks have 10 classes). Vanilla does degrade (0.83 -> near
  chance), but MHA is no better at depth 4 (about -0.07 +- 0.08), which excludes +0.28 with
  power >= 0.8: recorded ``not reproduced`` at ``quick``.

- ``mha.token_uniformity``: with skips, 12-layer LMs on order-2 Markov languages (Fig. 1's
  analogue, ``docs/papers/mha.md#departures-and-why``) trained to near their entropy floor: MHA's
  final-layer tokens are less uniform than
  vanilla's at no worse validation NLL. Both use standard residuals: with the convex skip
  alpha = 0.5 of the first design the stream is damped by alpha per layer, and at 12 layers the
  tokens collapse to one vector (mean cosine 1.0000, NLL at chance after 2000 steps, seed 0, lr
  3e-3: measured here). Each model takes the better learning rate of one grid (``quick``: 1e-3
  alone, the rate both models chose at seeds 0-2 on 32 symbols). Two choices, both measured
  (README): (1) 8 symbols, not the 32 first planned: the paper compares trained models (GPT-2, Fig.
  1), and on 32 symbols the quick budget stops both far above the floor (NLL 2.9 against 1.75) while
  the cosine still falls tenfold, so the gap measured training progress (MHA the more uniform
  after 500 steps, the less after 2000: 0.0146 +- 0.0056 over 30 seeds, per-seed SD 0.03; at
  equal validation NLL -0.0015 +- 0.0057) and six seeds passed or failed with the seed. On 8
  symbols both end within 0.09 nats of the floor and the per-seed SD is 0.002-0.006. (2) Each
  replicate its own language: with one language per claim seed the verdict followed the
  language drawn (+0.0037 +- 0.0010, +0.0006 +- 0.0025, +0.0008 +- 0.0012 at seeds 0-2, 6
  seeds each), so the SE is over languages, as ACAVP's is over source models. The report adds
  the gap at equal validation NLL (:func:`cosine_at_loss`), reported, not judged.

Not registered (``docs/papers/mha.md#departures-and-why``): an accuracy gain at shallow depth with
skips; a public 4-layer replication found none, and the paper's own ViT-Tiny row gets worse.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import nn
from _core.streams import stream_key, substream_seed
from nn.hopfield import HopfieldViT, decode, hopfield_attention, hopfield_lm, patchify
from paper_checks import (
    Measurement,
    at_most,
    claim,
    computed,
    holds,
    measure,
    memo,
    paired_gap,
    record,
    sizes,
    unit,
    within,
    wrap,
)
from theory.rank_collapse import relative_residual

PAPER = "Masumura & Taki 2025 (NeurIPS, arXiv 2511.20698)"

# ------------------------------------------------------------------------------ exact reductions
EXACT_SIZES = sizes(smoke=dict(T=6, layers=2), quick=dict(T=8, layers=3), full=dict(T=32, layers=6))


@memo
def exact_reductions(T: int, layers: int, seed: int) -> dict:
    """Max abs differences (float64): MHA(alpha'=0, ordinary residual) vs ``nn.TransformerLM``;
    cached decode vs prefill for alpha' in {0.5, 1} with the convex skip; parameter counts;
    finiteness of logits and gradients for alpha' in {0, 1} under the causal mask."""
    with jax.enable_x64(True):
        key = jax.random.key(seed)
        V, d, H = 23, 16, 4
        toks = jax.random.randint(jax.random.fold_in(key, 1), (3, T), 0, V)
        van = nn.TransformerLM(V, d, H, layers, T, key=key)
        mha0 = hopfield_lm(V, d, H, layers, T, alpha_prime=0.0, key=key)
        red = float(jnp.max(jnp.abs(van(toks) - mha0(toks))))
        dec, finite = [], []
        for ap in (0.5, 1.0):
            lm = hopfield_lm(V, d, H, layers, T, alpha_prime=ap, alpha=0.5, key=key)
            dec.append(float(jnp.max(jnp.abs(decode(lm, toks) - lm(toks)))))
        for ap in (0.0, 1.0):
            lm = hopfield_lm(V, d, H, layers, T, alpha_prime=ap, alpha=0.5, key=key)
            loss, g = eqx.filter_jit(eqx.filter_value_and_grad(nn.lm_loss))(lm, toks)
            finite.append(
                bool(jnp.isfinite(loss))
                and all(bool(jnp.all(jnp.isfinite(a))) for a in jax.tree.leaves(g))
            )
        params = (nn.count_params(van), nn.count_params(mha0))
    return dict(reduction=red, decode=max(dec), params=params, finite=all(finite))


@claim(
    "mha.exact_reductions",
    paper=PAPER,
    statement="MHA adds no trainable parameter, reduces to vanilla attention at alpha' = 0, and "
    "(derived here) its cached decoding, passing one hidden row per head up the "
    "stack, "
    "equals the full prefill.",
    where="Sec. 3 (MHA update; 'without adding training parameters'); decode: derived",
    sizes=EXACT_SIZES,
    mutants=[
        wrap(
            "nn.hopfield.hidden_update",
            lambda f: lambda h, s, a: a * s + (1 - a) * h,
            "EMA weights swapped: alpha' on the new scores",
            name="ema_swapped",
        ),
        wrap(
            "nn.hopfield.HopfieldAttention.decode_step",
            lambda f: lambda self, x, h, kc, vc, t: f(self, x, None, kc, vc, t),
            "decode does not pass the hidden row up the stack",
            name="decode_no_row",
        ),
    ],
)
def _exact(size, seed) -> Measurement:
    r = exact_reductions(size.T, size.layers, seed)
    return measure(
        at_most(r["reduction"], 1e-12, name="alpha'=0 vs vanilla |diff|"),
        at_most(r["decode"], 1e-12, name="decode vs prefill |diff|"),
        holds(
            r["params"][0] == r["params"][1],
            name="parameter count",
            rule="count(MHA) == count(vanilla)",
            measured=list(r["params"]),
        ),
        holds(r["finite"], name="finite", rule="alpha' in {0, 1}: loss and grads finite"),
        detail=f"float64, vocab 23, d 16, 4 heads, {size.layers} layers, T={size.T}, batch 3, "
        f"seed {seed}; decode for alpha' in {{0.5, 1}}, grads for {{0, 1}}, alpha = 0.5",
    )


# ------------------------------------------------------------------------------- rank collapse
COLLAPSE_SIZES = sizes(
    smoke=dict(seeds=8, depth=12), quick=dict(seeds=48, depth=12), full=dict(seeds=200, depth=12)
)
T_TOK, D_MODEL, N_HEADS = 16, 32, 4
ALPHAS = (0.0, 0.5, 0.8)
#: last depth used for each alpha' (before the float64 floor ~1e-15.6 is approached)
LAST = {0.0: 3, 0.5: 8, 0.8: 12}


def pure_attention_stack(X, W, alpha_prime):
    """Token states of a pure-attention MHA stack (no skip, no MLP, no norm; Dong et al. 2021's
    SAN with the hidden state): ``X_{n+1} = concat_h softmax(h_n) X_n W_V W_O``.

    ``X (T, d)``, ``W (depth, 4, d, d)`` (Q, K, V, O per layer). Returns ``(depth + 1, T, d)``
    and the largest ``max|h_n - E_n| / max|S_n|`` over the layers, ``E_n = alpha' E_{n-1} +
    (1 - alpha') S_n`` (``E_1 = S_1``) the paper's hidden state computed here from each layer's
    scores ``S_n = Q_n K_n^T / sqrt(d_h)``, not read back from the library.
    """
    T, d = X.shape
    a = alpha_prime

    def layer(X, Wn, h):
        q, k, v = ((X @ Wn[i]).reshape(T, N_HEADS, -1).swapaxes(0, 1) for i in range(3))
        s = jnp.einsum("htd,hsd->hts", q, k) / np.sqrt(q.shape[-1])
        o, h = hopfield_attention(q, k, v, h, alpha_prime=a, causal=False)
        return o.swapaxes(0, 1).reshape(T, d) @ Wn[3], h, s

    X1, h1, s1 = layer(X, W[0], None)

    def body(carry, Wn):
        X, h, e = carry
        X, h, s = layer(X, Wn, h)
        e = a * e + (1 - a) * s
        return (X, h, e), (X, jnp.abs(h - e).max() / jnp.abs(s).max())

    _, (Xs, dev) = jax.lax.scan(body, (X1, h1, s1), W[1:])
    return jnp.concatenate([X[None], X1[None], Xs], 0), jnp.max(dev)


@memo
def rank_collapse(seeds: int, depth: int, seed: int) -> dict:
    """log10 relative residuals ``(alpha', seeds, depth + 1)`` of :func:`pure_attention_stack` at
    random init: X_0 ~ N(0, 1), weights N(0, 1/d) fresh per layer (float64), T=16, d=32, 4 heads;
    and per alpha' the largest deviation of the carried state from the paper's (``state``)."""
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(1000 + seed), seeds)

        def one(k, ap):
            kx, kw = jax.random.split(k)
            X = jax.random.normal(kx, (T_TOK, D_MODEL), jnp.float64)
            W = jax.random.normal(kw, (depth, 4, D_MODEL, D_MODEL), jnp.float64)
            return pure_attention_stack(X, W / np.sqrt(D_MODEL), ap)

        runs = {ap: jax.jit(jax.vmap(functools.partial(one, ap=ap)))(keys) for ap in ALPHAS}
        logres = {ap: np.log10(relative_residual(np.asarray(r[0]))) for ap, r in runs.items()}
        state = {ap: float(np.max(r[1])) for ap, r in runs.items()}
    return dict(alphas=ALPHAS, logres=logres, state=state)


def collapse_stats(r: dict) -> dict:
    """Per-seed statistics of the collapse laws: vanilla decrement ratio (l1-l2 -> l2-l3), gap at
    depth 3, and mean second difference of l_n from decrement 3 to the last depth per alpha'."""
    out = {}
    van = r["logres"][0.0]
    d2, d3 = van[:, 1] - van[:, 2], van[:, 2] - van[:, 3]
    out["ratio"] = d3.mean() / d2.mean()
    out["ratio_se"] = np.std(d3 / d2.mean() - d2 * d3.mean() / d2.mean() ** 2, ddof=1) / np.sqrt(
        len(d2)
    )  # delta method
    for ap in ALPHAS[1:]:
        l = r["logres"][ap]
        D = LAST[ap]
        # mean second difference of l from decrement delta_3 = l2 - l3 to delta_D = l_{D-1} - l_D
        s = ((l[:, D - 1] - l[:, D]) - (l[:, 2] - l[:, 3])) / (D - 3)
        out[f"d2_{ap}"], out[f"d2_se_{ap}"] = s.mean(), s.std(ddof=1) / np.sqrt(len(s))
    out["gap3"] = (r["logres"][0.5][:, 3], van[:, 3])
    return out


#: the mutant shared by the rank-collapse claims: no hidden state is carried between layers
NO_STATE = wrap(
    "nn.hopfield.hidden_update",
    lambda f: lambda h, s, a: s,
    "hidden state not carried (h_n = S_n at every layer)",
    name="no_state",
)


@claim(
    "mha.rank_collapse",
    paper=PAPER,
    statement="In a pure-attention stack at initialisation the hidden state slows token rank "
    "collapse: vanilla collapses doubly exponentially (decrement ratio ~3, Dong et "
    "al.), "
    "MHA's log-residual decrements grow by only -log10 alpha' per layer (derived "
    "here), "
    "leaving > 2 decades more residual at depth 3.",
    where="Sec. 4 (rank-collapse theorem, geometric m=0 term); law: theory.rank_collapse",
    sizes=COLLAPSE_SIZES,
    mutants=[
        NO_STATE,
        wrap(
            "nn.hopfield.hidden_update",
            lambda f: lambda h, s, a: a**2 * h + (1 - a**2) * s,
            "state weight alpha'^2 instead of alpha'",
            name="alpha_squared",
        ),
        wrap(
            "nn.hopfield.hidden_update",
            lambda f: lambda h, s, a: a * h + s,
            "h = alpha' h + S without the (1 - alpha') factor (RealFormer-style accumulation)",
            name="no_one_minus_alpha",
        ),
    ],
)
def _collapse(size, seed) -> Measurement:
    r = rank_collapse(size.seeds, size.depth, seed)
    st = collapse_stats(r)
    n = size.seeds
    law = [
        within(
            st[f"d2_{ap}"],
            abs(np.log10(ap)),
            3 * st[f"d2_se_{ap}"] + 0.02,
            name=f"second difference, alpha'={ap}",
        )
        for ap in ALPHAS[1:]
    ]
    return measure(
        # res_{l+1} = c res_l^3 gives decrements l_l - l_{l+1} in ratio exactly 3 for any
        # constant c (derived here); c varies with depth at T = 16, hence 0.5 beyond 3 SE
        within(st["ratio"], 3.0, 3 * st["ratio_se"] + 0.5, name="vanilla decrement ratio"),
        paired_gap(*st["gap3"], n_se=2, margin=2.0, name="l3(alpha'=0.5) - l3(vanilla)"),
        *law,
        # the state the law is measured on is the paper's EMA of the scores (weights summing to
        # 1, so |h_n| <= max_k |S_k|; docs/papers/mha.md): the law alone does not see an update
        # without the (1 - alpha') factor (module docstring)
        at_most(
            max(r["state"][ap] for ap in ALPHAS[1:]),
            1e-12,
            name="max|h_n - EMA_n(S)| / max|S_n|",
        ),
        extra={
            "vanilla ratio": st["ratio"],
            "mean l3": {str(ap): float(r["logres"][ap][:, 3].mean()) for ap in ALPHAS},
        },
        detail=f"T=16, d=32, 4 heads, N(0,1/d) weights, {n} inits (seed {seed}), float64; second "
        "difference = mean growth of the log10 decrement from depth 3 to "
        f"{LAST[0.5]} (alpha' .5) / {LAST[0.8]} (.8), tol 3 SE + 0.02 (transient); vanilla "
        "decrement ratio two-sided around the cubic law's 3 (measured 3.34-3.55, seeds 0-2)",
    )


# ------------------------------------------------------------------------- skip-free ViT (digits)
VIT_SIZES = sizes(
    smoke=dict(seeds=2, steps=2, depths=(1, 2)),
    quick=dict(seeds=4, steps=400, depths=(2, 4)),
    full=dict(seeds=10, steps=1500, depths=(2, 4, 6, 8)),
)
VIT = dict(d_model=32, num_heads=4, mlp_ratio=2, alpha_mha=0.8, lr=1e-3, batch=32)
#: the paper's skip-free ViT on CIFAR-10 (docs/papers/mha.md C4), as accuracy fractions: MHA -
#: vanilla at depth 4 (85.74 - 57.38 %) and vanilla's loss from depth 2 to 4 (63.72 - 57.38 %),
#: registered as the same gaps in accuracy on the digits (both tasks have 10 classes)
VIT_PAPER = dict(mha_gain=0.2836, vanilla_loss=0.0634)


@functools.cache
def digits(seed: int = 0):
    """load_digits as 2x2 patches (16 tokens of dim 4, pixels / 16), a stratified 80/20 split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).reshape(-1, 8, 8)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    P = lambda a: np.asarray(patchify(jnp.asarray(a, jnp.float32), 2))  # noqa: E731
    return P(Xtr), ytr.astype(np.int32), P(Xte), yte.astype(np.int32)


def train_vit(depth, alpha_prime, seeds, steps, seed):
    """Train ``seeds`` skip-free ViTs (``alpha = 0``, no MLP residual) in one vmapped program;
    returns test accuracies ``(seeds,)`` and the final-layer log10 residual on test images."""
    Xtr, ytr, Xte, yte = digits(seed)
    keys = jax.random.split(jax.random.key(seed), seeds)

    def make(k):
        return HopfieldViT(
            16,
            4,
            10,
            VIT["d_model"],
            VIT["num_heads"],
            depth,
            alpha_prime=alpha_prime,
            alpha=0.0,
            mlp_residual=False,
            mlp_ratio=VIT["mlp_ratio"],
            dtype=jnp.float32,
            key=k,
        )

    models = eqx.filter_vmap(make)(keys)
    params, static = eqx.partition(models, eqx.is_array)
    opt = optax.adam(VIT["lr"])
    idx = jax.random.randint(
        jax.random.fold_in(jax.random.key(seed), 7), (steps, seeds, VIT["batch"]), 0, len(ytr)
    )
    Xtr, ytr = jnp.asarray(Xtr), jnp.asarray(ytr)

    def loss(m, ix):
        return nn.cross_entropy(m(Xtr[ix]), ytr[ix])

    @jax.jit
    def run(p):  # idx is (steps, seeds, batch): seeds on axis 1
        return jax.vmap(lambda p, ix: nn.fit(loss, opt, p, ix, frozen=static)[0], (0, 1))(p, idx)

    p = run(params)

    @jax.jit
    def evaluate(p):
        m = eqx.combine(p, static)
        return jnp.mean(jnp.argmax(m(Xte), -1) == yte), m.features(Xte)

    acc, feats = jax.vmap(evaluate)(p)
    res = relative_residual(np.asarray(feats, np.float64))  # 0 once collapsed exactly (float32)
    return np.asarray(acc, float), np.log10(np.maximum(res, 1e-8)).mean(-1)


def _vit_specs(size, seed):
    """:func:`train_vit` arguments: vanilla (alpha' = 0) at every depth, MHA (alpha' =
    VIT["alpha_mha"]) at the depths beyond the shallowest; seeds paired (same init keys and
    batches). Independent runs: units of the claim, one task each on a cluster."""
    models = [(L, 0.0) for L in size.depths] + [(L, VIT["alpha_mha"]) for L in size.depths[1:]]
    return [(L, ap, size.seeds, size.steps, seed) for L, ap in models]


@claim(
    "mha.skipfree_vit",
    paper=PAPER,
    statement="Without skip connections a ViT's accuracy falls with depth, while MHA keeps it: "
    "at the deeper depth MHA beats vanilla, and vanilla is worse than when shallow.",
    where="Sec. 5, skip-free ViT experiment (no-skip rank-collapse study); paper's effect: "
    "CIFAR-10 depth 4, MHA 85.74 % against 57.38 %, vanilla 63.72 % at depth 2 (VIT_PAPER)",
    sizes=VIT_SIZES,
    replicates=lambda size, seed: [unit(train_vit, *a) for a in _vit_specs(size, seed)],
    recorded=record(
        quick="not reproduced",
        reason="without skips vanilla attention does degrade with depth here (0.83 at depth 2, "
        "near chance at 4), but MHA (alpha' = 0.8, the most favourable setting found) is no "
        "better at depth 4 (MHA - vanilla about -0.07, SE about 0.08), while the paper's CIFAR-10 "
        "gap of +0.28 would pass with power >= 0.8.",
    ),
    # NO_STATE makes MHA vanilla (gap -0.07 -> 0, about 1 SE: not a 3-SE move); the causal mask
    # leaves the CLS token (first) blind to the patches at every depth
    mutants=[
        NO_STATE,
        wrap(
            "nn.hopfield.hopfield_attention",
            lambda f: lambda q, k, v, h=None, **kw: f(q, k, v, h, **(kw | {"causal": True})),
            "the ViT's attention under the LM's causal mask",
            name="vit_causal",
        ),
    ],
)
def _vit(size, seed) -> Measurement:
    specs = _vit_specs(size, seed)
    r = {("mha" if a[1] else "vanilla", a[0]): computed(train_vit, *a) for a in specs}
    deep, shallow = max(size.depths), min(size.depths)
    return measure(
        paired_gap(
            r[("mha", deep)][0],
            r[("vanilla", deep)][0],
            n_se=2,
            margin=0.0,
            name=f"acc MHA - vanilla, L={deep}",
            paper=VIT_PAPER["mha_gain"],
        ),
        paired_gap(
            r[("vanilla", shallow)][0],
            r[("vanilla", deep)][0],
            n_se=2,
            margin=0.0,
            name=f"vanilla acc L={shallow} - L={deep}",
            paper=VIT_PAPER["vanilla_loss"],
        ),
        extra={f"{n} acc L={L}": float(r[(n, L)][0].mean()) for (n, L) in r}
        | {f"{n} log10 res L={L}": float(r[(n, L)][1].mean()) for (n, L) in r},
        detail=f"load_digits, 2x2 patches, d=32, 4 heads, skip-free (alpha=0, no MLP residual), "
        f"Adam {VIT['lr']:g}, batch {VIT['batch']}, {size.steps} steps, {size.seeds} paired "
        f"seeds (seed {seed}); MHA alpha'={VIT['alpha_mha']}",
    )


# ---------------------------------------------------------------- token uniformity with skips (LM)
TU_SIZES = sizes(
    smoke=dict(layers=2, steps=4, evals=2, seeds=2, lrs=(3e-3,), length=8, batch=4),
    quick=dict(layers=12, steps=2000, evals=20, seeds=6, lrs=(1e-3,), length=16, batch=16),
    full=dict(layers=12, steps=2000, evals=20, seeds=12, lrs=(1e-3, 3e-3), length=32, batch=32),
)  # quick: the 12-layer design on 4x fewer tokens per step (the cost is compute-bound),
# one rate: 3e-3 lost on validation NLL to 1e-3 for both models at every seed measured (on 32
# symbols, before the claim moved to 8)
TU = dict(vocab=8, d_model=32, num_heads=4, alpha_mha=0.5, val=256)  # vocab: module docstring


def mean_cosine(x):
    """Mean pairwise cosine similarity of the token vectors of each sequence ``(..., T, d)``
    (the off-diagonal mean; 1 when every token is the same vector)."""
    u = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    T = x.shape[-2]
    c = jnp.einsum("...td,...sd->...ts", u, u)
    return (c.sum((-2, -1)) - T) / (T * (T - 1))


def _languages(seed, n):
    """The ``n`` order-2 Markov languages of ``seed`` (language ``j`` drawn with seed
    ``1000 seed + j``): replicate ``j`` trains on language ``j``."""
    from dynamics.distill import Order2Markov

    return [
        Order2Markov.random(substream_seed(seed, j), TU["vocab"], concentration=0.1)
        for j in range(n)
    ]


@memo
def train_lm_seeds(layers, alpha_prime, lrs, seeds, steps, evals, length, batch, seed):
    """Train pre-norm LMs with skips (MHA ``alpha_prime``; 0 is vanilla, standard residuals),
    replicate ``j`` on language ``j`` of :func:`_languages` with its own init and batches (shared
    across rates and models), every learning rate of ``lrs`` times ``seeds`` replicates in one
    vmapped program; validation NLL (on the replicate's language) and final-layer mean cosine are
    measured after each of ``evals`` equal chunks of the ``steps`` (the last one at the end of
    training). Returns both, each ``(len(lrs), seeds, evals)``."""
    T, B, R = length, batch, len(lrs)
    if steps % evals:
        raise ValueError(f"`evals` must divide steps = {steps}; got {evals}.")
    keys = jax.random.split(stream_key(seed, 7, 1), seeds)
    draws = jax.random.split(stream_key(seed, 7, 2), seeds)
    langs = _languages(seed, seeds)
    toks = jnp.stack(
        [c.sample(steps * B, T + 1, key=k) for c, k in zip(langs, draws, strict=True)]
    ).reshape(seeds, evals, -1, B, T + 1)
    vkey = stream_key(seed, 7, 3)
    val = jnp.stack([c.sample(TU["val"], T + 1, key=vkey) for c in langs])

    def make(k):
        return hopfield_lm(TU["vocab"], TU["d_model"], TU["num_heads"], layers, T,
                           alpha_prime=alpha_prime, dtype=jnp.float32, key=k)  # fmt: skip

    params, static = eqx.partition(eqx.filter_vmap(make)(keys), eqx.is_array)
    tile = lambda v: jnp.concatenate([v] * R)  # noqa: E731  (rate-major: index r * seeds + s)
    params, toks, val = jax.tree.map(tile, params), tile(toks), tile(val)
    rates = jnp.repeat(jnp.asarray(lrs, jnp.float32), seeds)

    def nll(m, tk):
        logits = jax.vmap(m)(tk[:, :-1])
        return nn.cross_entropy(logits.reshape(-1, logits.shape[-1]), tk[:, 1:].reshape(-1))

    @jax.jit
    def run(p, tk, lr, vl):
        opt = optax.adam(lr)

        def chunk(carry, x):
            p, st, _ = nn.fit(nll, opt, carry[0], x, frozen=static, opt_state=carry[1])
            m = eqx.combine(p, static)
            return (p, st), (nll(m, vl), jnp.mean(mean_cosine(jax.vmap(m.hidden)(vl[:, :-1]))))

        return jax.lax.scan(chunk, (p, opt.init(p)), tk)[1]

    v, c = jax.vmap(run)(params, toks, rates, val)
    return tuple(np.asarray(a, float).reshape(R, seeds, evals) for a in (v, c))


def cosine_at_loss(nll, cos, level):
    """Mean cosine of each run ``(seeds, evals)`` where its validation NLL first reaches ``level``
    (per seed), linear between the two checkpoints around the crossing; the first checkpoint's
    when it is already below, NaN when the run never gets there (derived here: a matched-loss
    reading of the cosine, since both follow training progress)."""
    out = np.full(len(level), np.nan)
    for s, (v, c, lev) in enumerate(zip(nll, cos, level, strict=True)):
        hit = np.flatnonzero(v <= lev)
        if hit.size == 0:
            continue
        i = hit[0]  # v[i] <= lev < v[i - 1]: interpolate on the increasing pair (v[i], v[i - 1])
        out[s] = np.interp(lev, v[i - 1 : i + 1][::-1], c[i - 1 : i + 1][::-1]) if i else c[0]
    return out


def _tu_specs(size, seed):
    """Vanilla's and MHA's (alpha' = TU["alpha_mha"]) :func:`train_lm_seeds` arguments: two
    independent runs, one task each on a cluster."""
    return [
        (
            size.layers,
            ap,
            tuple(size.lrs),
            size.seeds,
            size.steps,
            size.evals,
            size.length,
            size.batch,
            seed,
        )
        for ap in (0.0, TU["alpha_mha"])
    ]


@claim(
    "mha.token_uniformity",
    paper=PAPER,
    statement="With skip connections, MHA's hidden state makes the final-layer tokens of a deep "
    "language model less uniform (lower mean pairwise cosine similarity) than vanilla attention, "
    "without a worse validation loss.",
    where="abstract; Fig. 1 (GPT-2 token cosine similarity, layers 12 and 24); docs/papers/mha.md",
    sizes=TU_SIZES,
    replicates=lambda size, seed: [unit(train_lm_seeds, *a) for a in _tu_specs(size, seed)],
    mutants=[NO_STATE],
    recorded=record(
        quick="not reproduced",
        reason="as designed, not as the paper defines MHA: the models drop the paper's alpha "
        "skip and nothing collapses in either (final-layer cosine about 0.16 for both; gap "
        "+0.0022 +- 0.0014, -0.0007 +- 0.0020, -0.0010 +- 0.0014 at seeds 0-2); the fair test "
        "(MHA with its skip, where vanilla tokens do become uniform) is open (issue 44)",
    ),
)
def _token_uniformity(size, seed) -> Measurement:
    runs = (computed(train_lm_seeds, *a) for a in _tu_specs(size, seed))
    r = dict(zip(("vanilla", "mha"), runs, strict=True))  # {model: (nll, cos)}, (lrs, seeds, evals)
    best = {k: int(np.argmin(v[0][..., -1].mean(1))) for k, v in r.items()}  # same grid and rule
    (nv, cv), (nm, cm) = ((r[k][0][best[k]], r[k][1][best[k]]) for k in ("vanilla", "mha"))
    lv, lm = (size.lrs[best[k]] for k in ("vanilla", "mha"))
    d = nm[:, -1] - nv[:, -1]
    se = float(d.std(ddof=1) / np.sqrt(d.size))
    level = np.maximum(nv[:, -1], nm[:, -1])  # the end NLL of the worse model: both reached it
    matched = cosine_at_loss(nv, cv, level) - cosine_at_loss(nm, cm, level)
    return measure(
        paired_gap(cv[:, -1], cm[:, -1], n_se=2, name="cosine vanilla - MHA"),
        at_most(float(d.mean()), 0.0, tol=2 * se, name="val NLL MHA - vanilla (nats)"),
        extra={
            "cosine vanilla / MHA": [float(cv[:, -1].mean()), float(cm[:, -1].mean())],
            "val NLL vanilla / MHA": [float(nv[:, -1].mean()), float(nm[:, -1].mean())],
            "cosine vanilla - MHA at equal val NLL (mean, SE; reported)": [
                float(matched.mean()),
                float(matched.std(ddof=1) / np.sqrt(matched.size)),
            ],
            "entropy rate (NLL floor), mean over languages": float(
                np.mean([c.entropy_rate for c in _languages(seed, size.seeds)])
            ),
            "lr vanilla / MHA": [lv, lm],
            "per lr": {
                f"{lr:g}": {
                    k: {"NLL": float(v[0][i, :, -1].mean()), "cosine": float(v[1][i, :, -1].mean())}
                    for k, v in r.items()
                }
                for i, lr in enumerate(size.lrs)
            },  # fmt: skip
        },
        detail=f"order-2 Markov languages (vocab {TU['vocab']}, Dirichlet 0.1 rows; one per "
        "replicate), "
        f"L={size.layers}, d={TU['d_model']}, {TU['num_heads']} heads, pre-norm with standard "
        f"residuals, MHA alpha'={TU['alpha_mha']}; Adam, {size.steps} steps of "
        f"{size.batch} x {size.length} tokens, lr per model from {tuple(size.lrs)} by "
        f"validation NLL; {size.seeds} paired replicates, each its own language, init and "
        f"batches (seed {seed}); at equal val NLL: each "
        f"model's cosine where its NLL (checked every {size.steps // size.evals} steps) first "
        "reaches the worse model's end NLL",
    )
