"""Compiled CONSTRUCT for depth-2 OR nodes (numba): the inner loop of PRAXIS, where most OR nodes are built.

Heile et al. (ICML 2026), Algorithm 1. An OR node with two levels left holds leaves, splits into two depth-1 OR
nodes, and those hold leaves and splits into leaves; everything in it is integer counting (the proxy of a depth-1
child is its exact optimum, the proxy of a depth-0 child its best leaf). ``or2`` does CONSTRUCT, the proxy pruning,
SOLVE_SIBLINGS' budget refinement and the counting of the node's objective histogram in one compiled call, from
the pair counts of the node's rows (ours: the same quantities as ``construct.construct`` with
``shallow.depth1_children``, which stay the reference; tests check equal sets on every shipped setting).

``split_counts`` is the class counts of every split of a batch (the greedy proxy's input, ``problem.split_counts``);
``exact2`` is the same pair-count pass for the exact depth-2 proxy of a batch of subproblems (``shallow.exact2``).

The node's two children are not built here: ``or2`` returns, per kept split, the final budgets of its two depth-1
children, and ``construct`` builds them with the numpy path only when a tree inside them is asked for (enumeration,
predictions), not for counting. numba is optional (the ``praxis`` extra); without it ``construct`` uses numpy.
"""

from __future__ import annotations

import numpy as np

try:
    from numba import njit
except ImportError:  # the numpy path in construct.py is used instead
    njit = None

INF = 1 << 62
"""The objective of an OR node that holds no tree (the numpy path in ``construct.py`` uses the same value)."""

_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_S1, _S2, _S4, _S56 = np.uint64(1), np.uint64(2), np.uint64(4), np.uint64(56)


def _popcount(x):
    """Bits set in a uint64 (SWAR; LLVM turns it into one ``popcnt``)."""
    x = x - ((x >> _S1) & _M1)
    x = (x & _M2) + ((x >> _S2) & _M2)
    x = (x + (x >> _S4)) & _M4
    return np.int64((x * _H01) >> _S56)


def _leaf_cost(gamma, counts):
    """``gamma + n - max_c n_c``: the best leaf of a non-empty set with class counts ``counts (C,)``."""
    n = 0
    best = 0
    for c in range(counts.shape[0]):
        n += counts[c]
        best = max(best, counts[c])
    return gamma + n - best


def _add_leaves(gamma, counts, budget, majority, out):
    """Add 1 to ``out[cost]`` for each leaf of ``counts`` with ``cost <= budget`` (the leaves that
    ``construct.leaf_node`` keeps; only the majority class, ties to the larger class, when ``majority``)."""
    n = 0
    top = 0
    for c in range(counts.shape[0]):
        n += counts[c]
        if counts[c] >= counts[top]:
            top = c
    for c in range(counts.shape[0]):
        if majority and c != top:
            continue
        cost = gamma + n - counts[c]
        if cost <= budget:
            out[cost] += 1


def _depth1_min(gamma, counts, q1, q2, budget):
    """Best objective of the depth-1 OR node (``construct`` at depth 1) on a set with class counts ``counts (C,)``
    whose split ``g`` has sides ``q1[g]``, ``q2[g]`` ``(F, C)``; ``INF`` when no tree fits ``budget``."""
    leaf = _leaf_cost(gamma, counts)
    best = leaf if leaf <= budget else INF
    if budget < 2 * gamma:
        return best
    for g in range(q1.shape[0]):
        if q1[g].sum() == 0 or q2[g].sum() == 0:
            continue
        pl = _leaf_cost(gamma, q1[g])
        pr = _leaf_cost(gamma, q2[g])
        if pl + pr <= budget:
            best = min(best, pl + pr)
    return best


def _depth1_hist(gamma, counts, q1, q2, budget, majority, out):
    """Objective histogram of that depth-1 node, dense: ``out[o]`` trees of objective ``o`` (``out`` has length
    ``budget + 1``). Leaves of each split's sides are those within ``budget - Proxy(other side)``."""
    _add_leaves(gamma, counts, budget, majority, out)
    if budget < 2 * gamma:
        return
    left = np.zeros(budget + 1, dtype=np.int64)
    right = np.zeros(budget + 1, dtype=np.int64)
    for g in range(q1.shape[0]):
        if q1[g].sum() == 0 or q2[g].sum() == 0:
            continue
        pl = _leaf_cost(gamma, q1[g])
        pr = _leaf_cost(gamma, q2[g])
        if pl + pr > budget:
            continue
        _add_leaves(gamma, q1[g], budget - pr, majority, left)
        _add_leaves(gamma, q2[g], budget - pl, majority, right)
        for a in range(pl, budget - pr + 1):  # left leaves cost pl .. budget - pr, right ones pr .. budget - pl
            if left[a] == 0:
                continue
            for b in range(pr, budget - a + 1):
                if right[b]:
                    out[a + b] += left[a] * right[b]
        for a in range(pl, budget + 1):
            left[a] = 0
        for b in range(pr, budget + 1):
            right[b] = 0


def _side(pc, single, total, f, side):
    """Class counts of child ``side`` (0: feature ``f`` = 1, 1: = 0) and of its two sides under every split ``g``,
    by inclusion-exclusion from the pair counts ``pc (F, F, C)``."""
    if side == 0:
        return single[f].copy(), pc[f].copy(), single[f][None, :] - pc[f]
    node = total - single[f]
    return node, single - pc[f], node[None, :] - single + pc[f]


def _pair_counts(mask, X, Y):
    """``(F, F, C)`` class counts of the rows of ``mask`` with features ``f`` and ``g`` both 1, ``(F, C)`` the
    single-feature counts and ``(C,)`` the totals (``shallow.pair_counts``)."""
    n_feat, n_words = X.shape
    n_classes = Y.shape[0]
    pc = np.zeros((n_feat, n_feat, n_classes), dtype=np.int64)
    total = np.zeros(n_classes, dtype=np.int64)
    row = np.empty(n_words, dtype=np.uint64)
    for c in range(n_classes):
        for w in range(n_words):
            total[c] += _popcount(mask[w] & Y[c, w])
        for f in range(n_feat):
            for w in range(n_words):
                row[w] = mask[w] & Y[c, w] & X[f, w]
            for g in range(f, n_feat):
                s = 0
                for w in range(n_words):
                    s += _popcount(row[w] & X[g, w])
                pc[f, g, c] = s
                pc[g, f, c] = s
    single = np.empty((n_feat, n_classes), dtype=np.int64)
    for f in range(n_feat):
        single[f] = pc[f, f]
    return pc, single, total


def _split_counts(masks, X, Y):
    """Class counts on the feature = 1 side of every split of every mask: ``(M, W) -> (M, F, C)``
    (``problem.split_counts``)."""
    n_masks, n_words = masks.shape
    out = np.zeros((n_masks, X.shape[0], Y.shape[0]), dtype=np.int64)
    for m in range(n_masks):
        for c in range(Y.shape[0]):
            for f in range(X.shape[0]):
                s = 0
                for w in range(n_words):
                    s += _popcount(masks[m, w] & X[f, w] & Y[c, w])
                out[m, f, c] = s
    return out


def _exact2(masks, X, Y, gamma):
    """Best objective at depth <= 2 of each of ``masks (M, W)``: ``(M,)`` int64 (``shallow.exact2``)."""
    out = np.empty(masks.shape[0], dtype=np.int64)
    for m in range(masks.shape[0]):
        pc, single, total = _pair_counts(masks[m], X, Y)
        n_sub = total.sum()
        best = _leaf_cost(gamma, total) if n_sub > 0 else 0
        for f in range(X.shape[0]):
            n_left = single[f].sum()
            if n_left == 0 or n_left == n_sub:
                continue
            lc, lq1, lq2 = _side(pc, single, total, f, 0)
            rc, rq1, rq2 = _side(pc, single, total, f, 1)
            best = min(best, _depth1_min(gamma, lc, lq1, lq2, INF) + _depth1_min(gamma, rc, rq1, rq2, INF))
        out[m] = best
    return out


def _or2(mask, X, Y, gamma, budget, majority):
    """CONSTRUCT(D, 2, B) with SOLVE_SIBLINGS and the node's objective histogram.

    Args:
        mask: ``(W,)`` uint64 rows of D. X: ``(F, W)`` feature bitsets. Y: ``(C, W)`` class bitsets.
        gamma: per-leaf penalty. budget: ``B >= 2 gamma``. majority: ``majority_leaf_only``.

    Returns:
        ``(splits (K, 3) int64, hist (B + 1,) int64, min objective)``: each kept split's feature and the final budgets
        of its feature = 1 and feature = 0 children, in feature order; ``hist[o]`` trees of objective ``o``.
    """
    n_feat = X.shape[0]
    pc, single, total = _pair_counts(mask, X, Y)
    n_sub = total.sum()
    hist = np.zeros(budget + 1, dtype=np.int64)
    _add_leaves(gamma, total, budget, majority, hist)
    leaf = _leaf_cost(gamma, total)
    best = leaf if leaf <= budget else INF
    splits = np.empty((n_feat, 3), dtype=np.int64)
    n_kept = 0
    lh = np.zeros(budget + 1, dtype=np.int64)
    rh = np.zeros(budget + 1, dtype=np.int64)
    for f in range(n_feat):
        n_left = single[f].sum()
        if n_left == 0 or n_left == n_sub:
            continue
        lc, lq1, lq2 = _side(pc, single, total, f, 0)
        rc, rq1, rq2 = _side(pc, single, total, f, 1)
        p_left = _depth1_min(gamma, lc, lq1, lq2, INF)  # exact depth-1 proxies of the two children
        if p_left + gamma > budget:
            continue
        p_right = _depth1_min(gamma, rc, rq1, rq2, INF)
        if p_left + p_right > budget:
            continue
        # SOLVE_SIBLINGS: budget refinement ("ping-pong"), as construct.solve_siblings
        lb = budget - p_right
        min_l = _depth1_min(gamma, lc, lq1, lq2, lb) if lb >= 0 else INF
        rb = budget - min_l if min_l < INF else -1
        min_r = _depth1_min(gamma, rc, rq1, rq2, rb) if rb >= 0 else INF
        last_l = min_l
        while True:
            improved = False
            new_l = budget - min_r if min_r < INF else -1
            if new_l > lb:
                lb = new_l
                last_l = _depth1_min(gamma, lc, lq1, lq2, lb)
                min_l = min(min_l, last_l)
            new_r = budget - min_l if min_l < INF else -1
            if new_r > rb:
                rb = new_r
                r_now = _depth1_min(gamma, rc, rq1, rq2, rb)
                if r_now < min_r:
                    min_r = r_now
                    improved = True
            if not improved:
                break
        if lb < 0 or rb < 0:
            continue
        final_r = _depth1_min(gamma, rc, rq1, rq2, rb)
        if last_l >= INF or final_r >= INF:
            continue
        splits[n_kept, 0], splits[n_kept, 1], splits[n_kept, 2] = f, lb, rb
        n_kept += 1
        best = min(best, last_l + final_r)
        lh[: lb + 1] = 0
        rh[: rb + 1] = 0
        _depth1_hist(gamma, lc, lq1, lq2, lb, majority, lh[: lb + 1])
        _depth1_hist(gamma, rc, rq1, rq2, rb, majority, rh[: rb + 1])
        for a in range(last_l, lb + 1):
            if lh[a] == 0:
                continue
            for b in range(final_r, min(rb, budget - a) + 1):
                if rh[b]:
                    hist[a + b] += lh[a] * rh[b]
    return splits[:n_kept].copy(), hist, best


if njit is not None:
    _popcount = njit(inline="always", cache=True)(_popcount)
    _leaf_cost = njit(inline="always", cache=True)(_leaf_cost)
    _add_leaves = njit(cache=True)(_add_leaves)
    _depth1_min = njit(cache=True)(_depth1_min)
    _depth1_hist = njit(cache=True)(_depth1_hist)
    _side = njit(cache=True)(_side)
    _pair_counts = njit(cache=True)(_pair_counts)
    or2 = njit(cache=True)(_or2)
    exact2 = njit(cache=True)(_exact2)
    split_counts = njit(cache=True)(_split_counts)
else:
    or2 = exact2 = split_counts = None


def available() -> bool:
    """Whether the compiled kernel can be used (numba importable)."""
    return or2 is not None


def warm_up() -> None:
    """Compile the kernels (or load them from numba's cache) on a tiny problem, outside any timed region."""
    words = np.ones((2, 1), dtype=np.uint64)
    or2(words[0], words, words, 1, 4, False)
    exact2(words, words, words, 1)
    split_counts(words, words, words)
