"""Exact statements of Chen & Luo 2025 (arXiv 2510.06954) over random stage-1 states."""

import numpy as np

from theory import transformer as th

from .._properties import prop
from .._registry import scaled, wrap

PAPER = "Chen & Luo 2025 (arXiv 2510.06954)"


def _state(ex):
    g = np.random.default_rng(ex["seed"])
    d, s = ex["d"], ex["scale"]
    WV, W1 = g.standard_normal((2, d, d))
    W2 = g.standard_normal(d)
    v = g.standard_normal(d)
    return s * WV, W1 / s, s * W2, v / np.linalg.norm(v)


@prop(
    "transformer.energy_rate_amgm",
    paper=PAPER,
    statement="Along the stage-1 effective flow the cubic energy grows at least as fast as "
    "dE/dt >= 3 |E|^{4/3} (AM-GM on the three factors), for E of either sign.",
    where="Sec. 4, Eq. (16) and the blow-up lemma",
    strategy=lambda st: st.fixed_dictionaries(
        {"seed": st.integers(0, 2**31 - 1), "d": st.integers(1, 8), "scale": st.floats(0.05, 5.0)}
    ),
    mutants=[
        wrap(
            "theory.transformer.energy_rate_lower_bound",
            scaled(1.5),
            "the AM-GM constant 3 raised to 4.5",
            name="amgm_constant",
        )
    ],
)
def _amgm(ex) -> float:
    WV, W1, W2, v = _state(ex)
    u = v @ WV
    rate = th.energy_rate(u, W1, W2)
    lower = th.energy_rate_lower_bound(th.cubic_energy(u, W1, W2))
    return float((rate - lower) / max(abs(rate), abs(lower), 1e-300) + 1e-12)


@prop(
    "transformer.conserved_quantities",
    paper=PAPER,
    statement="u_i^2 - ||W1[i, :]||^2 and W2_j^2 - ||W1[:, j]||^2 are conserved by the stage-1 "
    "effective flow (their derivative along the vector field is zero).",
    where="Sec. 4, conservation lemma",
    strategy=lambda st: st.fixed_dictionaries(
        {"seed": st.integers(0, 2**31 - 1), "d": st.integers(1, 8), "scale": st.floats(0.2, 5.0)}
    ),
    mutants=[
        wrap(
            "theory.transformer.effective_vector_field",
            lambda f: lambda *a: tuple(1.05 * x if i == 1 else x for i, x in enumerate(f(*a))),
            "the W1 component of the vector field 5 % too large",
            name="field_w1",
        )
    ],
)
def _conserved(ex) -> float:
    WV, W1, W2, v = _state(ex)
    dWV, dW1, dW2 = (np.asarray(x) for x in th.effective_vector_field(WV, W1, W2, v))
    u, du = v @ WV, v @ dWV
    row = 2 * u * du - 2 * np.sum(W1 * dW1, axis=1)
    col = 2 * W2 * dW2 - 2 * np.sum(W1 * dW1, axis=0)
    size = np.max(np.abs(np.concatenate([2 * u * du, 2 * W2 * dW2]))) + 1e-300
    return float(1.0 - np.max(np.abs(np.concatenate([row, col]))) / (1e-10 * size))
