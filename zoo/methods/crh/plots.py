"""PNG plots: the cylinder view of one concept, steerability against sin^2/cos, label fractions per step."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from zoo.methods.crh.geometry import cylinder

OUTCOME_COLOURS = {"concept reached": "tab:green", "never": "tab:grey", "gibberish first": "tab:red"}


def cylinder_view(d_train: torch.Tensor, d_test: torch.Tensor, outcomes: list[str], path: str, title: str) -> None:
    """Difference vectors on the axis u and the first two normal-plane PCs (of the train ``d_perp``): left,
    axial coordinate against normal PC1; right, the normal plane (PC1, PC2). Test questions coloured by outcome
    (``OUTCOME_COLOURS``)."""
    mu = d_train.mean(0)
    tr, te = cylinder(d_train, mu), cylinder(d_test, mu)
    basis = torch.linalg.svd(tr["d_perp"] - tr["d_perp"].mean(0), full_matrices=False).Vh[:2]
    ptr, pte = tr["d_perp"] @ basis.T, te["d_perp"] @ basis.T
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    axes[0].scatter(tr["axial"], ptr[:, 0], s=10, c="tab:blue", alpha=0.4, label="train d")
    axes[1].scatter(ptr[:, 0], ptr[:, 1], s=10, c="tab:blue", alpha=0.4, label="train d")
    for i, o in enumerate(outcomes):
        c = OUTCOME_COLOURS[o]
        axes[0].scatter(te["axial"][i], pte[i, 0], s=60, c=c, marker="*", edgecolors="k")
        axes[1].scatter(pte[i, 0], pte[i, 1], s=60, c=c, marker="*", edgecolors="k")
    axes[0].axvline(float(mu.norm()), color="k", lw=0.8, ls="--", label="|mu_c|")
    axes[0].set_xlabel("<d, u> (axis)")
    axes[0].set_ylabel("normal-plane PC1")
    axes[1].set_xlabel("normal-plane PC1")
    axes[1].set_ylabel("normal-plane PC2")
    handles = [plt.Line2D([], [], marker="*", ls="", color=c, label=f"test: {o}") for o, c in OUTCOME_COLOURS.items()]
    axes[1].legend(handles=handles, fontsize=8)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def steerability_scatter(
    x: np.ndarray, y: np.ndarray, path: str, title: str, ylabel: str = "steerability / |mu_c|^2"
) -> None:
    """Steerability / |mu_c|^2 against sin^2(theta)/cos(theta), one point per (concept, question)."""
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    ax.scatter(x, y, s=12, alpha=0.6)
    ax.set_xlabel("sin^2(theta) / cos(theta)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def label_fractions(frac: dict[str, dict[str, list[float]]], path: str, title: str) -> None:
    """Fraction of each label (1 normal, 2 concept, 3 gibberish) against the steering step, one panel per run."""
    names = list(frac)
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for lab, colour, text in (
            ("1", "tab:blue", "normal"),
            ("2", "tab:green", "concept"),
            ("3", "tab:red", "gibberish"),
        ):
            ys = frac[name][lab]
            ax.plot(range(1, len(ys) + 1), ys, color=colour, label=text)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step k")
        ax.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("fraction of outputs")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
