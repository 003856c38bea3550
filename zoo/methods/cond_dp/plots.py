"""Figures for the card: MSE vs ε with seed bands, training MSE vs step at ε = 1, singular values before/after C."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

COLORS = {
    "cond-dp-precondition": "C3",
    "cond-dp-reparam": "C1",
    "dp-sgd": "C0",
    "rr-on-bins": "C2",
    "laplace": "C4",
    "sufficient-statistics": "C5",
    "non-private": "k",
}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def mse_vs_eps(doc: dict, out: Path) -> Path:
    """One panel per (dataset, model): mean test MSE over seeds vs ε, band = min..max over seeds."""
    plt = _plt()
    panels = sorted({(r["dataset"], r["model"]) for r in doc["rows"]})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (dataset, model) in zip(axes[0], panels):
        rows = [r for r in doc["rows"] if r["dataset"] == dataset and r["model"] == model]
        for method, color in COLORS.items():
            mine = [r for r in rows if r["method"] == method]
            if not mine:
                continue
            if method == "non-private":
                ax.axhline(np.mean([r["test_mse"] for r in mine]), color="k", ls="--", label="non-private")
                continue
            eps = sorted({r["epsilon"] for r in mine})
            vals = [[r["test_mse"] for r in mine if r["epsilon"] == e] for e in eps]
            ax.plot(eps, [np.mean(v) for v in vals], "o-", color=color, label=method, ms=3)
            ax.fill_between(eps, [min(v) for v in vals], [max(v) for v in vals], color=color, alpha=0.2)
        ax.set(xscale="log", yscale="log", xlabel="ε (δ = 1e-5)", ylabel="test MSE", title=f"{dataset}, {model}")
    max(axes[0], key=lambda a: len(a.get_lines())).legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def loss_vs_step(doc: dict, out: Path) -> Path:
    """Training MSE vs step at ε = 1, seed 0, for DP-SGD and both Cond-DP modes."""
    plt = _plt()
    panels = sorted({(c["dataset"], c["model"]) for c in doc.get("curves", [])})
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.2 * max(1, len(panels)), 3.4), squeeze=False)
    for ax, (dataset, model) in zip(axes[0], panels):
        for c in doc["curves"]:
            if (c["dataset"], c["model"]) == (dataset, model):
                ax.plot(c["step"], c["train_mse"], color=COLORS[c["method"]], label=c["method"])
        ax.set(yscale="log", xlabel="step", ylabel="training MSE", title=f"{dataset}, {model}, ε = 1")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def singular_values(out: Path, ridge: float = 0.01) -> Path:
    """Singular values of the standardised SF and diabetes training features, and of X C^{1/2} (what ``reparam``
    feeds the first layer; the precondition update sees the same geometry), each divided by its largest."""
    from zoo.methods.cond_dp.conditioning import conditioning_matrix, spectrum
    from zoo.methods.cond_dp.datamodule import LabelDPDataModule

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4))
    for ax, dataset in zip(axes, ("commuting-sf", "diabetes")):
        X = LabelDPDataModule(dataset=dataset).X_train
        C = conditioning_matrix(X, ridge=ridge, intercept=True)
        for s, label in ((spectrum(X), "X"), (spectrum(X, C), f"X C^1/2 (λ = {ridge})")):
            ax.plot(np.arange(1, len(s) + 1), s / s[0], label=label)
        ax.set(yscale="log", xlabel="index j", ylabel="σ_j / σ_1", title=dataset)
        ax.set_ylim(1e-4, 1.5)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def render_all(result_json: Path) -> list[Path]:
    """Write the three PNGs next to ``result_json``."""
    doc = json.loads(Path(result_json).read_text())
    base = Path(result_json).parent
    return [
        mse_vs_eps(doc, base / "mse-vs-eps.png"),
        loss_vs_step(doc, base / "loss-vs-step.png"),
        singular_values(base / "singular-values.png"),
    ]


if __name__ == "__main__":
    import sys

    from zoo.core.data import repo_root

    print(render_all(Path(sys.argv[1]) if len(sys.argv) > 1 else repo_root() / "results/cond-dp/mse-vs-eps.json"))
