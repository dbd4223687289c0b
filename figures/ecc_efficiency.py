"""Efficiency of the exact OLS route (route 0) against the paper's best ridge estimators over
p/n: ``n Var`` of route 0, ``(1 + psi^2)/(1 - p/n)``
(``docs/papers/ecc_unknown_covariance.md#route-0``),
with Monte Carlo points on AR(1) 0.9 covariance and t5 rows; the derived variance of the
two- and three-split debiased DR at its variance-optimal common penalty (identity covariance,
aligned coefficients, theta = 0.75; :func:`theory.ecc.asymptotic_variance`); and the efficiency
bound ``Var(eps delta) = 1 + psi^2``."""

import matplotlib.pyplot as plt
import numpy as np

from paper_checks.ecc_ols import PSI, SIZES, simulate_efficiency
from theory.ecc import asymptotic_variance

ID = "ecc.efficiency"
TITLE = "Efficiency of ECC estimators over p/n (n Var, unit noises, psi = 0.5)"


def best_ridge_nvar(ratios, split, theta=0.75):
    """``n Var`` of the debiased DR with ``split`` folds at its variance-optimal common penalty
    on a 121-point log grid in [1e-3, 1e3] (``n = split m``, ``gamma = split p/n``)."""
    grid = np.geomspace(1e-3, 1e3, 121)
    out = []
    for r in ratios:
        with np.errstate(all="ignore"):
            V = asymptotic_variance(
                "dr",
                split,
                grid,
                grid,
                split * r,
                a2=1.0,
                b2=1.0,
                theta=theta,
                var_eps=1.0,
                var_delta=1.0,
                cov_eps_delta=PSI,
            )
        out.append(split * np.min(np.where(np.isfinite(V) & (V > 0), V, np.inf)))
    return np.array(out)


def make(scale: str = "quick", seed: int = 0):
    size = SIZES[scale]
    sim = simulate_efficiency(size.n, size.reps, seed)
    r = np.linspace(0.02, 0.9, 30)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.plot(r, (1 + PSI**2) / (1 - r), "k-", label=r"route 0 (OLS): $(1+\psi^2)/(1-p/n)$")
    ax.errorbar(
        sim["ratios"],
        sim["nvar"],
        yerr=2 * sim["nvar_se"],
        fmt="o",
        color="C0",
        capsize=3,
        label=f"route 0, MC (AR(1) 0.9, t5 rows, n={sim['n']})",
    )
    for split, col in ((2, "C1"), (3, "C2")):
        ax.plot(
            r,
            best_ridge_nvar(r, split),
            "--",
            color=col,
            label=f"best {split}-split debiased DR (derived variance)",
        )
    ax.axhline(1 + PSI**2, color="grey", ls=":", label=r"efficiency bound $1+\psi^2$")
    ax.set(
        xlabel="p / n",
        ylabel=r"$n\,\mathrm{Var}(\hat\psi)$",
        ylim=(0, 25),
        title=f"{TITLE}\n({sim['reps']} reps per point, bars ±2 SE)",
    )
    ax.title.set_fontsize(9)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig
