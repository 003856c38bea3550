"""Small statistics shared by several methods' experiment drivers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_ci(
    values: Sequence[float], n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values`` (items resampled with replacement).

    Args:
        values: ``(n,)`` numbers, one per independent unit (a seed, a pair, a prompt).
        n_boot: bootstrap resamples.
        level: two-sided coverage, e.g. 0.95.
        seed: seed of the resampling generator (numpy ``default_rng``), so the interval is reproducible.
    Returns:
        ``(low, high)``.
    Raises:
        ValueError: ``values`` is empty.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        raise ValueError("no values to bootstrap")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), (n_boot, len(v)))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)
