"""σ families for the nonlinear Laplacian: bounded, non-decreasing, kinks/jumps declared.

``spectral.sigmas.tanh(a, b)``, ``zshape(a, b, c)``, ``step(breaks, levels)``, ``constant(c)``,
``zero()``, ``monotone_mlp(v, w, b, c0)``, ``custom(fn, upper=, lower=, breaks=)``.
"""

from ._sigmas import Sigma, constant, custom, monotone_mlp, step, tanh, zero, zshape

__all__ = ["Sigma", "tanh", "zshape", "step", "constant", "zero", "monotone_mlp", "custom"]
