"""theorylab: estimators.

``ecc`` — debiased ridge estimators of the Expected Conditional Covariance under proportional
asymptotics (McGrath, Mukherjee, Mukherjee & Wang 2025, arXiv 2509.25536).
"""

from ._ecc import (
    CITestResult,
    ECCResult,
    VarianceCurve,
    asymptotic_variance,
    ecc,
    ecc_path,
    ecc_test,
    paper_lambda_grid,
    plugin_moments,
    variance_curve,
)
from ._ridge import unchecked_ridge_estimate

__all__ = [
    "CITestResult",
    "ECCResult",
    "VarianceCurve",
    "asymptotic_variance",
    "ecc",
    "ecc_path",
    "ecc_test",
    "paper_lambda_grid",
    "plugin_moments",
    "variance_curve",
    "unchecked_ridge_estimate",
]
