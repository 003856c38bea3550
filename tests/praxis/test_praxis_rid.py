"""Rashomon importance distribution: model reliance by hand and against every permutation, weights, quantiles."""

import itertools

import numpy as np
import pytest
from praxis_brute import all_trees, random_data

from zoo.methods.praxis.encoding import encode_trees, predict_encoded
from zoo.methods.praxis.enumerate import predict_tree
from zoo.methods.praxis.rid import RID, model_reliance, rashomon_importance, variable_groups


def test_predict_encoded_matches_tree_walk():
    X, _ = random_data(0, n=30, n_features=3)
    trees = all_trees(X, np.arange(30), 2, 2)[::7]
    feat, val = encode_trees(trees, 2)
    preds = predict_encoded(feat, val, X)
    for t, p in zip(trees, preds):
        assert np.array_equal(p, predict_tree(t, X))


def test_model_reliance_by_hand():
    # tree: x0 ? 1 : 0 on 4 rows; y = x0, so the tree is perfect (error 0).
    X = np.array([[1, 0], [1, 1], [0, 0], [0, 1]], dtype=np.uint8)
    y = np.array([1, 1, 0, 0])
    feat, val = encode_trees([(0, 1, 0)], 1)
    mr = model_reliance(feat, val, X, y, [[0], [1]])
    # permuting x0: each row gets x0 = 1 with probability 2/4, wrong half the time -> error 0.5; x1 unused -> 0
    assert mr == pytest.approx(np.array([[0.5, 0.0]]))


def test_model_reliance_is_the_mean_over_all_permutations():
    X, y = random_data(2, n=6, n_features=3)
    X[:, 2] = X[:, 0] ^ 1  # a two-column variable {0, 2}, permuted as a block
    trees = [(0, 1, (1, 0, 1)), (1, (2, 1, 0), 0), (2, 0, 1)]
    feat, val = encode_trees(trees, 2)
    groups = [[0, 2], [1]]
    ours = model_reliance(feat, val, X, y, groups)
    base = (predict_encoded(feat, val, X) != y).mean(1)
    for v, cols in enumerate(groups):
        errs = []
        for perm in itertools.permutations(range(len(y))):
            Xp = X.copy()
            Xp[:, cols] = X[list(perm)][:, cols]
            errs.append((predict_encoded(feat, val, Xp) != y).mean(1))
        assert ours[:, v] == pytest.approx(np.mean(errs, axis=0) - base)


def test_rid_weights_quantiles_and_cdf():
    # bootstrap 1: two trees with reliance 0 and 1; bootstrap 2: one tree with 0.5 -> weights 1/4, 1/4, 1/2
    rid = RID(["a"], [np.array([[0.0], [1.0]]), np.array([[0.5]])], [2, 1])
    vals, w = rid.samples()
    assert w.sum() == pytest.approx(1.0) and sorted(w) == [0.25, 0.25, 0.5] and vals.shape == (3, 1)
    row = rid.summary()[0]
    assert row["mean"] == pytest.approx(0.5) and row["q50"] == 0.5 and row["q05"] == 0.0 and row["q95"] == 1.0
    assert row["p_positive"] == pytest.approx(0.75) and rid.cdf(0, 0.0) == pytest.approx(0.25)


def test_rid_finds_the_informative_variable():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(120, 4)).astype(np.uint8)
    y = (X[:, 1] ^ (rng.random(120) < 0.1)).astype(int)
    rid = rashomon_importance(X, y, 0.02, 2, 0.1, n_bootstrap=4, max_trees=50, seed=1)
    again = rashomon_importance(X, y, 0.02, 2, 0.1, n_bootstrap=4, max_trees=50, seed=1)
    means = [r["mean"] for r in rid.summary()]
    assert means == [r["mean"] for r in again.summary()]
    assert np.argmax(means) == 1 and means[1] > 0.3 and len(rid.values) == 4
    with pytest.raises(ValueError):
        rashomon_importance(X, y, 0.02, 2, 0.1, n_bootstrap=0)


def test_variable_groups_follow_the_binarisation_spec():
    spec = [
        {"kind": "threshold", "column": "age", "threshold": 30},
        {"kind": "onehot", "column": "sex", "value": "m"},
        {"kind": "threshold", "column": "age", "threshold": 50},
    ]
    assert variable_groups(["a", "b", "c"], spec) == (["age", "sex"], [[0, 2], [1]])
    assert variable_groups(["a", "b"], None) == (["a", "b"], [[0], [1]])
