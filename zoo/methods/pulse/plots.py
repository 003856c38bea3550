"""PNG plots: 30-day rolling fractions with the fitted trend, its changepoints and the releases; wealth paths with
the alarm threshold and alarm days."""

from __future__ import annotations

import math

import numpy as np

from zoo.methods.pulse.series import RELEASES, FeatureSeries
from zoo.methods.pulse.trend import TrendFit, rolling_mean


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_trends(series: FeatureSeries, fits: dict[int, TrendFit], path: str) -> None:
    """One panel per feature: rolling fraction (%), fitted ``lambda(t)`` (%), releases (grey), changepoints (red)."""
    plt = _plt()
    feats = list(fits)
    fig, axes = plt.subplots(len(feats), 1, figsize=(10, 2.2 * len(feats)), sharex=True, squeeze=False)
    t = np.array(series.dates, dtype="datetime64[D]")
    for ax, f in zip(axes[:, 0], feats):
        frac = series.fractions[series.row(f)]
        ax.plot(t, 100 * rolling_mean(frac), lw=1, color="tab:blue", label="30-day rolling")
        ax.plot(t, 100 * fits[f].fitted, lw=1.6, color="black", label="Poisson trend")
        for d in RELEASES:
            if series.dates[0] < d < series.dates[-1]:
                ax.axvline(np.datetime64(d), color="0.8", lw=0.8, zorder=0)
        for d in fits[f].changepoints:
            ax.axvline(np.datetime64(d), color="tab:red", lw=1.4, ls="--")
        label = series.labels[series.row(f)]
        ax.set_title(f"{f}: {label[:70]}  (x{fits[f].ratio:.2f})", fontsize=8, loc="left")
        ax.set_ylabel("% posts", fontsize=8)
    axes[0, 0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_wealth(paths: dict[str, tuple[list[str], np.ndarray, float, str | None]], path: str) -> None:
    """``{name: (dates, log_wealth, alpha, alarm_date)}`` -> log-wealth curves, ``ln(1/alpha)`` and alarm markers."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for name, (dates, logk, alpha, alarm) in paths.items():
        t = np.array(dates, dtype="datetime64[D]")
        (line,) = ax.plot(t, logk, lw=1.2, label=f"{name} (alpha {alpha:.3g}): {alarm or 'no alarm'}")
        ax.axhline(math.log(1 / alpha), color=line.get_color(), lw=0.7, ls=":")
        if alarm:
            ax.axvline(np.datetime64(alarm), color=line.get_color(), lw=1, ls="--")
    ax.set_ylabel("log wealth")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
