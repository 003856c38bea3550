"""The card's PNGs: paired perplexity scatter, patching heatmap, logit-lens rank by layer, accuracy vs key scale."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def perplexity_scatter(before: list[dict], after: list[dict], path: str) -> None:
    """Per benchmark item, answer and prompt perplexity before (x) vs after (y), leaked and clean coloured."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, key in zip(axes, ("ppl_answer", "ppl_prompt")):
        for leaked, colour in ((True, "tab:red"), (False, "tab:blue")):
            xs = [b[key] for b in before if b["leaked"] == leaked]
            ys = [a[key] for a in after if a["leaked"] == leaked]
            ax.scatter(xs, ys, s=6, alpha=0.5, c=colour, label="leaked" if leaked else "clean")
        lo = min(min(b[key] for b in before), min(a[key] for a in after))
        hi = max(max(b[key] for b in before), max(a[key] for a in after))
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{key} before")
        ax.set_ylabel(f"{key} after")
        ax.legend()
    fig.suptitle("perplexity paradox: answer PPL should fall, prompt PPL rise")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def patching_heatmap(acc: dict, baseline: float, target: float, path: str) -> None:
    """Accuracy of the before-RL model with one (layer, component) patched from after-RL; ``acc[(layer, comp)]``."""
    layers = sorted({k[0] for k in acc})
    comps = ["attn", "mlp"]
    grid = [[acc[(layer, c)] for layer in layers] for c in comps]
    fig, ax = plt.subplots(figsize=(1.2 * len(layers) + 2, 2.6))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=max(1e-6, max(max(r) for r in grid)))
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="w")
    ax.set_xticks(range(len(layers)), [f"L{layer}" for layer in layers])
    ax.set_yticks(range(2), comps)
    ax.set_title(f"patched accuracy (before {baseline:.2f}, after {target:.2f})")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def lens_ranks(ranks: dict[str, list[float]], path: str) -> None:
    """Mean rank of the answer's first token by layer, one line per decoded stream."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, values in ranks.items():
        ax.plot(range(len(values)), values, marker="o", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel("mean rank of answer token (1 = top)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def accuracy_vs_scale(curves: dict[str, dict[float, float]], path: str) -> None:
    """Accuracy vs key-scaling factor s, one line per setting (anchor neurons, random neurons, other layer)."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, pts in curves.items():
        xs = sorted(pts)
        ax.plot(xs, [pts[x] for x in xs], marker="o", label=name)
    ax.set_xlabel("key scale s")
    ax.set_ylabel("accuracy (leaked items)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
