"""Explanations: fidelity under token removal, post-hoc importance baselines, one-event explanations and plots.

The release imports an ``explain.py`` that it does not ship (seed-repos.md §2.5); this file is *ours*, built on
the code's masking mechanism (masked tokens become padding, then the whole forward is recomputed).
"""

from __future__ import annotations

import torch

from zoo.methods.st_tgexplainer.metrics import top_fraction_keep
from zoo.methods.st_tgexplainer.networks import STTGExplainerNet, pos_neg_inputs


@torch.no_grad()
def fidelity_agreement(
    net: STTGExplainerNet,
    inputs: dict,
    importance: torch.Tensor,
    levels: list[float],
    full_logit: torch.Tensor | None = None,
) -> torch.Tensor:
    """Does the prediction from only the top-``level`` tokens agree with the full prediction?

    Args:
        net: the network (put in eval mode by the caller).
        inputs: keyword arguments of ``net.forward`` for B events.
        importance: ``(B, 2K)`` token importance (higher = kept first).
        levels: sparsity levels in (0, 1].
        full_logit: ``(B,)`` the unmasked logits (recomputed when ``None``).

    Returns:
        bool ``(len(levels), B)``: ``sign(logit_masked) == sign(logit_full)`` (threshold p = 0.5).
    """
    if full_logit is None:
        full_logit = net(**inputs)["logit"]
    valid = torch.cat([inputs["u_valid"], inputs["v_valid"]], 1)
    out = []
    for level in levels:
        keep = top_fraction_keep(importance, valid, level)
        out.append((net(**inputs, keep=keep)["logit"] > 0) == (full_logit > 0))
    return torch.stack(out)


def random_importance(valid: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Post-hoc baseline: i.i.d. uniform scores ``(B, 2K)`` (a random explanation)."""
    return torch.rand(valid.shape, generator=generator).to(valid.device)


def gradient_importance(net: STTGExplainerNet, inputs: dict) -> torch.Tensor:
    """Post-hoc baseline: first-order occlusion score of every token (*ours*).

    With a token gate ``g = 1`` multiplying the token matrix, removing token ``i`` changes the logit by about
    ``-∂logit/∂g_i``; ``sign(logit) · ∂logit/∂g_i`` is therefore how much token ``i`` supports the current
    decision. Works for both the explainer and the plain GraphMixer.

    Returns:
        ``(B, 2K)`` importances (detached).
    """
    valid = torch.cat([inputs["u_valid"], inputs["v_valid"]], 1)
    with torch.enable_grad():
        gate = torch.ones(valid.shape, device=valid.device, requires_grad=True)
        logit = net(**inputs, gate=gate)["logit"]
        (grad,) = torch.autograd.grad(logit.sum(), gate)
    return (torch.sign(logit).unsqueeze(1) * grad).detach()


def explanation_records(
    out: dict, inputs: dict, raw_node_ids: torch.Tensor, top: int, threshold: float = 0.5
) -> list[dict]:
    """The ``top`` most important real tokens of the first event in ``inputs`` as readable records.

    Args:
        out: ``net.forward`` output for the event (explainer network, eval mode).
        inputs: its inputs (batch of 1).
        raw_node_ids: ``(N+1,)`` file ids of the remapped nodes.
        top: how many tokens to return.
        threshold: oriented stability at or above which a token is a ``stability`` pattern.

    Returns:
        list of ``{"endpoint", "neighbor", "time", "importance", "stability", "pattern"}``, most important first;
        ``stability`` is the oriented prior (``out["stability"]``); ``pattern`` is ``stability`` when it is
        ``≥ threshold`` else ``transition``.
    """
    k = inputs["u_nbr"].shape[1]
    ids = torch.cat([inputs["u_nbr"], inputs["v_nbr"]], 1)[0]
    times = torch.cat([inputs["u_nbr_t"], inputs["v_nbr_t"]], 1)[0]
    valid = out["valid"][0]
    s, rho = out["s"][0], out["stability"][0]
    order = torch.argsort(s.masked_fill(~valid, -torch.inf), descending=True)
    recs = []
    for j in order[: min(top, int(valid.sum()))].tolist():
        endpoint = inputs["u"][0] if j < k else inputs["v"][0]
        recs.append(
            {
                "endpoint": int(raw_node_ids[int(endpoint)]),
                "neighbor": int(raw_node_ids[int(ids[j])]),
                "time": float(times[j]),
                "importance": round(float(s[j]), 4),
                "stability": round(float(rho[j]), 4),
                "pattern": "stability" if float(rho[j]) >= threshold else "transition",
            }
        )
    return recs


def plot_explanation(src: int, dst: int, t: float, score: float, records: list[dict], path: str) -> str:
    """Draw one explanation subgraph to a PNG.

    The predicted event ``src -> dst`` is a dashed arc. Every explanatory interaction is an edge from its
    endpoint to its neighbour: blue for stability, orange for transition, width ∝ importance. Repeated
    interactions of one pair are merged into one edge labelled with all their ranks. Neighbours of ``src`` sit
    on its left, those of ``dst`` on its right, and shared ones in the middle.

    Returns:
        ``path``.
    """
    import math
    from collections import defaultdict

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch

    pos = {src: (-1.2, 0.0), dst: (1.2, 0.0)}
    sides = defaultdict(set)
    for r in records:
        if r["neighbor"] not in pos:
            sides[r["neighbor"]].add(r["endpoint"])
    groups = {
        "left": [n for n, e in sides.items() if e == {src}],
        "right": [n for n, e in sides.items() if e == {dst}],
        "both": [n for n, e in sides.items() if len(e) > 1],
    }
    for side, (cx, a0, a1) in (("left", (-1.2, 110, 250)), ("right", (1.2, -70, 70))):
        nodes = groups[side]
        for i, n in enumerate(nodes):
            a = math.radians(a0 + (a1 - a0) * (i + 0.5) / len(nodes))
            pos[n] = (cx + 1.3 * math.cos(a), 1.3 * math.sin(a))
    for i, n in enumerate(groups["both"]):
        pos[n] = (0.0, 1.4 + 0.5 * i)
    merged: dict = {}
    for rank, r in enumerate(records, 1):
        key = (r["endpoint"], r["neighbor"])
        if key not in merged:
            merged[key] = dict(r, ranks=[])
        merged[key]["ranks"].append(rank)
        merged[key]["importance"] = max(merged[key]["importance"], r["importance"])
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.add_patch(
        FancyArrowPatch(
            pos[src],
            pos[dst],
            connectionstyle="arc3,rad=0.45",
            arrowstyle="-|>",
            mutation_scale=14,
            ls="--",
            color="k",
            lw=1.2,
            zorder=1,
        )
    )
    colors = {"stability": "tab:blue", "transition": "tab:orange"}
    for (a, b), r in merged.items():
        direct = {a, b} == {src, dst}  # an earlier src-dst interaction: arc above, the prediction arcs below
        (x0, y0), (x1, y1) = (pos[src], pos[dst]) if direct else (pos[a], pos[b])
        rad = -0.25 if direct else 0.0
        ax.add_patch(
            FancyArrowPatch(
                (x0, y0),
                (x1, y1),
                connectionstyle=f"arc3,rad={rad}",
                arrowstyle="-",
                color=colors[r["pattern"]],
                lw=0.5 + 5 * r["importance"],
                alpha=0.85,
                zorder=2,
            )
        )
        mx, my = (x0 + x1) / 2 + rad * (y1 - y0) / 2, (y0 + y1) / 2 - rad * (x1 - x0) / 2  # arc3 midpoint
        ax.text(
            mx,
            my,
            ",".join(map(str, r["ranks"])),
            fontsize=7,
            ha="center",
            va="center",
            bbox={"boxstyle": "round", "fc": "white", "lw": 0},
            zorder=4,
        )
    for n, (x, y) in pos.items():
        ax.scatter(
            [x],
            [y],
            s=600 if n in (src, dst) else 300,
            c="tab:red" if n in (src, dst) else "lightgray",
            edgecolors="k",
            zorder=3,
        )
        ax.text(x, y, str(n), fontsize=7, ha="center", va="center", zorder=5)
    handles = [plt.Line2D([], [], color=c, lw=3, label=k) for k, c in colors.items()]
    handles.append(plt.Line2D([], [], color="k", ls="--", label=f"predicted {src} -> {dst}"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), fontsize=8, ncol=3, frameon=False)
    xs, ys = zip(*pos.values())
    ax.set_xlim(min(xs) - 0.4, max(xs) + 0.4)
    ax.set_ylim(min(ys + (-1.0,)) - 0.4, max(ys + (0.5,)) + 0.4)
    ax.set_aspect("equal")
    ax.set_title(
        f"ST-TGExplainer: {src} -> {dst} at t={t:.0f}, p={score:.3f}\n"
        "edge labels: importance rank of the explanatory interaction(s)",
        fontsize=9,
    )
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


#: importances read off the model's own outputs: the mask s, and s weighted into the stability channel (ρ·s, the
#: token weight of the ρ pass) or the transition channel ((1-ρ)·s): the two orientations of ρ
MASK_IMPORTANCE = {
    "mask": lambda out: out["s"],
    "rho*mask": lambda out: out["rho"] * out["s"],
    "(1-rho)*mask": lambda out: (1 - out["rho"]) * out["s"],
}


def first_test_batches(net, dm, n_events: int):
    """Yield ``(inputs, outputs)`` for the test batches that cover the first ``n_events`` events: the network's
    positive + negative inputs (:func:`pos_neg_inputs`) and its outputs on them, computed without gradient (the
    consumer may differentiate ``net`` on ``inputs`` itself)."""
    seen = 0
    for batch in dm.test_dataloader():
        if seen >= n_events:
            return
        seen += batch["src"].numel()
        inputs = pos_neg_inputs(batch)
        with torch.no_grad():
            out = net(**inputs)
        yield inputs, out


def fidelity_curves(net, dm, levels: list[float], n_events: int, importances: list[str], seed: int) -> dict:
    """Agreement per level for each importance kind on the first ``n_events`` test events (pos + neg).

    Kinds: ``mask``, ``rho*mask``, ``(1-rho)*mask`` (:data:`MASK_IMPORTANCE`), ``random``, ``gradient``.
    """
    net.eval()
    g = torch.Generator().manual_seed(seed)
    agree = {k: [] for k in importances}
    for inputs, full in first_test_batches(net, dm, n_events):
        valid = full["valid"]
        for kind in importances:
            if kind in MASK_IMPORTANCE:
                imp = MASK_IMPORTANCE[kind](full)
            elif kind == "random":
                imp = random_importance(valid, g)
            else:
                imp = gradient_importance(net, inputs)
            agree[kind].append(fidelity_agreement(net, inputs, imp, levels, full["logit"]))
    return {k: torch.cat(v, 1).float().mean(1).tolist() for k, v in agree.items()}
