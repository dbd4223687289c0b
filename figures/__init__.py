"""One module per theorem plot: each has ``ID``, ``TITLE`` and ``make(scale, seed=0) -> Figure``."""

from ._registry import figure_modules, save

__all__ = ["figure_modules", "save"]
