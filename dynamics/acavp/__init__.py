"""ACAVP's small-scale experiment (Enomoto, NeurIPS 2025, arXiv 2510.07823;
``docs/papers/acavp.md#small-scale-experiment``):
digits on a 32x32 canvas (:mod:`.data`), TrivialAugment in its standard space (:mod:`.augment`),
and the pre-training / adaptation pipeline (:mod:`.pipeline`) around the prompts of
:mod:`nn.acavp`."""

from .augment import LEVELS, OPS, apply_ops, trivial_augment
from .data import SHIFTS, TASKS, Task, digits, render, source_task, target_task
from .pipeline import LABEL_MAPS, LR_GRID, METHODS, TA_SIDE, AdaptResult, adapt, build, pretrain

__all__ = [
    "METHODS",
    "LR_GRID",
    "LABEL_MAPS",
    "TA_SIDE",
    "AdaptResult",
    "adapt",
    "build",
    "pretrain",
    "OPS",
    "LEVELS",
    "apply_ops",
    "trivial_augment",
    "SHIFTS",
    "TASKS",
    "Task",
    "digits",
    "render",
    "source_task",
    "target_task",
]
