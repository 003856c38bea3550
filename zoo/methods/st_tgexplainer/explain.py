"""Explanations: fidelity under token removal, post-hoc importance baselines, one-event explanations and plots.

The release imports an ``explain.py`` that it does not ship (seed-repos.md §2.5); this file is *ours*, built on
the code's masking mechanism (masked tokens become padding, then the whole forward is recomputed).
"""
from __future__ import annotations

import torch

from .metrics import top_fraction_keep
from .model import STTGExplainerNet


@torch.no_grad()
def fidelity_agreement(net: STTGExplainerNet, inputs: dict, importance: torch.Tensor, levels: list[float],
                       full_logit: torch.Tensor | None = None) -> torch.Tensor:
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


def explanation_records(out: dict, inputs: dict, raw_node_ids: torch.Tensor, top: int) -> list[dict]:
    """The ``top`` most important real tokens of the first event in ``inputs`` as readable records.

    Args:
        out: ``net.forward`` output for the event (explainer network, eval mode).
        inputs: its inputs (batch of 1).
        raw_node_ids: ``(N+1,)`` file ids of the remapped nodes.
        top: how many tokens to return.

    Returns:
        list of ``{"endpoint", "neighbor", "time", "importance", "stability", "pattern"}``, most important first;
        ``stability`` is the oriented prior (``out["stability"]``); ``pattern`` is ``stability`` when it is
        ``≥ 0.5`` else ``transition``.
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
        recs.append({"endpoint": int(raw_node_ids[int(endpoint)]), "neighbor": int(raw_node_ids[int(ids[j])]),
                     "time": float(times[j]), "importance": round(float(s[j]), 4),
                     "stability": round(float(rho[j]), 4),
                     "pattern": "stability" if float(rho[j]) >= 0.5 else "transition"})
    return recs


def plot_explanation(src: int, dst: int, t: float, score: float, records: list[dict], path: str) -> str:
    """Draw one explanation subgraph to a PNG.

    The predicted event ``src -> dst`` is dashed; every explanatory interaction is an edge from its endpoint
    to its neighbour, blue for stability and orange for transition, width ∝ importance, labelled with its rank.

    Returns:
        ``path``.
    """
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pos = {src: (-1.0, 0.0), dst: (1.0, 0.0)}
    others = [n for n in dict.fromkeys(r["neighbor"] for r in records) if n not in pos]
    for i, n in enumerate(others):
        a = 2 * math.pi * (i + 0.5) / max(1, len(others))
        pos[n] = (1.9 * math.cos(a), 1.4 * math.sin(a))
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    ax.plot(*zip(pos[src], pos[dst]), "k--", lw=1.5, zorder=1)
    colors = {"stability": "tab:blue", "transition": "tab:orange"}
    for rank, r in enumerate(records, 1):
        (x0, y0), (x1, y1) = pos[r["endpoint"]], pos[r["neighbor"]]
        ax.plot([x0, x1], [y0, y1], color=colors[r["pattern"]], lw=0.5 + 5 * r["importance"], alpha=0.8, zorder=2)
        ax.text((x0 + x1) / 2, (y0 + y1) / 2, str(rank), fontsize=7, ha="center", va="center",
                bbox={"boxstyle": "round", "fc": "white", "lw": 0}, zorder=4)
    for n, (x, y) in pos.items():
        ax.scatter([x], [y], s=500 if n in (src, dst) else 250, c="tab:red" if n in (src, dst) else "lightgray",
                   edgecolors="k", zorder=3)
        ax.text(x, y, str(n), fontsize=8, ha="center", va="center", zorder=5)
    handles = [plt.Line2D([], [], color=c, lw=3, label=k) for k, c in colors.items()]
    handles.append(plt.Line2D([], [], color="k", ls="--", label="predicted event"))
    ax.legend(handles=handles, loc="lower center", fontsize=8, ncol=3, frameon=False)
    ax.set_title(f"ST-TGExplainer: {src} -> {dst} at t={t:.0f}, p={score:.3f}", fontsize=10)
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
