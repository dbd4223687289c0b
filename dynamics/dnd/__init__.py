"""Drag-and-Drop LLMs at small scale (Liang et al. 2025, arXiv 2506.16406;
``docs/papers/dnd.md``).

* :mod:`._tasks`: :class:`TaskFamily`, :func:`task_family` (tasks whose unlabeled inputs identify
  them, or a negative control whose inputs do not), :func:`sample_inputs`, :func:`task_targets`;
* :mod:`._collect`: :func:`lora_template`, :func:`factors_of`, :func:`with_factors`,
  :func:`collect_checkpoints` (consecutive-step LoRA checkpoints per task, the official protocol);
* :mod:`._generator`: :func:`train_generator` (the prompt -> tokens generator of :mod:`nn.dnd`
  on random (checkpoint, fresh prompt batch) pairs of the same task), :func:`generate_tokens`;
* :mod:`._evaluate`: :func:`adapter_mse`, :func:`evaluate_heldout` (DnD against the training-LoRA
  average, the mean adapter and wrong-task prompts), :func:`timed`.
"""

from ._collect import Checkpoints, collect_checkpoints, factors_of, lora_template, with_factors
from ._evaluate import GEN_REPEATS, GEN_WARMUP, HeldOut, adapter_mse, evaluate_heldout, timed
from ._generator import GeneratorFit, generate_tokens, train_generator
from ._tasks import TaskFamily, sample_inputs, task_family, task_targets

__all__ = [
    "TaskFamily",
    "task_family",
    "sample_inputs",
    "task_targets",
    "Checkpoints",
    "lora_template",
    "factors_of",
    "with_factors",
    "collect_checkpoints",
    "GeneratorFit",
    "train_generator",
    "generate_tokens",
    "HeldOut",
    "adapter_mse",
    "evaluate_heldout",
    "timed",
    "GEN_WARMUP",
    "GEN_REPEATS",
]
