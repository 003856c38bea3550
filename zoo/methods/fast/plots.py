"""Figures of the FAST experiments (``results/fast/figures/*.png``), drawn from the per-SAE rows of
:mod:`zoo.methods.fast.experiments`."""

from __future__ import annotations

import statistics

from zoo.core.data import repo_root

LABEL = {"fast": "FAST", "bt_pretrain": "BT(P)", "bt_chat": "BT(F)"}
COLOR = {"fast": "tab:green", "bt_pretrain": "tab:red", "bt_chat": "tab:blue"}


def _mean_curves(curves: list[list]) -> tuple[list, list]:
    """Pointwise mean of aligned ``[(x, y), ...]`` curves (None entries skipped; a point with no value is left out)."""
    points = [(x, [c[i][1] for c in curves if c[i][1] is not None]) for i, (x, _) in enumerate(curves[0])]
    points = [(x, statistics.fmean(ys)) for x, ys in points if ys]
    return [x for x, _ in points], [y for _, y in points]


def plot_all(rows: list[dict], name: str, out_dir=None, layer: int = 2, lm: str = "zoo-lm.chat") -> list:
    """Write the four figures ``<name>-*.png`` for the rows of block ``layer`` of ``lm``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = out_dir or repo_root() / "results" / "fast" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    rows = [r for r in rows if r["layer"] == layer]
    saes = sorted({r["sae"] for r in rows}, reverse=True)
    pipes = [p for p in LABEL if any(r["pipeline"] == p for r in rows)]
    paths = []

    fig, axes = plt.subplots(1, len(saes), figsize=(4.5 * len(saes), 3.6), squeeze=False)
    for ax, sae in zip(axes[0], saes):
        for i, p in enumerate(pipes):
            vals = [r["log2_mse_st"] for r in rows if r["sae"] == sae and r["pipeline"] == p]
            ax.scatter([i] * len(vals), vals, color=COLOR[p], zorder=3)
            ax.hlines(statistics.fmean(vals), i - 0.25, i + 0.25, color=COLOR[p])
        ax.set_xticks(range(len(pipes)), [LABEL[p] for p in pipes])
        ax.set_title(f"{sae} SAE, layer {layer}")
        ax.set_ylabel("log2 MSE on chat-template tokens")
    fig.suptitle(f"{lm}: error on template tokens (dots: seeds)", fontsize=9)
    paths.append(_save(fig, out / f"{name}-log2-mse-st.png"))

    fig, axes = plt.subplots(1, len(saes), figsize=(4.5 * len(saes), 3.6), squeeze=False)
    for ax, sae in zip(axes[0], saes):
        for p in pipes:
            curves = [
                list(zip(range(len(r["error_by_position"])), r["error_by_position"]))
                for r in rows
                if r["sae"] == sae and r["pipeline"] == p
            ]
            xs, ys = _mean_curves(curves)
            ax.plot(xs, ys, marker="o", color=COLOR[p], label=LABEL[p])
        from zoo.methods.fast.metrics import POSITION_EDGES  # imports torch: only when drawing this figure

        edges = rows[0].get("position_edges", POSITION_EDGES)  # rows written before the edges were stored: 256
        ax.set_xticks(range(len(edges) - 1), [f"{a}" for a in edges[:-1]], fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("token position (bin start)")
        ax.set_ylabel("MSE per dimension")
        ax.set_title(f"{sae} SAE")
        ax.legend()
    fig.suptitle("Error vs position (validation conversations, each alone)", fontsize=9)
    paths.append(_save(fig, out / f"{name}-error-vs-position.png"))

    fig, axes = plt.subplots(1, len(saes), figsize=(4.5 * len(saes), 3.6), squeeze=False)
    for ax, sae in zip(axes[0], saes):
        for p in pipes:
            dens = [r["log10_density"] for r in rows if r["sae"] == sae and r["pipeline"] == p and r["log10_density"]]
            if dens:
                ax.hist(dens[0], bins=40, range=(-6, 0), histtype="step", color=COLOR[p], label=LABEL[p])
        ax.set_xlabel("log10 feature firing frequency (-6: never)")
        ax.set_ylabel("features")
        ax.set_title(f"{sae} SAE, seed 0")
        ax.legend()
    paths.append(_save(fig, out / f"{name}-feature-density.png"))

    fig, axes = plt.subplots(1, len(saes), figsize=(4.5 * len(saes), 3.6), squeeze=False)
    for ax, sae in zip(axes[0], saes):
        for p in pipes:
            xs, ys = _mean_curves([r["gsnr_curve"] for r in rows if r["sae"] == sae and r["pipeline"] == p])
            ax.plot(xs, ys, marker="o", color=COLOR[p], label=LABEL[p])
        ax.set_xlabel("training step")
        ax.set_ylabel("median GSNR (ours)")
        ax.set_yscale("log")
        ax.set_title(f"{sae} SAE (mean over seeds)")
        ax.legend()
    paths.append(_save(fig, out / f"{name}-gsnr.png"))
    return paths


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
