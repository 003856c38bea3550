"""Trees as complete-binary-tree arrays: how a fitted set is stored (checkpoint buffers) and evaluated in batch.

Node ``i`` has children ``2i+1`` (rows with the feature = 1) and ``2i+2``; ``feature[i]`` is the split feature,
``LEAF`` for a leaf (its class in ``value[i]``) or ``UNUSED`` for a slot below a leaf.
"""

from __future__ import annotations

import numpy as np

LEAF, UNUSED = -1, -2


def encode_trees(trees: list, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Trees -> complete-binary-tree arrays (node ``i`` has children ``2i+1`` (feature = 1) and ``2i+2``).

    Returns:
        ``feature (T, 2**(depth+1)-1)`` int16 with ``-1`` for a leaf and ``-2`` for an unused slot, and
        ``value`` of the same shape holding each leaf's class.
    """
    size = 2 ** (depth + 1) - 1
    feat = np.full((len(trees), size), UNUSED, dtype=np.int16)
    val = np.zeros((len(trees), size), dtype=np.int16)

    def put(t_idx, t, i):
        if isinstance(t, int):
            feat[t_idx, i], val[t_idx, i] = LEAF, t
        else:
            feat[t_idx, i] = t[0]
            put(t_idx, t[1], 2 * i + 1)
            put(t_idx, t[2], 2 * i + 2)

    for k, t in enumerate(trees):
        put(k, t, 0)
    return feat, val


def decode_tree(feature: np.ndarray, value: np.ndarray, i: int = 0):
    """Inverse of ``encode_trees`` for one row."""
    if feature[i] == LEAF:
        return int(value[i])
    return (int(feature[i]), decode_tree(feature, value, 2 * i + 1), decode_tree(feature, value, 2 * i + 2))


def predict_encoded(feature: np.ndarray, value: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Predictions of encoded trees: ``feature, value (T, S)``, ``X (n, F)`` 0/1 -> ``(T, n)`` int64 classes."""
    feature = np.asarray(feature, dtype=np.int64)
    Xb = np.asarray(X).astype(bool)
    n_trees, n = feature.shape[0], Xb.shape[0]
    idx = np.zeros((n_trees, n), dtype=np.int64)
    rows = np.arange(n)[None, :]
    depth = int(np.log2(feature.shape[1] + 1)) - 1
    for _ in range(depth):
        f = np.take_along_axis(feature, idx, 1)
        inner = f >= 0
        go_left = Xb[rows, np.maximum(f, 0)]
        idx = np.where(inner, 2 * idx + 1 + (~go_left), idx)
    return np.take_along_axis(np.asarray(value, dtype=np.int64), idx, 1)
