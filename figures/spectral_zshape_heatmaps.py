"""Heatmaps of β* over the Z-shape family min(b, max(0, (b/a)(t - c))) on the planted submatrix,
one parameter fixed at the Nelder–Mead optimum (Ma & Kunisky 2025, Sec. 4, exhaustive search)."""

import matplotlib.pyplot as plt
import numpy as np

import spectral
from paper_checks.spectral import SIZES, Z_PS

ID = "spectral.zshape_heatmaps"
TITLE = "beta* over the Z-shape family (planted submatrix)"


def make(scale: str = "quick", seed: int = 0):
    """``seed`` is unused: the heatmaps are deterministic (exact beta* on a grid)."""
    da, db, dc = SIZES[scale].grid
    g = dict(a=np.arange(0.5, 13.01, da), b=np.arange(0.5, 10.01, db), c=np.arange(-10.0, 2.01, dc))
    opt = dict(zip("abc", Z_PS, strict=True))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.9))
    for ax, (x, y, fixed) in zip(
        axes, (("a", "b", "c"), ("b", "c", "a"), ("a", "c", "b")), strict=True
    ):
        res = spectral.threshold_grid("zshape", {x: g[x], y: g[y]}, {fixed: opt[fixed]})
        shown = np.minimum(res.values, 1.0)  # colour scale clipped at 1 (">= 1"): values exact
        im = ax.pcolormesh(
            res.x,
            res.y,
            shown.T,
            shading="nearest",
            cmap="viridis",
            vmin=np.nanmin(shown),
            vmax=1.0,
        )
        bx, by, bv = res.argmin
        ax.plot(bx, by, "r*", ms=10, label=rf"grid min $\beta^*$={bv:.4f}")
        ax.plot(opt[x], opt[y], "wx", ms=8, label="Nelder–Mead optimum")
        ax.set(xlabel=x, ylabel=y, title=f"{fixed} = {opt[fixed]:.3f} fixed")
        ax.legend(frameon=False, fontsize=7, loc="lower right")
        fig.colorbar(im, ax=ax, label=r"$\beta^*$ (clipped at 1: $\geq 1$)")
    fig.suptitle(TITLE)
    fig.tight_layout()
    return fig
