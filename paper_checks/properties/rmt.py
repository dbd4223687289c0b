"""The semicircle law's Stieltjes transform (the spiked Wigner / BBP foundation)."""

from paper_checks import wrap
from theory import semicircle

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
