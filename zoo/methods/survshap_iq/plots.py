"""Files people look at: interaction curves (CSV, PNG) and the SurvFD time-dependent / independent partition."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from zoo.methods.survshap_iq.decomposition import Decomposition, classify_components
from zoo.methods.survshap_iq.explain import InteractionCurves, survshap_iq

SCALE_LABEL = {"survival": "S(t|x)", "hazard": "h(t|x)", "log_hazard": "log h(t|x)"}


def choose_approximator(p: int, approximator: str) -> str:
    """``auto``: exact up to 12 players (4 096 coalitions), shapiq's kernel approximator beyond."""
    return ("exact" if p <= 12 else "kernel") if approximator == "auto" else approximator


def explain_points(
    model,
    X: np.ndarray,
    background: np.ndarray,
    times: np.ndarray,
    names: list[str],
    scale: str,
    index: str = "k-SII",
    max_order: int = 2,
    approximator: str = "auto",
    budget: int | None = None,
    seed: int = 0,
) -> list[InteractionCurves]:
    """SurvSHAP-IQ curves of each row of ``X (n, p)`` for ``model`` (any object with ``target(scale, times)``)."""
    f = model.target(scale, times)
    how = choose_approximator(X.shape[1], approximator)
    return [
        survshap_iq(
            f,
            x,
            background,
            times,
            index=index,
            max_order=max_order,
            approximator=how,
            budget=budget,
            random_state=seed,
            feature_names=names,
        )
        for x in X
    ]


def write_curves_csv(path: Path, curves_by_scale: dict[str, list[InteractionCurves]]) -> None:
    """Long-format CSV: ``point, scale, index, time, interaction, order, value`` (plus the baseline and prediction
    rows with interaction ``<baseline>`` / ``<prediction>``)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["point", "scale", "index", "time", "interaction", "order", "value"])
        for scale, curves in curves_by_scale.items():
            for i, c in enumerate(curves):
                for r in c.rows():
                    w.writerow(
                        [i, scale, c.index, f"{r['time']:.6g}", r["interaction"], r["order"], f"{r['value']:.8g}"]
                    )
                for label, vals in (("<baseline>", c.baseline), ("<prediction>", c.prediction)):
                    for t, v in zip(c.times, vals):
                        w.writerow([i, scale, c.index, f"{t:.6g}", label, 0, f"{v:.8g}"])


def plot_curves(c: InteractionCurves, path: Path, scale: str, top: int = 8, title: str = "") -> None:
    """Interaction curves ``phi_K(t|x)`` of one point: the ``top`` largest (by max |phi|), pairs dashed."""
    order = np.argsort(-np.abs(c.values).max(axis=0))[:top]
    fig, ax = plt.subplots(figsize=(7, 4))
    for k in order:
        ax.plot(c.times, c.values[:, k], ls="-" if len(c.interactions[k]) == 1 else "--", label=c.name(k))
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("time")
    ax.set_ylabel(f"{c.index} on {SCALE_LABEL.get(scale, scale)}")
    ax.set_title(title or f"SurvSHAP-IQ ({c.index}) on {SCALE_LABEL.get(scale, scale)}")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def partition_table(dec: Decomposition, names: list[str], rel_tol: float) -> list[dict]:
    """Per non-empty component: size, time variation and its class ("td" / "ti" / "absent") under ``rel_tol``."""
    comps = dec.components
    size = np.sqrt((comps**2).mean(axis=(0, 2)))
    variation = np.sqrt((comps.std(axis=2) ** 2).mean(axis=0))
    part = classify_components(dec, rel_tol=rel_tol)
    return [
        {
            "component": " * ".join(names[j] for j in s),
            "size": float(size[m]),
            "time_variation": float(variation[m]),
            "class": part.get(s, "absent"),
        }
        for m, s in enumerate(dec.sets())
        if s
    ]


def plot_partition(rows: list[dict], path: Path, title: str, top: int = 15) -> None:
    """Bar chart of component size and time variation, coloured by the time-dependent / independent class."""
    rows = sorted(rows, key=lambda r: -r["size"])[:top]
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.5))
    y = np.arange(len(rows))
    colour = {"td": "tab:red", "ti": "tab:blue", "absent": "lightgrey"}
    ax.barh(
        y + 0.2,
        [r["size"] for r in rows],
        height=0.4,
        color=[colour[r["class"]] for r in rows],
        label="size (rms of f_M)",
    )
    ax.barh(
        y - 0.2,
        [r["time_variation"] for r in rows],
        height=0.4,
        color="k",
        alpha=0.4,
        label="time variation (rms sd over t)",
    )
    ax.set_yticks(y, [f"{r['component']} [{r['class']}]" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=1))
