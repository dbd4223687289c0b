r"""The BBP transition of the rank-one spiked Wigner model Y = W/sqrt(n) + beta·x xᵀ, ||x|| = 1.

For W a GOE matrix (off-diagonal variance 1), as n → ∞ (Baik, Ben Arous & Péché 2005; Féral &
Péché 2007, Thm 1.1; Benaych-Georges & Nadakuditi 2011, Thm 2.1 and Example 3.1):

.. math:: \lambda_{\max}(Y) \to \begin{cases} \beta + 1/\beta & \beta > 1 \\ 2 & \beta \le 1
   \end{cases}, \qquad \langle v_{\max}, x\rangle^2 \to \max(1 - 1/\beta^2, 0).

At finite n and beta < 1 the top eigenvalue is 2 + n^{-2/3} TW₁ (Tracy–Widom, β = 1), whose mean
is -1.2065335745820 (Tracy & Widom 1996; Bornemann 2010, Table 4) and standard deviation
1.2680340580149.
"""

from __future__ import annotations

import numpy as np

from _core.validation import as_array, check_int

__all__ = ["bbp_top_eigenvalue", "bbp_overlap", "TW1_MEAN", "TW1_STD", "tw_edge_shift"]

TW1_MEAN = -1.2065335745820  # Bornemann (2010), Math. Comp. 79, Table 4
TW1_STD = 1.2680340580149  # same source (variance 1.6078...)


def bbp_top_eigenvalue(beta):
    """Limit of the top eigenvalue: beta + 1/beta above beta = 1, the edge 2 below.

    Féral & Péché 2007, Thm 1.1; Benaych-Georges & Nadakuditi 2011, Thm 2.1 and Ex. 3.1.

    >>> bbp_top_eigenvalue(2.0)  # beta + 1/beta above the transition
    2.5
    >>> bbp_top_eigenvalue(0.5)  # the bulk edge below it
    2.0
    """
    beta = as_array(beta, "beta", lower=0.0)
    out = np.where(beta > 1, beta + 1 / np.maximum(beta, 1.0), 2.0)
    return out if out.ndim else float(out)


def bbp_overlap(beta):
    """Limit of the squared overlap <v_max, x>²: 1 - 1/beta² above beta = 1, 0 below.

    Benaych-Georges & Nadakuditi 2011, Thm 2.3 and Ex. 3.1.

    >>> bbp_overlap(2.0)  # 1 - 1/beta^2
    0.75
    """
    beta = as_array(beta, "beta", lower=0.0)
    out = np.where(beta > 1, 1 - (1 / np.maximum(beta, 1.0)) ** 2, 0.0)
    return out if out.ndim else float(out)


def tw_edge_shift(n: int) -> float:
    """Mean finite-n shift of the GOE top eigenvalue below 2: n^{-2/3}·E[TW₁] (negative).

    Tracy & Widom 1996 (edge scaling); E[TW₁] from Bornemann 2010, Table 4.

    >>> round(tw_edge_shift(1000), 6)  # -1.2065... / 1000^(2/3)
    -0.012065
    """
    n = check_int(n, "n", lower=1)
    return TW1_MEAN * n ** (-2.0 / 3.0)
