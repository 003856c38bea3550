"""PNG plots: return vs step over the drift signal, AUC bars, beaker distances, value maps at two slips."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np


def plot_curves(runs: dict[str, list[dict]], path: Path, title: str = "") -> None:
    """Eval return vs env step per variant (mean over its runs, shaded min-max), drift signal on a twin axis.

    Args:
        runs: ``variant -> [run summary]`` (``history`` rows with ``step``, ``eval_return``; ``drift``).
    """
    fig, ax = plt.subplots(figsize=(8, 4.5))
    first = None
    for name, summaries in runs.items():
        hs = [s["history"] for s in summaries if s["history"]]
        if not hs:
            continue
        n = min(len(h) for h in hs)
        x = [r["step"] for r in hs[0][:n]]
        y = np.array([[r["eval_return"] for r in h[:n]] for h in hs])
        ax.plot(x, y.mean(0), label=name)
        ax.fill_between(x, y.min(0), y.max(0), alpha=0.15)
        first = first or summaries[0]
    ax.set_xlabel("environment step")
    ax.set_ylabel("eval return (current dynamics)")
    if first is not None:
        d = first["drift"]
        key = "slip_prob" if max(d["slip_prob"]) > 0 else "mass_scale"
        ax2 = ax.twinx()
        ax2.plot(np.arange(len(d[key])) * d["every"], d[key], color="grey", lw=0.6, alpha=0.6)
        ax2.set_ylabel(key.replace("_", " "), color="grey")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_auc_bars(rank_rows: list[dict], path: Path, title: str = "") -> None:
    """AUC per variant with bootstrap 95% CI (rows from :func:`.metrics.ranking`)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    names = [r["variant"] for r in rank_rows]
    means = np.array([r["mean"] for r in rank_rows])
    err = np.array([[r["mean"] - r["lo"] for r in rank_rows], [r["hi"] - r["mean"] for r in rank_rows]])
    ax.bar(names, means, yerr=err, capsize=3, color="tab:blue")
    ax.set_ylabel("AUC of training return")
    ax.set_title(title)
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_distances(history: list[dict], taus: list[int], path: Path) -> None:
    """``||u_k - u_0||`` vs env step, one line per beaker (``taus``: their timescales in learning steps)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    x = [h["step"] for h in history]
    d = np.array([h["beaker_distances"] for h in history])
    for k in range(d.shape[1]):
        ax.plot(x, d[:, k], label=f"beaker {k + 1} (tau={taus[k]})")
    ax.set_xlabel("environment step")
    ax.set_ylabel("||u_k - u_0||")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_value_maps(rows: list[dict], path: Path) -> None:
    """Four Rooms ``max Q`` maps at the evals with the lowest and the highest slip."""
    fig, axes = plt.subplots(1, len(rows), figsize=(4 * len(rows), 3.8))
    for ax, r in zip(np.atleast_1d(axes), rows):
        im = ax.imshow(np.array(r["value_map"], dtype=float), cmap="viridis")
        ax.set_title(f"step {r['step']}, slip {r['slip_prob']:.2f}, task {r['task']}")
        ax.axis("off")
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
