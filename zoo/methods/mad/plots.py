"""The PNG of the most and least anomalous images (tables go through ``zoo.core.results.render_table``)."""

from __future__ import annotations

from pathlib import Path

import torch


def plot_extremes(
    path: Path,
    x: torch.Tensor,
    score: torch.Tensor,
    k: int = 8,
    labels: list[str] | None = None,
    title: str = "anomaly score",
) -> Path:
    """Write a PNG with the ``k`` most anomalous images of ``x (N, C, H, W)`` (top row, highest ``score (N,)``
    first) and the ``k`` least anomalous (bottom row), each titled with its score (and label)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = torch.argsort(score, descending=True)
    k = min(k, len(order))
    rows = [("most", order[:k]), ("least", order.flip(0)[:k])] if len(order) > k else [("all", order)]
    fig, axes = plt.subplots(len(rows), k, figsize=(1.6 * k, 1.9 * len(rows)), squeeze=False)
    for r, (name, idx) in enumerate(rows):
        for c in range(k):
            ax = axes[r][c]
            ax.axis("off")
            if c >= len(idx):
                continue
            i = int(idx[c])
            img = x[i].permute(1, 2, 0).clamp(0, 1).numpy()
            ax.imshow(img[..., 0] if img.shape[-1] == 1 else img, cmap="gray" if img.shape[-1] == 1 else None)
            ax.set_title((f"{labels[i]}\n" if labels else "") + f"{float(score[i]):.3f}", fontsize=7)
        axes[r][0].text(-0.1, 0.5, name, transform=axes[r][0].transAxes, rotation=90, va="center", ha="right")
    fig.suptitle(title + " (top: most anomalous)" if len(rows) > 1 else title, fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
