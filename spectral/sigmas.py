"""σ families for the nonlinear Laplacian: bounded, non-decreasing, kinks/jumps declared.

``spectral.sigmas.tanh(a, b)``, ``zshape(a, b, c)``, ``step(breaks, levels)``, ``constant(c)``,
``zero()``, ``monotone_mlp(v, w, b, c0)``, ``custom(fn, upper=, lower=, breaks=)``,
``extremal(c, t0, width, prior)`` (the capped floor-attaining σ).
"""

from ._sigmas import Sigma, constant, custom, extremal, monotone_mlp, step, tanh, zero, zshape

__all__ = [
    "Sigma",
    "tanh",
    "zshape",
    "step",
    "constant",
    "zero",
    "monotone_mlp",
    "custom",
    "extremal",
]
