"""What people look at: a tree as text and as PNG, Rashomon set size vs epsilon, Rashomon importance (usage, RID)."""

from __future__ import annotations

import numpy as np

from zoo.methods.praxis.construct import OrNode
from zoo.methods.praxis.enumerate import count_within_mult


def tree_text(tree, names: list[str], classes: list[str] | None = None, indent: str = "") -> str:
    """Indented ``if feature: ... else: ...`` rendering; ``names[f]`` is feature ``f``'s name."""
    cls = (lambda c: classes[c]) if classes else str
    if isinstance(tree, int):
        return f"{indent}predict {cls(tree)}\n"
    f, lt, rt = tree
    return (
        f"{indent}if {names[f]}:\n"
        + tree_text(lt, names, classes, indent + "    ")
        + f"{indent}else:  # not {names[f]}\n"
        + tree_text(rt, names, classes, indent + "    ")
    )


def plot_tree(tree, names: list[str], path: str, classes: list[str] | None = None, title: str = "") -> None:
    """Draw ``tree`` top-down (true branch left) and save a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pos, edges, labels, leaf_x = {}, [], {}, [0]

    def place(t, depth, key):
        if isinstance(t, int):
            pos[key] = (leaf_x[0], -depth)
            leaf_x[0] += 1
            labels[key] = (f"predict {classes[t] if classes else t}", True)
            return
        f, lt, rt = t
        place(lt, depth + 1, key + "L")
        place(rt, depth + 1, key + "R")
        pos[key] = ((pos[key + "L"][0] + pos[key + "R"][0]) / 2, -depth)
        labels[key] = (names[f], False)
        edges.extend([(key, key + "L", "yes"), (key, key + "R", "no")])

    place(tree, 0, "")
    width = max(4.0, 2.2 * leaf_x[0])
    depth = -min(y for _, y in pos.values())
    fig, ax = plt.subplots(figsize=(width, 1.6 * (depth + 1) + 0.6))
    for a, b, lab in edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        ax.plot([x0, x1], [y0, y1], color="0.4", zorder=1)
        ax.text(
            (x0 + x1) / 2,
            (y0 + y1) / 2,
            lab,
            fontsize=8,
            ha="center",
            va="center",
            color="0.3",
            bbox={"fc": "white", "ec": "none", "pad": 0.5},
        )
    for key, (x, y) in pos.items():
        text, leaf = labels[key]
        ax.text(
            x,
            y,
            text,
            ha="center",
            va="center",
            fontsize=9,
            zorder=2,
            bbox={"boxstyle": "round", "fc": "#fde8c8" if leaf else "#dceaf4", "ec": "0.3"},
        )
    ax.set_xlim(-0.8, leaf_x[0] - 0.2)
    ax.set_ylim(-depth - 0.6, 0.6)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def size_vs_eps(root: OrNode, eps_grid) -> list[tuple[float, int]]:
    """``[(eps, #trees with objective <= round((1 + eps) * best))]`` from one enumeration (re-thresholding)."""
    return [(float(e), count_within_mult(root, float(e))) for e in eps_grid]


def plot_size_vs_eps(rows: list[tuple[float, int]], path: str, title: str = "") -> None:
    """Log-scale plot of Rashomon set size against epsilon, saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    eps = [e for e, _ in rows]
    ax.plot(eps, [max(c, 1) for _, c in rows], marker="o")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon (relative to the best tree found)")
    ax.set_ylabel("trees in the Rashomon set")
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_importance(
    usage, total: int, names: list[str], path: str, top: int = 20, rid: list[dict] | None = None
) -> None:
    """Rashomon importance as PNG: the share of the set's trees that split on each feature (top ``top``) and, when
    ``rid`` (``rid.RID.summary()`` rows) is given, beside it the RID of each variable: box 25-75%, whiskers 5-95%,
    median line, mean dot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    share = np.array([float(u) / total if total else 0.0 for u in usage])
    order = np.argsort(-share)[:top][::-1]
    rid_rows = sorted(rid or [], key=lambda r: r["mean"])[-top:]
    height = 0.3 * max(len(order), len(rid_rows)) + 1.4
    fig, axes = plt.subplots(1, 2 if rid_rows else 1, figsize=(12 if rid_rows else 6, height), squeeze=False)
    ax = axes[0, 0]
    ax.barh([names[i] for i in order], share[order])
    ax.set_xlabel("share of trees in the Rashomon set that use the feature")
    ax.set_xlim(0, 1)
    ax.set_title("usage", fontsize=10)
    if rid_rows:
        ax = axes[0, 1]
        ys = np.arange(len(rid_rows))
        for k, r in enumerate(rid_rows):
            ax.plot([r["q05"], r["q95"]], [k, k], color="0.4", lw=1)
            ax.add_patch(
                matplotlib.patches.Rectangle((r["q25"], k - 0.3), r["q75"] - r["q25"], 0.6, fc="#dceaf4", ec="0.3")
            )
            ax.plot([r["q50"], r["q50"]], [k - 0.3, k + 0.3], color="0.1", lw=1.5)
            ax.plot(r["mean"], k, "o", color="#c0392b", ms=4)
        ax.set_yticks(ys, [r["variable"] for r in rid_rows])
        ax.axvline(0, color="0.6", lw=0.8, ls=":")
        ax.set_xlabel("model reliance (permuted - original misclassification rate)")
        ax.set_title("Rashomon importance distribution (bootstrap; dot = mean)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
