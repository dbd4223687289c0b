"""Stage-1 effective dynamics (cubic-energy ascent, solved through its finite-time blow-up) and the
stage-2 linear key-query flow, both with diffrax in float64 (Chen & Luo 2025, Eq. 7 and Prop. 3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from _core.validation import (
    ConvergenceError,
    as_array,
    check_finite_result,
    check_int,
    check_scalar,
)
from theory.transformer import check_key_query

__all__ = ["EffectiveFlow", "effective_flow", "key_query_flow"]


@dataclass(frozen=True)
class EffectiveFlow:
    """A trajectory of the stage-1 effective dynamics, at every accepted solver step.

    ``t`` is rescaled time ``tbar``; ``W_V, W1, W2`` are stacks ``(len(t), ...)``; ``u = v W_V``;
    ``E = u W1 W2``. The run stops when ``||theta||`` reaches ``stop_norm`` (or ``||W_V||_F``
    reaches ``stop_wv``): ``stop_time`` is then a lower bound on the blow-up time ``T*`` and
    ``blowup_upper = stop_time + E(stop)^{-1/3}`` an upper bound (``tbar + E^{-1/3}`` never
    increases; Chen & Luo 2025, proof of Thm 1). ``reached`` says whether the stop fired.
    """

    t: np.ndarray
    W_V: np.ndarray = field(repr=False)
    W1: np.ndarray = field(repr=False)
    W2: np.ndarray = field(repr=False)
    v: np.ndarray = field(repr=False)
    num_steps: int
    reached: bool
    stop_time: float

    @property
    def u(self) -> np.ndarray:
        return self.W_V @ self.v if self.W_V.ndim == 2 else np.einsum("k,tkl->tl", self.v, self.W_V)

    @property
    def E(self) -> np.ndarray:
        return np.einsum("tk,tkl,tl->t", self.u, self.W1, self.W2)

    @property
    def blowup_upper(self) -> float:
        E = self.E[-1]
        return float(self.stop_time + E ** (-1.0 / 3.0)) if E > 0 else float("inf")

    def summary(self) -> str:
        rows = [
            ("steps", f"{self.num_steps}"),
            ("stopped", f"{self.reached}"),
            ("stop time tbar", f"{self.stop_time:.10g}"),
            ("T* upper bound", f"{self.blowup_upper:.10g}"),
            ("E(0) / E(stop)", f"{self.E[0]:.6g} / {self.E[-1]:.6g}"),
        ]
        w = max(len(r[0]) for r in rows)
        return "\n".join(f"{a:<{w}}  {b}" for a, b in rows)


def f64(a):
    return jnp.asarray(a, jnp.float64)


def _effective_rhs(s, state, v):
    WV, W1, W2, _ = state
    u = v @ WV
    nrm = jnp.sqrt(jnp.sum(WV**2) + jnp.sum(W1**2) + jnp.sum(W2**2))
    c = 1.0 / (1.0 + nrm)  # time change dtbar = ds / (1 + ||theta||)
    return (c * jnp.outer(v, W1 @ W2), c * jnp.outer(u, W2), c * (W1.T @ u), c)


def _effective_stop(t, y, args, **kwargs):
    WV, W1, W2, _ = y
    _, stop_norm, stop_wv = args
    nrm = jnp.sqrt(jnp.sum(WV**2) + jnp.sum(W1**2) + jnp.sum(W2**2))
    return jnp.maximum(nrm / stop_norm, jnp.linalg.norm(WV) / stop_wv) - 1.0


@eqx.filter_jit
def _solve_effective(WV, W1, W2, v, stop_norm, stop_wv, s1, rtol, atol, max_steps):
    term = diffrax.ODETerm(lambda s, y, a: _effective_rhs(s, y, a[0]))
    y0 = (WV, W1, W2, jnp.zeros((), WV.dtype))
    sol = diffrax.diffeqsolve(
        term,
        diffrax.Tsit5(),
        0.0,
        s1,
        None,
        y0,
        args=(v, stop_norm, stop_wv),
        saveat=diffrax.SaveAt(t0=True, steps=True),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        event=diffrax.Event(_effective_stop, root_finder=optx.Newton(rtol=1e-13, atol=1e-13)),
        max_steps=max_steps,
        throw=False,
    )
    ys = cast(tuple[jax.Array, ...], sol.ys)  # diffrax types ys optional; SaveAt makes it set
    return ys, sol.stats["num_steps"], sol.event_mask


def effective_flow(
    W_V,
    W1,
    W2,
    v,
    *,
    stop_norm: float = 1e4,
    stop_wv: float | None = None,
    rtol: float = 1e-12,
    atol: float = 1e-13,
    max_steps: int = 4096,
    s_max: float = 1e4,
) -> EffectiveFlow:
    """Solve the stage-1 effective dynamics (Chen & Luo 2025, Eq. 7) up to its blow-up.

    ``dW_V/dtbar = v^T (W1 W2)^T``, ``dW1/dtbar = u^T W2^T``, ``dW2/dtbar = (u W1)^T``, ``u = v
    W_V`` (gradient ascent on ``E = v W_V W1 W2``), from normalised weights ``W/eps``. Because the
    solution blows up at a finite ``T*`` (Thm 1), it is integrated in the time ``s`` with ``dtbar/ds
    = 1/(1 + ||theta||)``, which stretches the blow-up to ``s -> inf`` (the trajectory in ``tbar``
    is unchanged), with Dopri8 and a PID controller, until ``||theta|| = stop_norm`` (or ``||W_V||_F
    = stop_wv``).

    Parameters
    ----------
    W_V, W1 : (d, d) arrays; W2 : (d,) array; v : unit (d,) vector (the condensation direction).
    stop_norm : float > ||theta(0)||; stop_wv : optional float > ||W_V(0)||_F.
    rtol, atol, max_steps : solver controls; s_max : horizon in the stretched time ``s``.
    """
    big: dict[str, Any] = dict(lower=-1e100, upper=1e100)  # ||theta|| must stay finite
    W1 = as_array(W1, "W1", ndim=2, **big)
    d = W1.shape[0]
    W1 = as_array(W1, "W1", shape=(d, d), **big)
    W_V = as_array(W_V, "W_V", shape=(d, d), **big)
    W2 = as_array(W2, "W2", shape=(d,), **big)
    v = as_array(v, "v", shape=(d,))
    if abs(np.linalg.norm(v) - 1.0) > 1e-8:
        raise ValueError(f"`v` must be a unit vector; got norm {np.linalg.norm(v):.6g}.")
    theta0 = np.sqrt(np.sum(W_V**2) + np.sum(W1**2) + np.sum(W2**2))
    stop_norm = check_scalar(stop_norm, "stop_norm", lower=theta0, closed="neither")
    if stop_wv is None:
        stop_wv = np.inf
    else:
        stop_wv = check_scalar(
            stop_wv, "stop_wv", lower=float(np.linalg.norm(W_V)), closed="neither"
        )
    check_scalar(rtol, "rtol", lower=0.0, upper=1.0, closed="right")
    check_scalar(atol, "atol", lower=0.0, upper=1.0, closed="right")
    max_steps = check_int(max_steps, "max_steps", lower=1, upper=10**6)  # every step is saved
    s_max = check_scalar(s_max, "s_max", lower=0.0, closed="neither")
    with jax.enable_x64(True):
        ys, nsteps, fired = _solve_effective(
            f64(W_V),
            f64(W1),
            f64(W2),
            f64(v),
            f64(stop_norm),
            f64(stop_wv),
            f64(s_max),
            f64(rtol),
            f64(atol),
            max_steps,
        )
    WV_t, W1_t, W2_t, t = (np.asarray(a) for a in ys)
    keep = np.isfinite(t)
    return EffectiveFlow(
        t=t[keep],
        W_V=WV_t[keep],
        W1=W1_t[keep],
        W2=W2_t[keep],
        v=v,
        num_steps=int(nsteps),
        reached=bool(fired),
        stop_time=float(t[keep][-1]),
    )


@eqx.filter_jit
def _solve_kq(F, WQ0, WK0, ts, rtol, atol, max_steps):
    term = diffrax.ODETerm(lambda t, y, F: (F @ y[1], F.T @ y[0]))
    sol = diffrax.diffeqsolve(
        term,
        diffrax.Tsit5(),
        ts[0],
        ts[-1],
        None,
        (WQ0, WK0),
        args=F,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        throw=False,
    )
    ys = cast(tuple[jax.Array, jax.Array], sol.ys)  # diffrax types ys optional; SaveAt sets it
    return ys, sol.stats["num_steps"], sol.result == diffrax.RESULTS.successful


def key_query_flow(
    F, W_Q0, W_K0, ts, *, rtol: float = 1e-13, atol: float = 1e-15, max_steps: int = 100_000
):
    """Numerical solution of the stage-2 key-query flow ``dW_Q/dt = F W_K``, ``dW_K/dt = F^T W_Q``
    (Chen & Luo 2025, Prop. 3), diffrax Dopri8 with a PID controller, float64.

    ``ts`` increasing times starting at 0. Returns ``(W_Q, W_K)`` stacks ``(len(ts), ...)``. The
    exact solution is :func:`theory.transformer.key_query_closed_form`.
    """
    F, W_Q0, W_K0 = check_key_query(F, W_Q0, W_K0)
    ts = as_array(ts, "ts", ndim=1)
    if ts.size < 1 or ts[0] != 0 or np.any(np.diff(ts) <= 0):
        raise ValueError("`ts` must be strictly increasing and start at 0.")
    rtol = check_scalar(rtol, "rtol", lower=0.0, upper=1.0, closed="right")
    atol = check_scalar(atol, "atol", lower=0.0, upper=1.0, closed="right")
    max_steps = check_int(max_steps, "max_steps", lower=1, upper=10**7)
    if ts.size == 1:
        return W_Q0[None].copy(), W_K0[None].copy()
    with jax.enable_x64(True):
        (WQ, WK), nsteps, ok = _solve_kq(
            f64(F), f64(W_Q0), f64(W_K0), f64(ts), f64(rtol), f64(atol), max_steps
        )
    WQ, WK = np.asarray(WQ), np.asarray(WK)
    if not bool(ok):
        raise ConvergenceError(
            f"the key-query flow did not reach t = {ts[-1]:g} within max_steps = {max_steps} "
            "(or its solution overflowed); raise `max_steps`, lower the last of `ts` or loosen "
            "`rtol`/`atol`.",
            num_steps=int(nsteps),
        )
    check_finite_result(WQ, "the key-query flow W_Q(t)", t_last=float(ts[-1]))
    check_finite_result(WK, "the key-query flow W_K(t)", t_last=float(ts[-1]))
    return WQ, WK
