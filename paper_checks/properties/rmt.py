"""The semicircle law's Stieltjes transform (the spiked Wigner / BBP foundation)."""

import math

import numpy as np
from scipy import integrate

from paper_checks import wrap
from theory import bbp, semicircle
from theory import marchenko_pastur as mp

from .._properties import prop

PAPER = "Wigner 1958; Anderson, Guionnet & Zeitouni 2010, Sec. 2.4"


@prop(
    "rmt.semicircle_stieltjes",
    paper=PAPER,
    statement="The semicircle law of variance s^2 has Stieltjes transform m(z) solving "
    "s^2 m^2 + z m + 1 = 0 with Im m > 0 on the upper half-plane (the Herglotz branch).",
    where="AGZ 2010, Sec. 2.4 (Stieltjes transform of the semicircle)",
    strategy=lambda st: st.fixed_dictionaries(
        {"re": st.floats(-4.0, 4.0), "im": st.floats(0.05, 4.0), "scale": st.floats(0.5, 2.0)}
    ),
    mutants=[
        wrap(
            "theory.semicircle.semicircle_stieltjes",
            lambda f: lambda z, *a, **k: complex(f(z, *a, **k)).conjugate(),
            "the other root's sign of the imaginary part (wrong branch)",
            name="wrong_branch",
        )
    ],
)
def _stieltjes(ex) -> float:
    z, s = complex(ex["re"], ex["im"]), ex["scale"]
    m = complex(semicircle.semicircle_stieltjes(z, s))
    if m.imag <= 0:
        return -1.0
    resid = abs(s**2 * m * m + z * m + 1)
    return float(1.0 - resid / (1e-11 * max(1.0, abs(z)) ** 2))


@prop(
    "rmt.mp_moments",
    paper="Marchenko & Pastur 1967; Bai & Silverstein 2010, Lemma 3.1",
    statement="The k-th moment (k >= 1) of the Marchenko-Pastur law F_gamma is the Narayana "
    "polynomial sum_r gamma^r / (r + 1) C(k, r) C(k - 1, r): the closed form equals the "
    "quadrature of x^k against the law's density, for any k and ratio gamma.",
    where="Bai & Silverstein 2010, Lemma 3.1; density and edges Sec. 3.1",
    strategy=lambda st: st.fixed_dictionaries(
        {"k": st.integers(1, 8), "gamma": st.floats(0.02, 4.0)}
    ),
    mutants=[
        wrap(
            "theory.marchenko_pastur.edges",
            lambda f: lambda g: (lambda a, b: (a, b * 1.001))(*f(g)),
            "the upper edge (1 + sqrt(gamma))^2 placed 0.1 % too far",
            name="upper_edge_off",
        ),
    ],
)
def _mp_moments(ex) -> float:
    k, g = ex["k"], ex["gamma"]
    closed = mp.moment(k, g)
    a, b = mp.edges(g)
    c = 1.0 / (2 * np.pi * g)
    cont, _ = integrate.quad(
        lambda x: x ** (k - 1) * c, a, b, weight="alg", wvar=(0.5, 0.5), epsabs=0, epsrel=1e-13
    )  # sqrt((b - x)(x - a)) / (2 pi gamma x) * x^k, the square roots in QUADPACK's weight
    return 1.0 - abs(closed - cont) / (1e-9 * max(abs(closed), 1.0))


@prop(
    "rmt.bbp_stieltjes",
    paper="Benaych-Georges & Nadakuditi 2011, Thm 2.1, 2.3 and Ex. 3.1",
    statement="For a rank-one spike of strength beta on a Wigner matrix the top eigenvalue rho "
    "and squared overlap are rho = G^{-1}(1/beta) and -1/(beta^2 G'(rho)) above beta = 1 (G(z) = "
    "(z - sqrt(z^2 - 4))/2 the semicircle's Cauchy transform), the edge 2 and 0 below: the "
    "closed forms beta + 1/beta and 1 - 1/beta^2 satisfy both equations for any beta.",
    where="Benaych-Georges & Nadakuditi 2011, Thm 2.1 (eigenvalue), Thm 2.3 (overlap), Ex. 3.1",
    strategy=lambda st: st.fixed_dictionaries({"beta": st.floats(0.0, 20.0)}),
    mutants=[
        wrap(
            "theory.bbp.bbp_overlap",
            lambda f: lambda beta: (lambda v: np.where(v > 0, 1 - (1 - v) ** 0.5, v))(f(beta)),
            "the overlap 1 - 1/beta instead of 1 - 1/beta^2",
            name="overlap_unsquared",
        ),
        wrap(
            "theory.bbp.bbp_top_eigenvalue",
            lambda f: lambda beta: np.where(np.asarray(beta) > 1, f(beta) * 1.001, f(beta)),
            "the outlier 0.1 % too far out",
            name="outlier_off",
        ),
    ],
)
def _bbp(ex) -> float:
    beta = ex["beta"]
    rho, ov = float(bbp.bbp_top_eigenvalue(beta)), float(bbp.bbp_overlap(beta))
    if beta <= 1:
        return 1.0 if (rho == 2.0 and ov == 0.0) else -1.0
    r = math.sqrt(max(rho * rho - 4.0, 0.0))
    G, dG = (rho - r) / 2, (1 - rho / r) / 2 if r > 0 else -math.inf
    want_ov = -1.0 / (beta**2 * dG)
    # the root's conditioning: dG ~ 1/sqrt(rho - 2) near the transition; 1e-7 absolute in G
    err = max(abs(G - 1 / beta) / 1e-7, abs(ov - want_ov) / (1e-7 + 1e-7 * abs(dG) ** 2))
    return 1.0 - err
