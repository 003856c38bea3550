"""The PRAXIS objective on packed data: the problem, its leaf penalty, class and split counts.

Heile et al., "From Rashomon Theory to PRAXIS" (ICML 2026), §3. A tree ``t`` on a subproblem ``D`` (a set of rows)
costs ``Obj(t, D) = gamma * leaves(t) + #{i in D : t(x_i) != y_i}`` with the integer ``gamma = round(lambda * n)``.
Subproblems are batches of row bitsets: ``masks`` is ``(M, W)`` uint64 (see ``bitset.py``); every count here is one
``AND`` and one ``bitwise_count`` per class over a whole batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from zoo.methods.praxis.bitset import full_mask, pack_columns, pack_vector, popcount
from zoo.methods.praxis.kernel import split_counts as compiled_split_counts

_CHUNK_WORDS = 1 << 19  # largest (masks x features x words) block evaluated in one numpy call (4 MiB of uint64)


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
        backend: ``"numpy"`` (the reference) or ``"numba"``: CONSTRUCT of depth-2 OR nodes by the compiled kernel
            (``kernel.or2``); the sets are the same.
    """

    X: np.ndarray
    notX: np.ndarray
    Y: np.ndarray
    n: int
    gamma: int
    lookahead_k: int = 1
    cache: dict = field(default_factory=dict)
    backend: str = "numpy"

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
    return Problem(
        X=bits,
        notX=(~bits) & root,
        Y=Y,
        n=int(X.shape[0]),
        gamma=gamma_from_lambda(lam, X.shape[0]),
        lookahead_k=int(lookahead_k),
    )


def batch_chunks(m: int, per_row_words: int):
    """Slices of ``range(m)`` whose blocks of ``per_row_words`` uint64 words each stay within ``_CHUNK_WORDS``."""
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
    if p.backend == "numba":
        return compiled_split_counts(np.ascontiguousarray(masks), p.X, p.Y)
    m, w = masks.shape
    out = np.empty((m, p.n_features, p.n_classes), dtype=np.int64)
    for sl in batch_chunks(m, p.n_features * w):
        left = masks[sl, None, :] & p.X[None, :, :]
        for c in range(p.n_classes):
            out[sl, :, c] = popcount(left & p.Y[c])
    return out


def leaf_cost(gamma: int, counts: np.ndarray) -> np.ndarray:
    """Objective of the best single leaf: ``gamma + n - max_c n_c`` (0 for an empty set). ``(..., C) -> (...)``."""
    total = counts.sum(axis=-1)
    return np.where(total > 0, gamma + total - counts.max(axis=-1), 0)
