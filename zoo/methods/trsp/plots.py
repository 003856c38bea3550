"""PNG plots people look at: a map of one outcome, JR factor vs lambda, and cost CDFs per algorithm."""

from __future__ import annotations

import numpy as np

from zoo.methods.trsp.costs import Instance, best_routes


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_map(inst: Instance, stops, path: str, title: str = "", n_trips: int = 50, seed: int = 0) -> None:
    """Candidate centroids (grey), open stops (red) and ``n_trips`` sampled trips: walked (grey line) or ridden
    (blue: walk to the boarding stop, ride, walk on). Needs coordinates (``inst.trips``, ``inst.stops``).

    Raises:
        ValueError: the instance has no coordinates (the authors' matrix format).
    """
    if inst.trips is None or inst.stops is None:
        raise ValueError("a map needs coordinates; this instance has travel-time matrices only")
    plt = _plt()
    _, board, alight = best_routes(inst, stops)
    show = np.random.default_rng(seed).choice(inst.n, size=min(n_trips, inst.n), replace=False)
    fig, ax = plt.subplots(figsize=(6, 7))
    ax.scatter(inst.stops[:, 0], inst.stops[:, 1], s=6, c="0.7", label="candidate (tract centroid)")
    for i in show:
        a, b = inst.trips[i, :2], inst.trips[i, 2:]
        if board[i] < 0:
            ax.plot([a[0], b[0]], [a[1], b[1]], c="0.55", lw=0.7, ls="--")
        else:
            y, z = inst.stops[board[i]], inst.stops[alight[i]]
            ax.plot([a[0], y[0], z[0], b[0]], [a[1], y[1], z[1], b[1]], c="tab:blue", lw=0.8)
    Y = np.asarray(list(stops), int)
    if len(Y):
        ax.scatter(inst.stops[Y, 0], inst.stops[Y, 1], s=40, c="tab:red", marker="s", label=f"open stop ({len(Y)})")
    ax.plot([], [], c="0.55", ls="--", label="walks")
    ax.plot([], [], c="tab:blue", label="walk-ride-walk")
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    ax.set_aspect(1 / np.cos(np.radians(inst.stops[:, 1].mean())))
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_jr_vs_lambda(rows: list[dict], path: str, bounds: dict[str, float]) -> None:
    """Mean JR factor (with min-max bars) against lambda, one line per county; ``rows`` carry ``county, lambda,
    jr_factor`` (lambda = 0 is ECA). ``bounds``: horizontal reference lines, name -> value."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for county in sorted({r["county"] for r in rows}):
        lams = sorted({r["lambda"] for r in rows if r["county"] == county})
        vals = [[r["jr_factor"] for r in rows if r["county"] == county and r["lambda"] == lam] for lam in lams]
        mean = [np.mean(v) for v in vals]
        err = [[m - min(v) for m, v in zip(mean, vals)], [max(v) - m for m, v in zip(mean, vals)]]
        ax.errorbar(lams, mean, yerr=err, marker="o", capsize=3, label=county)
    for name, v in bounds.items():
        ax.axhline(v, ls=":", c="0.4")
        ax.text(0, v, f" {name}", va="bottom", fontsize=7)
    ax.set_xlabel("lambda (0 = ECA)")
    ax.set_ylabel("JR factor (least gamma)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_cost_cdfs(costs: dict[str, np.ndarray], path: str, title: str = "") -> None:
    """Empirical CDF of travellers' cost (minutes) per algorithm; ``costs``: name -> (N,) minutes."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name, c in costs.items():
        c = np.sort(np.asarray(c))
        ax.step(c, np.arange(1, len(c) + 1) / len(c), where="post", label=f"{name} (mean {c.mean():.0f})")
    ax.set_xlabel("door-to-door minutes")
    ax.set_ylabel("share of travellers")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
