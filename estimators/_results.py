"""Result types of the ECC estimators: estimate, SE, interval, test; frozen, with ``summary()``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special

from _core.validation import check_scalar

__all__ = ["ECCResult", "VarianceCurve", "CITestResult"]


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


def wald(estimate: float, se: float, level: float) -> tuple[float, float]:
    """Wald interval ``estimate ± z_{(1+level)/2} se`` (normal quantile)."""
    z = float(special.ndtri(0.5 + level / 2))
    return (float(estimate - z * se), float(estimate + z * se))


@dataclass(frozen=True)
class ECCResult:
    """ECC estimate with its plug-in standard error (debiased ridge, or exact OLS residual).

    Attributes
    ----------
    estimate : float
        Estimate of ``psi = E Cov(Y, A | X)`` (debiased ridge ``psi_tilde``, or the exactly
        unbiased OLS residual / leave-one-out form for ``estimator="ols"`` / ``"ols_loo"``).
    se : float
        Plug-in standard error (from the derived asymptotic variance, :func:`asymptotic_variance`).
    ci : (float, float)
        Wald interval at ``level``.
    variance : float
        Estimated ``m Var(estimate)`` with ``m`` the evaluation-fold size (``= m se^2``; all ``n``
        rows for the OLS forms).
    lam : (float, float)
        Ridge penalties ``(lam_a, lam_y)`` used for the A- and the Y-regression (0 for OLS).
    estimator, split : str, int
        ``split`` is 1 for the OLS forms (no splitting).
    naive : float
        The naive (uncorrected) plug-in estimate on the same folds (the estimate for OLS).
    theta : float
        Debiased estimate of ``alpha^T Sigma beta`` (OLS: of ``alpha^T (X^T X/n) beta``).
    m, gamma : int, float
        Evaluation-fold size and ``p / m_train`` (the Marchenko–Pastur ratio of the training fold;
        ``p / n`` for OLS).
    lam_prediction : (float, float) or None
        Prediction-optimal penalties ``gamma sigma^2 / ||alpha||^2`` (Lemma F.2), plug-in; None
        for OLS and when a plug-in signal ``||alpha||^2`` or ``||beta||^2`` is not positive
        (the optimal penalty is then infinite).
    names : dict or None
        Names of ``y``, ``a`` and the columns of ``X`` when they were pandas objects.
    constants : str
        ``"empirical"``/``"mp"`` (ridge, known covariance), ``"exact"`` (OLS), ``"unlabeled"``
        (ridge whitened by unlabeled rows, route c2; also the U-statistic), ``"generic"``
        (route b, ``assume="generic"``: ``theta`` is then ``alpha^T beta``, ``naive`` the
        df-only estimate ``r_A^T r_Y / tr((I - H_a)(I - H_y))``).
    alignment : dict or None
        Route b only: the over-identification check (estimates at the penalties times 1/4, 1, 4,
        chi-square ``statistic`` on ``df`` = 2, ``pvalue``); a small p-value says the
        coefficients look aligned with the covariance's eigenvectors.
    """

    estimate: float
    se: float
    ci: tuple[float, float]
    variance: float
    lam: tuple[float, float]
    estimator: str
    split: int
    level: float
    naive: float
    theta: float
    n: int
    p: int
    m: int
    gamma: float
    lam_prediction: tuple[float, float] | None
    constants: str = "empirical"
    moments: dict = field(default_factory=dict, repr=False)
    names: dict | None = field(default=None, repr=False)
    alignment: dict | None = field(default=None, repr=False)

    @property
    def zstat(self) -> float:
        """Wald statistic for H0: psi = 0."""
        return self.estimate / self.se

    @property
    def pvalue(self) -> float:
        """Two-sided p-value of H0: psi = 0."""
        return float(2 * special.ndtr(-abs(self.zstat)))

    def conf_int(self, level: float = 0.95) -> tuple[float, float]:
        """Wald interval ``estimate ± z_{(1+level)/2} se``."""
        level = check_scalar(level, "level", lower=0.0, upper=1.0, closed="neither")
        return wald(self.estimate, self.se, level)

    def summary(self) -> str:
        lo, hi = self.ci
        if self.estimator == "hoif":
            head = (
                f"ECC (U-statistic, covariance from {self.moments['N']} unlabeled rows)   "
                f"n={self.n}  p={self.p}  p/n={self.gamma:.3g}"
            )
            tail = (
                f"theta (alpha^T Sigma beta) {self.theta:.4f}   n*Var={self.variance:.4g} "
                f"(labeled {self.n * self.moments['var_labeled']:.4g}, unlabeled "
                f"{self.n * self.moments['var_unlabeled']:.4g})"
            )
        elif self.constants == "generic":
            head = (
                f"ECC (route b: in-sample ridge DR, generic alignment assumed)   n={self.n}  "
                f"p={self.p}  p/n={self.p / self.n:.3g}"
            )
            al = self.alignment or {}
            tail = (
                f"df-only {self.naive:.4f}   lam_a={self.lam[0]:.4g}  lam_y={self.lam[1]:.4g}   "
                f"theta_I (alpha^T beta) {self.theta:.4f}   n*Var={self.variance:.4g}\n"
                f"alignment check (penalties x 1/4, 1, 4): chi2(2) = "
                f"{al.get('statistic', float('nan')):.3g}, p = {al.get('pvalue', float('nan')):.3g}"
            )
        elif self.constants == "unlabeled":
            head = (
                f"ECC ({self.estimator.upper()}, {self.split} splits, ridge whitened by "
                f"{self.moments['N']} unlabeled rows)   n={self.n}  p={self.p}  m={self.m}  "
                f"gamma={self.gamma:.3g}"
            )
            tail = (
                f"naive {self.naive:.4f}   lam_a={self.lam[0]:.4g}  lam_y={self.lam[1]:.4g}   "
                f"m*Var={self.variance:.4g} (labeled {self.m * self.moments['var_labeled']:.4g}, "
                f"unlabeled {self.m * self.moments['var_unlabeled']:.4g})"
            )
        elif self.estimator.startswith("ols"):
            kind = "OLS residual" if self.estimator == "ols" else "OLS leave-one-out"
            head = (
                f"ECC ({kind}, exact for any covariance)   n={self.n}  p={self.p}  "
                f"p/n={self.gamma:.3g}"
            )
            tail = f"theta (alpha^T X^T X beta / n) {self.theta:.4f}   n*Var={self.variance:.4g}"
        else:
            head = (
                f"ECC ({self.estimator.upper()}, {self.split} splits, debiased ridge)   "
                f"n={self.n}  p={self.p}  m={self.m}  gamma={self.gamma:.3g}"
            )
            lp = self.lam_prediction
            pred = "undefined" if lp is None else f"({lp[0]:.4g}, {lp[1]:.4g})"
            tail = (
                f"naive {self.naive:.4f}   lam_a={self.lam[0]:.4g}  lam_y={self.lam[1]:.4g}"
                f"   prediction-optimal {pred}   m*Var={self.variance:.4g}"
            )
        lines = [head]
        if self.names:
            cols_x = self.names.get("X")
            desc = [f"{k}: {self.names[k]}" for k in ("y", "a") if k in self.names]
            if cols_x:
                shown = ", ".join(cols_x[:8]) + (", ..." if len(cols_x) > 8 else "")
                desc.append(f"X: {len(cols_x)} columns ({shown})")
            lines.append("   ".join(desc))
        cols = (
            f"{'':>10}{'coef':>11}{'std err':>11}{'z':>9}{'P>|z|':>9}"
            f"{f'[{(1 - self.level) / 2:.3f}':>11}{f'{(1 + self.level) / 2:.3f}]':>11}"
        )
        row = (
            f"{'psi':>10}{self.estimate:>11.4f}{self.se:>11.4f}{self.zstat:>9.3f}"
            f"{self.pvalue:>9.3f}{lo:>11.4f}{hi:>11.4f}"
        )
        rule = "=" * max(len(head), len(cols))
        return "\n".join([*lines, rule, cols, "-" * len(rule), row, rule, tail])

    def __repr__(self):
        return (
            f"ECCResult(estimate={self.estimate:.4g}, se={self.se:.3g}, "
            f"estimator={self.estimator!r}, split={self.split}, lam=({self.lam[0]:.3g}, "
            f"{self.lam[1]:.3g}))"
        )


@dataclass(frozen=True)
class VarianceCurve:
    """Plug-in ``lim m Var`` of one debiased estimator over a common-lambda grid.

    ``lam_opt`` minimises the curve; ``lam_prediction`` is the prediction-optimal pair of
    Lemma F.2 (``gamma sigma^2 / ||alpha||^2`` for each nuisance) and ``variance_at_prediction``
    the variance at that pair; both are None when a plug-in signal is not positive (the optimal
    penalty is then infinite), and ``variance_at_prediction`` also when the plug-in variance is
    undefined there.

    The plug-in formula can break down (a variance that is not finite, or not positive, e.g. at
    penalties far above the spectrum where its terms cancel in float64): such penalties are left
    out of ``lams``/``variance`` (which hold only finite, positive values) and listed in
    ``undefined_lams``, with a ``RuntimeWarning``; when no penalty is left,
    :func:`variance_curve` raises :class:`theory.NumericalError`.
    """

    lams: np.ndarray
    variance: np.ndarray
    lam_opt: float
    variance_opt: float
    lam_prediction: tuple[float, float] | None
    variance_at_prediction: float | None
    estimator: str
    split: int
    gamma: float
    undefined_lams: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def summary(self) -> str:
        head = (
            f"{self.estimator.upper()} {self.split}-split, gamma={self.gamma:.3g}: "
            f"variance-optimal lam={self.lam_opt:.4g} (m*Var={self.variance_opt:.4g}); "
        )
        if self.undefined_lams.size:
            head += f"plug-in undefined at {self.undefined_lams.size} penalties; "
        if self.lam_prediction is None:
            return head + "prediction-optimal lam undefined (no plug-in signal)"
        vp = self.variance_at_prediction
        return head + (
            f"prediction-optimal lam=({self.lam_prediction[0]:.4g}, "
            f"{self.lam_prediction[1]:.4g}) (m*Var={'undefined' if vp is None else f'{vp:.4g}'})"
        )


@dataclass(frozen=True)
class CITestResult:
    """Conditional-independence test of H0: E Cov(Y, A | X) = 0.

    ``statistic``/``pvalue`` come from the debiased DR estimator (size-correct when p ~ n);
    ``gcm_statistic``/``gcm_pvalue`` from the naive GCM statistic of Shah & Peters (2020) with
    in-sample ridge residuals at the same penalties, for comparison.
    """

    statistic: float
    pvalue: float
    gcm_statistic: float
    gcm_pvalue: float
    result: ECCResult

    def reject(self, alpha: float = 0.05) -> bool:
        alpha = check_scalar(alpha, "alpha", lower=0.0, upper=1.0, closed="neither")
        return bool(self.pvalue < alpha)

    def summary(self) -> str:
        return (
            f"CI test H0: ECC = 0   debiased DR z={self.statistic:.3f} p={self.pvalue:.4f}   "
            f"naive GCM T={self.gcm_statistic:.3f} p={self.gcm_pvalue:.4f}"
        )
