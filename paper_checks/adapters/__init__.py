"""Claims of the adapter papers, measured on tasks that run on 2 cores, one module per method.

Each experiment is a ``functools.cache``d function of ``scale`` shared by the claim and its figure
(``figures/adapters_*``); :mod:`._base` holds the training loop and the small pretrained model.
"""

from . import ct, moore, polar, ravan, tfb, unilora

__all__ = ["ct", "moore", "polar", "ravan", "tfb", "unilora"]
