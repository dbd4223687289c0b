"""Claims of Zebra-Llama (Yang, Rezagholizadeh, Li, Appia & Barsoum 2025, arXiv 2505.17272; the
NeurIPS 2025 poster titled X-EcoMLA hybrid): MLA/Mamba2 hybrids composed from a pre-trained GQA
Transformer. Layers in :mod:`nn.mla`, :mod:`nn.mamba2`, :mod:`nn.hybrid`; accounting in
:mod:`theory.kv_cache`.

- ``hybrid.kv_cache_fraction``: the published KV sizes 3.9 % / 2 % / 2.73 % (1B/3B/8B, Table 1)
  recomputed from the public Llama configurations and the official hybrid settings; the Mamba2
  state the headline leaves out and the break-even context are reported beside them.
- ``hybrid.svd_init``: the structured MLA init (Alg. 1) is the Eckart-Young truncation, reproduces
  the teacher exactly at full latent rank without positional encoding, beats a random rank-r
  factorisation, and with RoPE is not the teacher (negative control).
- ``hybrid.exact_layers``: absorbed MLA (prefill and cached decode) equals the naive path; the
  chunked SSD equals the sequential scan; the attention-initialised Mamba2 reduces to causal
  linear attention.
- ``hybrid.distill_to_teacher``: the 2MLA-2M2 student after ILD (100 steps) and end-to-end KD
  (200) at ``quick``: held-out CE within 5 % of the teacher's (the paper's effect, 100 %, 100 %,
  > 97 % of the base's accuracy, registered as ratio 1 with its SE over 256 sequences; 1.025
  at seed 0), KL down tenfold, and the two stages Z7's ablation credits present: ILD lowers the
  KL (after ILD / step 0: 0.46; exactly 1 when ILD is a no-op, mutant ``ild_noop``, which also
  leaves the CE ratio at 1.068) and the MLA layers start at Alg. 1's Eckart-Young truncation
  (an identity; broken by the mutant ``random_init``). Its Stage 1 is the paper's (Sec. 3.3):
  the student's layers are taken from replicate 0's MLA-ILD and Mamba2-ILD models
  (:func:`ild_pair`, shared with ``layer_selection``); ILD is teacher-forced per layer, so that
  student is the one ILD of the 2MLA-2M2 layout trains, on other batches (before: its own ILD
  run, CE ratio 1.022 and KL after ILD / step 0 0.41 at seed 0). Seeds 1, 2: CE ratio 1.035,
  1.015, reproduced; mutants at seed 0: ``no_log_softmax`` CE ratio 2.05, ``random_init``
  Eckart-Young ratio 5.4 (its CE ratio, 1.025, KD washes out), all ``not reproduced``.
- ``hybrid.layer_selection``: the sensitivity-score layer selection (SMART) against an exhaustive
  search over placements of 1-3 MLA layers in the 4-layer toy (after ILD); the first-layer
  constraint's cost reported.
- ``hybrid.cache_tradeoff``: cache exact in the MLA count, KL to the teacher falling as MLA layers
  are added to the hybrid (after ILD, rule placements); the all-MLA model reported.

Time (issue 46): held-out cross-entropies (:func:`sequence_ce`) run the models through the
per-layer programs their KL has compiled, not eagerly (an eager call compiled each operation).
The quick area went from 111 to 85 CPU-s (user + sys, the area alone in one process):
compiling the one-off training programs dominated, so ``distill_to_teacher`` reuses
``layer_selection``'s ILD models instead of compiling and running an ILD of its own layout
(:func:`ild_pair`); the training programs compile at LLVM -O1 (``dynamics.distill``); and
``exact_layers`` and ``svd_init`` draw their float64 inputs with numpy, where each shape of a
float64 ``jax.random.normal`` was a compile of 1-3 CPU-s (``exact_layers`` 16 -> 10 CPU-s
alone, startup included). The identities' inputs changed, their verdicts did not.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from _core.streams import stream_key
from nn.mamba2 import ssd_chunked, ssd_scan
from nn.mla import MLA, GQAttention, mla_decode, mla_from_gqa
from paper_checks import (
    Measurement,
    at_least,
    at_most,
    claim,
    holds,
    measure,
    memo,
    paired_gap,
    record,
    sizes,
    within,
    wrap,
)
from paper_checks._stats import ratio_se
from theory.kv_cache import ZEBRA, break_even_context, kv_fraction, state_fraction

PAPER = "Yang, Rezagholizadeh et al. 2025 (Zebra-Llama, arXiv 2505.17272)"

# ------------------------------------------------------------------------------ KV accounting
#: Table 1 / abstract: KV cache of the 1B, 3B, 8B hybrids relative to their base, in percent, and
#: half a unit of the last digit printed (the rounding the paper's numbers carry)
PUBLISHED = {"1B": (3.9, 0.05), "3B": (2.0, 0.5), "8B": (2.73, 0.005)}
CONTEXTS = (2048, 8192, 32768, 131072)
NO_SIZES = sizes(smoke={}, quick={}, full={})


# one mutant shared by the SVD-init claims: the factorisation keeps the smallest triplets
SMALLEST_SV = wrap(
    "nn.mla.svd_factor",
    lambda f: (
        lambda W, r: (
            lambda U, s, Vt: (
                U[:, -r:],
                s[-r:, None] * Vt[-r:],
                float(np.sqrt(np.sum(s[:-r] ** 2))),
            )
        )(*np.linalg.svd(np.asarray(W), full_matrices=False))
    ),
    "keeps the smallest singular triplets",
    name="smallest_sv",
)

#: the other mutant of both SVD-init claims: the down map loses its singular values
NO_SIGMA = wrap(
    "nn.mla.svd_factor",
    lambda f: (
        lambda W, r: (lambda u, dn, t: (u, dn / np.linalg.norm(dn, axis=1, keepdims=True), t))(
            *f(W, r)
        )
    ),
    "singular values dropped from the down map",
    name="no_sigma",
)


#: a plausible cache-accounting bug shared by the claims that count the MLA cache
NO_ROPE_KEY = wrap(
    "theory.kv_cache.mla_cache_per_token",
    lambda f: lambda cfg: cfg.num_mla * cfg.kv_rank,
    "decoupled RoPE key not counted in the MLA cache",
    name="no_rope_key",
)


@claim(
    "hybrid.kv_cache_fraction",
    paper=PAPER,
    statement="The 1B/3B/8B hybrids keep 3.9 %, 2 % and 2.73 % of their base model's KV cache.",
    where="Abstract; Table 1 (KV size column)",
    sizes=NO_SIZES,
    mutants=[
        NO_ROPE_KEY,
        wrap(
            "theory.kv_cache.gqa_cache_per_token",
            lambda f: lambda cfg: f(cfg) // 2,
            "GQA baseline counts keys only",
            name="keys_only",
        ),
    ],
)
def _kv(size, seed) -> Measurement:
    names = tuple(PUBLISHED)
    pct = {n: 100 * kv_fraction(ZEBRA[n]) for n in names}
    return measure(
        within(
            pct,
            {n: PUBLISHED[n][0] for n in names},
            {n: PUBLISHED[n][1] for n in names},
            name="KV %",
        ),
        extra={
            "Mamba2 state included, % at context " + "/".join(map(str, CONTEXTS)): {
                n: [round(100 * state_fraction(ZEBRA[n], T), 3) for T in CONTEXTS] for n in names
            },
            "break-even context (Mamba2 state = MLA cache)": {
                n: break_even_context(ZEBRA[n]) for n in names
            },
        },
        detail="exact, from Llama-3.2-1B/3B and 3.1-8B configs and the official 4MLA-12M2 (r_kv "
        "128, d_rope 32), 6MLA-22M2 (128, 64), 8MLA-24M2 (160, 64) settings; tolerance = "
        "half a unit of the printed digit; the README's r_kv 128 for the 8B row would give "
        "2.34 %",
    )


# ------------------------------------------------------------------------------ SVD init
SVD_SIZES = sizes(smoke=dict(seeds=3), quick=dict(seeds=10), full=dict(seeds=40))
TOY = dict(d=64, H=8, G=2, dh=8, T=32)


@memo
def svd_init(seeds: int, seed: int) -> dict:
    """Toy teacher (d 64, 8 heads, 2 KV heads, d_h 8, T 32), float64, per init seed: relative
    output error of the SVD-initialised MLA on a rank grid (NoPE), of a random rank-r
    factorisation, the weight error against the Eckart-Young tail, and the RoPE control."""
    d, H, G, dh, T = TOY.values()
    full = min(d, 2 * G * dh)
    ranks = (full // 4, full // 2, 3 * full // 4, full)
    rows = []
    with jax.enable_x64(True):
        for s in range(seeds):
            key = stream_key(seed, 10_000, s)
            kt, _, kr = jax.random.split(key, 3)
            # numpy draws: a float64 ``jax.random.normal`` compiles anew per shape (5 shapes)
            rng = np.random.default_rng([seed, 10_000, s])
            x = jnp.asarray(rng.standard_normal((2, T, d)))
            g = GQAttention(d, H, G, dh, dtype=jnp.float64, key=kt)
            y = g(x)
            rel = lambda out, y=y: float(jnp.linalg.norm(out - y) / jnp.linalg.norm(y))  # noqa
            W = np.concatenate(
                [
                    np.asarray(g.k_proj.weight).reshape(G, dh, d),
                    np.asarray(g.v_proj.weight).reshape(G, dh, d),
                ],
                1,
            )
            W = W.reshape(-1, d)
            sv = np.linalg.svd(W, compute_uv=False)
            err, rnd, ey, ey_tail = [], [], [], []
            for r in ranks:
                m, _ = mla_from_gqa(g, r, key=kr)
                err.append(rel(m(x)))
                rec = np.asarray(m.kv_up.weight) @ np.asarray(m.kv_down.weight)[:r]
                ey.append(np.linalg.norm(rec - W))
                ey_tail.append(np.sqrt(np.sum(sv[r:] ** 2)))
                # random rank-r factorisation of the same matrix: W P P^T, P a random orthonormal
                P = np.linalg.qr(rng.standard_normal((d, r)))[0]
                rm = eqx.tree_at(
                    lambda t: (t.kv_up.weight, t.kv_down.weight),
                    m,
                    (jnp.asarray(W @ P), jnp.asarray(P.T)),
                )
                rnd.append(rel(rm(x)))
            gr = GQAttention(d, H, G, dh, rope_theta=10000.0, dtype=jnp.float64, key=kt)
            mr, _ = mla_from_gqa(gr, 2 * G * dh - G * dh // 2, rope_dim=dh // 2, key=kr)
            yr = gr(x)
            rope_err = float(jnp.linalg.norm(mr(x) - yr) / jnp.linalg.norm(yr))
            rows.append(
                dict(
                    err=err,
                    rnd=rnd,
                    ey=np.array(ey) / np.linalg.norm(W),
                    tail=np.array(ey_tail) / np.linalg.norm(W),
                    rope=rope_err,
                )
            )
    stack = lambda k: np.array([r[k] for r in rows])  # noqa: E731
    return dict(
        ranks=ranks,
        err=stack("err"),
        rnd=stack("rnd"),
        ey=stack("ey"),
        tail=stack("tail"),
        rope=stack("rope"),
    )


@claim(
    "hybrid.svd_init",
    paper=PAPER,
    statement="The SVD initialisation of MLA from the teacher's K/V is the Eckart-Young "
    "truncation: exact teacher attention at full latent rank without positional "
    "encoding, better than a random rank-r map at every rank; with RoPE it is not the "
    "teacher (negative control: relative error >= 0.1).",
    where="Sec. 3.1, Alg. 1 (SVD initialization for MLA); control derived here",
    sizes=SVD_SIZES,
    mutants=[
        NO_SIGMA,
        SMALLEST_SV,
    ],
)
def _svd(size, seed) -> Measurement:
    r = svd_init(size.seeds, seed)
    full_err = r["err"][:, -1]
    ey_rel = np.abs(r["ey"] - r["tail"])  # both relative to ||[W_K; W_V]||_F
    mean_err = r["err"].mean(0)
    return measure(
        at_most(full_err.max(), 1e-10, name="full-rank NoPE rel error"),
        at_most(ey_rel.max(), 1e-10, name="|weight error - EY tail| rel"),
        holds(
            bool(np.all(np.diff(mean_err) <= 0)),
            name="mean error non-increasing in r",
            rule="mean rel error non-increasing over the rank grid",
            measured=mean_err.tolist(),
        ),
        holds(
            bool(np.all(r["err"][:, :-1] < r["rnd"][:, :-1])),
            name="SVD < random",
            rule="SVD error < random rank-r error at every rank < full, every seed",
            measured=r["rnd"].mean(0).tolist(),
        ),
        at_least(r["rope"].min(), 0.1, name="RoPE control rel error (min)"),
        extra={"ranks": list(r["ranks"]), "RoPE control mean": float(r["rope"].mean())},
        detail=f"toy GQA teacher d=64, 8 heads, 2 KV heads, d_h=8, T=32, float64, {size.seeds} "
        f"seeds (seed {seed}); RoPE control at full kept rank, d_rope = d_h/2",
    )


# ------------------------------------------------------------------------------ exact layers
EXACT_SIZES = sizes(smoke=dict(T=9), quick=dict(T=21), full=dict(T=64))


@memo
def exact_layers(T: int, seed: int) -> dict:
    """Max abs differences (float64): MLA naive vs absorbed prefill vs cached absorbed decode
    (low-rank query, RoPE); chunked SSD vs scan (T not a multiple of the chunk); SSD with A = 0,
    dt = 1 vs causal linear attention tril(C B^T) x."""
    with jax.enable_x64(True):
        # inputs from numpy: a float64 ``jax.random.normal`` compiled anew per shape (six
        # shapes here, 1-3 CPU-s each; the identities hold for any input)
        rng = np.random.default_rng([seed, 21])
        normal = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float64)  # noqa: E731
        k = jax.random.split(jax.random.key(seed), 8)
        m = MLA(
            32,
            4,
            2,
            kv_rank=12,
            nope_dim=6,
            v_dim=8,
            rope_dim=4,
            q_rank=20,
            dtype=jnp.float64,
            key=k[0],
        )
        x = normal(2, T, 32)
        naive = m(x)
        mla = (
            float(jnp.max(jnp.abs(naive - m(x, absorbed=True)))),
            float(jnp.max(jnp.abs(naive - mla_decode(m, x)))),
        )
        B_, H, P, N = 2, 3, 4, 5
        xs = normal(B_, T, H, P)
        dt = jax.nn.softplus(normal(B_, T, H))
        A = -jnp.exp(normal(H))
        Bm = normal(B_, T, H, N)
        Cm = normal(B_, T, H, N)
        ssd = float(
            jnp.max(jnp.abs(ssd_scan(xs, dt, A, Bm, Cm)[0] - ssd_chunked(xs, dt, A, Bm, Cm, 8)))
        )
        lin = jnp.einsum("bthn,bshn->bhts", Cm, Bm) * jnp.tril(jnp.ones((T, T)))
        ref = jnp.einsum("bhts,bshp->bthp", lin, xs)
        one = jnp.ones_like(dt)
        lin_err = max(
            float(jnp.max(jnp.abs(f(xs, one, jnp.zeros(H), Bm, Cm) - ref)))
            for f in (lambda *a: ssd_scan(*a)[0], lambda *a: ssd_chunked(*a, 8))
        )
    return dict(mla_absorbed=mla[0], mla_decode=mla[1], ssd=ssd, linear=lin_err)


@claim(
    "hybrid.exact_layers",
    paper=PAPER,
    statement="Absorbed MLA decoding on the (r_kv + d_rope)-wide latent cache equals the naive "
    "MLA; the chunked SSD equals Mamba2's recurrence; with A = 0, dt = 1 the SSD is "
    "causal linear attention (why the Q/K/V -> C/B/x init starts at the teacher).",
    where="Sec. 3 (MLA as DeepSeek-V2 Sec. 2.1.2; Mamba2 init from attention, MambaInLlama)",
    sizes=EXACT_SIZES,
    mutants=[
        wrap(
            "nn.mla.MLA.attend_latent",
            lambda f: lambda self, qc, qr, c, kr, q_pos: f(self, qc, qr, c, kr, q_pos + 1),
            "off-by-one causal mask in the latent attention",
            name="mask_off_by_one",
        ),
        wrap(
            "nn.mamba2.ssd_chunked",
            lambda f: lambda x, dt, A, B, C, chunk=16: f(x, dt, 0.5 * A, B, C, chunk),
            "chunked path decays with A/2",
            name="chunk_decay",
        ),
    ],
)
def _exact(size, seed) -> Measurement:
    r = exact_layers(size.T, seed)
    return measure(
        at_most(r["mla_absorbed"], 1e-12, name="MLA absorbed - naive"),
        at_most(r["mla_decode"], 1e-12, name="MLA cached decode - naive"),
        at_most(r["ssd"], 1e-12, name="SSD chunked - scan"),
        at_most(r["linear"], 1e-12, name="SSD(A=0, dt=1) - linear attention"),
        detail=f"float64, MLA d=32, 4 heads, 2 KV groups, r_kv=12, r_q=20, d_rope=4; SSD 3 heads, "
        f"P=4, N=5, chunk 8; T={size.T} (seed {seed})",
    )


# ------------------------------------------------------------------------------ structured init
INIT_SIZES = sizes(  # kinds: the students built (the claim judges all-MLA; the rest reported)
    smoke=dict(teacher_steps=2, students=2, kinds=("all-MLA",)),
    quick=dict(teacher_steps=300, students=6, kinds=("all-MLA", "2MLA-2M2", "all-M2")),
    full=dict(teacher_steps=2000, students=20, kinds=("all-MLA", "2MLA-2M2", "all-M2")),
)
STUDENTS = {
    "all-MLA": ("mla",) * 4,
    "2MLA-2M2": ("mla", "mamba2", "mla", "mamba2"),
    "all-M2": ("mamba2",) * 4,
}
LM = dict(vocab=16, d=32, H=4, G=2, dh=8, mlp=64, layers=4, T=32, batch=32, kv_rank=16, rope_dim=4)


@memo
def teacher_lm(steps: int, seed: int):
    """The GQA teacher (4 layers, d 32, 4 heads, 2 KV heads, RoPE) trained on an order-2 Markov
    language (vocab 16, concentration 0.1) with Adam 3e-3, batch 32, T 32; with its corpus."""
    from dynamics.distill import Order2Markov, train_lm
    from nn.hybrid import HybridLM

    corpus = Order2Markov.random(seed, LM["vocab"])
    key = jax.random.key(100 + seed)
    t = HybridLM(
        LM["vocab"],
        LM["d"],
        LM["H"],
        LM["G"],
        LM["dh"],
        ("gqa",) * LM["layers"],
        mlp_hidden=LM["mlp"],
        rope_theta=10000.0,
        dtype=jnp.float32,
        key=key,
    )
    t, _ = train_lm(
        t, corpus, steps=steps, batch=LM["batch"], length=LM["T"], key=jax.random.fold_in(key, 1)
    )
    return t, corpus


@memo
def init_kl(teacher_steps: int, students: int, seed: int, kinds: tuple = tuple(STUDENTS)) -> dict:
    """KL(teacher || student) at step 0 on 256 held-out sequences for the students ``kinds`` (of
    :data:`STUDENTS`) built from the teacher with structured (SVD / kqvo) or random mixers, over
    ``students`` init keys."""
    from dynamics.distill import kl_to_teacher
    from nn.hybrid import hybrid_from_teacher

    t, corpus = teacher_lm(teacher_steps, seed)
    ev = corpus.sample(256, LM["T"] + 1, key=jax.random.key(7 + seed))
    out = {}
    for name in kinds:
        ks = STUDENTS[name]
        for init in ("structured", "random"):
            out[(name, init)] = np.array(
                [
                    float(
                        kl_to_teacher(
                            t,
                            hybrid_from_teacher(
                                t,
                                ks,
                                kv_rank=LM["kv_rank"],
                                rope_dim=LM["rope_dim"],
                                init=init,
                                key=stream_key(seed, 1000, i),
                            ),
                            ev[:, :-1],
                        )
                    )
                    for i in range(students)
                ]
            )
    return dict(
        kl=out,
        teacher_ce=float(sequence_ce(t, ev).mean()),
        entropy=corpus.entropy_rate,
        kv_optimality=_kv_optimality(t),
    )


def _kv_optimality(teacher) -> np.ndarray:
    """Per teacher layer: :func:`_ey_ratio` of the structured MLA built from it (1 when the init
    is the truncated SVD)."""
    from nn.mla import mla_from_gqa

    return np.array(
        [
            _ey_ratio(
                layer.mixer, mla_from_gqa(layer.mixer, LM["kv_rank"], rope_dim=LM["rope_dim"])[0]
            )
            for layer in teacher.layers
        ]
    )


def _ey_ratio(g, m) -> float:
    """``||[W_K(nope); W_V] - kv_up kv_down||_F`` of the MLA ``m`` against the GQA ``g`` it
    replaces, over the Eckart-Young optimum ``sqrt(sum_{i > r} s_i^2)``."""
    G, dh, d = g.num_kv_heads, g.head_dim, g.q_proj.in_features
    nope = dh - LM["rope_dim"]
    WK = np.asarray(g.k_proj.weight, np.float64).reshape(G, dh, d)
    WV = np.asarray(g.v_proj.weight, np.float64).reshape(G, dh, d)
    W = np.concatenate([WK[:, :nope], WV], axis=1).reshape(-1, d)
    up = np.asarray(m.kv_up.weight, np.float64)
    down = np.asarray(m.kv_down.weight, np.float64)[: LM["kv_rank"]]
    sv = np.linalg.svd(W, compute_uv=False)
    return float(np.linalg.norm(W - up @ down) / np.sqrt(np.sum(sv[LM["kv_rank"] :] ** 2)))


@claim(
    "hybrid.structured_init",
    paper=PAPER,
    statement="Initialising MLA from the teacher's attention by SVD gives a student much closer "
    "to the teacher at step 0 than random initialisation.",
    where="Sec. 4 ablation (structured init vs random init); Alg. 1",
    sizes=INIT_SIZES,
    mutants=[
        SMALLEST_SV,
        NO_SIGMA,
    ],
)
def _init(size, seed) -> Measurement:
    r = init_kl(size.teacher_steps, size.students, seed, tuple(size.kinds))
    kl = r["kl"]
    return measure(
        paired_gap(
            np.log(kl[("all-MLA", "structured")]),
            np.log(kl[("all-MLA", "random")]),
            n_se=2,
            margin=np.log(1.2),
            direction="less",
            name="log KL all-MLA: structured - random",
        ),
        within(
            r["kv_optimality"].round(6),
            np.ones_like(r["kv_optimality"]),
            1e-6,
            name="||W_KV - up down||_F / Eckart-Young optimum, per layer",
        ),
        extra={f"KL {n} {i}": float(v.mean()) for (n, i), v in kl.items()}
        | {"teacher CE": r["teacher_ce"], "entropy rate": r["entropy"]},
        detail=f"GQA teacher 4 layers d=32 (RoPE) trained {size.teacher_steps} steps on an order-2 "
        f"Markov language (vocab 16); students r_kv=16, d_rope=4; KL on 256 held-out "
        f"sequences of 32, {size.students} student keys (seed {seed}); margin: >20 % lower",
    )


# ------------------------------------------------------------------------------ distillation
DISTILL_SIZES = sizes(
    smoke=dict(teacher_steps=2, ild_steps=2, kd_steps=2),
    quick=dict(teacher_steps=300, ild_steps=100, kd_steps=200),
    full=dict(teacher_steps=2000, ild_steps=1000, kd_steps=3000),
)


#: the distilled student's layers
KINDS_DISTILL = ("mla", "mamba2", "mla", "mamba2")


@memo
def distilled(teacher_steps: int, ild_steps: int, kd_steps: int, seed: int) -> dict:
    """The 2MLA-2M2 student (MLA at layers 0 and 2, structured init) after ILD then end-to-end KL,
    against its teacher (:func:`teacher_lm`): held-out CE of both, KL before and after."""
    from dynamics.distill import distill, kl_to_teacher
    from nn.hybrid import compose_hybrid, hybrid_from_teacher

    t, corpus = teacher_lm(teacher_steps, seed)
    # the step-0 student: layer i's mixer from ``fold_in(key, i)`` whatever the other layers'
    # kinds, so these are the initial layers of replicate 0's ILD models (:func:`ild_pair`)
    s = hybrid_from_teacher(
        t,
        KINDS_DISTILL,
        kv_rank=LM["kv_rank"],
        rope_dim=LM["rope_dim"],
        key=stream_key(seed, 700, 0),
    )
    ev = corpus.sample(256, LM["T"] + 1, key=jax.random.key(9 + seed))
    kl0 = float(kl_to_teacher(t, s, ev[:, :-1]))
    # Alg. 1's student: its MLA layers start at the Eckart-Young truncation of the teacher's
    ey = [_ey_ratio(tl.mixer, sl.mixer) for tl, sl, k in zip(t.layers, s.layers, KINDS_DISTILL,
          strict=True) if k == "mla"]  # fmt: skip
    # Stage 1 as the paper runs it (Sec. 3.3): the layers taken from the MLA-ILD and the
    # Mamba2-ILD model, shared with hybrid.layer_selection (ILD is per layer, teacher-forced)
    m = ild_pair(teacher_steps, ild_steps, seed, 0)
    s = compose_hybrid(m["mla"], m["mamba2"], KINDS_DISTILL)
    kl_ild = float(kl_to_teacher(t, s, ev[:, :-1]))
    kw = dict(batch=LM["batch"], length=LM["T"])
    key = jax.random.key(500 + seed)
    s, _ = distill(t, s, corpus, steps=kd_steps, key=jax.random.fold_in(key, 2), **kw)
    ce_seq = (sequence_ce(s, ev), sequence_ce(t, ev))
    return dict(
        kl0=kl0,
        ey=np.array(ey),
        kl_ild=kl_ild,
        kl=float(kl_to_teacher(t, s, ev[:, :-1])),
        ce_student=float(ce_seq[0].mean()),  # lm_ce: equal sequence lengths
        ce_teacher=float(ce_seq[1].mean()),
        ce_seq=ce_seq,
        entropy=corpus.entropy_rate,
    )


def sequence_ce(model, tokens) -> np.ndarray:
    """Next-token cross-entropy (nats) of each sequence of ``tokens (B, T + 1)``, ``(B,)``.

    The model runs through the per-layer programs of :func:`dynamics.distill.kl_to_teacher`,
    already compiled for it by its KL on ``tokens[:, :-1]`` (issue 46: the eager call compiled
    every operation anew, a third of ``distill_to_teacher``'s time)."""
    from dynamics.distill import logits_by_layer

    return np.asarray(_ce_rows(logits_by_layer(model, tokens[:, :-1]), tokens[:, 1:]), np.float64)


@jax.jit
def _ce_rows(logits, labels):
    import optax

    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(-1)


def _unnormalised_kl(f):
    def kl(teacher, student, tokens):
        lt, ls = teacher(tokens), student(tokens)
        return jnp.mean(jnp.sum(jax.nn.softmax(lt, -1) * (lt - ls), -1))

    return kl


@claim(
    "hybrid.distill_to_teacher",
    paper=PAPER,
    statement="After intermediate-layer distillation and end-to-end KL distillation, a hybrid "
    "with half its layers MLA and half Mamba2 matches its Transformer teacher "
    "(held-out CE within 5 %).",
    where="Abstract ('preserving 100 % ... of the base's accuracy'); Sec. 3.2-3.3 pipeline",
    sizes=DISTILL_SIZES,
    mutants=[
        wrap(
            "dynamics.distill._kl",
            _unnormalised_kl,
            "KD loss on raw logits (log_softmax forgotten)",
            name="no_log_softmax",
        ),
        wrap(
            "dynamics.distill._ild_loss",
            lambda f: lambda s, tk, teacher: 0.0 * f(s, tk, teacher),
            "intermediate-layer distillation a no-op (its loss times 0)",
            name="ild_noop",
        ),
        wrap(
            "nn.hybrid.hybrid_from_teacher",
            lambda f: lambda t, kinds, **kw: f(t, kinds, **(kw | {"init": "random"})),
            "random instead of SVD (MLA) / kqvo (Mamba2) initialisation",
            name="random_init",
        ),
    ],
)
def _distill(size, seed) -> Measurement:
    r = distilled(size.teacher_steps, size.ild_steps, size.kd_steps, seed)
    ratio, se = ratio_se(*r["ce_seq"])
    return measure(
        at_most(
            ratio,
            1.05,
            name="CE student / teacher",
            paper=1.0,
            se=se,
            replicates=len(r["ce_seq"][0]),
        ),
        at_most(r["kl"], r["kl0"] / 10, name="KL after / KL at step 0 * 10"),
        # the pipeline as Z7's ablation credits it: the student starts at Alg. 1's SVD init, and
        # ILD lowers the KL before end-to-end distillation
        at_most(r["kl_ild"] / r["kl0"], 0.8, name="KL after ILD / KL at step 0"),
        within(
            r["ey"].round(6),
            np.ones_like(r["ey"]),
            1e-6,
            name="student MLA at step 0: ||W_KV - up down||_F / Eckart-Young optimum",
        ),
        extra={
            "KL step 0": r["kl0"],
            "KL after ILD": r["kl_ild"],
            "KL final": r["kl"],
            "CE teacher": r["ce_teacher"],
            "CE student": r["ce_student"],
            "entropy rate": r["entropy"],
            "cache ratio": 2
            * (LM["kv_rank"] + LM["rope_dim"])
            / (2 * LM["layers"] * LM["G"] * LM["dh"]),
        },
        detail=f"teacher as hybrid.structured_init ({size.teacher_steps} steps); student MLA at "
        f"layers 0, 2 (r_kv 16, d_rope 4), Mamba2 at 1, 3; ILD {size.ild_steps} steps "
        f"(Adam 1e-3), KD {size.kd_steps} steps; 256 held-out sequences (seed {seed}); "
        "margin 5 %; paper's effect: CE ratio 1 (100 %, 100 %, > 97 % of the base's "
        "accuracy), SE over sequences; the student's MLA layers checked at the SVD init (Alg. 1)",
    )


# ------------------------------------------------------------------------------ placements
PLACE_SIZES = sizes(
    smoke=dict(teacher_steps=2, ild_steps=2, reps=2),
    quick=dict(teacher_steps=300, ild_steps=100, reps=3),
    full=dict(teacher_steps=2000, ild_steps=1000, reps=8),
)


def _kinds(placement, L):
    return tuple("mla" if i in placement else "mamba2" for i in range(L))


@memo
def ild_pair(teacher_steps: int, ild_steps: int, seed: int, r: int) -> dict:
    """Replicate ``r`` of Stage 1: an all-MLA and an all-Mamba2 student (structured init, key
    ``stream_key(seed, 700, r)``) each trained by ILD from the teacher of :func:`teacher_lm`."""
    from dynamics.distill import ild
    from nn.hybrid import hybrid_from_teacher

    t, corpus = teacher_lm(teacher_steps, seed)
    key = stream_key(seed, 700, r)
    m = {}
    for j, kind in enumerate(("mla", "mamba2")):
        s = hybrid_from_teacher(
            t, (kind,) * LM["layers"], kv_rank=LM["kv_rank"], rope_dim=LM["rope_dim"], key=key
        )
        m[kind], _ = ild(
            t,
            s,
            corpus,
            steps=ild_steps,
            key=jax.random.fold_in(key, 1 + j),
            batch=LM["batch"],
            length=LM["T"],
        )
    return m


@memo
def placements(teacher_steps: int, ild_steps: int, reps: int, seed: int) -> dict:
    """The Stage 1-2 pipeline per replicate: an all-MLA and an all-Mamba2 student (structured
    init) each trained by ILD from the teacher of :func:`teacher_lm`, then every one of the 2^L
    placements composed from them (:func:`nn.hybrid.compose_hybrid`) and scored by its KL to the
    teacher on 256 held-out sequences; the sensitivity scores
    (:func:`dynamics.distill.layer_sensitivity`) of each replicate. Replicates differ in the ILD
    data and init keys; the held-out set is shared (paired)."""
    from dynamics.distill import kl_to_teacher, layer_sensitivity
    from nn.hybrid import compose_hybrid

    t, corpus = teacher_lm(teacher_steps, seed)
    L = LM["layers"]
    ev = corpus.sample(256, LM["T"], key=jax.random.key(11 + seed))
    masks = [tuple(i for i in range(L) if m >> i & 1) for m in range(2**L)]
    kl = {p: np.zeros(reps) for p in masks}
    scores = np.zeros((reps, L))
    models = []
    for r in range(reps):
        m = ild_pair(teacher_steps, ild_steps, seed, r)
        for p in masks:
            kl[p][r] = float(
                kl_to_teacher(t, compose_hybrid(m["mla"], m["mamba2"], _kinds(p, L)), ev)
            )
        scores[r] = layer_sensitivity(t, m["mla"], m["mamba2"], ev)
        models.append(m)
    return dict(kl=kl, scores=scores, models=models, L=L)


def rule_kl(r: dict, n: int, keep_first: bool) -> tuple[np.ndarray, list]:
    """Per replicate: the rule's placement of ``n`` MLA layers from that replicate's scores and
    its KL."""
    from nn.hybrid import select_mla_layers

    chosen = [select_mla_layers(s, n, keep_first=keep_first) for s in r["scores"]]
    return np.array([r["kl"][p][i] for i, p in enumerate(chosen)]), chosen


def _regret(r: dict, n: int, keep_first: bool):
    """(KL rule - KL best) / KL best per replicate (best: the placement of least mean KL), the
    rule's placements and their ranks, and the best placement."""
    cands = [p for p in r["kl"] if len(p) == n]
    means = {p: float(r["kl"][p].mean()) for p in cands}
    order = sorted(cands, key=lambda p: means[p])
    got, ch = rule_kl(r, n, keep_first)
    d = (got - r["kl"][order[0]]) / means[order[0]]
    return d, ch, [order.index(p) + 1 for p in ch], order[0]


SELECT_NS = (1, 2, 3)
#: the rule's placement may lose at most this fraction of the best placement's KL (mean + 2 SE)
SELECT_MARGIN = 0.05


@claim(
    "hybrid.layer_selection",
    paper=PAPER,
    statement="Zebra-Llama's sensitivity-score layer selection (scores from the two ILD models, "
    "near-uniform spread, maximal total score) places the MLA layers as well as an "
    "exhaustive search: for 1, 2 and 3 MLA layers of 4 its composed student's KL to "
    "the teacher is within 5 % of the best placement's. Judged without the first-layer "
    "constraint (terminal preservation, every shipped config's layer 0), whose cost is "
    "reported beside it.",
    where="Sec. 3.4, Alg. 2 (SMART layer selection) and its ablation against other placements "
    "(per a digest of the paper; the rule's details unverified, see docs/papers/hybrid.md and "
    "nn.hybrid.select_mla_layers)",
    sizes=PLACE_SIZES,
    recorded=record(
        quick="not reproduced",
        reason="seed 0 on a fresh clone (and at the previous session's head): for 3 MLA layers "
        "of 4 the rule's placement ranks 3rd of 4 in 2 of 3 replicates, regret mean + 2 SE "
        "6.4 % against the 5 % bound (1 and 2 layers: 0.2 % and 2.7 %); the record said "
        "reproduced from an earlier run. Three replicates; seeds 1-2 not re-run.",
    ),
    mutants=[
        wrap(
            "nn.hybrid.select_mla_layers",
            lambda f: lambda scores, n, **kw: f(-np.asarray(scores), n, **kw),
            "sensitivity sign flipped: the least useful layers become MLA",
            name="rule_inverted",
        )
    ],
)
def _select(size, seed) -> Measurement:
    r = placements(size.teacher_steps, size.ild_steps, size.reps, seed)
    L = r["L"]
    out = {}
    for kf in (False, True):
        for n in SELECT_NS:
            d, ch, rank, best = _regret(r, n, kf)
            se = d.std(ddof=1) / np.sqrt(len(d))
            out[(kf, n)] = dict(
                regret=float(d.mean() + 2 * se), chosen=[list(p) for p in ch], rank=rank, best=best
            )
    key = lambda kf: {str(n): out[(kf, n)]["regret"] for n in SELECT_NS}  # noqa: E731
    return measure(
        at_most(
            key(False),
            {str(n): SELECT_MARGIN for n in SELECT_NS},
            name="(KL rule - KL best) / KL best, mean + 2 SE",
        ),
        extra={
            "rule placement per replicate": {str(n): out[(False, n)]["chosen"] for n in SELECT_NS},
            "rank among C(4, n) placements": {str(n): out[(False, n)]["rank"] for n in SELECT_NS},
            "best placement (exhaustive)": {
                str(n): list(out[(False, n)]["best"]) for n in SELECT_NS
            },
            "with layer 0 kept: regret mean + 2 SE": key(True),
            "with layer 0 kept: rank": {str(n): out[(True, n)]["rank"] for n in SELECT_NS},
            "sensitivity scores (mean)": r["scores"].mean(0),
            "KL all-Mamba2": float(r["kl"][()].mean()),
            "KL all-MLA": float(r["kl"][tuple(range(L))].mean()),
        },
        detail=f"teacher as hybrid.structured_init ({size.teacher_steps} steps); per replicate "
        f"({size.reps}, paired) all-MLA and all-Mamba2 ILD ({size.ild_steps} steps), every "
        f"placement composed and scored by KL to the teacher on 256 held-out sequences (before "
        f"end-to-end KD, where the rule is applied); margin {SELECT_MARGIN:.0%}; seed {seed}",
    )


# ------------------------------------------------------------------------------ cache trade-off
#: the paper's 1B/3B/8B rows (Zebra-Llama README, LM-Harness average): fewer MLA layers, the
#: half-MLA hybrid, and the all-MLA X-EcoMLA model -- (KV %, average)
PAPER_TRADEOFF = {
    "1B": ((3.91, 52.03), (7.81, 52.94), (9.37, 52.01)),
    "3B": ((2.01, 59.75), (4.69, 60.69), (9.37, 60.13)),
    "8B": ((2.73, 64.12), (5.47, 64.97), (9.37, 64.16)),
}


def toy_config(n: int):
    from theory.kv_cache import HybridConfig, LlamaConfig

    base = LlamaConfig(LM["layers"], LM["H"], LM["G"], LM["dh"], LM["d"])
    return HybridConfig(base, n, LM["kv_rank"], LM["rope_dim"], LM["dh"])


def _measured_cache(model) -> int:
    """Elements cached per token by a student: the width of each MLA layer's latent and RoPE
    key for one token (Mamba2 layers cache nothing per token)."""
    from nn.mla import MLA

    x = jnp.zeros((1, LM["d"]), jnp.float32)
    tot = 0
    for layer in model.layers:
        if isinstance(layer.mixer, MLA):
            c, kr = layer.mixer.latent(x, jnp.arange(1))
            tot += c.shape[-1] + kr.shape[-1]
    return tot


@claim(
    "hybrid.cache_tradeoff",
    paper=PAPER,
    statement="Adding MLA layers to the hybrid trades KV cache for quality: the cache grows "
    "exactly as N_MLA (r_kv + d_rope) / (2 L n_kv d_h), and among hybrids (0 to L-1 MLA "
    "layers, placed by the selection rule) the KL to the teacher does not increase "
    "with each added MLA layer (within 2 SE) and is lower with L-1 than with none.",
    where="README tables of the official code (1B 4MLA 3.91 % 52.03 -> 8MLA 7.81 % 52.94; 3B "
    "6MLA 59.75 -> 14MLA 60.69; 8B 8MLA 64.12 -> 16MLA 64.97: 'reducing the KV-cache "
    "size lowers accuracy'); Sec. 4 ablation on the MLA count",
    sizes=PLACE_SIZES,
    mutants=[
        NO_ROPE_KEY,
        wrap(
            "nn.hybrid.compose_hybrid",
            lambda f: lambda a, b, kinds: f(a, b, ("mamba2",) * len(kinds)),
            "composition ignores the placement: every layer from the Mamba2 model",
            name="compose_ignores_kinds",
        ),
    ],
)
def _tradeoff(size, seed) -> Measurement:
    from nn.hybrid import compose_hybrid
    from theory.kv_cache import kv_fraction, mla_cache_per_token

    r = placements(size.teacher_steps, size.ild_steps, size.reps, seed)
    L = r["L"]
    kl = np.stack([rule_kl(r, n, False)[0] for n in range(L + 1)])  # (L + 1, reps)
    # the cache of the rule's placement, measured from the composed model of replicate 0
    m = r["models"][0]
    measured, theory, frac = [], [], []
    for n in range(L + 1):
        p = rule_kl(r, n, False)[1][0]
        measured.append(_measured_cache(compose_hybrid(m["mla"], m["mamba2"], _kinds(p, L))))
        theory.append(mla_cache_per_token(toy_config(n)))
        frac.append(kv_fraction(toy_config(n)))
    steps = [
        paired_gap(
            kl[n + 1],
            kl[n],
            n_se=2,
            margin=0.0,
            direction="less",
            name=f"KL {n + 1} MLA - KL {n} MLA",
        )
        for n in range(L - 1)
    ]
    se = lambda d: float(d.std(ddof=1) / np.sqrt(len(d)))  # noqa: E731
    nonincreasing = [
        float((kl[n + 1] - kl[n]).mean() - 2 * se(kl[n + 1] - kl[n])) for n in range(L - 1)
    ]
    return measure(
        within(measured, theory, 0, name="cache per token, measured vs N_MLA (r_kv + d_rope)"),
        at_most(
            nonincreasing,
            np.zeros(L - 1),
            name="KL(n+1) - KL(n) - 2 SE, n = 0..L-2",
        ),
        paired_gap(kl[0], kl[L - 1], n_se=2, margin=0.0, name=f"KL 0 MLA - KL {L - 1} MLA"),
        extra={
            "KL per MLA count (mean)": kl.mean(1),
            "KL SE": [se(k) for k in kl],
            "strict decrease per step": [s.passed for s in steps],
            "cache fraction of the GQA teacher": frac,
            "all-MLA minus (L-1)-MLA KL": float((kl[L] - kl[L - 1]).mean()),
            "paper (KV %, avg) fewer MLA / half MLA / all-MLA": PAPER_TRADEOFF,
        },
        detail=f"as hybrid.layer_selection ({size.reps} paired ILD replicates, seed {seed}); "
        "students composed after ILD with the rule's placement for each MLA count, KL on 256 "
        "held-out sequences; the all-MLA model reported, not judged (the paper's all-MLA "
        "X-EcoMLA rows are below its half-MLA hybrids); end-to-end KD not run here: on this "
        "order-2 language the Mamba2 conv window alone covers the context and 200 KD steps "
        "bring every count to KL ~0.04",
    )
