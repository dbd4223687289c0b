"""The TEE cost model's integers against hand computation (``theory.aegisguard``)."""

import math

import numpy as np
import pytest

from theory import aegisguard as C


def test_one_adapter_by_hand():
    # d_in 16, d_out 32, r 4, n 3 tokens, fp32: M = 4 * 48 * 4 = 768; in 3*16*4 = 192;
    # out 3*32*4 = 384; FLOPs 2*3*4*48 = 1152
    c = C.adapter_cost(16, 32, 4, n_tokens=3, bytes_per_element=4)
    assert (c.param_bytes, c.host_to_tee_bytes, c.tee_to_host_bytes) == (768, 192, 384)
    assert (c.messages, c.flops, c.transfer_bytes) == (2, 1152, 576)


def test_pruned_outputs_by_hand():
    # SAC keeps 24 of 32 outputs: M = 4 * (16 + 24) * 2 = 320 (fp16); out bytes 5 * 24 * 2 = 240
    c = C.adapter_cost(16, 32, 4, n_tokens=5, bytes_per_element=2, kept_out=24)
    assert (c.param_bytes, c.host_to_tee_bytes, c.tee_to_host_bytes) == (320, 160, 240)
    assert c.flops == 2 * 5 * 4 * 40 == 1600


def test_llama_7b_q_v_rank_8_fp16():
    # 32 layers x (q, v), each 4096 -> 4096: 64 adapters x 8 * 8192 * 2 bytes = 8,388,608 bytes;
    # one token in and out per adapter: 64 x 8192 bytes each way = 524,288
    shapes = C.llama_lora_shapes()
    assert len(shapes) == 64 and set(shapes) == {(4096, 4096)}
    c = C.shielded_cost(shapes, [True] * 64, 8, bytes_per_element=2)
    assert c.param_bytes == 8_388_608
    assert c.host_to_tee_bytes == c.tee_to_host_bytes == 524_288
    assert c.messages == 128


def test_llama_7b_all_projections_rank_16_fp32():
    # per layer r (4 * 8192 + 2 * 15104 + 15104) = 16 * 78080 = 1,249,280 params; x 32 layers
    # = 39,976,960 params; x 4 bytes = 159,907,840 bytes
    names = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    shapes = C.llama_lora_shapes(names)
    c = C.shielded_cost(shapes, [True] * len(shapes), 16)
    assert c.param_bytes == 159_907_840


def test_selection_sums_only_shielded_layers():
    shapes = [(32, 16), (32, 32), (32, 32), (8, 32)]
    c = C.shielded_cost(shapes, [False, True, False, True], 4, kept_out=[32, 32, 32, 4])
    # layer 1: 4 * 64 * 4 = 1024; layer 3 keeps 4 of 8: 4 * 36 * 4 = 576
    assert c.param_bytes == 1024 + 576
    assert c.host_to_tee_bytes == (32 + 32) * 4 and c.tee_to_host_bytes == (32 + 4) * 4


def test_serial_latency_and_amdahl():
    c = C.adapter_cost(16, 32, 4)
    t = C.serial_latency(c, gpu_seconds=1.0, transition_seconds=0.5, bandwidth=96.0, tee_flops=384)
    assert t == 1.0 + 2 * 0.5 + 192 / 96 + 384 / 384
    assert C.amdahl_speedup(0.6, 0.0) == pytest.approx(2.5, rel=1e-15)
    assert C.amdahl_speedup(0.0, 0.3) == 1.0
    rng = np.random.default_rng(0)
    for f, cc in rng.uniform(0, 0.999, (200, 2)):
        assert C.amdahl_speedup(f, cc) <= 1 / (1 - f) * (1 + 1e-12)
    assert math.isclose(C.amdahl_speedup(0.7, 0.0), 1 / 0.3)


def test_tee_share_inverts_amdahl():
    # 1 / ((1 - f) + f c) with f = 0.75, c = 0.2: 1 / (0.25 + 0.15) = 2.5
    assert C.tee_share(2.5, 0.2) == pytest.approx(0.75, rel=1e-14)
    rng = np.random.default_rng(1)
    for f, cc in rng.uniform(0, 0.999, (200, 2)):
        assert C.tee_share(C.amdahl_speedup(f, cc), cc) == pytest.approx(f, abs=1e-12)
    with pytest.raises(ValueError, match="speedup"):
        C.tee_share(6.0, 0.2)  # above the ceiling 1 / c = 5


def test_path_fraction_bounds_the_serial_path_for_any_hardware():
    full = C.shielded_cost([(32, 16), (32, 32), (8, 32)], [True] * 3, 4)
    part = C.shielded_cost(
        [(32, 16), (32, 32), (8, 32)], [False, True, False], 4, kept_out=[32, 24, 8]
    )
    # messages 2 / 6; bytes and flops (32 + 24) / (48 + 64 + 40) = 56 / 152, the larger
    assert C.path_fraction(part, full) == 56 / 152
    rng = np.random.default_rng(2)
    for c0, bw, fl in 10.0 ** rng.uniform(-9, 3, (300, 3)):
        t_part, t_full = (
            c.messages * c0 + c.transfer_bytes / bw + c.flops / fl for c in (part, full)
        )
        assert t_part / t_full <= C.path_fraction(part, full) * (1 + 1e-12)
    with pytest.raises(TypeError, match="part"):
        C.path_fraction(1.0, full)


def test_same_shape_adapters_keep_the_memory_fraction_of_the_path():
    # derived here (paper_checks.aegisguard.paper_tee_share): with one rank and one shape, the
    # bytes and FLOPs of the TEE path keep exactly the fraction of TEE memory kept
    from fractions import Fraction

    shapes = C.llama_lora_shapes(("q_proj", "v_proj"), n_layers=4)
    full = C.shielded_cost(shapes, [True] * 8, 8, n_tokens=5)
    rng = np.random.default_rng(3)
    for _ in range(20):
        on = [bool(x) for x in rng.integers(0, 2, 8)]
        on[0] = True
        kept = [int(k) for k in rng.integers(1, 4097, 8)]
        part = C.shielded_cost(shapes, on, 8, n_tokens=5, kept_out=kept)
        mem = Fraction(part.param_bytes, full.param_bytes)
        assert Fraction(part.transfer_bytes, full.transfer_bytes) == mem
        assert Fraction(part.flops, full.flops) == mem


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(d_in=0, d_out=4, r=1), "d_in"),
        (dict(d_in=4, d_out=4, r=1, kept_out=5), "kept_out"),
        (dict(d_in=4, d_out=4, r=2.0), "r"),
        (dict(d_in=4, d_out=4, r=1, n_tokens=10**13), "n_tokens"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        C.adapter_cost(**kwargs)
