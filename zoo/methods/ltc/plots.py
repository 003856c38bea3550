"""Pictures: a grid of images per group, the layer×head map of ``F_{A−} − F_{A+}`` with S and Y marked, the top
images of each located head, and the ``zoo predict`` panel."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

GROUP_NAMES = {
    0: "y=0 (animal), flowers",
    1: "y=0 (animal), temple",
    2: "y=1 (vehicle), flowers",
    3: "y=1 (vehicle), temple",
}


def _img(x: torch.Tensor):
    return x.permute(1, 2, 0).numpy()


def group_grid(path: Path, x: torch.Tensor, group: torch.Tensor, per_group: int = 8) -> Path:
    """Rows = groups 0..3, ``per_group`` uint8 images ``x (n, 3, S, S)`` each."""
    fig, axes = plt.subplots(4, per_group, figsize=(per_group * 1.1, 4 * 1.25))
    for g in range(4):
        idx = (group == g).nonzero().flatten()[:per_group]
        for j in range(per_group):
            ax = axes[g, j]
            ax.axis("off")
            if j < len(idx):
                ax.imshow(_img(x[idx[j]]))
        axes[g, 0].set_title(GROUP_NAMES[g], fontsize=7, loc="left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def head_map(path: Path, f_wrong: torch.Tensor, f_right: torch.Tensor, spurious, salient, title: str = "") -> Path:
    """``F_{A−} − F_{A+}`` as a layer × head heatmap; S marked ``S``, Y marked ``Y``."""
    d = (f_wrong - f_right).numpy()
    L, H = d.shape
    fig, ax = plt.subplots(figsize=(1.0 + 0.6 * H, 0.8 + 0.45 * L))
    lim = max(abs(d).max(), 1e-6)
    im = ax.imshow(d, cmap="coolwarm", vmin=-lim, vmax=lim)
    for marks, ch in ((spurious, "S"), (salient, "Y")):
        for l, h in marks:
            ax.text(h, l, ch, ha="center", va="center", fontsize=10, weight="bold")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(H))
    ax.set_yticks(range(L))
    ax.set_title(title or "F_A- - F_A+ (val, bias-conflicting)", fontsize=8)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def top_images(path: Path, x: torch.Tensor, scores: dict[str, torch.Tensor], k: int = 6) -> Path:
    """For each head name, the ``k`` images with the largest score (one row per head)."""
    names = list(scores) or ["(no located head)"]
    fig, axes = plt.subplots(len(names), k, figsize=(k * 1.1, len(names) * 1.25), squeeze=False)
    for r, name in enumerate(names):
        idx = scores[name].argsort(descending=True)[:k] if name in scores else []
        for j in range(k):
            axes[r, j].axis("off")
            if j < len(idx):
                axes[r, j].imshow(_img(x[idx[j]]))
        axes[r, 0].set_title(name, fontsize=7, loc="left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def predict_panel(path: Path, img: torch.Tensor, shares: dict[str, float], text: str) -> Path:
    """The input image beside a bar chart of each located head's share of the logit gap."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.5, 2.6), gridspec_kw={"width_ratios": [1, 1.6]})
    a.imshow(_img(img))
    a.axis("off")
    a.set_title(text, fontsize=7)
    names = list(shares) or ["none"]
    b.barh(names, [shares.get(n, 0.0) for n in names], color="tab:purple")
    b.set_xlabel("share of the zero-shot logit gap (vehicle − animal)", fontsize=7)
    b.tick_params(labelsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
