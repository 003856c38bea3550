"""Monitoring baselines beside PuLSE (ours; the paper argues for anytime validity against them in §4):

* ``peeking_z_test``: a one-sided z-test of the pooled fraction against ``mu0`` repeated every day at level
  ``alpha`` (valid for one look, not for many: its type-I error grows with the horizon).
* ``cusum``: one-sided CUSUM on standardised daily fractions, ``S_t = max(0, S_{t-1} + z_t - k)``, alarm when
  ``S_t > h``, with ``h`` calibrated on a pre-window (the largest ``S_t`` reached there: no alarm before monitoring).

Both take counts ``(S, T)`` of S streams over the same days and the days' posts ``n (T,)``.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm


def _first(over: np.ndarray) -> np.ndarray:
    return np.where(over.any(1), over.argmax(1), -1)


def peeking_z_test(counts: np.ndarray, n: np.ndarray, mu0: float, alpha: float) -> np.ndarray:
    """First day (``(S,)``, ``-1`` = never) on which ``(p_hat - mu0) / sqrt(mu0 (1 - mu0) / N_t) > z_{1-alpha}``,
    ``p_hat`` and ``N_t`` pooled over days ``0..t``."""
    counts = np.atleast_2d(counts)
    N = np.cumsum(n)
    p_hat = np.cumsum(counts, 1) / N[None, :]
    z = (p_hat - mu0) / np.sqrt(mu0 * (1 - mu0) / N[None, :])
    return _first(z > norm.ppf(1 - alpha))


def cusum_path(counts: np.ndarray, n: np.ndarray, mu0: float, k: float = 0.5) -> np.ndarray:
    """``S_t (S, T)`` of the one-sided CUSUM on ``z_t = (x_t - mu0) / sqrt(mu0 (1 - mu0) / n_t)``."""
    counts = np.atleast_2d(counts)
    z = (counts / n[None, :] - mu0) / np.sqrt(mu0 * (1 - mu0) / n[None, :])
    out = np.empty_like(z)
    s = np.zeros(len(z))
    for t in range(z.shape[1]):
        s = np.maximum(0.0, s + z[:, t] - k)
        out[:, t] = s
    return out


def calibrate_cusum(pre_counts: np.ndarray, pre_n: np.ndarray, mu0: float, k: float = 0.5) -> float:
    """Threshold ``h``: the largest CUSUM value on the pre-window (so that it raises no alarm there)."""
    return float(cusum_path(pre_counts, pre_n, mu0, k).max())


def cusum(counts: np.ndarray, n: np.ndarray, mu0: float, h: float, k: float = 0.5) -> np.ndarray:
    """First day (``(S,)``, ``-1`` = never) with ``S_t > h``."""
    return _first(cusum_path(counts, n, mu0, k) > h)
