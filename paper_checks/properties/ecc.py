"""Marchenko-Pastur identities behind the ECC corrections (McGrath et al. 2025, 2509.25536)."""

from theory import marchenko_pastur as mp

from .._properties import prop
from .._registry import scaled, wrap

PAPER = "McGrath, Mukherjee, Mukherjee & Wang 2025 (arXiv 2509.25536)"


@prop(
    "ecc.ridge_df_kappa_identity",
    paper=PAPER,
    statement="For the Marchenko-Pastur law with ratio gamma the ridge degrees of freedom s(lam) "
    "lies in (0, min(1, 1/gamma)), decreases in lam, and lam^2 m_0(lam, lam) = "
    "1 - 2 s + G_2 (the kappa identity of the corrections).",
    where="Sec. 3 (MP resolvent moments; derived here, tests/theory/test_marchenko_pastur.py)",
    strategy=lambda st: st.fixed_dictionaries(
        {"gamma": st.floats(0.05, 8.0), "lam": st.floats(1e-3, 20.0)}
    ),
    mutants=[
        wrap("theory.marchenko_pastur.ridge_df", scaled(1.03), "ridge df 3 % high", name="df_3pct")
    ],
)
def _kappa(ex) -> float:
    g, lam = ex["gamma"], ex["lam"]
    s = mp.ridge_df(lam, g)
    G = mp.resolvent_moment(g, [lam, lam], 2)
    kappa = lam**2 * mp.resolvent_moment(g, [lam, lam], 0)
    room_range = min(s, min(1.0, 1.0 / g) - s) / min(1.0, 1.0 / g)
    room_mono = (s - mp.ridge_df(lam * 1.1, g)) / s
    room_identity = 1.0 - abs(kappa - (1 - 2 * s + G)) / 1e-10
    return float(min(room_range, room_mono, room_identity))
