"""Limits of the nonlinear Laplacian (Ma & Kunisky 2025, arXiv 2505.12528) over sigma and beta."""

import dataclasses

import numpy as np

import spectral
from paper_checks import scaled, wrap
from spectral import sigmas
from theory.nonlinear_laplacian import null_law, theta
from theory.nonlinear_laplacian_floor import beta_floor

from .._properties import prop

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


def _sigma(ex):
    """A tanh nonlinearity ``a tanh(b x)`` or a nondecreasing step function (1 to 4 jumps)."""
    if ex["family"] == "tanh":
        return sigmas.tanh(ex["a"], ex["b"])
    k = ex["jumps"]
    br = np.sort(np.asarray(ex["breaks"][:k]))
    return sigmas.step(br, np.concatenate([[0.0], np.cumsum(ex["heights"][:k])]))


def _strict(room: float) -> float:
    """A strict inequality's room: itself when positive, else -1 (an exact tie is a failure)."""
    return room if room > 0 else -1.0


@prop(
    "spectral.transition_shape",
    paper=PAPER,
    statement="For tanh and step nonlinearities and either prior: theta(beta) increases; H' at "
    "theta(beta) changes sign at most once; below beta* the overlap is 0; above it the outlier "
    "lies above the edge, and the outlier and the overlap (in [0, 1]) increase with beta; "
    "the outlier meets the edge at beta* (and so does the overlap for a regular edge).",
    where="Sec. 3, main theorem and the threshold characterisation (H'(theta) = 0)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "family": st.sampled_from(["tanh", "step"]),
            "prior": st.sampled_from(PRIORS),
            "a": st.floats(0.2, 3.0),
            "b": st.floats(0.3, 2.0),
            "jumps": st.integers(1, 4),
            "breaks": st.lists(st.floats(-2.0, 2.0), min_size=4, max_size=4),
            "heights": st.lists(st.floats(0.05, 1.5), min_size=4, max_size=4),
        }
    ),
    mutants=[
        wrap(
            "spectral.critical_threshold",
            scaled(0.97),
            "the threshold beta* 3 % low",
            name="threshold_3pct_low",
        )
    ],
)
def _transition(ex) -> float:
    s, prior = _sigma(ex), ex["prior"]
    law = null_law(s)
    bstar = spectral.critical_threshold(s, prior)
    near = bstar * np.array([0.95, 0.99, 1.0, 1.001, 1.01, 1.05])  # both sides of beta*
    betas = np.sort(np.concatenate([np.linspace(0.3, 2.5, 12), near]))
    th = [theta(s, b, spectral.as_prior(prior)) for b in betas]
    present = np.array([t for t in th if t is not None])
    rooms = [_strict(float(np.min(np.diff(present), initial=1.0) / np.max(np.abs(present))))]
    hp = np.array(
        [
            -1.0 if t is None else 1 - np.sum(law.weights / (t - s.upper + law.upper_gaps) ** 2)
            for t in th
        ]
    )
    flips = np.count_nonzero(np.diff(np.sign(hp[np.abs(betas - bstar) > 1e-9])))
    rooms.append(1.0 if flips <= 1 else -1.0)
    above = betas[betas > bstar * (1 + 1e-9)]
    res = [spectral.outlier_limits(s, b, prior) for b in above]
    ov = np.array([r.overlap for r in res])
    lam = np.array([r.eigenvalue for r in res])
    edge = res[0].edge
    rooms += [
        float(min(ov.min(), 1.0 - ov.max())),
        _strict(float(np.min(np.diff(ov)))),
        _strict(float(np.min(np.diff(lam)) / np.max(np.abs(lam)))),
        _strict(float((lam.min() - edge) / abs(edge))),
    ]
    below = [spectral.outlier(s, b, prior)[1] for b in betas[betas < bstar * (1 - 1e-9)]]
    rooms.append(1.0 if max(below, default=0.0) == 0.0 else -1.0)  # no overlap below beta*
    r = spectral.outlier_limits(s, bstar * (1 + 1e-8), prior)  # continuity at beta*
    rooms.append(1.0 - (r.eigenvalue - r.edge) / 1e-4)
    if spectral.threshold(s, prior).regular:
        rooms.append(1.0 - r.overlap / 1e-4)
    return min(rooms)


#: the extremal σ's optimal scale c for t0 -> ∞ (W(1) on the planted submatrix; the gradient
#: search's 0.78217 on NNPCA, paper_checks.spectral.FLOOR_PARAMS): the strategy samples around it
EXTREMAL_SCALE = {"planted_submatrix": 0.5671432904, "sparse_nnpca": 0.78216893}


def _low(f):
    """Mutant wrapper: every β* returned 1 % low (a biased root or quadrature)."""

    def g(*args, **kwargs):
        r = f(*args, **kwargs)
        return dataclasses.replace(r, beta_star=0.99 * r.beta_star)

    return g


def _any_sigma(ex):
    """A bounded non-decreasing σ of the instance's family: random steps (1 to 4 jumps), tanh,
    Z-shapes, monotone one-hidden-layer networks (1 to 3 units) and the capped extremal σ (scale
    within 0.1 of its optimum, cap t0 in [2.5, 8], constant below ``low``: near the floor)."""
    fam = ex["family"]
    if fam in ("tanh", "step"):
        return _sigma(ex)
    if fam == "zshape":
        return sigmas.zshape(ex["a"], ex["b"], ex["c"])
    if fam == "mlp":
        k = ex["units"]
        return sigmas.monotone_mlp(ex["v"][:k], ex["w"][:k], ex["bias"][:k])
    c = EXTREMAL_SCALE[ex["shape"]] + ex["scale"]
    return sigmas.extremal(c, ex["t0"], ex["t0"] - ex["low"], ex["shape"])


@prop(
    "spectral.beta_star_above_floor",
    paper=PAPER,
    statement="(Derived here) no bounded sigma beats the floor: beta*(sigma) >= beta0 "
    "(sqrt(W(1)) on the planted submatrix, 0.66093 on sparse NNPCA) for steps, tanh, "
    "Z-shapes, monotone networks and the capped extremal sigma, on either prior.",
    where="Sec. 3 threshold characterisation + Cauchy-Schwarz (theory.nonlinear_laplacian_floor)",
    strategy=lambda st: st.fixed_dictionaries(
        {
            "family": st.sampled_from(["tanh", "step", "zshape", "mlp", "extremal"]),
            "prior": st.sampled_from(PRIORS),
            "a": st.floats(0.2, 8.0),
            "b": st.floats(0.3, 5.0),
            "c": st.floats(-6.0, 2.0),
            "jumps": st.integers(1, 4),
            "breaks": st.lists(st.floats(-2.0, 3.0), min_size=4, max_size=4),
            "heights": st.lists(st.floats(0.05, 1.5), min_size=4, max_size=4),
            "units": st.integers(1, 3),
            "v": st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3),
            "w": st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3),
            "bias": st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3),
            "scale": st.floats(-0.1, 0.1),
            "t0": st.floats(2.5, 8.0),
            "low": st.floats(-8.0, -1.0),
            "shape": st.sampled_from(PRIORS),
        }
    ),
    mutants=[
        wrap(
            "theory.nonlinear_laplacian.critical_threshold",
            _low,
            "the beta* root 1 % low",
            name="beta_star_1pct_low",
        )
    ],
)
def _above_floor(ex) -> float:
    bstar = spectral.critical_threshold(_any_sigma(ex), ex["prior"])
    return bstar / beta_floor(ex["prior"]) - 1.0
