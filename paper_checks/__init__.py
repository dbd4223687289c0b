"""Registry of the papers' claims, each a check that measures and compares.

One module per area (``rmt``, ``ecc``, ``spectral``, ``sgd``, ``fp4``, ``koopman``, ``transformer``,
``adapters``); each registers its claims with :func:`claim`. ``scale`` is ``"quick"`` (every claim
together within about ten minutes on two cores) or ``"full"`` (the papers' own sizes).
"""

from ._registry import REGISTRY, SCALES, Claim, Measurement, Registry, claim

__all__ = ["REGISTRY", "SCALES", "Claim", "Measurement", "Registry", "claim"]
