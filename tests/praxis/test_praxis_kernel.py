"""The compiled depth-2 kernel (numba) against the numpy reference: the same set on every shipped setting."""

import numpy as np
import pytest
import yaml
from praxis_brute import random_data

from zoo.core.data import repo_root
from zoo.methods.praxis.construct import LazySplitsNode
from zoo.methods.praxis.datamodule import BinaryCSVDataModule
from zoo.methods.praxis.enumerate import _hist, count_trees, histogram, iter_trees, tree_at
from zoo.methods.praxis.experiments import RECIPES
from zoo.methods.praxis.rashomon import fit_rashomon, resolve_backend

pytest.importorskip("numba")


def _recipe_data(name):
    cfg = yaml.safe_load((repo_root() / "recipes" / f"{name}.yaml").read_text())
    d = dict(cfg["data"], path=str(repo_root() / cfg["data"]["path"]))
    dm = BinaryCSVDataModule(**d)
    dm.setup()
    return dm.X_train, dm.y_train, cfg["model"]


def _same_set(X, y, lam, depth, eps, **kw):
    ref = fit_rashomon(X, y, lam, depth, eps, backend="numpy", **kw)
    fast = fit_rashomon(X, y, lam, depth, eps, backend="numba", **kw)
    (o1, c1), (o2, c2) = histogram(ref.root), histogram(fast.root)
    assert np.array_equal(o1, o2) and list(c1) == list(c2)
    assert (fast.n_trees, fast.min_objective, fast.n_within_best) == (ref.n_trees, ref.min_objective, ref.n_within_best)
    n = ref.n_trees
    first = [t for _, (_, t) in zip(range(200), iter_trees(ref.root))]
    assert first == [t for _, (_, t) in zip(range(200), iter_trees(fast.root))]
    for i in {0, n // 3, n // 2, n - 1} if n else ():
        assert tree_at(ref.root, i) == tree_at(fast.root, i)
    return ref, fast


@pytest.mark.parametrize("name", RECIPES)
def test_kernel_equals_numpy_on_every_recipe_tiny(name):
    """Every shipped recipe's data and settings on its first 150 rows at depth <= 3."""
    X, y, m = _recipe_data(name)
    _same_set(X[:150], y[:150], m["lam"], min(m["depth"], 3), m["eps"], lookahead_k=m["lookahead_k"])


@pytest.mark.parametrize("n_classes,majority", [(2, True), (3, False), (3, True)])
def test_kernel_multiclass_and_majority_leaves(n_classes, majority):
    X, y = random_data(7, n=90, n_features=6, n_classes=n_classes)
    for lookahead_k in (0, 1, 2):
        _same_set(X, y, 0.02, 3, 0.2, lookahead_k=lookahead_k, majority_leaf_only=majority)


def test_kernel_histograms_match_the_nodes_it_defers():
    """Each compiled depth-2 node's histogram equals the one counted from its children once they are built."""
    X, y = random_data(3, n=120, n_features=7)
    fast = fit_rashomon(X, y, 0.01, 4, 0.3, backend="numba")
    lazy = [nd for nd in _walk(fast.root) if isinstance(nd, LazySplitsNode)]
    assert lazy
    for nd in lazy:
        stored = nd.hist
        nd.hist = None
        nd.splits  # noqa: B018  (builds the children)
        assert _hist(nd) == stored
    assert count_trees(fast.root) == fit_rashomon(X, y, 0.01, 4, 0.3, backend="numpy").n_trees


def _walk(node, seen=None):
    """Every node of the graph once, without building the children of compiled nodes (those are yielded as is)."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    yield node
    if isinstance(node, LazySplitsNode) and node._make is not None:
        return
    for _, lnode, rnode in node.splits:
        yield from _walk(lnode, seen)
        yield from _walk(rnode, seen)


def test_backend_choice():
    assert resolve_backend("auto") == "numba" and resolve_backend("numpy") == "numpy"
    with pytest.raises(ValueError):
        resolve_backend("cuda")


@pytest.mark.slow
@pytest.mark.parametrize("name", RECIPES)
def test_kernel_equals_numpy_on_every_recipe_full(name):
    X, y, m = _recipe_data(name)
    _same_set(X, y, m["lam"], m["depth"], m["eps"], lookahead_k=m["lookahead_k"])
