"""Drift signals (paper §2.1, ``helpers/modulators.py`` of the authors' code, re-written): plain functions of the
step count returning one value per environment step.

* ``noisy_sine``: ``v_t = lo + (hi - lo) * clip(0.5 (sin(2 pi t / P + phase) + 1) + N(0, noise^2), 0, 1)``;
* ``aperiodic_sine``: the same, but every half cycle lasts ``(P / 2)(1 + 0.3 N(0, 1))`` steps (the phase is
  integrated step by step, so the signal stays continuous);
* ``ou_drift``: ``x_t = clip(x_{t-1} + theta (mu - x_{t-1}) + sigma eps_t, lo, hi)``.
"""

from __future__ import annotations

import numpy as np


def noisy_sine(
    n_steps: int, period: float, low: float, high: float, noise: float = 0.05, phase: float = 0.0, seed: int = 0
) -> np.ndarray:
    """Periodic drift ``(n_steps,)`` float64 in ``[low, high]``; ``period`` in environment steps.

    Raises:
        ValueError: a non-positive period or ``low > high``.
    """
    _check(period, low, high)
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=np.float64)
    base = 0.5 * (np.sin(2 * np.pi * t / period + phase) + 1.0)
    return low + (high - low) * np.clip(base + rng.normal(0.0, noise, n_steps), 0.0, 1.0)


def aperiodic_sine(
    n_steps: int, period: float, low: float, high: float, noise: float = 0.05, jitter: float = 0.3, seed: int = 0
) -> np.ndarray:
    """Aperiodic drift ``(n_steps,)``: each half cycle's length is ``(period/2)(1 + jitter N(0,1))`` (at least one
    step); otherwise as :func:`noisy_sine`."""
    _check(period, low, high)
    rng = np.random.default_rng(seed)
    phase = np.empty(n_steps)
    ph, half = 0.0, max(1.0, period / 2 * (1 + jitter * rng.normal()))
    for t in range(n_steps):
        phase[t] = ph
        new = ph + np.pi / half
        if np.floor(new / np.pi) != np.floor(ph / np.pi):  # a half cycle ended: draw the next one's length
            half = max(1.0, period / 2 * (1 + jitter * rng.normal()))
        ph = new
    base = 0.5 * (np.sin(phase) + 1.0)
    return low + (high - low) * np.clip(base + rng.normal(0.0, noise, n_steps), 0.0, 1.0)


def ou_drift(
    n_steps: int,
    mu: float = 1.0,
    theta: float = 0.01,
    sigma: float = 0.02,
    low: float = 0.9,
    high: float = 1.1,
    x0: float | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Ornstein-Uhlenbeck drift ``(n_steps,)`` clipped to ``[low, high]``, starting at ``x0`` (default ``mu``);
    the paper's MuJoCo variant is ``mu=1, theta=0.01, sigma=0.02, low=0.9, high=1.1``."""
    if low > high:
        raise ValueError(f"low {low} > high {high}")
    rng = np.random.default_rng(seed)
    out = np.empty(n_steps)
    x = mu if x0 is None else x0
    eps = rng.normal(size=n_steps)
    for t in range(n_steps):
        x = min(max(x + theta * (mu - x) + sigma * eps[t], low), high)
        out[t] = x
    return out


def _check(period: float, low: float, high: float) -> None:
    if period <= 0:
        raise ValueError(f"period must be > 0, got {period}")
    if low > high:
        raise ValueError(f"low {low} > high {high}")
