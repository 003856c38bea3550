"""PNG plots of a DeSI fit: index weights with bootstrap CIs, responses along the index, held-out predictions."""

from __future__ import annotations

import numpy as np

from zoo.methods.desi.spaces import Space, density_from_quantiles


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_importance(names: list[str], beta: np.ndarray, lo: np.ndarray, hi: np.ndarray, path: str, index: str) -> None:
    """Bar chart of the index direction (standardised inputs) with 95% bootstrap intervals."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4, 0.35 * len(names) + 2), 3.2))
    x = np.arange(len(names))
    ax.bar(x, beta, color="#4472c4")
    ax.errorbar(x, beta, yerr=[np.maximum(beta - lo, 0), np.maximum(hi - beta, 0)], fmt="none", ecolor="k", lw=1)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("index weight")
    ax.set_title(f"DeSI index direction ({index}; 95% bootstrap CI)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _draw(ax, sp: Space, z: np.ndarray, **kw) -> None:
    if sp.kind == "distribution":
        lo, hi = sp.support or (z[0], z[-1])
        ages = np.linspace(lo, hi, 200)
        ax.plot(ages, density_from_quantiles(z, sp.grid, ages), **kw)
    else:
        obj = sp.to_object(z[None])[0].reshape(-1)
        ax.plot(np.arange(len(obj)), obj, marker="o", ms=3, **kw)


def plot_along_index(sp: Space, t: np.ndarray, Z: np.ndarray, path: str) -> None:
    """Predicted responses (densities, or object entries) at index values ``t (k,)``; ``Z (k, m)`` projected."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    cmap = plt.get_cmap("viridis")
    for k, (tk, z) in enumerate(zip(t, Z)):
        _draw(ax, sp, z, color=cmap(k / max(1, len(t) - 1)), label=f"t = {tk:.2f}")
    ax.set_xlabel("age at death" if sp.kind == "distribution" else "entry")
    ax.set_ylabel("density" if sp.kind == "distribution" else "value")
    ax.set_title("DeSI: fitted responses along the index (5%-95% of t)", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_heldout(sp: Space, pred: np.ndarray, obs: np.ndarray | None, labels: list[str], path: str) -> None:
    """Predicted (solid) vs observed (dashed) responses for a few held-out rows."""
    plt = _plt()
    k = len(pred)
    cols = min(3, k)
    rows = int(np.ceil(k / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= k:
            ax.axis("off")
            continue
        _draw(ax, sp, pred[i], color="C0", label="predicted")
        if obs is not None:
            _draw(ax, sp, obs[i], color="C3", ls="--", label="observed")
        ax.set_title(labels[i], fontsize=8)
        ax.tick_params(labelsize=6)
    axes.flat[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
