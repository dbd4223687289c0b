"""Claims of the adapter papers, measured on tasks that run on 2 cores, one module per method.

Each experiment is a :func:`paper_checks.memo` function of a size row's entries and the seed,
shared by the claim and its figure (``figures/adapters_*``); every draw comes from the seed, and
seeds (and learning rates) run ``vmap``-ed in one compiled program. :mod:`._base` holds the
training loop, seed stacking and the small pretrained model.
"""

from . import ct, moore, polar, ravan, tfb, unilora

__all__ = ["ct", "moore", "polar", "ravan", "tfb", "unilora"]
