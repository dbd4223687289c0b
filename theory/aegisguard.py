"""Exact TEE cost bookkeeping of selectively shielded LoRA adapters (AegisGuard, Wang et al.,
NeurIPS 2025, OpenReview i99ZhFw6GN; the formulas are derived here,
``docs/papers/aegisguard.md#as-implemented-here``).

For an adapter on a linear map ``d_in -> d_out`` of rank ``r``, ``n`` tokens per forward pass and
``b`` bytes per element, with the activation sent into the enclave and the adapter's output sent
back (one ECALL/OCALL pair):

    TEE parameter bytes   M = r (d_in + d_out) b
    host -> TEE bytes     n d_in b            TEE -> host bytes   n d_out b
    messages              2                   TEE FLOPs           2 n r (d_in + d_out)

Shielded-adapter compression keeps ``d_out' <= d_out`` outputs (and/or rank ``r' <= r``): replace
``d_out, r`` by ``d_out', r'``. Serial latency (the GPU waits at every shielded layer):
``T(S) = T_gpu + sum_{l in S} [2 c0 + n (d_in + d_out') b / BW + 2 n r' (d_in + d_out') / F_tee]``.
The Amdahl form (derived here): with ``f`` the share of full-shield latency on the TEE path
and ``c`` the fraction of that path left, the speed-up is ``1 / ((1 - f) + f c) <= 1 / (1 - f)``.
Counts are Python ints (exact); only latencies and ratios are floats. Tests:
``tests/theory/test_aegisguard.py`` (hand-computed integers).
"""

from __future__ import annotations

import dataclasses

from _core.validation import check_bool, check_finite_result, check_int, check_scalar

__all__ = [
    "TEECost",
    "adapter_cost",
    "shielded_cost",
    "serial_latency",
    "amdahl_speedup",
    "tee_share",
    "path_fraction",
    "llama_lora_shapes",
]

_MAX = 2**40


@dataclasses.dataclass(frozen=True)
class TEECost:
    """Per-inference TEE bookkeeping (``docs/papers/aegisguard.md#as-implemented-here``): parameter
    bytes held in the enclave, bytes crossing the boundary each way, enclave transitions (ECALL +
    OCALL) and enclave FLOPs."""

    param_bytes: int
    host_to_tee_bytes: int
    tee_to_host_bytes: int
    messages: int
    flops: int

    @property
    def transfer_bytes(self) -> int:
        return self.host_to_tee_bytes + self.tee_to_host_bytes

    def __add__(self, other: TEECost) -> TEECost:
        return TEECost(*(getattr(self, f.name) + getattr(other, f.name) for f in _FIELDS))

    def summary(self) -> str:
        rows = [(f.name, getattr(self, f.name)) for f in _FIELDS]
        rows.append(("transfer_bytes", self.transfer_bytes))
        return "\n".join(["TEECost", "-" * 36] + [f"{k:<20}{v:>16d}" for k, v in rows])


_FIELDS = dataclasses.fields(TEECost)
ZERO = TEECost(0, 0, 0, 0, 0)


def adapter_cost(
    d_in: int,
    d_out: int,
    r: int,
    *,
    n_tokens: int = 1,
    bytes_per_element: int = 4,
    kept_out: int | None = None,
    kept_rank: int | None = None,
) -> TEECost:
    """The cost of one shielded adapter (module formulas,
    ``docs/papers/aegisguard.md#as-implemented-here``); ``kept_out``/``kept_rank`` after SAC.

    >>> adapter_cost(4096, 4096, 8).param_bytes  # r (d_in + d_out) b = 8 * 8192 * 4
    262144
    """
    d_in = check_int(d_in, "d_in", lower=1, upper=_MAX)
    d_out = check_int(d_out, "d_out", lower=1, upper=_MAX)
    r = check_int(r, "r", lower=1, upper=_MAX)
    n = check_int(n_tokens, "n_tokens", lower=1, upper=_MAX)
    b = check_int(bytes_per_element, "bytes_per_element", lower=1, upper=64)
    do = d_out if kept_out is None else check_int(kept_out, "kept_out", lower=0, upper=d_out)
    rr = r if kept_rank is None else check_int(kept_rank, "kept_rank", lower=0, upper=r)
    return TEECost(
        param_bytes=rr * (d_in + do) * b,
        host_to_tee_bytes=n * d_in * b,
        tee_to_host_bytes=n * do * b,
        messages=2,
        flops=2 * n * rr * (d_in + do),
    )


def shielded_cost(
    shapes,
    shielded,
    r: int,
    *,
    n_tokens: int = 1,
    bytes_per_element: int = 4,
    kept_out=None,
) -> TEECost:
    """Sum of :func:`adapter_cost` over the layers ``l`` with ``shielded[l]``
    (``docs/papers/aegisguard.md#as-implemented-here``); ``shapes`` the ``(d_out, d_in)`` of every
    adapted layer, ``kept_out`` (optional) the outputs each keeps.

    >>> shielded_cost([(8, 4), (8, 4)], [True, False], 2).flops  # 2 n r (d_in + d_out), one layer
    48
    """
    if not isinstance(shapes, list | tuple) or not shapes:
        raise TypeError(f"`shapes` must be a non-empty list of (d_out, d_in); got {shapes!r}.")
    for s in shapes:
        if not isinstance(s, list | tuple) or len(s) != 2:
            raise ValueError(f"`shapes` must hold (d_out, d_in) pairs; got {s!r}.")
    if not isinstance(shielded, list | tuple) or len(shielded) != len(shapes):
        raise ValueError(f"`shielded` must be a list of {len(shapes)} bools; got {shielded!r}.")
    flags = [check_bool(x, "shielded") for x in shielded]
    if kept_out is None:
        kept_out = [None] * len(shapes)
    if not isinstance(kept_out, list | tuple) or len(kept_out) != len(shapes):
        raise ValueError(f"`kept_out` must be a list of {len(shapes)} widths; got {kept_out!r}.")
    total = ZERO
    for (d_out, d_in), on, ko in zip(shapes, flags, kept_out, strict=True):
        if on:
            total = total + adapter_cost(
                d_in, d_out, r, n_tokens=n_tokens, bytes_per_element=bytes_per_element,
                kept_out=ko,
            )  # fmt: skip
    return total


def serial_latency(
    cost: TEECost,
    *,
    gpu_seconds: float,
    transition_seconds: float,
    bandwidth: float,
    tee_flops: float,
) -> float:
    """``T_gpu + messages c0 + transfer_bytes / BW + flops / F_tee`` (seconds), the serial
    schedule of the module formula (``docs/papers/aegisguard.md#as-implemented-here``; ``c0`` per
    transition, so ``2 c0`` per shielded layer).

    >>> cost = adapter_cost(4, 8, 2)
    >>> serial_latency(
    ...     cost, gpu_seconds=1.0, transition_seconds=0.5, bandwidth=48.0, tee_flops=48.0
    ... )
    4.0
    """
    if not isinstance(cost, TEECost):
        raise TypeError(f"`cost` must be a TEECost; got {type(cost).__name__}.")
    t = check_scalar(gpu_seconds, "gpu_seconds", lower=0, upper=1e6)
    c0 = check_scalar(transition_seconds, "transition_seconds", lower=0, upper=1e3)
    bw = check_scalar(bandwidth, "bandwidth", lower=0, upper=1e15, closed="right")
    fl = check_scalar(tee_flops, "tee_flops", lower=0, upper=1e18, closed="right")
    total = t + cost.messages * c0 + cost.transfer_bytes / bw + cost.flops / fl
    return check_finite_result(total, "the latency", bandwidth=bw, tee_flops=fl)


def amdahl_speedup(f: float, c: float) -> float:
    """``1 / ((1 - f) + f c)``: ``f`` the full-shield latency share of the TEE path, ``c`` the
    fraction of that path left (derived here, ``docs/papers/aegisguard.md#as-implemented-here``).

    >>> amdahl_speedup(0.6, 0.0)  # the ceiling 1 / (1 - f)
    2.5
    """
    f = check_scalar(f, "f", lower=0, upper=1, closed="left")
    c = check_scalar(c, "c", lower=0, upper=1)
    return 1.0 / ((1.0 - f) + f * c)


def tee_share(speedup: float, c: float) -> float:
    """The share ``f`` of full-shield latency on the TEE path implied by an end-to-end
    ``speedup`` that leaves a fraction ``c`` of the path: :func:`amdahl_speedup` solved for ``f``,
    ``f = (1 - 1/S) / (1 - c)`` (derived here; ``tests/theory/test_aegisguard.py`` checks the
    round trip). A speed-up above the ceiling ``1/c`` implies no share and raises.

    >>> round(tee_share(2.5, 0.0), 12)  # 60 % of the latency on the TEE path, all of it removed
    0.6
    """
    s = check_scalar(speedup, "speedup", lower=1, upper=1e12)
    c = check_scalar(c, "c", lower=0, upper=1, closed="left")
    f = (1.0 - 1.0 / s) / (1.0 - c)
    if f > 1.0:
        raise ValueError(
            f"`speedup` must be at most the ceiling 1/c = {1 / c:g} when c = {c:g} of the TEE "
            f"path is left; got {s:g}."
        )
    return f


def path_fraction(part: TEECost, full: TEECost) -> float:
    """An upper bound on the fraction of the full-shield TEE path's time that the configuration
    ``part`` leaves, whatever the hardware: the largest of its transition, transfer-byte and FLOP
    ratios to ``full``.

    Derived here: in the serial model (module formula) the TEE path takes
    ``messages c0 + transfer_bytes / BW + flops / F_tee``, a positive combination of the three
    counts, so its ratio between two configurations is a weighted mean of the three ratios and at
    most their largest for every ``c0, BW, F_tee > 0`` (``tests/theory/test_aegisguard.py`` draws
    hardware constants and checks the bound).

    >>> full = adapter_cost(8, 8, 2) + adapter_cost(8, 8, 2)
    >>> path_fraction(adapter_cost(8, 4, 2), full)  # 1 of 2 messages pairs; 12 of 32 bytes
    0.5
    """
    for name, v in (("part", part), ("full", full)):
        if not isinstance(v, TEECost):
            raise TypeError(f"`{name}` must be a TEECost; got {type(v).__name__}.")
    if min(full.messages, full.transfer_bytes, full.flops) <= 0:
        raise ValueError(f"`full` must shield at least one adapter; got {full!r}.")
    return max(
        part.messages / full.messages,
        part.transfer_bytes / full.transfer_bytes,
        part.flops / full.flops,
    )


def llama_lora_shapes(
    targets=("q_proj", "v_proj"),
    *,
    n_layers: int = 32,
    hidden: int = 4096,
    intermediate: int = 11008,
) -> list[tuple[int, int]]:
    """``(d_out, d_in)`` of every LoRA-adapted projection of a LLaMA-7B-shaped model (Touvron et
    al. 2023, arXiv 2302.13971, Table 2; the SwiGLU width 11008 from their Sec. 2.3).

    >>> llama_lora_shapes(("q_proj", "down_proj"), n_layers=1)
    [(4096, 4096), (4096, 11008)]
    """
    n_layers = check_int(n_layers, "n_layers", lower=1, upper=10**4)
    h = check_int(hidden, "hidden", lower=1, upper=10**6)
    m = check_int(intermediate, "intermediate", lower=1, upper=10**6)
    table = {
        "q_proj": (h, h), "k_proj": (h, h), "v_proj": (h, h), "o_proj": (h, h),
        "gate_proj": (m, h), "up_proj": (m, h), "down_proj": (h, m),
    }  # fmt: skip
    if isinstance(targets, str) or not isinstance(targets, tuple | list) or not targets:
        raise TypeError(
            f"`targets` must be a non-empty tuple of projection names; got {targets!r}."
        )
    for t in targets:
        if t not in table:
            raise ValueError(f"`targets` must name projections among {sorted(table)}; got {t!r}.")
    return [table[t] for _ in range(n_layers) for t in targets]
