"""Simulators and learners that produce the quantities the theorems predict.

Public submodules (every public module or package of this folder), loaded on first access:
``dynamics.sgd`` (last-iterate SGD: exact recursion,
JAX Monte Carlo, PEP worst cases), ``dynamics.koopman`` (top-k Koopman singular functions by
low-rank approximation), ``dynamics.fp4_training`` (gradient-to-noise ratio in FP4 training),
``dynamics.transformer`` (small-initialisation Transformer gradient flow), ``dynamics.mri``
(Cartesian MRI physics and ellipsoid phantoms with the shifts of D2SA's kind),
``dynamics.distill`` (distilling attention into hybrid students), ``dynamics.acavp`` (digits
suite and visual-prompt training), ``dynamics.mixprompt`` (RGB-D scenes and prompt training),
``dynamics.dnd`` (LoRA checkpoint collection and the parameter generator),
``dynamics.aegisguard`` (adapter shielding: victim, attack, RSM bandit, pruning).
"""

import importlib
import pkgutil

_SUBMODULES = tuple(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
__all__ = list(_SUBMODULES)  # pyright: ignore[reportUnsupportedDunderAll]  (discovered at import)


def __getattr__(name):  # PEP 562
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
