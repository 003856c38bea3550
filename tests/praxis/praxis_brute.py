"""Brute-force references for the PRAXIS tests: every tree of depth <= d, with its objective computed directly."""

from __future__ import annotations

import numpy as np


def all_trees(X: np.ndarray, rows: np.ndarray, depth: int, n_classes: int):
    """Every tree on ``rows`` with depth <= ``depth`` whose splits leave both sides non-empty (PRAXIS' search space)."""
    out = list(range(n_classes))
    if depth == 0:
        return out
    for f in range(X.shape[1]):
        sel = X[rows, f].astype(bool)
        lrows, rrows = rows[sel], rows[~sel]
        if len(lrows) == 0 or len(rrows) == 0:
            continue
        for lt in all_trees(X, lrows, depth - 1, n_classes):
            for rt in all_trees(X, rrows, depth - 1, n_classes):
                out.append((f, lt, rt))
    return out


def random_data(seed: int, n: int = 40, n_features: int = 4, n_classes: int = 2):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, size=(n, n_features)).astype(np.uint8)
    y = ((X[:, 0] ^ X[:, 1]) | (rng.random(n) < 0.2)).astype(int) % n_classes
    if n_classes > 2:
        y = rng.integers(0, n_classes, size=n)
        y[:n_classes] = np.arange(n_classes)
    return X, y
