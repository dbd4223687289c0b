"""Valid calls of :mod:`theory.aegisguard` for the bad-input harness (``tests/_bad_input.py``)."""

from _bad_input import Case

from theory import aegisguard as C

COST = C.adapter_cost(16, 32, 4)

CASES = {
    "theory.aegisguard.adapter_cost": Case(
        C.adapter_cost, dict(d_in=16, d_out=32, r=4, n_tokens=2, bytes_per_element=2, kept_out=24)
    ),
    "theory.aegisguard.shielded_cost": Case(
        C.shielded_cost,
        dict(shapes=[(32, 16), (8, 32)], shielded=[True, False], r=4, n_tokens=1),
    ),
    "theory.aegisguard.serial_latency": Case(
        C.serial_latency,
        dict(cost=COST, gpu_seconds=1e-3, transition_seconds=1e-5, bandwidth=1e9, tee_flops=1e9),
    ),
    "theory.aegisguard.amdahl_speedup": Case(C.amdahl_speedup, dict(f=0.6, c=0.2)),
    "theory.aegisguard.tee_share": Case(C.tee_share, dict(speedup=2.0, c=0.2)),
    "theory.aegisguard.path_fraction": Case(C.path_fraction, dict(part=COST, full=COST + COST)),
    "theory.aegisguard.llama_lora_shapes": Case(
        C.llama_lora_shapes, dict(targets=("q_proj", "v_proj"), n_layers=2)
    ),
}

NOT_ENTRY_POINTS = {"theory.aegisguard.TEECost": "result"}
