"""The PRAXIS proxies: greedy completion, LicketySPLIT with k-step lookahead, and the exact optimum.

Heile et al., "From Rashomon Theory to PRAXIS" (ICML 2026), §3 and Definition 3.1. A *proxy* ``Proxy(D, d)`` is the
objective (``problem.py``) of one concrete tree of depth <= d built cheaply, so it is an upper bound on the best
objective at depth ``d``. The default proxy is LicketySPLIT with one-step lookahead: at each node choose the split
whose two greedy completions are best, recurse with the same rule into its children, and keep the better of "leaf
here" and "that split".

Every function here works on a batch of subproblems at once: ``masks`` is ``(M, W)`` uint64 and the result is
``(M,)`` int64. Tie-breaking follows the reference package ``tree-praxis`` (first feature wins, binary entropy
clamped to ``[1e-12, 1 - 1e-12]``) so that the proxy values, and hence the pruned sets, agree with it.
"""

from __future__ import annotations

import numpy as np

from zoo.methods.praxis.bitset import mask_key
from zoo.methods.praxis.problem import Problem, class_counts, leaf_cost, split_counts
from zoo.methods.praxis.shallow import exact1, exact2

_EPS = 1e-12


def _entropy_scores(left: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Weighted child entropy of every split (the greedy split heuristic); ``inf`` where a side is empty.

    Args:
        left: ``(M, F, C)`` left class counts. total: ``(M, C)`` class counts of the parent.

    Returns:
        ``(M, F)`` float64 ``w_L H(p_L) + w_R H(p_R)``; binary entropy uses the clamped form of the reference code.
    """
    right = total[:, None, :] - left
    n_l = left.sum(-1)
    n_r = right.sum(-1)
    n = (n_l + n_r).astype(np.float64)
    valid = (n_l > 0) & (n_r > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if left.shape[-1] == 2:

            def h(pos, cnt):
                q = np.clip(pos / cnt, _EPS, 1.0 - _EPS)
                return -(q * np.log2(q) + (1.0 - q) * np.log2(1.0 - q))

            hl, hr = h(left[..., 1], n_l), h(right[..., 1], n_r)
        else:

            def h(cnts, cnt):
                q = cnts / cnt[..., None]
                return -np.where(cnts > 0, q * np.log2(np.where(cnts > 0, q, 1.0)), 0.0).sum(-1)

            hl, hr = h(left, n_l), h(right, n_r)
        score = (n_l / n) * hl + (n_r / n) * hr
    return np.where(valid, score, np.inf)


def _children(p: Problem, masks: np.ndarray, feats: np.ndarray):
    return masks & p.X[feats], masks & p.notX[feats]


def greedy(p: Problem, masks: np.ndarray, depth: int) -> np.ndarray:
    """Greedy completion (the ``k = 0`` proxy): entropy-best split at each node, exact at depth 1.

    Args:
        masks: ``(M, W)`` subproblems. depth: remaining depth budget (0 = leaf only).

    Returns:
        ``(M,)`` objectives of the greedy trees, each pruned back to a leaf where the leaf is better.
    """
    if len(masks) == 0:
        return np.zeros(0, dtype=np.int64)
    if depth <= 0:
        return leaf_cost(p.gamma, class_counts(p, masks))
    if depth == 1:
        return exact1(p, masks)
    total = class_counts(p, masks)
    out = leaf_cost(p.gamma, total)
    active = np.flatnonzero(out > 2 * p.gamma)  # a split costs >= 2 gamma, so it cannot beat such a leaf
    if len(active) == 0:
        return out
    scores = _entropy_scores(split_counts(p, masks[active]), total[active])
    best = scores.argmin(axis=1)
    ok = np.isfinite(scores[np.arange(len(active)), best])
    rows, feats = active[ok], best[ok]
    if len(rows):
        left, right = _children(p, masks[rows], feats)
        both = greedy(p, np.concatenate([left, right]), depth - 1)
        out[rows] = np.minimum(out[rows], both[: len(rows)] + both[len(rows) :])
    return out


def _all_children(p: Problem, masks: np.ndarray):
    """Children of every split of every mask: ``(M, F, W)`` left and right, and ``(M, F)`` validity."""
    left = masks[:, None, :] & p.X[None]
    right = masks[:, None, :] & p.notX[None]
    valid = left.any(-1) & right.any(-1)
    return left, right, valid


def _memo(p: Problem, masks: np.ndarray, depth: int, k: int, compute) -> np.ndarray:
    """Look every mask up in ``p.cache`` under ``(depth, k, bytes)``; compute the misses in one batch."""
    out = np.empty(len(masks), dtype=np.int64)
    keys = [(depth, k, mask_key(m)) for m in masks]
    miss = []
    for i, key in enumerate(keys):
        v = p.cache.get(key)
        if v is None:
            miss.append(i)
        else:
            out[i] = v
    if miss:
        # duplicates inside the batch are computed once
        first: dict = {}
        uniq = [first.setdefault(keys[i], i) for i in miss]
        todo = sorted(set(uniq))
        vals = compute(masks[todo])
        for i, v in zip(todo, vals.tolist()):
            p.cache[keys[i]] = v
        for i in miss:
            out[i] = p.cache[keys[i]]
    return out


def _scored_splits(p: Problem, ms: np.ndarray, score) -> tuple[np.ndarray, np.ndarray, tuple | None]:
    """Leaf objectives of ``ms (M, W)`` and every split of the nodes that a split could still improve.

    A node is active when its leaf cost exceeds ``2 * gamma`` (two leaves cost at least that). Returns
    ``(out (M,), active (A,), split)`` with ``split = (left, right, valid, sums)``: the children ``(A, F, W)``,
    which splits are valid ``(A, F)``, and ``sums[a, f] = score(left) + score(right)`` (int64 max where invalid);
    ``split`` is None when no active node has a valid split. ``score`` maps ``(n, W)`` subproblems to ``(n,)``.
    """
    out = leaf_cost(p.gamma, class_counts(p, ms))
    active = np.flatnonzero(out > 2 * p.gamma)
    if len(active) == 0:
        return out, active, None
    left, right, valid = _all_children(p, ms[active])
    r, f = np.nonzero(valid)
    if len(r) == 0:
        return out, active, None
    both = score(np.concatenate([left[r, f], right[r, f]]))
    sums = np.full(valid.shape, np.iinfo(np.int64).max)
    sums[r, f] = both[: len(r)] + both[len(r) :]
    return out, active, (left, right, valid, sums)


def exact(p: Problem, masks: np.ndarray, depth: int) -> np.ndarray:
    """Optimal objective at depth <= ``depth`` by exhaustive dynamic programming over cached subproblems."""
    if depth <= 0:
        return leaf_cost(p.gamma, class_counts(p, masks))
    if depth == 1:
        return exact1(p, masks)
    if depth == 2:
        return _memo(p, masks, 2, 1, lambda ms: exact2(p, ms))

    def compute(ms: np.ndarray) -> np.ndarray:
        out, active, split = _scored_splits(p, ms, lambda ch: exact(p, ch, depth - 1))
        if split is not None:
            out[active] = np.minimum(out[active], split[3].min(axis=1))
        return out

    return _memo(p, masks, depth, depth - 1, compute)


def lookahead(p: Problem, masks: np.ndarray, depth: int, k: int) -> np.ndarray:
    """Generalised LicketySPLIT with ``k``-step lookahead (§3, Definition 3.1; ``k = 1`` is LicketySPLIT).

    At a node: for every feature, score the split by the ``(k-1)``-lookahead proxies of its two children (greedy
    for ``k = 1``), take the first best feature, recurse with lookahead ``k`` into its children, and return the
    minimum of that split's objective and the leaf's. Depth 1 is solved exactly; ``k >= depth - 1`` is exact.

    Args:
        masks: ``(M, W)`` subproblems. depth: remaining depth budget. k: lookahead (``<= 0`` means greedy).

    Returns:
        ``(M,)`` int64 proxy objectives (each the objective of a concrete tree, so an upper bound on the optimum).
    """
    if len(masks) == 0:
        return np.zeros(0, dtype=np.int64)
    if k <= 0:
        return greedy(p, masks, depth)
    if depth <= 0:
        return leaf_cost(p.gamma, class_counts(p, masks))
    if depth == 1:
        return exact1(p, masks)
    k = min(k, depth - 1)
    if k == depth - 1:
        return exact(p, masks, depth)

    def compute(ms: np.ndarray) -> np.ndarray:
        out, active, split = _scored_splits(p, ms, lambda ch: lookahead(p, ch, depth - 1, k - 1))
        if split is None:
            return out
        left, right, valid, sums = split
        best = sums.argmin(axis=1)
        has = valid[np.arange(len(active)), best]
        rows = np.flatnonzero(has)
        if len(rows):
            bl = left[rows, best[rows]]
            br = right[rows, best[rows]]
            vals = lookahead(p, np.concatenate([bl, br]), depth - 1, k)
            idx = active[rows]
            out[idx] = np.minimum(out[idx], vals[: len(rows)] + vals[len(rows) :])
        return out

    return _memo(p, masks, depth, k, compute)


def proxy(p: Problem, masks: np.ndarray, depth: int) -> np.ndarray:
    """``Proxy(D, d)`` as configured by ``p.lookahead_k``: leaf (-1), greedy (0) or ``lookahead(k)`` (>= 1)."""
    masks = np.atleast_2d(masks)
    if p.lookahead_k < 0:
        return leaf_cost(p.gamma, class_counts(p, masks))
    return lookahead(p, masks, depth, p.lookahead_k)
