"""Anytime-valid sequential mean tests by betting (PuLSE, paper Algorithm 2; Dai et al. 2025a; notes §4.4).

For observations ``x_t in [0, 1]`` and ``H0: E[x_t | past] <= mu0``, the wealth ``K_t = prod_s (1 + lambda_s (x_s -
mu0))`` with predictable bets ``lambda_s in [0, 1]`` is a non-negative supermartingale under ``H0`` (``1 + lambda (x -
mu0) >= 1 - mu0 > 0``), so by Ville's inequality ``P(exists t: K_t >= 1/alpha) <= alpha``. Bets follow online Newton
steps (ONS):

    z = (x - mu0) / (1 + lambda (x - mu0));  log K += log(1 + lambda (x - mu0));  S += z^2
    lambda <- clip(lambda + 2 / (2 - ln 3) * z / (1 + S), 0, 1)

Everything is vectorised over independent streams (rows), so the 2,000 null streams of ``experiments.py`` are one
call.
"""

from __future__ import annotations

import math

import numpy as np

ONS_RATE = 2.0 / (2.0 - math.log(3.0))
ZETA_CONSTANT = 10.58  # the paper's normaliser of alpha_s = alpha (s + 1)^-1.1 / 10.58 (zeta(1.1) = 10.5844...)


class SequentialMeanTest:
    """One stream's test of ``H0: mean <= mu0`` at level ``alpha`` (Algorithm 2's Initialize / Increment).

    Args:
        mu0: null mean bound in ``(0, 1)``; alpha: level in ``(0, 1)``; lam0: initial bet (the code's 0.5).
    Raises:
        ValueError: ``mu0`` or ``alpha`` outside ``(0, 1)``, or ``lam0`` outside ``[0, 1]``.
    """

    def __init__(self, mu0: float, alpha: float, lam0: float = 0.5):
        if not 0.0 < mu0 < 1.0 or not 0.0 < alpha < 1.0 or not 0.0 <= lam0 <= 1.0:
            raise ValueError(
                f"SequentialMeanTest: need 0 < mu0, alpha < 1 and 0 <= lam0 <= 1; got mu0={mu0}, "
                f"alpha={alpha}, lam0={lam0}"
            )
        self.mu0, self.alpha, self.lam = float(mu0), float(alpha), float(lam0)
        self.log_wealth, self.sum_sq, self.n, self.rejected_at = 0.0, 0.0, 0, None

    def update(self, x: float) -> bool:
        """Add one observation in ``[0, 1]``; returns whether ``H0`` is rejected (it stays rejected).

        Raises:
            ValueError: ``x`` outside ``[0, 1]``.
        """
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"SequentialMeanTest.update: x = {x} is outside [0, 1]")
        d = x - self.mu0
        z = d / (1.0 + self.lam * d)
        self.log_wealth += math.log1p(self.lam * d)
        self.sum_sq += z * z
        self.lam = min(max(self.lam + ONS_RATE * z / (1.0 + self.sum_sq), 0.0), 1.0)
        self.n += 1
        if self.rejected_at is None and self.log_wealth > math.log(1.0 / self.alpha):
            self.rejected_at = self.n - 1
        return self.rejected_at is not None


def run_tests(
    x: np.ndarray, mu0: np.ndarray | float, alpha: np.ndarray | float, lam0: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """:class:`SequentialMeanTest` over many streams at once.

    Args:
        x: ``(S, T)`` observations in ``[0, 1]`` (NaN = no observation that day: wealth and bet unchanged).
        mu0, alpha: scalars or ``(S,)``.
    Returns:
        ``log_wealth (S, T)`` after each day and ``first (S,)``: index of the first day with ``log K > ln(1/alpha)``,
        ``-1`` if never.
    Raises:
        ValueError: an observation outside ``[0, 1]`` or ``mu0``/``alpha`` outside ``(0, 1)``.
    """
    x = np.atleast_2d(np.asarray(x, float))
    S, T = x.shape
    mu0 = np.broadcast_to(np.asarray(mu0, float), (S,))
    alpha = np.broadcast_to(np.asarray(alpha, float), (S,))
    if ((x < 0) | (x > 1)).any() or ((mu0 <= 0) | (mu0 >= 1)).any() or ((alpha <= 0) | (alpha >= 1)).any():
        raise ValueError("run_tests: need x in [0, 1] and mu0, alpha in (0, 1)")
    lam, ssq, logk = np.full(S, float(lam0)), np.zeros(S), np.zeros(S)
    path = np.empty((S, T))
    for t in range(T):
        d = np.nan_to_num(x[:, t] - mu0, nan=0.0)
        z = d / (1.0 + lam * d)
        logk = logk + np.log1p(lam * d)
        ssq = ssq + z * z
        lam = np.clip(lam + ONS_RATE * z / (1.0 + ssq), 0.0, 1.0)
        path[:, t] = logk
    over = path > np.log(1.0 / alpha)[:, None]
    first = np.where(over.any(1), over.argmax(1), -1)
    return path, first


def alpha_schedule(alpha: float, s: np.ndarray | int, constant: float = ZETA_CONSTANT) -> np.ndarray:
    """Level of the ``s``-th accuracy test (``s = 0`` before any retrain): ``alpha (s + 1)^-1.1 / constant``.

    With the paper's 10.58 the sum over the first ``10**6`` tests stays below ``alpha``; the infinite sum is
    ``alpha zeta(1.1) / 10.58 = 1.0004 alpha`` (the constant is rounded down; pass ``10.5845`` for a strict bound).
    """
    return alpha * (np.asarray(s, float) + 1.0) ** -1.1 / constant
