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

from zoo.methods.praxis.bitset import mask_key
from zoo.methods.praxis.kernel import INF, or2
from zoo.methods.praxis.problem import Problem, class_counts
from zoo.methods.praxis.proxy import proxy
from zoo.methods.praxis.shallow import depth1_children


class OrNode:
    """An OR node of the AND/OR graph: a subproblem with its admissible leaves and splits.

    Attributes:
        budget: the objective budget ``B`` it was built with; it represents every kept tree with objective <= B.
        leaves: ``[(class, objective)]`` leaves with ``gamma + mistakes <= B``.
        splits: ``[(feature, left OrNode, right OrNode)]`` AND nodes; ``left`` holds the rows where feature = 1.
        min_objective: best objective of any tree in this node (``INF`` when empty).
        size: rows in the subproblem.
    """

    __slots__ = ("budget", "hist", "leaves", "min_objective", "size", "splits")

    def __init__(self, budget: int, size: int):
        self.budget = budget
        self.size = size
        self.leaves: list[tuple[int, int]] = []
        self.splits: list[tuple[int, OrNode, OrNode]] = []
        self.min_objective = INF
        self.hist = None  # (objectives, counts), filled by enumerate.histogram


def rashomon_bound(reference: int, eps: float, slack: float = 0.0) -> int:
    """Absolute budget ``round((1 + eps) (1 + slack) reference)`` (half away from zero, as ``llround``)."""
    return math.floor(reference * (1.0 + eps) * (1.0 + slack) + 0.5)


def construct(
    p: Problem,
    mask: np.ndarray,
    depth: int,
    budget: int,
    cache: dict,
    majority_leaf_only: bool = False,
    counts: list[int] | None = None,
) -> OrNode:
    """CONSTRUCT(D, d, B) (Algorithm 1).

    Args:
        p: the packed problem (holds the proxy cache).
        mask: ``(W,)`` uint64 bitset of the subproblem's rows.
        depth: remaining depth budget (0 = leaves only); PRAXIS' convention, a root-only tree has depth 0.
        budget: objective budget ``B`` (integer units: gamma per leaf + 1 per mistake).
        cache: the OR-node cache ``(depth, budget, mask_key(mask)) -> OrNode`` shared by the whole run.
        majority_leaf_only: keep only the majority-class leaf (the reference package's ``majority_leaf_only``).
        counts: the subproblem's class counts if the caller already has them (``C`` ints).

    Returns:
        The OR node; ``node.min_objective == INF`` when no tree fits the budget.
    """
    if counts is None:
        counts = class_counts(p, mask[None])[0].tolist()
    gamma = p.gamma
    if depth == 0 or budget < 2 * gamma:
        return leaf_node(gamma, tuple(counts), budget, cache, majority_leaf_only)
    key = (depth, budget, mask_key(mask))
    node = cache.get(key)
    if node is not None:
        return node
    n_sub = sum(counts)
    if depth == 2 and p.backend == "numba" and p.lookahead_k >= 0:
        node = compiled_depth2(p, mask, budget, cache, majority_leaf_only, counts)
        cache[key] = node
        return node
    node = OrNode(budget, n_sub)
    node.leaves = list(leaf_node(gamma, tuple(counts), budget, cache, majority_leaf_only).leaves)
    node.min_objective = min((cost for _, cost in node.leaves), default=INF)
    cache[key] = node
    left = mask & p.X
    right = mask & p.notX
    if depth == 2 and p.lookahead_k >= 0:  # children at depth 1: their proxy is the exact depth-1 optimum
        d1_left, d1_right, single, _ = depth1_children(p, mask[None])
        left_counts = single[0]
    else:
        left_counts = split_class_counts(p, left)  # (F, C)
    left_n = left_counts.sum(1)
    feats = np.flatnonzero((left_n > 0) & (left_n < n_sub))
    if len(feats) == 0:
        return node
    if depth == 2 and p.lookahead_k >= 0:
        p_left = d1_left[0][feats]
    else:
        p_left = child_proxy(p, left[feats], left_counts[feats], depth - 1)
    keep = p_left + gamma <= budget  # cheap early prune: the right side costs at least gamma
    feats, p_left = feats[keep], p_left[keep]
    if len(feats) == 0:
        return node
    right_counts = np.asarray(counts)[None, :] - left_counts[feats]
    if depth == 2 and p.lookahead_k >= 0:
        p_right = d1_right[0][feats]
    else:
        p_right = child_proxy(p, right[feats], right_counts, depth - 1)
    keep = p_left + p_right <= budget  # the proxy prune: the approximation of PRAXIS
    if depth == 1:
        _depth1_splits(
            p,
            node,
            feats[keep],
            left_counts[feats[keep]].tolist(),
            right_counts[keep].tolist(),
            p_left[keep].tolist(),
            p_right[keep].tolist(),
            cache,
            majority_leaf_only,
        )
        return node
    lc_rows = left_counts[feats[keep]].tolist()
    rc_rows = right_counts[keep].tolist()
    for f, pr, lc, rc in zip(feats[keep].tolist(), p_right[keep].tolist(), lc_rows, rc_rows):
        lnode, rnode = solve_siblings(p, left[f], right[f], pr, depth, budget, cache, majority_leaf_only, (lc, rc))
        if lnode is None or rnode is None or lnode.min_objective >= INF or rnode.min_objective >= INF:
            continue
        node.splits.append((f, lnode, rnode))
        node.min_objective = min(node.min_objective, lnode.min_objective + rnode.min_objective)
    return node


class LazySplitsNode(OrNode):
    """A depth-2 OR node built by the compiled kernel: budget, leaves, minimum and histogram are set; its splits
    (depth-1 children) are built by the numpy path on first access, when a tree inside is asked for."""

    __slots__ = ("_built", "_make")

    def __init__(self, budget: int, size: int, make):
        super().__init__(budget, size)
        self._make = make

    @property
    def splits(self):
        if self._make is not None:
            self._built = self._make()
            self._make = None
        return self._built

    @splits.setter
    def splits(self, value):
        self._built = value


def compiled_depth2(
    p: Problem, mask: np.ndarray, budget: int, cache: dict, majority_leaf_only: bool, counts: list[int]
) -> OrNode:
    """CONSTRUCT(D, 2, B) through ``kernel.or2`` (same node as the numpy path; children built lazily)."""
    kept, hist, best = or2(mask, p.X, p.Y, p.gamma, budget, majority_leaf_only)
    node = LazySplitsNode(budget, sum(counts), None)
    node.leaves = list(leaf_node(p.gamma, tuple(counts), budget, cache, majority_leaf_only).leaves)
    node.min_objective = int(best) if best < INF else INF
    objs = np.flatnonzero(hist)
    node.hist = (tuple(objs.tolist()), tuple(hist[objs].tolist()))

    def make():
        out = []
        for f, lb, rb in kept.tolist():
            lnode = construct(p, mask & p.X[f], 1, lb, cache, majority_leaf_only)
            rnode = construct(p, mask & p.notX[f], 1, rb, cache, majority_leaf_only)
            out.append((f, lnode, rnode))
        return out

    node._make = make
    return node


def leaf_node(gamma: int, counts: tuple, budget: int, cache: dict, majority_leaf_only: bool = False) -> OrNode:
    """An OR node with leaves only (depth 0 or a budget below two leaves).

    Its content depends on the class counts and the budget alone, so it is cached under ``(counts, budget)``
    and shared by every subproblem with the same counts (ours).
    """
    key = ("leaf", counts, budget)
    node = cache.get(key)
    if node is not None:
        return node
    n_sub = sum(counts)
    node = OrNode(budget, n_sub)
    if majority_leaf_only:
        classes = [max(range(len(counts)), key=lambda c: (counts[c], c))]  # ties go to the larger class
    else:
        classes = range(len(counts))
    for c in classes:
        cost = gamma + n_sub - counts[c]
        if cost <= budget:
            node.leaves.append((c, cost))
            node.min_objective = min(node.min_objective, cost)
    cache[key] = node
    return node


def _depth1_splits(
    p: Problem, node: OrNode, feats, left_counts, right_counts, p_left, p_right, cache: dict, majority_leaf_only: bool
) -> None:
    """SOLVE_SIBLINGS for a depth-1 node, in closed form.

    At depth 0 the proxy of a child is its best leaf, which is also its minimum, so budget refinement stops at once
    with budgets ``B - Proxy(other side)``: the left child keeps its leaves within ``B - P_R`` and the right child
    those within ``B - min(left)``.
    """
    budget = node.budget
    for f, lc, rc, _pl, pr in zip(feats.tolist(), left_counts, right_counts, p_left, p_right):
        lnode = leaf_node(p.gamma, tuple(lc), budget - pr, cache, majority_leaf_only)
        if lnode.min_objective >= INF:
            continue
        rnode = leaf_node(p.gamma, tuple(rc), budget - lnode.min_objective, cache, majority_leaf_only)
        if rnode.min_objective >= INF:
            continue
        node.splits.append((f, lnode, rnode))
        node.min_objective = min(node.min_objective, lnode.min_objective + rnode.min_objective)


def split_class_counts(p: Problem, children: np.ndarray) -> np.ndarray:
    """Class counts of a batch of subproblems ``(M, W) -> (M, C)``, one ``AND`` + popcount per class."""
    out = np.empty((len(children), p.n_classes), dtype=np.int64)
    for c in range(p.n_classes):
        out[:, c] = np.bitwise_count(children & p.Y[c]).sum(-1, dtype=np.int64)
    return out


def child_proxy(p: Problem, masks: np.ndarray, counts: np.ndarray, depth: int) -> np.ndarray:
    """``Proxy(D, depth)`` of a batch of children whose class counts are known.

    A child whose best leaf costs at most ``2 gamma`` (or with ``depth == 0``) has proxy = leaf cost, since every
    split costs at least ``2 gamma``; only the others go to ``proxy`` (same values, fewer cache look-ups).
    """
    leaf = p.gamma + counts.sum(1) - counts.max(1)
    if depth == 0 or p.lookahead_k < 0:
        return leaf
    todo = np.flatnonzero(leaf > 2 * p.gamma)
    if len(todo):
        leaf[todo] = proxy(p, masks[todo], depth)
    return leaf


def solve_siblings(
    p: Problem,
    lmask: np.ndarray,
    rmask: np.ndarray,
    proxy_right: int,
    depth: int,
    budget: int,
    cache: dict,
    majority_leaf_only: bool = False,
    counts=(None, None),
):
    """SOLVE_SIBLINGS with iterative budget refinement (§3, "ping-pong").

    The left child first gets ``B - Proxy(D_R)``; the right child then gets ``B - min Obj(left)``; each side is
    rebuilt with the larger budget ``B - min Obj(other side)`` while that budget grows, until the right side's
    minimum stops improving. Every tree ``l + r <= B`` has ``l <= B - min r`` and ``r <= B - min l``, so the final
    pair of nodes holds all combinations the proxy admits.

    Args:
        counts: the two children's class counts when known (passed on to ``construct``).

    Returns:
        ``(left OrNode | None, right OrNode | None)``; ``None`` where the side's budget went negative.
    """
    lc, rc = counts
    left_budget = budget - proxy_right
    left = construct(p, lmask, depth - 1, left_budget, cache, majority_leaf_only, lc) if left_budget >= 0 else None
    min_left = left.min_objective if left is not None else INF
    right_budget = budget - min_left if min_left < INF else -1
    right = construct(p, rmask, depth - 1, right_budget, cache, majority_leaf_only, rc) if right_budget >= 0 else None
    min_right = right.min_objective if right is not None else INF
    while True:
        improved = False
        new_left = budget - min_right if min_right < INF else -1
        if new_left > left_budget:
            left_budget = new_left
            left = construct(p, lmask, depth - 1, left_budget, cache, majority_leaf_only, lc)
            min_left = min(min_left, left.min_objective)
        new_right = budget - min_left if min_left < INF else -1
        if new_right > right_budget:
            right_budget = new_right
            right = construct(p, rmask, depth - 1, right_budget, cache, majority_leaf_only, rc)
            if right.min_objective < min_right:
                min_right = right.min_objective
                improved = True
        if not improved:
            return left, right
