"""Limits of the nonlinear Laplacian (Ma & Kunisky 2025, arXiv 2505.12528) over sigma and beta."""

import spectral
from spectral import sigmas

from .._properties import prop
from .._registry import scaled, wrap

PAPER = "Ma & Kunisky 2025 (arXiv 2505.12528)"
PRIORS = ("planted_submatrix", "sparse_nnpca")


@prop(
    "spectral.bbp_constant_sigma",
    paper=PAPER,
    statement="With a constant sigma = c the nonlinear Laplacian is PCA shifted by c: "
    "beta* = 1, outlier beta + 1/beta + c and overlap 1 - 1/beta^2 above it.",
    where="Sec. 3, main theorem at constant sigma (BBP)",
    strategy=lambda st: st.fixed_dictionaries(
        {"c": st.floats(-5.0, 5.0), "beta": st.floats(1.01, 6.0), "prior": st.sampled_from(PRIORS)}
    ),
    mutants=[
        wrap(
            "spectral.outlier",
            lambda f: lambda s, b, p: (f(s, b, p)[0], 1.01 * f(s, b, p)[1]),
            "overlap 1 % high",
            name="overlap_1pct",
        )
    ],
)
def _bbp(ex) -> float:
    s = sigmas.constant(ex["c"])
    b = ex["beta"]
    lam, ov = spectral.outlier(s, b, ex["prior"])
    err = max(
        abs(spectral.critical_threshold(s, ex["prior"]) - 1.0),
        abs(lam - (b + 1 / b + ex["c"])),
        abs(ov - (1 - 1 / b**2)),
    )
    return 1.0 - err / 1e-9


@prop(
    "spectral.outlier_above_edge",
    paper=PAPER,
    statement="For tanh nonlinearities and beta > beta*(sigma) the limiting outlier lies "
    "strictly above the bulk edge, with squared overlap in (0, 1].",
    where="Sec. 3, main theorem",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "a": st.floats(0.2, 3.0),
            "b": st.floats(0.3, 2.0),
            "excess": st.floats(0.02, 2.0),
            "prior": st.sampled_from(PRIORS),
        }
    ),
    mutants=[wrap("spectral.bulk_edge", scaled(1.2), "bulk edge 20 % high", name="edge_20pct")],
)
def _above_edge(ex) -> float:
    s = sigmas.tanh(ex["a"], ex["b"])
    beta = spectral.critical_threshold(s, ex["prior"]) * (1 + ex["excess"])
    lam, ov = spectral.outlier(s, beta, ex["prior"])
    edge = spectral.bulk_edge(s)
    return float(min((lam - edge) / abs(edge), ov, 1.0 - ov + 1e-12))
