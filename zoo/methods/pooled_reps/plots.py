"""PNGs of one domain's measurement: alignment vs pooled tokens (with the single-token curve), the segment-mixture
simplex, and per-layer bars."""

from __future__ import annotations

import math
from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curve(curves: dict, path: str | Path, title: str) -> None:
    """CKA and mutual k-NN of the mean of the first m tokens and of the single token h_m, per reference space."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for space, c in curves.items():
        for ax, metric in zip(axes, ("cka", "mknn")):
            (line,) = ax.plot(c["m"], c[f"pool_{metric}"], label=f"{space}: mean of first m")
            ax.plot(c["m"], c[f"single_{metric}"], ls=":", color=line.get_color(), label=f"{space}: single h_m")
    for ax, metric in zip(axes, ("unbiased CKA", "mutual kNN")):
        ax.set_xlabel("generated tokens m")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_simplex(grid: list, path: str | Path, title: str) -> None:
    """CKA of r_α over the 0.1 simplex grid, drawn on the triangle with vertices r₁ (first third), r₂, r₃."""
    plt = _plt()
    corners = [(0.0, 0.0), (1.0, 0.0), (0.5, math.sqrt(3) / 2)]
    xs = [sum(a[k] * corners[k][0] for k in range(3)) for a, _ in grid]
    ys = [sum(a[k] * corners[k][1] for k in range(3)) for a, _ in grid]
    vals = [v for _, v in grid]
    fig, ax = plt.subplots(figsize=(4.6, 4))
    sc = ax.scatter(xs, ys, c=vals, s=140, marker="h", cmap="viridis")
    best = max(range(len(vals)), key=vals.__getitem__)
    ax.scatter([xs[best]], [ys[best]], s=200, facecolors="none", edgecolors="red", label="best α")
    for (x, y), name in zip(corners, ("r1 (first)", "r2 (middle)", "r3 (last)")):
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(0, -14 if y == 0 else 8), ha="center", fontsize=8)
    fig.colorbar(sc, ax=ax, label="unbiased CKA")
    ax.set_axis_off()
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_layers(rows: list[dict], space: str, path: str | Path, title: str) -> None:
    """Per-layer CKA of the mean pool and the prompt pool, with the layer average as a line."""
    plt = _plt()
    by = {r["readout"]: r["cka"] for r in rows if r["space"] == space}
    layers = sorted(int(k.split("@L")[1]) for k in by if k.startswith("mean@L"))
    fig, ax = plt.subplots(figsize=(5, 3.2))
    w = 0.38
    ax.bar([l - w / 2 for l in layers], [by[f"mean@L{l}"] for l in layers], w, label="mean pool (generated)")
    ax.bar([l + w / 2 for l in layers], [by[f"prompt@L{l}"] for l in layers], w, label="prompt pool")
    ax.axhline(by["layer_avg"], color="k", ls="--", lw=1, label="layer average (mean pools)")
    ax.set_xticks(layers, [f"{l}" + (" (norm)" if l == layers[-1] else "") for l in layers])
    ax.set_xlabel("readout layer (block output; last = after final RMSNorm)")
    ax.set_ylabel(f"unbiased CKA vs {space}")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(result: dict, out_dir: str | Path, domain: str) -> dict[str, str]:
    """All three PNGs of one domain's :func:`measure_domain` result; returns ``{name: path}``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    space = next(iter(result["curves"]))
    files = {
        f"{domain}-curve.png": out_dir / f"{domain}-curve.png",
        f"{domain}-simplex.png": out_dir / f"{domain}-simplex.png",
        f"{domain}-layers.png": out_dir / f"{domain}-layers.png",
    }
    plot_curve(
        result["curves"], files[f"{domain}-curve.png"], f"{domain}: alignment vs pooled tokens (n={result['n']})"
    )
    plot_simplex(result["simplex"][space], files[f"{domain}-simplex.png"], f"{domain}: r_α vs {space}")
    plot_layers(result["rows"], space, files[f"{domain}-layers.png"], f"{domain}: per-layer alignment")
    return {k: str(v) for k, v in files.items()}
