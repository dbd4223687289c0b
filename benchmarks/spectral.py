"""Benchmarks for spectral/: the detector and the threshold solver against what a user would write.

1. Detector at n = 4000 (2000 at quick): L_σ(Ŷ) and its top eigenpair by Lanczos
   (``spectral.detect``) against a dense ``scipy.linalg.eigh`` of L (all eigenpairs, and the top
   one only via subset_by_index).
2. β*(σ) for σ = tanh (planted submatrix): ``spectral.critical_threshold`` (single root, split
   Gauss–Legendre) against the nested formulation of the official code written plainly: brentq in
   β of H'(θ(β)), θ by brentq, every expectation by ``scipy.integrate.quad``.
3. Sparse NNPCA (2-D expectation): one evaluation of S_β(θ) by our rule against
   ``scipy.integrate.dblquad``, and our full β* (the nested dblquad β* takes minutes; its time is
   estimated as evaluations × the single-evaluation time).

Run: ``python benchmarks/spectral.py [--quick | --full] [--json PATH]`` (prints a table of times
and ratios; quick runs the detector at n = 2000, full at 4000).
"""

from __future__ import annotations

import os
import sys
import time

from _harness import run

# this file is named like the package it measures: keep its folder off the import path
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [q for q in sys.path if os.path.abspath(q or ".") != _here]

import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from scipy.integrate import dblquad, quad  # noqa: E402
from scipy.optimize import brentq  # noqa: E402

import spectral  # noqa: E402
from spectral import sigmas  # noqa: E402
from theory.nonlinear_laplacian import EtaLaw, signal_expectations  # noqa: E402

A, B = 1.70974534, 0.58384117


def timeit(f, repeat=3):
    best, out = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def quad_nested_threshold():
    """Official-code style β*: nested brentq over quad expectations (planted submatrix, tanh)."""
    sig = lambda t: A * np.tanh(B * t)  # noqa: E731
    phi = lambda g: np.exp(-g * g / 2) / np.sqrt(2 * np.pi)  # noqa: E731
    calls = [0]

    def expect(f):
        calls[0] += 1
        return quad(lambda g: f(g) * phi(g), -np.inf, np.inf, epsabs=1e-13, epsrel=1e-13)[0]

    def theta(beta):
        f = lambda th: beta * expect(lambda g: 1 / (th - sig(beta + g))) - 1  # noqa: E731
        lo = A + 1e-7
        if f(lo) < 0:
            return None
        return brentq(f, lo, A + beta, xtol=1e-13)

    def hprime(beta):
        th = theta(beta)
        return -1.0 if th is None else 1 - expect(lambda g: 1 / (th - sig(g)) ** 2)

    return brentq(hprime, 0.5, 1.5, xtol=1e-13), calls[0]


def bench(scale: str, args) -> dict:
    rows = []
    rng = np.random.default_rng(0)
    n = 4000 if scale == "full" else 2000
    s = sigmas.tanh(A, B)
    inst = spectral.planted_submatrix(n, 1.2, rng=rng)
    t_ours, det = timeit(lambda: spectral.detect(inst.Y, s, rng=0), repeat=2)
    L = spectral.nonlinear_laplacian(inst.Y, s)
    t_full, (w, _) = timeit(lambda: scipy.linalg.eigh(L), repeat=1)
    t_top, _ = timeit(lambda: scipy.linalg.eigh(L, subset_by_index=[n - 1, n - 1]), repeat=1)
    assert abs(w[-1] - det.eigenvalue) < 1e-8
    rows += [
        (f"detector n={n}: eigsh (ours)", t_ours, 1.0),
        ("  dense eigh, all pairs", t_full, t_full / t_ours),
        ("  dense eigh, top pair only", t_top, t_top / t_ours),
    ]

    t_ours, b_ours = timeit(lambda: spectral.critical_threshold(s), repeat=5)
    t_quad, (b_quad, calls) = timeit(quad_nested_threshold, repeat=1)
    rows += [
        ("beta* tanh, planted submatrix (ours)", t_ours, 1.0),
        (f"  nested brentq + quad ({calls} quads)", t_quad, t_quad / t_ours),
    ]

    eta = EtaLaw.half_normal()
    beta, th = 0.7, A + 0.3
    t_s, sval = timeit(lambda: signal_expectations(s, beta, eta).s1(th - A), repeat=5)
    sq = np.sqrt(2 / np.pi)

    def dbl():
        def f(g, h):
            return (
                h
                * h
                / (th - A * np.tanh(B * (beta * sq * h + g)))
                * 2
                * np.exp(-(h * h + g * g) / 2)
                / (2 * np.pi)
            )

        return dblquad(f, 0, np.inf, -np.inf, np.inf, epsabs=1e-11, epsrel=1e-11)[0]

    t_dbl, dval = timeit(dbl, repeat=1)
    t_nn, r_nn = timeit(
        lambda: spectral.threshold(sigmas.tanh(2.17506053, 0.57475203), "sparse_nnpca"), repeat=2
    )
    rows += [
        ("S_beta(theta) NNPCA, one evaluation (ours)", t_s, 1.0),
        ("  scipy dblquad", t_dbl, t_dbl / t_s),
        ("beta* NNPCA (ours, single root)", t_nn, 1.0),
        (f"  nested dblquad (est. {calls} evals)", t_dbl * calls, t_dbl * calls / t_nn),
    ]

    print(f"{'case':<46}{'seconds':>12}{'ratio':>10}")
    for name, t, r in rows:
        print(f"{name:<46}{t:>12.4f}{r:>10.1f}")
    print(
        f"\nagreement: beta* ours {b_ours:.12f} vs quad {b_quad:.12f} "
        f"(diff {abs(b_ours - b_quad):.1e}); S ours {sval:.12f} vs dblquad {dval:.12f} "
        f"(diff {abs(sval - dval):.1e})"
    )

    return {name.strip(): dict(seconds=t, ratio=r) for name, t, r in rows}


if __name__ == "__main__":
    run(bench, __doc__, quick="detector at n = 2000", full="detector at n = 4000")
