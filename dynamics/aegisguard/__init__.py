"""AegisGuard (Wang et al., NeurIPS 2025, OpenReview i99ZhFw6GN): which LoRA adapters of an
on-device model to keep in a TEE so that a model-stealing attacker gains little, reconstructed
from digests of the paper (``docs/papers/aegisguard.md``; no code is public; every choice
the digests leave open is an explicit option).

Submodules: :mod:`.victim` (public backbone, planted private task, LoRA victim on
``nn.adapters``), :mod:`.attack` (the attacker's view, the TEESlice-protocol surrogate attack,
the feature-leakage recovery), :mod:`.bandit` (RSM: noise probes, reward, score update,
RSM-guided training), :mod:`.baselines` (random, magnitude, depth, one-shot probe, exhaustive
oracle), :mod:`.pruning` (SAC: importance-based structured pruning of the shielded adapters).
The exact TEE cost model is :mod:`theory.aegisguard`.
"""

from . import attack, bandit, baselines, pruning, victim

__all__ = ["victim", "attack", "bandit", "baselines", "pruning"]
