"""Counting, best-first enumeration and predictions of the trees held by a PRAXIS AND/OR graph.

A tree of the graph picks, at each OR node, one leaf or one split (AND node), and recursively one tree in each child.
``histogram(node)`` gives, for every objective value, how many trees of the node have it, by convolving the children's
histograms and keeping sums within the node's budget (§3, "counting"). Trees are ordered by objective; ties follow the
graph order (leaves, then splits in feature order, then left-major pairs), the order of the reference package, so
tree ``i`` here is tree ``i`` there. Trees are ``int`` (a leaf predicting that class) or
``(feature, left, right)`` where ``left`` is the subtree for rows with feature = 1.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

import numpy as np

from zoo.methods.praxis.construct import OrNode, rashomon_bound

_SAFE = 1 << 62


def histogram(node: OrNode) -> tuple[np.ndarray, np.ndarray]:
    """Objective histogram of the trees of ``node``.

    Returns:
        ``(objectives, counts)``: sorted int64 objectives and their tree counts (int64, or Python ints in an object
        array once a count could exceed 2**62).
    """
    objs, counts = _hist(node)
    big = bool(counts) and max(counts) >= _SAFE
    return np.array(objs, dtype=np.int64), np.array(counts, dtype=object if big else np.int64)


def _hist(node: OrNode) -> tuple[tuple, tuple]:
    """``histogram`` as two tuples of Python ints, memoised on the node (small, exact, fast to convolve)."""
    if node.hist is not None:
        return node.hist
    acc: dict[int, int] = {}
    for _, cost in node.leaves:
        acc[cost] = acc.get(cost, 0) + 1
    budget = node.budget
    for _, lnode, rnode in node.splits:
        lo, lc = _hist(lnode)
        ro, rc = _hist(rnode)
        if len(lo) * len(ro) <= 256:  # small: plain Python is faster than numpy here
            for a, ca in zip(lo, lc):
                for b, cb in zip(ro, rc):
                    if a + b > budget:
                        break
                    acc[a + b] = acc.get(a + b, 0) + ca * cb
            continue
        lo_a, ro_a = np.array(lo, dtype=np.int64), np.array(ro, dtype=np.int64)
        sums = lo_a[:, None] + ro_a[None, :]
        keep = sums <= budget
        if not keep.any():
            continue
        big = max(lc) * max(rc) * min(len(lc), len(rc)) >= _SAFE
        dt = object if big else np.int64
        prod = np.multiply.outer(np.array(lc, dtype=dt), np.array(rc, dtype=dt))
        objs, inv = np.unique(sums[keep], return_inverse=True)
        tot = np.zeros(len(objs), dtype=dt)
        np.add.at(tot, inv, prod[keep])
        for o, c in zip(objs.tolist(), tot.tolist()):
            acc[o] = acc.get(o, 0) + c
    keys = tuple(sorted(acc))
    node.hist = (keys, tuple(acc[k] for k in keys))
    return node.hist


def count_trees(node: OrNode) -> int:
    """Number of trees in the graph rooted at ``node``."""
    return int(sum(_hist(node)[1]))


def count_within_mult(node: OrNode, mult: float) -> int:
    """Trees with objective ``<= round((1 + mult) * min objective)`` (re-thresholding relative to the best tree found;
    rounding half away from zero, as ``construct.rashomon_bound``)."""
    objs, counts = histogram(node)
    if len(objs) == 0:
        return 0
    thresh = rashomon_bound(int(objs[0]), mult)
    return int(sum(c for o, c in zip(objs.tolist(), counts.tolist()) if o <= thresh))


def _pairs(lnode: OrNode, rnode: OrNode, target: int):
    """``(left objective, right objective, left count, right count)`` with ``l + r == target``, by ascending l."""
    lo, lc = _hist(lnode)
    ro, rc = _hist(rnode)
    for a, ca in zip(lo, lc):
        j = bisect.bisect_left(ro, target - a)
        if j < len(ro) and ro[j] == target - a:
            yield a, ro[j], ca, rc[j]


def trees_with_objective(node: OrNode, target: int) -> Iterator:
    """All trees of ``node`` with objective exactly ``target``, in graph order."""
    for pred, cost in node.leaves:
        if cost == target:
            yield pred
    if target > node.budget:
        return
    for f, lnode, rnode in node.splits:
        for lobj, robj, _, _ in _pairs(lnode, rnode, target):
            for lt in trees_with_objective(lnode, lobj):
                for rt in trees_with_objective(rnode, robj):
                    yield (f, lt, rt)


def iter_trees(node: OrNode, max_objective: int | None = None) -> Iterator[tuple[int, object]]:
    """Best-first enumeration: ``(objective, tree)`` in ascending objective (ties in graph order)."""
    objs, _ = histogram(node)
    for obj in objs.tolist():
        if max_objective is not None and obj > max_objective:
            return
        for t in trees_with_objective(node, obj):
            yield obj, t


def tree_at(node: OrNode, index: int):
    """The ``index``-th tree (0-based) of the enumeration order, found by counting, without enumerating.

    Raises:
        IndexError: ``index`` outside ``[0, count_trees(node))``.
    """
    objs, counts = histogram(node)
    for obj, cnt in zip(objs.tolist(), counts.tolist()):
        if index < cnt:
            return obj, _kth(node, obj, index)
        index -= cnt
    raise IndexError("tree index out of range")


def _kth(node: OrNode, target: int, k: int):
    for pred, cost in node.leaves:
        if cost == target:
            if k == 0:
                return pred
            k -= 1
    for f, lnode, rnode in node.splits:
        for lobj, robj, lcnt, rcnt in _pairs(lnode, rnode, target):
            if k < lcnt * rcnt:
                return (f, _kth(lnode, lobj, k // rcnt), _kth(rnode, robj, k % rcnt))
            k -= lcnt * rcnt
    raise IndexError("tree index out of range for this objective")


def predictions(node: OrNode, Xb: np.ndarray, max_trees: int = 1_000_000) -> tuple[np.ndarray, np.ndarray]:
    """Predictions of every tree, in enumeration order, composed bottom-up over the graph (no per-tree walk).

    Args:
        node: root OR node. Xb: ``(m, F)`` 0/1 features of the rows to predict.
        max_trees: refuse to materialise more trees than this.

    Returns:
        ``(objectives (T,), predictions (T, m) uint8)``.

    Raises:
        ValueError: the set holds more than ``max_trees`` trees.
    """
    total = count_trees(node)
    if total > max_trees:
        raise ValueError(
            f"the Rashomon set holds {total} trees, more than max_trees={max_trees}; lower eps or raise max_trees"
        )
    Xb = np.asarray(Xb).astype(bool)
    memo: dict = {}

    def at(nd: OrNode, obj: int) -> np.ndarray:
        key = (id(nd), obj)
        if key in memo:
            return memo[key]
        parts = [np.full((1, len(Xb)), pred, dtype=np.uint8) for pred, cost in nd.leaves if cost == obj]
        if obj <= nd.budget:
            for f, lnode, rnode in nd.splits:
                col = Xb[:, f]
                for lobj, robj, _, _ in _pairs(lnode, rnode, obj):
                    lp, rp = at(lnode, lobj), at(rnode, robj)
                    parts.append(np.where(col, lp[:, None, :], rp[None, :, :]).reshape(-1, len(Xb)))
        out = np.concatenate(parts) if parts else np.zeros((0, len(Xb)), dtype=np.uint8)
        memo[key] = out
        return out

    objs, counts = histogram(node)
    preds = [at(node, o) for o in objs.tolist()]
    obj_col = np.repeat(objs, np.asarray(counts, dtype=np.int64))
    return obj_col, (np.concatenate(preds) if preds else np.zeros((0, len(Xb)), dtype=np.uint8))


def predict_tree(tree, Xb: np.ndarray) -> np.ndarray:
    """Predictions of one tree on ``(m, F)`` 0/1 rows: ``(m,)`` int64."""
    Xb = np.asarray(Xb).astype(bool)
    out = np.empty(len(Xb), dtype=np.int64)

    def walk(t, rows):
        if isinstance(t, int):
            out[rows] = t
            return
        f, lt, rt = t
        sel = Xb[rows, f]
        walk(lt, rows[sel])
        walk(rt, rows[~sel])

    walk(tree, np.arange(len(Xb)))
    return out


def tree_leaves(tree) -> int:
    """Number of leaves."""
    return 1 if isinstance(tree, int) else tree_leaves(tree[1]) + tree_leaves(tree[2])


def tree_paths(tree) -> frozenset:
    """Canonical form: the set of ``(frozenset of (feature, value) literals, prediction)``, one per leaf.

    Two trees with the same leaves (regions and predictions) have the same canonical form whatever the split order
    or library they came from; recall against other enumerators is measured on this form (ours, see the notes).
    """
    out = []

    def walk(t, lits):
        if isinstance(t, int):
            out.append((frozenset(lits), t))
            return
        f, lt, rt = t
        walk(lt, lits + ((f, 1),))
        walk(rt, lits + ((f, 0),))

    walk(tree, ())
    return frozenset(out)


def feature_usage(node: OrNode, n_features: int) -> np.ndarray:
    """Rashomon importance by usage: for each feature, the number of trees that split on it at least once.

    Computed exactly by counting, per feature ``j``, the trees of the graph with every split on ``j`` removed and
    subtracting from the total (ours; the paper's RID uses bootstrap model reliance instead).

    Returns:
        ``(n_features,)`` object array of Python ints.
    """
    total = count_trees(node)
    out = np.zeros(n_features, dtype=object)
    for j in range(n_features):
        memo: dict = {}
        out[j] = total - _count_without(node, j, memo, node.budget)
    return out


def _count_without(node: OrNode, j: int, memo: dict, cap: int) -> int:
    """Trees of ``node`` with objective <= ``cap`` using no split on feature ``j``."""
    return int(sum(c for o, c in _hist_without(node, j, memo).items() if o <= cap))


def _hist_without(node: OrNode, j: int, memo: dict) -> dict:
    key = id(node)
    if key in memo:
        return memo[key]
    acc: dict[int, int] = {}
    for _, cost in node.leaves:
        acc[cost] = acc.get(cost, 0) + 1
    for f, lnode, rnode in node.splits:
        if f == j:
            continue
        lh, rh = _hist_without(lnode, j, memo), _hist_without(rnode, j, memo)
        for lo, lc in lh.items():
            for ro, rc in rh.items():
                if lo + ro <= node.budget:
                    acc[lo + ro] = acc.get(lo + ro, 0) + lc * rc
    memo[key] = acc
    return acc


def objective(tree, Xb: np.ndarray, y: np.ndarray, gamma: int) -> int:
    """``Obj(t) = gamma * leaves(t) + #{i : t(x_i) != y_i}`` (§3), computed directly from the rows."""
    return int(gamma * tree_leaves(tree) + np.count_nonzero(predict_tree(tree, Xb) != np.asarray(y)))


def contains(p, node: OrNode, mask: np.ndarray, tree, memo: dict | None = None) -> bool:
    """Whether ``tree`` (same structure) is one of the trees of ``node`` for the rows in ``mask``.

    A split tree is in the node when the node has that split, each subtree is in the matching child, and the two
    subtrees' objectives on their rows sum to at most the node's budget (the rule ``histogram`` counts by).

    Args:
        p: the ``proxy.Problem`` the graph was built on. mask: ``(W,)`` rows of ``node``.
        memo: optional dict shared across calls (many trees share subtrees); keyed by node identity and subtree.
    """
    memo = {} if memo is None else memo
    key = (id(node), tree)
    if key in memo:
        return memo[key]
    if isinstance(tree, int):
        found = any(pred == tree for pred, _ in node.leaves)
    else:
        f, lt, rt = tree
        lmask, rmask = mask & p.X[f], mask & p.notX[f]
        found = False
        for g, lnode, rnode in node.splits:
            if g == f:
                cost = tree_cost(p, lt, lmask, memo) + tree_cost(p, rt, rmask, memo)
                found = (
                    cost <= node.budget and contains(p, lnode, lmask, lt, memo) and contains(p, rnode, rmask, rt, memo)
                )
                break
    memo[key] = found
    return found


def tree_cost(p, tree, mask: np.ndarray, memo: dict | None = None) -> int:
    """``Obj(tree)`` on the rows of ``mask`` from bitset counts, memoised on ``(mask, subtree)`` in ``memo``."""
    from zoo.methods.praxis.problem import class_counts

    memo = {} if memo is None else memo
    key = ("cost", mask.tobytes(), tree)
    if key not in memo:
        if isinstance(tree, int):
            counts = class_counts(p, mask[None])[0]
            memo[key] = int(p.gamma + counts.sum() - counts[tree])
        else:
            f, lt, rt = tree
            memo[key] = tree_cost(p, lt, mask & p.X[f], memo) + tree_cost(p, rt, mask & p.notX[f], memo)
    return memo[key]
