"""Benchmark of ``estimators.ecc`` against the baselines a user would otherwise reach for.

1. Speed: one whole ``ecc`` call (``lam="auto"``: tuning, fit, debiasing, plug-in SE) at
   n = 20,000, p = 2,000 against one scikit-learn ``RidgeCV`` fit of a single nuisance on the same
   data (default alphas, efficient leave-one-out), timed in the same run.
2. Statistics: DoubleML PLR (partialling out, ``RidgeCV`` learners, 5-fold cross-fitting); its
   cross-fitted residual product ``mean((y - l_hat)(a - m_hat))`` read as an ECC estimate with the
   i.i.d. standard error of the products (what a DoubleML user would report), against the debiased
   two-split DR estimator. Bias, 95% coverage and wall-time ratio at p/n = 0.25 and 0.5.

Run: ``python benchmarks/ecc.py [--quick | --full] [--reps R] [--json PATH]`` (``--quick``, the
default, in a minute or two; ``--full`` about an hour; ``--reps`` changes the Monte Carlo size).
DoubleML and scikit-learn are benchmark dependencies only.
"""

from __future__ import annotations

import time

import numpy as np
from _harness import run
from tqdm import tqdm

from estimators import ecc

PSI = 0.5


def simulate(n, p, rng):
    al, be = rng.uniform(size=p), rng.uniform(size=p)
    al /= np.linalg.norm(al)
    be /= np.linalg.norm(be)
    X = rng.standard_normal((n, p))
    e = rng.standard_normal((n, 2)) @ np.linalg.cholesky([[1.0, PSI], [PSI, 1.0]]).T
    return X @ be + e[:, 0], X @ al + e[:, 1], X


def best_of(f, k):
    ts = []
    for _ in range(k):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def speed(n, p, repeat):
    from sklearn.linear_model import RidgeCV

    rng = np.random.default_rng(0)
    y, a, X = simulate(n, p, rng)
    rows = []
    t_cv = best_of(lambda: RidgeCV().fit(X, a), repeat)
    for split in (2, 3):
        for lam in ("auto", 0.5):
            t = best_of(lambda s=split, lm=lam: ecc(y, a, X, split=s, lam=lm, rng=1), repeat)
            rows.append((f"ecc(split={split}, lam={lam!r})", t, t / t_cv))
    print(
        f"\nSpeed, n={n}, p={p} (best of {repeat}); baseline sklearn RidgeCV().fit(X, a): "
        f"{t_cv:.2f} s"
    )
    print(f"{'call':<32}{'seconds':>10}{'ratio to RidgeCV':>20}")
    for name, t, r in rows:
        print(f"{name:<32}{t:>10.2f}{r:>20.3f}")
    return dict(n=n, p=p, ridgecv_seconds=t_cv,
                calls={name: dict(seconds=t, vs_ridgecv=r) for name, t, r in rows})  # fmt: skip


def doubleml_ecc(y, a, X):
    """DoubleML PLR, partialling out, RidgeCV learners: cross-fitted residual-product ECC."""
    import doubleml as dml
    from sklearn.linear_model import RidgeCV

    data = dml.DoubleMLData.from_arrays(X, y, a)
    model = dml.DoubleMLPLR(
        data,
        ml_l=RidgeCV(alphas=np.geomspace(1e-2, 1e4, 25)),
        ml_m=RidgeCV(alphas=np.geomspace(1e-2, 1e4, 25)),
        n_folds=5,
        score="partialling out",
    )
    model.fit(store_predictions=True)
    u = y - model.predictions["ml_l"][:, 0, 0]
    v = a - model.predictions["ml_m"][:, 0, 0]
    r = u * v
    return r.mean(), r.std(ddof=1) / np.sqrt(len(r))


def statistics(n, ratios, reps):
    print(f"\nECC estimation, n={n}, psi={PSI}, {reps} replicates per row (95% intervals)")
    head = (
        f"{'p/n':>5}  {'method':<36}{'bias':>9}{'MC se':>8}{'coverage':>10}"
        f"{'sec/fit':>9}{'time ratio':>12}"
    )
    print(head)
    table = {}
    for c in ratios:
        p = int(c * n)
        res = {"ours": [], "dml": []}
        times = {"ours": 0.0, "dml": 0.0}
        for r in tqdm(range(reps), desc=f"p/n={c}", leave=False, disable=None):
            rng = np.random.default_rng([11, p, r])
            y, a, X = simulate(n, p, rng)
            t = time.perf_counter()
            out = ecc(y, a, X, estimator="dr", split=2, lam="auto", rng=rng)
            times["ours"] += time.perf_counter() - t
            res["ours"].append((out.estimate, out.se))
            t = time.perf_counter()
            res["dml"].append(doubleml_ecc(y, a, X))
            times["dml"] += time.perf_counter() - t
        for key, name in (
            ("ours", "estimators.ecc (DR, 2-split, auto)"),
            ("dml", "DoubleML PLR residual product"),
        ):
            est, se = np.array(res[key]).T
            cover = np.mean(np.abs(est - PSI) <= 1.959963984540054 * se)
            bias = est.mean() - PSI
            table[f"p/n={c} {key}"] = dict(bias=bias, mc_se=est.std(ddof=1) / np.sqrt(reps),
                                         coverage=cover, seconds_per_fit=times[key] / reps,
                                         vs_doubleml=times[key] / times["dml"])  # fmt: skip
            print(
                f"{c:>5}  {name:<36}{bias:>+9.4f}{est.std(ddof=1) / np.sqrt(reps):>8.4f}"
                f"{cover:>10.3f}{times[key] / reps:>9.3f}"
                f"{times[key] / times['dml']:>12.3f}"
            )
    return table


def bench(scale: str, args) -> dict:
    if scale == "full":
        return dict(speed=speed(20000, 2000, 2),
                    statistics=statistics(1000, (0.25, 0.5), args.reps or 200))  # fmt: skip
    return dict(speed=speed(4000, 400, 1), statistics=statistics(400, (0.25, 0.5), args.reps or 10))


def _options(ap):
    ap.add_argument("--reps", type=int, default=None, help="Monte Carlo replicates per setting")


if __name__ == "__main__":
    run(bench, __doc__, quick="n = 4000 speed, n = 400 x 10 replicates",
        full="n = 20,000, p = 2,000 speed, n = 1000 x 200 replicates (about an hour)",
        options=_options)  # fmt: skip
