"""Adapters to the two reference enumerators, for correctness tests and benchmarks (ours, not the paper's).

- ``tree-praxis`` (the authors' C++ package, ``from praxis import PRAXIS``): same objective and depth convention.
- ``treefarms`` (exact Rashomon sets, ``from treefarms import TREEFARMS``): objective ``lambda * leaves + error rate``,
  bound ``(1 + eps) * optimum``, and **a root-only tree has depth 1**, so PRAXIS depth ``d`` is TreeFARMS
  ``depth_budget = d + 1`` (notes §6). TreeFARMS drops trees with trivial splits by default, so recall is measured as
  the share of the TreeFARMS set that PRAXIS recovers, on canonical leaf-path sets (``enumerate.tree_paths``).

Both packages print to the C-level stdout; ``quiet_stdout`` silences it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

import numpy as np
import pandas as pd

from zoo.methods.praxis.problem import gamma_from_lambda


@contextlib.contextmanager
def quiet_stdout():
    """Redirect file descriptor 1 (and ``sys.stdout``) to ``/dev/null`` for the duration of the block."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def run_tree_praxis(
    X: np.ndarray, y: np.ndarray, lam: float, depth: int, eps: float, lookahead_k: int = 1, max_trees: int = 0
) -> dict:
    """Fit ``tree-praxis`` with the same settings.

    Returns:
        ``{"n_trees", "min_objective", "histogram": [(obj, count)], "seconds", "trees": [canonical] (first
        max_trees)}``.
    """
    from praxis import PRAXIS

    model = PRAXIS()
    t0 = time.perf_counter()
    with quiet_stdout():
        model.fit(
            np.asarray(X, dtype=np.uint8),
            np.asarray(y, dtype=int),
            lambda_reg=lam,
            depth_budget=depth,
            rashomon_mult=eps,
            lookahead_k=lookahead_k,
        )
    seconds = time.perf_counter() - t0
    n = int(model.count_trees())
    trees = [praxis_paths_to_canonical(*model.get_tree_paths(i)) for i in range(min(n, max_trees))]
    return {
        "n_trees": n,
        "min_objective": int(model.get_min_objective()),
        "histogram": [(int(o), int(c)) for o, c in model.get_root_histogram()],
        "seconds": seconds,
        "trees": trees,
    }


def praxis_paths_to_canonical(paths, preds) -> frozenset:
    """``tree-praxis`` signed 1-based literals (+f: feature f-1 is 1) -> canonical leaf-path set."""
    return frozenset(
        (frozenset((abs(v) - 1, 1 if v > 0 else 0) for v in path), int(p)) for path, p in zip(paths, preds)
    )


def treefarms_source_to_tree(src: dict):
    """A TreeFARMS JSON tree (``feature``/``true``/``false``/``prediction``) -> our ``(feature, left, right)`` form.

    Raises:
        ValueError: a split that does not test ``feature == true`` on a 0/1 column.
    """
    if "prediction" in src:
        return int(src["prediction"])
    if src.get("relation") != "==" or str(src.get("reference")).lower() not in ("true", "1"):
        raise ValueError(f"unexpected TreeFARMS split { ({k: src[k] for k in ('feature', 'relation', 'reference')}) }")
    return (int(src["feature"]), treefarms_source_to_tree(src["true"]), treefarms_source_to_tree(src["false"]))


def run_treefarms(
    X: np.ndarray, y: np.ndarray, lam: float, depth: int, eps: float, time_limit: int = 0, max_trees: int = 2_000_000
) -> dict:
    """Fit TreeFARMS on the same data with PRAXIS depth ``depth`` (TreeFARMS ``depth_budget = depth + 1``) and
    regularisation ``round(lam * n) / n``, the exact TreeFARMS equivalent of PRAXIS' integer leaf penalty.

    Returns:
        ``{"n_trees", "seconds", "trees": [(feature, left, right) trees] (first max_trees), "timeout"}``.
    """
    from treefarms import TREEFARMS

    cols = [f"f{j}" for j in range(X.shape[1])]
    Xdf = pd.DataFrame(np.asarray(X, dtype=int), columns=cols)
    yser = pd.Series(np.asarray(y, dtype=int), name="label")
    # PRAXIS charges the integer gamma = round(lambda n) per leaf; giving TreeFARMS gamma / n makes the two
    # objectives identical up to the factor n, so both rank trees the same way (ours)
    reg = gamma_from_lambda(lam, len(y)) / len(y)
    config = {
        "regularization": reg,
        "rashomon_bound_multiplier": float(eps),
        "depth_budget": int(depth) + 1,
        "verbose": False,
        "time_limit": int(time_limit),
    }
    if reg < 1.0 / len(y):
        config["allow_small_reg"] = True
    model = TREEFARMS(config)
    t0 = time.perf_counter()
    with quiet_stdout():
        model.fit(Xdf, yser)
    seconds = time.perf_counter() - t0
    n = int(model.get_tree_count())
    trees = [treefarms_source_to_tree(model[i].source) for i in range(min(n, max_trees))]
    return {"n_trees": n, "seconds": seconds, "trees": trees, "timeout": bool(model.timeout)}


def within_bound(p, trees: list, eps: float) -> tuple[list, list[int]]:
    """The trees of ``trees`` inside the exact Rashomon set ``Obj(t) <= (1 + eps) * min Obj`` (integer units).

    TreeFARMS' output can hold trees a few units above ``(1 + eps)`` times its optimum (its bound is applied in
    floating point to its own scaled objective); recall is measured on the trees within the common definition
    (ours). ``p`` is the ``proxy.Problem`` of the data.

    Returns:
        ``(kept trees, objectives of all trees)``.
    """
    from zoo.methods.praxis.enumerate import tree_cost

    memo: dict = {}
    objs = [tree_cost(p, t, p.root, memo) for t in trees]
    if not objs:
        return [], []
    limit = (1.0 + eps) * min(objs)
    return [t for t, o in zip(trees, objs) if o <= limit + 1e-9], objs


def recall(reference_trees, ours_trees) -> float:
    """Share of ``reference_trees`` (canonical forms) present in ``ours_trees``; 1.0 for an empty reference."""
    ref = set(reference_trees)
    if not ref:
        return 1.0
    return len(ref & set(ours_trees)) / len(ref)
