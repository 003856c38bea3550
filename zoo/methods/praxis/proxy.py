"""The PRAXIS objective and its proxies: leaf cost, greedy completion, LicketySPLIT with k-step lookahead.

Heile et al., "From Rashomon Theory to PRAXIS" (ICML 2026), §3 and Definition 3.1. A tree ``t`` on a subproblem ``D``
(a set of rows) costs ``Obj(t, D) = gamma * leaves(t) + #{i in D : t(x_i) != y_i}`` with the integer
``gamma = round(lambda * n)``. A *proxy* ``Proxy(D, d)`` is the objective of one concrete tree of depth <= d built
cheaply, so it is an upper bound on the best objective at depth ``d``. The default proxy is LicketySPLIT with
one-step lookahead: at each node choose the split whose two greedy completions are best, recurse with the same
rule into its children, and keep the better of "leaf here" and "that split".

Every function here works on a batch of subproblems at once: ``masks`` is ``(M, W)`` uint64 (see ``bitset.py``)
and the result is ``(M,)`` int64. Splits are evaluated for all features of all masks with one ``AND`` and one
``bitwise_count`` per class. Tie-breaking follows the reference package ``tree-praxis`` (first feature wins, binary
entropy clamped to ``[1e-12, 1 - 1e-12]``) so that the proxy values, and hence the pruned sets, agree with it.

The file is over 400 lines because the proxies (greedy, exact, lookahead) and the split counts they are built from
share one memo (``Problem.cache``) and one chunking rule and are checked together against Definition 3.1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from zoo.methods.praxis.bitset import full_mask, mask_key, pack_columns, pack_vector, popcount

_CHUNK_WORDS = 1 << 19  # largest (masks x features x words) block evaluated in one numpy call (4 MiB of uint64)
_EPS = 1e-12


@dataclass
class Problem:
    """A binarised data set packed for PRAXIS, with the proxy cache.

    Attributes:
        X: ``(F, W)`` uint64, bitset of the rows where feature ``f`` is 1 (the "left"/true branch).
        notX: ``(F, W)`` uint64, the rows where feature ``f`` is 0 (padding bits cleared).
        Y: ``(C, W)`` uint64, bitset of the rows of class ``c``.
        n: number of rows.
        gamma: integer leaf penalty ``round(lambda * n)`` (ties away from zero, as ``llround``).
        lookahead_k: proxy lookahead; ``-1`` leaf only, ``0`` greedy, ``k >= 1`` LicketySPLIT with k-step lookahead,
            ``k >= depth - 1`` the exact optimum (then the enumeration is exact).
        cache: subproblem cache ``(depth, k, mask_key(bitset)) -> proxy objective`` (``bitset.mask_key``: the
            bytes, or their 128-bit digest; the reference package keys a 64-bit hash).
    """

    X: np.ndarray
    notX: np.ndarray
    Y: np.ndarray
    n: int
    gamma: int
    lookahead_k: int = 1
    cache: dict = field(default_factory=dict)

    @property
    def n_features(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.Y.shape[0])

    @property
    def root(self) -> np.ndarray:
        """``(W,)`` bitset of all rows."""
        return full_mask(self.n)


def gamma_from_lambda(lam: float, n: int) -> int:
    """``gamma = llround(lambda * n)``: the per-leaf penalty in misclassification units (§3; C++ ``llround``).

    Raises:
        ValueError: negative ``lam`` or ``n < 1``.
    """
    if lam < 0 or n < 1:
        raise ValueError(f"need lambda >= 0 and n >= 1, got lambda={lam}, n={n}")
    return math.floor(lam * n + 0.5)


def make_problem(X: np.ndarray, y: np.ndarray, lam: float, lookahead_k: int = 1) -> Problem:
    """Pack binary features and integer labels.

    Args:
        X: ``(n, F)`` 0/1 features.
        y: ``(n,)`` labels ``0..C-1`` with every class present up to the largest (``C >= 1``).
        lam: regularisation ``lambda`` per leaf, as a fraction of ``n``.
        lookahead_k: see ``Problem.lookahead_k``.

    Raises:
        ValueError: shapes that disagree, non-binary ``X``, labels that are not ``0..C-1``.
    """
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ValueError(f"X must be (n, F) and y (n,) with n >= 1; got X {X.shape}, y {y.shape}")
    if not np.issubdtype(y.dtype, np.integer) or y.min() < 0:
        raise ValueError("y must hold integer class labels 0..C-1")
    n_classes = int(y.max()) + 1
    bits = pack_columns(X)
    root = full_mask(X.shape[0])
    Y = np.stack([pack_vector(y == c) for c in range(n_classes)])
    return Problem(X=bits, notX=(~bits) & root, Y=Y, n=int(X.shape[0]), gamma=gamma_from_lambda(lam, X.shape[0]),
                   lookahead_k=int(lookahead_k))


def _chunks(m: int, per_row_words: int):
    step = max(1, _CHUNK_WORDS // max(1, per_row_words))
    for start in range(0, m, step):
        yield slice(start, min(m, start + step))


def class_counts(p: Problem, masks: np.ndarray) -> np.ndarray:
    """Rows of each class in each subproblem: ``(M, W) -> (M, C)`` int64."""
    return popcount(masks[:, None, :] & p.Y[None, :, :])


def split_counts(p: Problem, masks: np.ndarray) -> np.ndarray:
    """Class counts on the left (feature = 1) side of every split: ``(M, W) -> (M, F, C)`` int64.

    The right side is ``class_counts(masks)[:, None, :] - split_counts(masks)``.
    """
    m, w = masks.shape
    out = np.empty((m, p.n_features, p.n_classes), dtype=np.int64)
    for sl in _chunks(m, p.n_features * w):
        left = masks[sl, None, :] & p.X[None, :, :]
        for c in range(p.n_classes):
            out[sl, :, c] = popcount(left & p.Y[c])
    return out


def leaf_cost(gamma: int, counts: np.ndarray) -> np.ndarray:
    """Objective of the best single leaf: ``gamma + n - max_c n_c`` (0 for an empty set). ``(..., C) -> (...)``."""
    total = counts.sum(axis=-1)
    return np.where(total > 0, gamma + total - counts.max(axis=-1), 0)


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
    for sl in _chunks(m, n_feat * n_feat * w):
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
    for sl in _chunks(m, n_feat * n_feat * w):
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
    right = best(tn - sn, tp - sp, sn_g - pn, sp_g - pp, tn[:, :, None] - sn_f - sn_g + pn,
                 tp[:, :, None] - sp_f - sp_g + pp)
    single = np.stack([sn - sp, sp], axis=-1)
    total = np.stack([total_n - total_p, total_p], axis=-1)
    return left, right, single, total


def exact2(p: Problem, masks: np.ndarray) -> np.ndarray:
    """Best objective at depth <= 2, exactly: ``min(leaf(D), min_f Obj1(D & f) + Obj1(D & not f))``, with the
    children's ``Obj1`` from ``depth1_children`` (the reference's depth-2 special solver, vectorised)."""
    left, right, single, total = depth1_children(p, masks)
    n_left = single.sum(-1)
    valid = (n_left > 0) & (n_left < total.sum(-1)[:, None])
    out = leaf_cost(p.gamma, total)
    if valid.shape[1]:
        out = np.minimum(out, np.where(valid, left + right, np.iinfo(np.int64).max // 4).min(1))
    return out


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
        out[rows] = np.minimum(out[rows], both[: len(rows)] + both[len(rows):])
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
    sums[r, f] = both[: len(r)] + both[len(r):]
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
            out[idx] = np.minimum(out[idx], vals[: len(rows)] + vals[len(rows):])
        return out

    return _memo(p, masks, depth, k, compute)


def proxy(p: Problem, masks: np.ndarray, depth: int) -> np.ndarray:
    """``Proxy(D, d)`` as configured by ``p.lookahead_k``: leaf (-1), greedy (0) or ``lookahead(k)`` (>= 1)."""
    masks = np.atleast_2d(masks)
    if p.lookahead_k < 0:
        return leaf_cost(p.gamma, class_counts(p, masks))
    return lookahead(p, masks, depth, p.lookahead_k)
