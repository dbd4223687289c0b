"""Exact statements of Chen & Luo 2025 (arXiv 2510.06954) over random stage-1 states."""

import jax
import jax.numpy as jnp
import numpy as np

from paper_checks import scaled, wrap
from theory import transformer as th

from .._properties import prop

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
    statement="Along the stage-1 effective flow the cubic energy grows at the rate of Eq. (16) "
    "(dE/dt by autodiff along the vector field) and at least as fast as "
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
    field = th.effective_vector_field(WV, W1, W2, v)
    with jax.enable_x64(True):  # dE/dt along the field, by autodiff of E = v W_V W1 W2
        _, dE = jax.jvp(
            lambda a, b, c: jnp.asarray(v) @ a @ b @ c,
            (jnp.asarray(WV), jnp.asarray(W1), jnp.asarray(W2)),
            tuple(jnp.asarray(x) for x in field),
        )
    room_eq16 = 1.0 - abs(rate - float(dE)) / (1e-12 * abs(rate))  # rate = sum of squares > 0
    lower = th.energy_rate_lower_bound(th.cubic_energy(u, W1, W2))
    room_amgm = (rate - lower) / max(abs(rate), abs(lower), 1e-300) + 1e-12
    return float(min(room_eq16, room_amgm))


@prop(
    "transformer.conserved_quantities",
    paper=PAPER,
    statement="u_i^2 - ||W1[i, :]||^2 and W2_j^2 - ||W1[:, j]||^2 are conserved by the stage-1 "
    "effective flow (their derivative along the vector field, by autodiff, is zero to "
    "round-off) and theory.transformer.conserved_quantities computes them.",
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
    field = th.effective_vector_field(WV, W1, W2, v)

    def invariants(a, b, c):  # Prop. 2's definitions, written out
        u = jnp.asarray(v) @ a
        return jnp.concatenate([u**2 - jnp.sum(b**2, axis=1), c**2 - jnp.sum(b**2, axis=0)])

    with jax.enable_x64(True):
        inv, dinv = jax.jvp(
            invariants,
            (jnp.asarray(WV), jnp.asarray(W1), jnp.asarray(W2)),
            tuple(jnp.asarray(x) for x in field),
        )
    inv, dinv = np.asarray(inv), np.asarray(dinv)
    # the scale of the derivative's terms: 2 |u du| + 2 ||W1|| ||dW1|| per quantity
    size = 2 * sum(
        float(np.linalg.norm(x) * np.linalg.norm(dx))
        for x, dx in zip((v @ WV, W1, W2), (v @ field[0], field[1], field[2]), strict=True)
    )
    room_rate = 1.0 - float(np.max(np.abs(dinv))) / (1e-12 * size + 1e-300)
    got = np.concatenate(th.conserved_quantities(v @ WV, W1, W2))
    scale = float(np.max(np.abs(np.concatenate([(v @ WV) ** 2, W2**2, np.sum(W1**2, 0)]))))
    room_value = 1.0 - float(np.max(np.abs(got - inv))) / (1e-14 * scale + 1e-300)
    return min(room_rate, room_value)


@prop(
    "transformer.flow_blowup_invariants",
    paper=PAPER,
    statement="Solved through to ||theta|| = 1e4, the stage-1 effective flow from a Gaussian "
    "initialisation (any width and scale) blows up in finite time, before E(0)^{-1/3} when "
    "E(0) > 0 (Thm 1); keeps the per-neuron invariants to 1e-8 ||theta(0)||^2 plus float64 "
    "round-off at ||theta(t)|| (Prop. 2); "
    "E never decreases and dE/dt >= 3 E^{4/3} wherever E > 0 (Eq. 16 + AM-GM); and the "
    "initialisation is non-degenerate (Def. 4).",
    where="Thm 1, Prop. 2, Eq. (16), Def. 4",
    strategy=lambda st: st.fixed_dictionaries(
        {"seed": st.integers(0, 2**31 - 1), "d": st.integers(1, 8), "scale": st.floats(0.2, 5.0)}
    ),
    mutants=[
        wrap(
            "dynamics.transformer._effective._solve_effective",
            lambda f: lambda *a: f(*a[:7], a[7] * 1e8, a[8] * 1e8, a[9]),
            "the ODE solver run at rtol 1e-4 instead of 1e-12",
            name="loose_solver",
        )
    ],
)
def _flow(ex) -> float:
    from dynamics import transformer as dt  # diffrax: loaded only when this property runs

    WV, W1, W2, v = _state(ex)
    r = dt.effective_flow(WV, W1, W2, v, stop_norm=1e4)
    if not r.reached:
        return -1.0
    scale = np.sum(WV**2) + np.sum(W1**2) + np.sum(W2**2)
    inv = np.array(
        [
            np.concatenate(th.conserved_quantities(u, a, b))
            for u, a, b in zip(r.u, r.W1, r.W2, strict=True)
        ]
    )
    # Prop. 2 to 1e-8 ||theta(0)||^2, plus the round-off of u_k^2 - ||W1[k]||^2 at step t
    # (16 eps ||theta(t)||^2: the differences of O(||theta||^2) numbers once ||theta|| ~ 1e4)
    norm2 = np.sum(r.W_V**2, (1, 2)) + np.sum(r.W1**2, (1, 2)) + np.sum(r.W2**2, 1)
    allowed = 1e-8 * scale + 16 * np.finfo(float).eps * norm2
    rooms = [1.0 - float(np.max(np.max(np.abs(inv - inv[0]), axis=1) / allowed))]
    E = r.E
    rate = np.array([th.energy_rate(u, a, b) for u, a, b in zip(r.u, r.W1, r.W2, strict=True)])
    pos = E > 0
    if np.any(pos):
        rooms.append(float(np.min((rate[pos] - 3 * E[pos] ** (4 / 3)) / rate[pos])) + 1e-12)
    rooms.append(float(np.min(np.diff(E) / np.abs(E[1:]))) + 1e-12)  # E never decreases
    if E[0] > 0:
        bound = th.blowup_time_bound(E[0]) * (1 + 1e-10)
        rooms.append(1.0 if r.stop_time <= r.blowup_upper else -1.0)
        rooms.append(1.0 - r.blowup_upper / bound)
    q1, q2 = th.nondegeneracy(r.u[0], W1, W2)
    rooms.append(1.0 if q1 != 0 and q2 != 0 else -1.0)
    return float(min(rooms))
