"""Exact statements of AegisGuard's TEE cost model (Wang et al., NeurIPS 2025, OpenReview
i99ZhFw6GN; module formulas in ``docs/papers/aegisguard.md#as-implemented-here``)."""

import numpy as np

from paper_checks import wrap
from theory import aegisguard as C

from .._properties import prop

PAPER = "Wang et al. 2025 (AegisGuard, NeurIPS 2025); docs/papers/aegisguard.md"


def _model_strategy(st):
    return st.fixed_dictionaries(
        {
            "shapes": st.lists(
                st.tuples(st.integers(1, 64), st.integers(1, 64)), min_size=1, max_size=6
            ),
            "r": st.integers(1, 8),
            "n_tokens": st.integers(1, 16),
            "bytes": st.sampled_from([1, 2, 4, 8]),
            "shielded": st.lists(st.booleans(), min_size=6, max_size=6),
            "extra": st.lists(st.booleans(), min_size=6, max_size=6),
            "kept": st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6),
            "hardware": st.tuples(
                st.floats(1e-9, 1e-3), st.floats(1e6, 1e12), st.floats(1e6, 1e13)
            ),
        }
    )


def _setup(ex):
    shapes = [tuple(s) for s in ex["shapes"]]
    n = len(shapes)
    kept = [int(np.floor(k * d_out)) for k, (d_out, _) in zip(ex["kept"], shapes, strict=False)]
    small = [bool(b) for b in ex["shielded"][:n]]
    big = [a or b for a, b in zip(small, ex["extra"][:n], strict=True)]
    return shapes, kept, small, big


_DTYPES = {1: np.int8, 2: np.float16, 4: np.float32, 8: np.float64}


@prop(
    "aegisguard.cost_counts_bytes",
    paper=PAPER,
    statement="The shielded cost's parameter bytes equal the bytes of the LoRA factors held in "
    "the enclave (A (r, d_in) and the kept rows of B (d_out, r)), its boundary bytes those of "
    "the activations crossing it (n x d_in in, n x kept_out back), its FLOPs those of the two "
    "matmuls (2 n r (d_in + kept_out)) and two transitions per shielded adapter, for any layers, "
    "rank, tokens, element width and SAC pruning.",
    where="Sec. 3 (TEE cost), docs/papers/aegisguard.md#as-implemented-here",
    strategy=_model_strategy,
    mutants=[
        wrap(
            "theory.aegisguard.adapter_cost",
            lambda f: lambda *a, kept_out=None, **k: f(*a, **k),
            "SAC's pruned outputs ignored (the full B counted)",
            name="kept_out_ignored",
        ),
        wrap(
            "theory.aegisguard.adapter_cost",
            lambda f: (
                lambda *a, **k: (
                    lambda c: C.TEECost(
                        c.param_bytes, c.host_to_tee_bytes, c.tee_to_host_bytes, 1, c.flops
                    )
                )(f(*a, **k))
            ),
            "one enclave transition per adapter instead of an ECALL and an OCALL",
            name="one_transition",
        ),
    ],
)
def _bytes(ex) -> float:
    shapes, kept, small, _ = _setup(ex)
    r, n, b = ex["r"], ex["n_tokens"], ex["bytes"]
    dt = _DTYPES[b]
    got = C.shielded_cost(shapes, small, r, n_tokens=n, bytes_per_element=b, kept_out=kept)
    want = dict(param_bytes=0, host_to_tee_bytes=0, tee_to_host_bytes=0, messages=0, flops=0)
    for (d_out, d_in), on, ko in zip(shapes, small, kept, strict=True):
        if not on:
            continue
        A, B = np.zeros((r, d_in), dt), np.zeros((d_out, r), dt)[:ko]
        x = np.zeros((n, d_in), dt)
        y = (x @ A.T) @ B.T  # (n, kept_out): what leaves the enclave
        want["param_bytes"] += A.nbytes + B.nbytes
        want["host_to_tee_bytes"] += x.nbytes
        want["tee_to_host_bytes"] += y.nbytes
        want["messages"] += 2  # ECALL in, OCALL out
        want["flops"] += 2 * n * r * d_in + 2 * n * r * ko  # two matmuls, multiply-add = 2
    return 1.0 if all(getattr(got, k) == v for k, v in want.items()) else -1.0


@prop(
    "aegisguard.cost_monotone_additive",
    paper=PAPER,
    statement="The integer cost model is additive and monotone in the shielded set: for S a "
    "subset of S', cost(S') = cost(S) + sum of the adapters in S' minus S, every count of "
    "cost(S) is at most that of cost(S'), and so is the serial latency on any hardware.",
    where="Sec. 3 (cost of a shielded set), docs/papers/aegisguard.md#as-implemented-here",
    strategy=_model_strategy,
    mutants=[
        wrap(
            "theory.aegisguard.shielded_cost",
            lambda f: lambda shapes, shielded, *a, **k: f(shapes, list(shielded)[::-1], *a, **k),
            "the shielded flags read in reverse layer order",
            name="flags_reversed",
        )
    ],
)
def _monotone(ex) -> float:
    shapes, kept, small, big = _setup(ex)
    r, n, b = ex["r"], ex["n_tokens"], ex["bytes"]
    kw = dict(n_tokens=n, bytes_per_element=b, kept_out=kept)
    c_small = C.shielded_cost(shapes, small, r, **kw)
    c_big = C.shielded_cost(shapes, big, r, **kw)
    diff = C.ZERO
    for (d_out, d_in), s, g, ko in zip(shapes, small, big, kept, strict=True):
        if g and not s:
            diff = diff + C.adapter_cost(d_in, d_out, r, n_tokens=n, bytes_per_element=b,
                                         kept_out=ko)  # fmt: skip
    if c_small + diff != c_big:
        return -1.0
    c0, bw, fl = ex["hardware"]
    lat = [C.serial_latency(c, gpu_seconds=0.0, transition_seconds=c0, bandwidth=bw, tee_flops=fl)
           for c in (c_small, c_big)]  # fmt: skip
    return 1.0 if lat[0] <= lat[1] * (1 + 1e-12) else -1.0


@prop(
    "aegisguard.path_fraction_bound",
    paper=PAPER,
    statement="Derived here: for S a subset of the full shielded set, the TEE path time of S over "
    "that of the full set (c0 transitions + bytes / BW + FLOPs / F_tee) is at most "
    "path_fraction(S, full), the largest of the three count ratios, on any hardware.",
    where="docs/papers/aegisguard.md#as-implemented-here (path_fraction, derived here)",
    strategy=_model_strategy,
    mutants=[
        wrap(
            "theory.aegisguard.path_fraction",
            lambda f: (
                lambda part, full: min(
                    part.messages / full.messages,
                    part.transfer_bytes / full.transfer_bytes,
                    part.flops / full.flops,
                )
            ),
            "the smallest ratio taken instead of the largest",
            name="min_ratio",
        )
    ],
)
def _fraction(ex) -> float:
    shapes, kept, small, _ = _setup(ex)
    r, n, b = ex["r"], ex["n_tokens"], ex["bytes"]
    kw = dict(n_tokens=n, bytes_per_element=b)
    full = C.shielded_cost(shapes, [True] * len(shapes), r, **kw)
    part = C.shielded_cost(shapes, small, r, **kw)
    c0, bw, fl = ex["hardware"]

    def path(c):
        return c.messages * c0 + c.transfer_bytes / bw + c.flops / fl

    bound = C.path_fraction(part, full)
    ratio = path(part) / path(full)
    return (
        float((bound - ratio) / max(bound, 1e-300) + 1e-12)
        if bound > 0
        else (1.0 if ratio == 0 else -1.0)
    )
