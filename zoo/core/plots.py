"""``curves.png``: a run's logged train and validation metrics against the global step, written at the end of a fit."""

from __future__ import annotations

import math
from pathlib import Path

from zoo.core.runs import metric_columns

CURVES_FILE = "curves.png"


def write_curves(run_dir: Path) -> Path | None:
    """Plot every ``train/*`` and ``val/*`` column of ``run_dir/logs/metrics.csv`` against the step into
    ``run_dir/curves.png``: one panel per metric name, its train and val series together (``train/loss`` beside
    ``val/loss``), points marked where a series has few. Other columns (learning rates, costs) get their own panels.

    Returns:
        The PNG's path, or None when the run has no ``metrics.csv`` (``logger.kind`` other than csv) or it holds
        no metric.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = {k: v for k, v in metric_columns(Path(run_dir)).items() if v[0]}
    if not cols:
        return None
    panels: dict[str, list[str]] = {}
    for k in sorted(cols):
        panels.setdefault(k.split("/", 1)[1] if k.startswith(("train/", "val/")) else k, []).append(k)
    n = len(panels)
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.0 * nrows), squeeze=False, layout="constrained")
    for ax, (name, keys) in zip(axes.flat, panels.items()):
        for k in keys:
            steps, values = cols[k]
            ax.plot(steps, values, marker="o" if len(steps) <= 20 else None, markersize=3, label=k)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step (logs/metrics.csv)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(f"{Path(run_dir).parent.name}/{Path(run_dir).name}", fontsize=11)
    out = Path(run_dir) / CURVES_FILE
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
