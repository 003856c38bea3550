"""Rashomon importance distribution (RID): bootstrap model reliance over Rashomon sets.

Donnelly, McTavish, Huang & Rudin, "The Rashomon Importance Distribution" (NeurIPS 2023), over PRAXIS sets (Heile
et al., ICML 2026; the authors' package offers it as ``compute_rid``). For bootstrap samples ``D_b`` of the data (``b = 1..B``), build the Rashomon set
``R_b`` of ``D_b`` and compute, for every tree ``t`` in it and every variable ``v``, the subtractive model reliance

    ``MR_v(t, D_b) = E_pi[ loss(t, D_b with v's columns permuted by pi) ] - loss(t, D_b)``

(0-1 loss, as a share of rows). RID_v is the distribution of ``MR_v`` with each bootstrap weighted ``1 / B`` and each
tree of ``R_b`` weighted ``1 / (B |R_b|)``; its CDF, mean and quantiles are what is reported.

Ours, labelled: (1) the expectation over permutations is taken exactly instead of by a few random scrambles: a
uniform permutation gives row ``i`` the block of values of a uniformly drawn row, so
``E_pi[loss] = mean_i sum_u freq(u) loss(t(x_i with v = u), y_i)`` over the distinct value blocks ``u`` of ``v``;
(2) ``R_b`` is the set re-thresholded to ``(1 + eps)`` of the best objective found on ``D_b``, as the reference
package does, and when it holds more than ``max_trees`` trees a uniform sample of ``max_trees`` of them (drawn by
index with ``enumerate.tree_at``) stands for it. A variable is an original column: the 0/1 columns that threshold
guessing or one-hot encoding made from one column are permuted together.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from zoo.methods.praxis.encoding import encode_trees, predict_encoded
from zoo.methods.praxis.enumerate import tree_at
from zoo.methods.praxis.rashomon import fit_rashomon

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def model_reliance(
    feature: np.ndarray, value: np.ndarray, X: np.ndarray, y: np.ndarray, groups: list[list[int]]
) -> np.ndarray:
    """Subtractive model reliance of each tree on each variable, exact over permutations (ours, see module doc).

    Args:
        feature, value: ``(T, S)`` encoded trees (``encode_trees``). X: ``(n, F)`` 0/1 rows. y: ``(n,)`` labels.
        groups: per variable, the indices of its 0/1 columns.

    Returns:
        ``(T, V)`` float64: permuted minus original misclassification rate (share of rows).
    """
    X = np.asarray(X, dtype=np.uint8)
    y = np.asarray(y)
    base = (predict_encoded(feature, value, X) != y[None]).mean(1)
    out = np.zeros((feature.shape[0], len(groups)))
    for v, cols in enumerate(groups):
        blocks, counts = np.unique(X[:, cols], axis=0, return_counts=True)
        for block, count in zip(blocks, counts):
            Xu = X.copy()
            Xu[:, cols] = block
            out[:, v] += count / len(y) * (predict_encoded(feature, value, Xu) != y[None]).mean(1)
        out[:, v] -= base
    return out


@dataclass
class RID:
    """Samples of the Rashomon importance distribution.

    Attributes:
        variables: variable names (``V``). values: per bootstrap, ``(T_b, V)`` model reliance of its trees.
        set_sizes: per bootstrap, trees in its Rashomon set within ``(1 + eps)`` of its best objective.
    """

    variables: list[str]
    values: list[np.ndarray]
    set_sizes: list[int]

    def samples(self) -> tuple[np.ndarray, np.ndarray]:
        """``(values (N, V), weights (N,))``: every (bootstrap, tree) sample, weights ``1 / (B T_b)`` summing to 1."""
        kept = [v for v in self.values if len(v)]
        vals = np.concatenate(kept) if kept else np.zeros((0, len(self.variables)))
        weights = np.concatenate([np.full(len(v), 1.0 / (len(kept) * len(v))) for v in kept]) if kept else np.zeros(0)
        return vals, weights

    def cdf(self, v: int, x: float) -> float:
        """``P(MR_v <= x)`` under RID."""
        vals, w = self.samples()
        return float(w[vals[:, v] <= x].sum())

    def summary(self) -> list[dict]:
        """Per variable: mean, weighted quantiles (``QUANTILES``) and ``P(MR > 0)``, in variable order."""
        vals, w = self.samples()
        rows = []
        for v, name in enumerate(self.variables):
            order = np.argsort(vals[:, v], kind="stable")
            x, cum = vals[order, v], np.cumsum(w[order])
            qs = {
                f"q{round(q * 100):02d}": float(x[min(np.searchsorted(cum, q - 1e-12), len(x) - 1)]) for q in QUANTILES
            }
            rows.append(
                {"variable": name, "mean": float(w @ vals[:, v]), **qs, "p_positive": float(w[vals[:, v] > 0].sum())}
            )
        return rows


def variable_groups(feature_names: list[str], spec: list[dict] | None) -> tuple[list[str], list[list[int]]]:
    """Variables and their 0/1 columns: the original columns of a binarisation ``spec``, else one per column."""
    if not spec:
        return list(feature_names), [[j] for j in range(len(feature_names))]
    names: list[str] = []
    groups: list[list[int]] = []
    for j, s in enumerate(spec):
        if s["column"] not in names:
            names.append(s["column"])
            groups.append([])
        groups[names.index(s["column"])].append(j)
    return names, groups


def rashomon_importance(
    X: np.ndarray,
    y: np.ndarray,
    lam: float,
    depth: int,
    eps: float,
    groups: list[list[int]] | None = None,
    variables: list[str] | None = None,
    n_bootstrap: int = 10,
    max_trees: int = 200,
    seed: int = 0,
    lookahead_k: int = 1,
    backend: str = "auto",
) -> RID:
    """RID by bootstrap: ``n_bootstrap`` resamples, each one's Rashomon set, model reliance of its trees.

    Args:
        X: ``(n, F)`` 0/1 features. y: ``(n,)`` labels. lam, depth, eps, lookahead_k, backend: as ``fit_rashomon``.
        groups: 0/1 columns of each variable (default: one variable per column). variables: their names.
        n_bootstrap: ``B``. max_trees: trees sampled per set when it holds more (ours). seed: bootstrap and sampling.

    Raises:
        ValueError: ``n_bootstrap < 1`` or ``max_trees < 1``; bad data as ``fit_rashomon``.
    """
    if n_bootstrap < 1 or max_trees < 1:
        raise ValueError(f"need n_bootstrap >= 1 and max_trees >= 1, got {n_bootstrap}, {max_trees}")
    X, y = np.asarray(X, dtype=np.uint8), np.asarray(y, dtype=np.int64)
    groups = groups if groups is not None else [[j] for j in range(X.shape[1])]
    variables = variables if variables is not None else [f"x{j}" for j in range(len(groups))]
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    values, sizes = [], []
    for _ in range(n_bootstrap):
        idx = rng.integers(0, len(y), size=len(y))
        Xb, yb = X[idx], y[idx]
        if len(np.unique(yb)) < 2:  # a one-class resample has no classification problem: skip it
            continue
        yb = np.searchsorted(np.unique(yb), yb)  # labels 0..C-1 of this resample
        rs = fit_rashomon(Xb, yb, lam, depth, eps, lookahead_k, backend=backend)
        n_set = rs.n_within_best
        chosen = range(n_set) if n_set <= max_trees else sorted(pick.sample(range(n_set), max_trees))
        trees = [tree_at(rs.root, i)[1] for i in chosen]
        feat, val = encode_trees(trees, depth)
        values.append(model_reliance(feat, val, Xb, yb, groups))
        sizes.append(n_set)
    return RID(variables, values, sizes)
