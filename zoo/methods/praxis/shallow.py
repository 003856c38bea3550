"""Exact objectives at depth <= 2 from split and pair counts (the proxy's closed-form base cases).

``exact1`` is the best tree of depth <= 1; ``exact2`` the best of depth <= 2, from the counts of every two-feature
conjunction (``pair_counts``): with the single-feature and total counts, inclusion-exclusion gives the four
quadrants of any two nested splits, so the depth-1 optima of all children of all splits are one vectorised pass
(ours; same values as the reference package's depth-1 and depth-2 solvers). Heile et al. (ICML 2026), §3.
"""

from __future__ import annotations

import numpy as np

from zoo.methods.praxis.bitset import popcount
from zoo.methods.praxis.kernel import exact2 as compiled_exact2
from zoo.methods.praxis.problem import Problem, batch_chunks, class_counts, leaf_cost, split_counts


def exact1(p: Problem, masks: np.ndarray) -> np.ndarray:
    """Best objective at depth <= 1 (a leaf or one split into two leaves), exactly: ``(M, W) -> (M,)``."""
    total = class_counts(p, masks)
    best = leaf_cost(p.gamma, total)
    left = split_counts(p, masks)
    right = total[:, None, :] - left
    valid = (left.sum(-1) > 0) & (right.sum(-1) > 0)
    split = np.where(valid, leaf_cost(p.gamma, left) + leaf_cost(p.gamma, right), np.iinfo(np.int64).max)
    if split.shape[1]:
        best = np.minimum(best, split.min(axis=1))
    return best


def pair_counts(p: Problem, masks: np.ndarray) -> np.ndarray:
    """Class counts of every two-feature conjunction: ``(M, W) -> (M, F, F, C)``, ``[m, f, g, c]`` counting rows
    of mask ``m`` with features ``f`` and ``g`` both 1 and class ``c`` (the diagonal ``f == g`` is the single
    feature). With the single-feature and total counts, inclusion-exclusion gives all four quadrants of any two
    nested splits without building the child bitsets (ours)."""
    m, w = masks.shape
    n_feat = p.n_features
    out = np.empty((m, n_feat, n_feat, p.n_classes), dtype=np.int64)
    for sl in batch_chunks(m, n_feat * n_feat * w):
        for c in range(p.n_classes):
            a = masks[sl, None, :] & p.Y[c] & p.X[None]  # (m, F, W)
            out[sl, :, :, c] = popcount(a[:, :, None, :] & p.X[None, None])
    return out


def depth1_children(p: Problem, masks: np.ndarray):
    """Exact depth-1 objectives of both children of every split, from ``pair_counts`` (ours).

    For mask ``m`` and feature ``f``: ``Obj1(m & f)`` and ``Obj1(m & not f)`` where
    ``Obj1(S) = min(leaf(S), min_g leaf(S & g) + leaf(S & not g))`` over splits ``g`` with both sides non-empty,
    the reference's depth-1 solver, for all ``f`` at once.

    Returns:
        ``(left (M, F), right (M, F), single (M, F, C), total (M, C))``: the children's objectives, the left
        children's class counts and the masks' class counts.
    """
    big = np.iinfo(np.int64).max // 4
    if p.n_classes == 2:
        return _depth1_children_binary(p, masks, big)
    pc = pair_counts(p, masks)  # (M, F, F, C)
    single = np.ascontiguousarray(np.diagonal(pc, axis1=1, axis2=2).transpose(0, 2, 1))  # (M, F, C)
    total = class_counts(p, masks)  # (M, C)

    def cost(counts):
        n = counts.sum(-1)
        return np.where(n > 0, p.gamma + n - counts.max(-1), big), n

    def best_depth1(node_counts, q1, q2):  # node (M, F, C); quadrants (M, F, F, C)
        leaf, _ = cost(node_counts)
        c1, n1 = cost(q1)
        c2, n2 = cost(q2)
        split = np.where((n1 > 0) & (n2 > 0), c1 + c2, big).min(-1) if q1.shape[2] else leaf
        return np.minimum(leaf, split)

    sf, sg = single[:, :, None, :], single[:, None, :, :]
    left = best_depth1(single, pc, sf - pc)
    right = best_depth1(total[:, None, :] - single, sg - pc, total[:, None, None, :] - sf - sg + pc)
    return left, right, single, total


def _depth1_children_binary(p: Problem, masks: np.ndarray, big: int):
    """``depth1_children`` for two classes: the same quantities from (rows, positives) pair counts only."""
    m, w = masks.shape
    n_feat = p.n_features
    pn = np.empty((m, n_feat, n_feat), dtype=np.int64)  # rows with f and g
    pp = np.empty((m, n_feat, n_feat), dtype=np.int64)  # positives with f and g
    for sl in batch_chunks(m, n_feat * n_feat * w):
        a = masks[sl, None, :] & p.X[None]  # (m, F, W)
        pn[sl] = popcount(a[:, :, None, :] & p.X[None, None])
        pp[sl] = popcount((a & p.Y[1])[:, :, None, :] & p.X[None, None])
    total_n = popcount(masks)
    total_p = popcount(masks & p.Y[1])
    sn = np.diagonal(pn, axis1=1, axis2=2)  # (M, F)
    sp = np.diagonal(pp, axis1=1, axis2=2)
    gamma = p.gamma

    def cost(n, pos):
        return np.where(n > 0, gamma + np.minimum(pos, n - pos), big)

    def best(n0, p0, n1, p1, n2, p2):  # node (M, F); its two children under every g (M, F, F)
        split = np.where((n1 > 0) & (n2 > 0), cost(n1, p1) + cost(n2, p2), big).min(-1)
        return np.minimum(cost(n0, p0), split)

    sn_f, sp_f, sn_g, sp_g = sn[:, :, None], sp[:, :, None], sn[:, None, :], sp[:, None, :]
    tn, tp = total_n[:, None], total_p[:, None]
    left = best(sn, sp, pn, pp, sn_f - pn, sp_f - pp)
    right = best(
        tn - sn, tp - sp, sn_g - pn, sp_g - pp, tn[:, :, None] - sn_f - sn_g + pn, tp[:, :, None] - sp_f - sp_g + pp
    )
    single = np.stack([sn - sp, sp], axis=-1)
    total = np.stack([total_n - total_p, total_p], axis=-1)
    return left, right, single, total


def exact2(p: Problem, masks: np.ndarray) -> np.ndarray:
    """Best objective at depth <= 2, exactly: ``min(leaf(D), min_f Obj1(D & f) + Obj1(D & not f))``, with the
    children's ``Obj1`` from ``depth1_children`` (the reference's depth-2 special solver, vectorised)."""
    if p.backend == "numba":
        return compiled_exact2(np.ascontiguousarray(masks), p.X, p.Y, p.gamma)
    left, right, single, total = depth1_children(p, masks)
    n_left = single.sum(-1)
    valid = (n_left > 0) & (n_left < total.sum(-1)[:, None])
    out = leaf_cost(p.gamma, total)
    if valid.shape[1]:
        out = np.minimum(out, np.where(valid, left + right, np.iinfo(np.int64).max // 4).min(1))
    return out
