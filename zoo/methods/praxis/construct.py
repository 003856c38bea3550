"""CONSTRUCT and SOLVE_SIBLINGS: build the AND/OR graph of the approximate Rashomon set (PRAXIS, §3, Algorithm 1).

``construct(D, d, B)`` returns an OR node holding every leaf of ``D`` whose objective is ``<= B`` and every split
``f`` that survives proxy pruning (``Proxy(D_L) + gamma <= B`` and ``Proxy(D_L) + Proxy(D_R) <= B``), each split
an AND node over two OR nodes built by ``solve_siblings`` with refined budgets. Pruning with a proxy (an upper
bound on the child optimum) instead of a lower bound is the approximation that makes PRAXIS fast; with an exact
proxy (``lookahead_k >= depth - 1``) the result is the exact Rashomon set.

OR nodes are cached under ``(depth, budget, sample bitset)`` so that a subproblem reached along different paths is
built once and the result is a DAG (ours: the reference package rebuilds them and shares only proxy values).
"""
from __future__ import annotations

import math

import numpy as np

from zoo.methods.praxis.proxy import Problem, class_counts, proxy

INF = 1 << 62  # min objective of an OR node that holds no tree


class OrNode:
    """An OR node of the AND/OR graph: a subproblem with its admissible leaves and splits.

    Attributes:
        budget: the objective budget ``B`` it was built with; it represents every kept tree with objective <= B.
        leaves: ``[(class, objective)]`` leaves with ``gamma + mistakes <= B``.
        splits: ``[(feature, left OrNode, right OrNode)]`` AND nodes; ``left`` holds the rows where feature = 1.
        min_objective: best objective of any tree in this node (``INF`` when empty).
        size: rows in the subproblem.
    """

    __slots__ = ("budget", "leaves", "splits", "min_objective", "size", "hist")

    def __init__(self, budget: int, size: int):
        self.budget = budget
        self.size = size
        self.leaves: list[tuple[int, int]] = []
        self.splits: list[tuple[int, OrNode, OrNode]] = []
        self.min_objective = INF
        self.hist = None  # (objectives, counts), filled by enumerate.histogram


def rashomon_bound(reference: int, eps: float, slack: float = 0.0) -> int:
    """Absolute budget ``round((1 + eps) (1 + slack) reference)`` (half away from zero, as ``llround``)."""
    return int(math.floor(reference * (1.0 + eps) * (1.0 + slack) + 0.5))


def construct(p: Problem, mask: np.ndarray, depth: int, budget: int, cache: dict,
              majority_leaf_only: bool = False) -> OrNode:
    """CONSTRUCT(D, d, B) (Algorithm 1).

    Args:
        p: the packed problem (holds the proxy cache).
        mask: ``(W,)`` uint64 bitset of the subproblem's rows.
        depth: remaining depth budget (0 = leaves only); PRAXIS' convention, a root-only tree has depth 0.
        budget: objective budget ``B`` (integer units: gamma per leaf + 1 per mistake).
        cache: the OR-node cache ``(depth, budget, bytes) -> OrNode`` shared by the whole run.
        majority_leaf_only: keep only the majority-class leaf (the reference package's ``majority_leaf_only``).

    Returns:
        The OR node; ``node.min_objective == INF`` when no tree fits the budget.
    """
    key = (depth, budget, mask.tobytes())
    node = cache.get(key)
    if node is not None:
        return node
    counts = class_counts(p, mask[None])[0]
    n_sub = int(counts.sum())
    node = OrNode(budget, n_sub)
    if majority_leaf_only:
        best = int(len(counts) - 1 - np.argmax(counts[::-1]))  # ties go to the larger class, as the reference
        classes = [best]
    else:
        classes = range(len(counts))
    for c in classes:
        cost = p.gamma + n_sub - int(counts[c])
        if cost <= budget:
            node.leaves.append((c, cost))
            node.min_objective = min(node.min_objective, cost)
    cache[key] = node
    if depth == 0 or budget < 2 * p.gamma:
        return node
    left = mask & p.X
    right = mask & p.notX
    feats = np.flatnonzero(left.any(-1) & right.any(-1))
    if len(feats) == 0:
        return node
    p_left = proxy(p, left[feats], depth - 1)
    keep = p_left + p.gamma <= budget  # cheap early prune: the right side costs at least gamma
    feats, p_left = feats[keep], p_left[keep]
    if len(feats) == 0:
        return node
    p_right = proxy(p, right[feats], depth - 1)
    keep = p_left + p_right <= budget  # the proxy prune: the approximation of PRAXIS
    for f, pl, pr in zip(feats[keep].tolist(), p_left[keep].tolist(), p_right[keep].tolist()):
        lnode, rnode = solve_siblings(p, left[f], right[f], pl, pr, depth, budget, cache, majority_leaf_only)
        if lnode is None or rnode is None or lnode.min_objective >= INF or rnode.min_objective >= INF:
            continue
        node.splits.append((f, lnode, rnode))
        node.min_objective = min(node.min_objective, lnode.min_objective + rnode.min_objective)
    return node


def solve_siblings(p: Problem, lmask: np.ndarray, rmask: np.ndarray, proxy_left: int, proxy_right: int,
                   depth: int, budget: int, cache: dict, majority_leaf_only: bool = False):
    """SOLVE_SIBLINGS with iterative budget refinement (§3, "ping-pong").

    The left child first gets ``B - Proxy(D_R)``; the right child then gets ``B - min Obj(left)``; each side is
    rebuilt with the larger budget ``B - min Obj(other side)`` while that budget grows, until the right side's
    minimum stops improving. Every tree ``l + r <= B`` has ``l <= B - min r`` and ``r <= B - min l``, so the final
    pair of nodes holds all combinations the proxy admits.

    Returns:
        ``(left OrNode | None, right OrNode | None)``; ``None`` where the side's budget went negative.
    """
    left_budget = budget - proxy_right
    left = construct(p, lmask, depth - 1, left_budget, cache, majority_leaf_only) if left_budget >= 0 else None
    min_left = left.min_objective if left is not None else INF
    right_budget = budget - min_left if min_left < INF else -1
    right = construct(p, rmask, depth - 1, right_budget, cache, majority_leaf_only) if right_budget >= 0 else None
    min_right = right.min_objective if right is not None else INF
    while True:
        improved = False
        new_left = budget - min_right if min_right < INF else -1
        if new_left > left_budget:
            left_budget = new_left
            left = construct(p, lmask, depth - 1, left_budget, cache, majority_leaf_only)
            min_left = min(min_left, left.min_objective)
        new_right = budget - min_left if min_left < INF else -1
        if new_right > right_budget:
            right_budget = new_right
            right = construct(p, rmask, depth - 1, right_budget, cache, majority_leaf_only)
            if right.min_objective < min_right:
                min_right = right.min_objective
                improved = True
        if not improved:
            return left, right
