"""Baselines: a clustering-induced outcome (k-means++ on endpoints, centres on candidates), a utilitarian greedy
(ours) and uniform random stops. All return a :class:`~zoo.methods.trsp.costs.Placement` with ``k`` stops.

The paper proves no clustering-induced outcome beats 3-JR (§4); k-means is the clustering people would reach for.
"""

from __future__ import annotations

import numpy as np

from zoo.methods.trsp.costs import Instance, Placement, all_pairs, open_stop, pair_costs


def kmeans_stops(inst: Instance, k: int, seed: int = 0, iters: int = 20) -> Placement:
    """k-means with k-means++ seeding on the 2n endpoints, centres restricted to candidates (k-medians would use d;
    k-means uses d^2), so it needs only the endpoint-to-candidate walking matrix and works for any metric (ours).

    Lloyd steps: assign each endpoint to its nearest open centre, move each centre to the candidate with the least
    sum of squared walking times to its endpoints (distinct candidates), until nothing moves or ``iters`` steps.

    Args:
        k: number of centres (= stops), ``k <= m``.
    """
    rng = np.random.default_rng(seed)
    E = inst.endpoint_walk  # (2n, m)
    sq = E**2
    k = min(k, inst.m)
    centres = [int(rng.integers(inst.m))]  # k-means++: first at random, then prop. to D^2 of the endpoints' mass
    while len(centres) < k:
        d2 = sq[:, centres].min(1)  # (2n,)
        gain = np.maximum(d2[:, None] - sq, 0).sum(0)  # how much each candidate would cut sum D^2
        gain[centres] = 0
        if gain.sum() <= 0:  # every endpoint already sits on a centre: pick among the rest uniformly
            gain = np.ones(inst.m)
            gain[centres] = 0
        centres.append(int(rng.choice(inst.m, p=gain / gain.sum())))
    for _ in range(iters):
        assign = np.asarray(centres)[sq[:, centres].argmin(1)]
        moved: list[int] = []
        for c in centres:
            members = assign == c
            cost = sq[members].sum(0)
            cost[moved] = np.inf
            best = int(cost.argmin())
            stay = c not in moved and (not members.any() or cost[c] <= cost[best])
            moved.append(c if stay else best)
        if moved == centres:
            break
        centres = moved
    return Placement(centres, [(0.0, "kmeans", tuple(centres))])


def greedy_stops(inst: Instance, k: int, C: np.ndarray | None = None) -> Placement:
    """Utilitarian greedy (ours): open the pair with the least total cost, then one stop at a time the candidate
    that lowers total cost most, until ``k`` stops."""
    C = pair_costs(inst) if C is None else C
    u, v = all_pairs(inst.m)[int(C.sum(1).argmin())]
    cost = inst.direct.copy()
    Y: list[int] = []
    for s in (u, v):
        open_stop(inst, cost, Y, int(s))
    while len(Y) < min(k, inst.m):
        Yi = np.asarray(Y)
        out = inst.walk_a.T[:, :, None] + inst.shuttle[:, Yi][:, None, :] + inst.walk_b[:, Yi][None]  # (m, n, |Y|)
        back = inst.walk_a[:, Yi][None] + inst.shuttle[Yi, :].T[:, None, :] + inst.walk_b.T[:, :, None]
        new = np.minimum(cost[None], np.minimum(out.min(2), back.min(2)))  # (m, n)
        total = new.sum(1)
        total[Yi] = np.inf
        open_stop(inst, cost, Y, int(total.argmin()))
    return Placement(Y, [(0.0, "greedy", tuple(Y))])


def random_stops(inst: Instance, k: int, seed: int = 0) -> Placement:
    """``k`` distinct candidates uniformly at random."""
    Y = np.random.default_rng(seed).choice(inst.m, size=min(k, inst.m), replace=False)
    return Placement([int(y) for y in Y], [(0.0, "random", tuple(int(y) for y in Y))])
