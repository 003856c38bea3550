"""Metrics (paper §2.5): area under the training-return curve, bootstrap confidence intervals over seeds, ranking."""

from __future__ import annotations

import numpy as np

from zoo.core.stats import bootstrap_ci

__all__ = ["auc_return", "bootstrap_ci", "ranking"]


def auc_return(episodes: list[dict], steps: int) -> float:
    """Mean over environment steps ``0..steps-1`` of ``R(t)``, the return of the last episode finished at or before
    ``t`` (0 before the first): the area under the training-return curve divided by ``steps``.

    Args:
        episodes: ``[{"step": end step, "return": float}, ...]`` in step order.
    """
    if steps <= 0:
        raise ValueError(f"steps must be > 0, got {steps}")
    area, last_t, last_r = 0.0, 0, 0.0
    for e in episodes:
        t = min(int(e["step"]), steps)
        area += last_r * (t - last_t)
        last_t, last_r = t, float(e["return"])
    area += last_r * (steps - last_t)
    return area / steps


def ranking(by_variant: dict[str, list[float]]) -> list[dict]:
    """Variants ordered by mean AUC (best first) with bootstrap 95% CIs: ``[{"variant", "mean", "lo", "hi"}]``."""
    rows = []
    for name, vals in by_variant.items():
        lo, hi = bootstrap_ci(vals)
        rows.append({"variant": name, "mean": float(np.mean(vals)), "lo": lo, "hi": hi})
    rows.sort(key=lambda r: -r["mean"])
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    return rows
