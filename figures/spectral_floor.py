"""β* against the number of parameters of σ on both models: PCA, tanh, the Z-shape, the paper's
16-jump step, the capped extremal σ (3 parameters) and, for the planted submatrix, its best
member with >= 10 top-level coordinates at finite n; the floor β0 and AMP's e^{-1/2} as lines.
Top row β*, bottom row β* - β0 on a log scale (Ma & Kunisky 2025, Sec. 4; the floor derived in
:mod:`theory.nonlinear_laplacian_floor`)."""

import matplotlib.pyplot as plt

import spectral
from paper_checks.spectral import (
    AMP,
    FINITE_SIZES,
    NN,
    PAPER_BETA,
    PS,
    finite_member,
    floor_sigma,
    floor_values,
    published_beta,
)
from spectral import sigmas

ID = "spectral.floor"
TITLE = "How low beta* can go: the floor and a 3-parameter sigma at it"


def make(scale: str = "quick", seed: int = 0):
    """``seed`` is unused: every β* here is exact (quadrature and roots)."""
    floor = floor_values()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for col, prior in enumerate((PS, NN)):
        points = [
            ("PCA", 0, spectral.critical_threshold(sigmas.zero(), prior)),
            ("tanh (paper)", 2, published_beta("tanh", prior)),
            ("Z-shape (paper)", 3, published_beta("zshape", prior)),
            ("step, 16 jumps (paper, reported)", 32, PAPER_BETA["step16", prior]),
            ("capped extremal (here)", 3, floor_sigma(prior, False)[1]),
        ]
        if prior == PS:
            for n in FINITE_SIZES[scale].ns:
                points.append((f"extremal, >= 10 top coords, n={n}", 3, finite_member(n, "top")[1]))
        top, bottom = axes[0, col], axes[1, col]
        for i, (name, k, b) in enumerate(points):
            marker = "*" if "here" in name else ("s" if "n=" in name else "o")
            for ax, y in ((top, b), (bottom, max(b - floor[prior], 1e-13))):
                ax.plot(k, y, marker, color=f"C{i}", ms=9 if marker == "*" else 6, label=name)
        top.axhline(floor[prior], color="k", lw=1, label=rf"floor $\beta_0$ = {floor[prior]:.7f}")
        if prior == PS:
            top.axhline(AMP, color="grey", ls="--", lw=1, label=r"AMP $e^{-1/2}$")
        bottom.axhline(1e-4, color="k", ls=":", lw=1, label="floor + 1e-4")
        bottom.set_yscale("log")
        top.set_title(prior.replace("_", " "))
        top.set_ylabel(r"$\beta^*(\sigma)$")
        bottom.set_ylabel(r"$\beta^*(\sigma) - \beta_0$")
        bottom.set_xlabel("parameters of sigma")
        bottom.set_xscale("symlog", linthresh=4)
        bottom.set_xticks([0, 2, 3, 32])
        bottom.get_xaxis().set_major_formatter(plt.ScalarFormatter())
        top.legend(frameon=False, fontsize=7)
    fig.suptitle(f"{TITLE} (AMP on NNPCA not drawn: no closed form here)")
    fig.tight_layout()
    return fig
