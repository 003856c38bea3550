"""PuLSE replayed on daily series (paper §4.2, Algorithm 2): accuracy tests that say when to retrain the SAE, and
feature tests that raise alarms.

* Accuracy: archive ``s`` was trained through ``trained_through``; from the next day its daily reconstruction error
  is tested against ``H0: err <= beta eps_s`` at level ``alpha_s = alpha (s + 1)^-1.1 / 10.58``, with ``eps_s`` the
  mean error of the ``ref_days`` days up to ``trained_through`` (ours: the paper's initial fit used 16 weeks).
* Features: from ``start`` (inclusive; archive c2 from 2024-04-04), ``mu0 = beta x`` (mean daily fraction of the first ``r`` days), and the
  test runs on the days after those ``r`` at level ``alpha / n_monitored`` (Bonferroni).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoo.methods.pulse.sequential import alpha_schedule, run_tests
from zoo.methods.pulse.series import FeatureSeries

#: The paper's SAE training ends (c0 = first 16 weeks) and the retrain dates its accuracy test chose (§4.2).
ARCHIVES = {"c0": "2023-03-23", "c1": "2023-09-09", "c2": "2024-04-04", "c3": "2025-04-18"}


@dataclass
class Alarm:
    """One test: where it started (``start``, first tested day), its level, ``mu0``, the first rejection day
    (``None`` = never) and the log-wealth path ``(T_test,)`` over ``dates``."""

    start: str
    alpha: float
    mu0: float
    alarm_date: str | None
    log_wealth: np.ndarray
    dates: list[str]


def _index_after(series: FeatureSeries, day: str | None, strict: bool = True) -> int:
    """First index with a date after ``day``; ``len(dates)`` when there is none and ``strict`` is False."""
    for i, d in enumerate(series.dates):
        if day is not None and d > day:
            return i
    if strict:
        raise ValueError(f"{series.source}: no day after {day}")
    return len(series.dates)


def accuracy_test(
    series: FeatureSeries,
    trained_through: str,
    s: int,
    alpha: float = 0.1,
    beta: float = 1.05,
    ref_days: int = 112,
    end: str | None = None,
) -> Alarm:
    """Test the archive's ``day_error`` from the day after ``trained_through`` (NaN days skipped).

    Raises:
        ValueError: no error values before ``trained_through`` or none after it.
    """
    i0 = _index_after(series, trained_through)
    ref = series.day_error[max(0, i0 - ref_days) : i0]
    if not np.isfinite(ref).any():
        raise ValueError(f"{series.source}: no day_error before {trained_through}")
    mu0 = beta * float(np.nanmean(ref))
    stop = _index_after(series, end, strict=False)
    x = series.day_error[i0:stop]
    a = float(alpha_schedule(alpha, s))
    path, first = run_tests(x[None, :], mu0, a)
    dates = series.dates[i0:stop]
    return Alarm(series.dates[i0], a, mu0, dates[first[0]] if first[0] >= 0 else None, path[0], dates)


def feature_test(
    series: FeatureSeries,
    feature: int,
    start: str,
    r: int = 28,
    alpha: float = 0.1,
    beta: float = 1.05,
    n_monitored: int = 1,
    end: str | None = None,
) -> Alarm:
    """Alarm test of one feature's daily fraction (see the module docstring).

    Raises:
        ValueError: the reference window has no posts with the feature (``mu0 = 0``) or ``beta x`` reaches 1.
    """
    i0 = next((i for i, d in enumerate(series.dates) if d >= start), None)
    if i0 is None:
        raise ValueError(f"{series.source}: no day on or after {start}")
    stop = _index_after(series, end, strict=False)
    frac = series.fractions[series.row(feature)]
    mu0 = beta * float(frac[i0 : i0 + r].mean())
    x = frac[i0 + r : stop]
    path, first = run_tests(x[None, :], mu0, alpha / n_monitored)
    dates = series.dates[i0 + r : stop]
    return Alarm(dates[0], alpha / n_monitored, mu0, dates[first[0]] if first[0] >= 0 else None, path[0], dates)
