"""PNG grids of saliency maps for corner-shifted objects (tables go through ``zoo.core.results.render_table``)."""

from __future__ import annotations

from pathlib import Path

import torch

from zoo.methods.saliency_bias.canvas import POSITIONS, CornerShiftSet


def _show_canvas(x: torch.Tensor):
    """``(C, H, W)`` normalised canvas -> an image array scaled to [0, 1] per canvas."""
    img = x.permute(1, 2, 0).double()
    img = (img - img.min()) / (img.max() - img.min()).clamp_min(1e-12)
    return img[..., 0].numpy() if img.shape[-1] == 1 else img.numpy()


def plot_grid(
    path: str | Path, data: CornerShiftSet, rows: dict[str, torch.Tensor], obj: int = 0, title: str = ""
) -> Path:
    """One object at the five positions (columns); the canvases on top, then one row of maps per ``rows`` entry
    (label -> ``(N, H, W)`` maps over ``data``), each with the object box drawn in red.

    Raises:
        ValueError: ``data`` does not hold object ``obj`` at every position.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    idx = [int(i) for i in torch.nonzero(data.source == obj).flatten()]
    if len(idx) != len(POSITIONS):
        raise ValueError(f"object {obj} is not at all {len(POSITIONS)} positions in this set")
    n_rows = 1 + len(rows)
    fig, axes = plt.subplots(n_rows, len(idx), figsize=(1.6 * len(idx), 1.6 * n_rows), squeeze=False)
    for j, i in enumerate(idx):
        axes[0, j].imshow(_show_canvas(data.x[i]), cmap="gray")
        axes[0, j].set_title(POSITIONS[int(data.position[i])], fontsize=7)
        for r, (label, maps) in enumerate(rows.items(), start=1):
            axes[r, j].imshow(maps[i].double().numpy(), cmap="inferno")
            y0, x0, y1, x1 = data.boxes[i].tolist()
            axes[r, j].add_patch(Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, ec="red", lw=0.8))
            if j == 0:
                axes[r, j].set_ylabel(label, fontsize=6)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / n_rows if title else 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return path
