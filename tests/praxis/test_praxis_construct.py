import numpy as np
import pytest
from praxis_brute import all_trees, random_data

from zoo.methods.praxis.construct import rashomon_bound
from zoo.methods.praxis.enumerate import (
    count_trees,
    count_within_mult,
    feature_usage,
    histogram,
    iter_trees,
    objective,
    predict_tree,
    predictions,
    tree_at,
    tree_paths,
)
from zoo.methods.praxis.rashomon import fit_rashomon


def test_rashomon_bound_rounding():
    assert rashomon_bound(100, 0.03) == 103
    assert rashomon_bound(2589, 0.03) == 2667  # 2666.67
    assert rashomon_bound(50, 0.01) == 51  # 50.5 rounds away from zero


@pytest.mark.parametrize("seed,depth", [(0, 2), (1, 2), (2, 3)])
def test_exact_proxy_recovers_the_brute_force_rashomon_set(seed, depth):
    """With lookahead k = depth - 1 the proxy is exact, so PRAXIS must return exactly the brute-force set."""
    X, y = random_data(seed, n=24, n_features=3)
    rs = fit_rashomon(X, y, lam=0.04, depth=depth, eps=0.15, lookahead_k=depth - 1)
    brute = {}
    for t in all_trees(X, np.arange(len(y)), depth, 2):
        obj = objective(t, X, y, rs.problem.gamma)
        if obj <= rs.bound:
            brute[t] = obj
    ours = {t: o for o, t in iter_trees(rs.root)}
    assert len(ours) == rs.n_trees  # no duplicates
    assert ours == brute
    assert rs.min_objective == min(brute.values())


def test_enumeration_is_best_first_and_consistent():
    X, y = random_data(5, n=60, n_features=5)
    rs = fit_rashomon(X, y, lam=0.02, depth=3, eps=0.2)
    listed = list(iter_trees(rs.root))
    objs = [o for o, _ in listed]
    assert objs == sorted(objs) and len(listed) == rs.n_trees > 10
    for i in (0, len(listed) // 2, len(listed) - 1):
        assert tree_at(rs.root, i) == listed[i]
    for o, t in listed[:50]:
        assert objective(t, X, y, rs.problem.gamma) == o
    objs_h, counts_h = histogram(rs.root)
    assert sum(counts_h.tolist()) == len(listed) and objs_h[0] == rs.min_objective
    pred_objs, preds = predictions(rs.root, X)
    assert np.array_equal(pred_objs, objs)
    for i in (0, 7, len(listed) - 1):
        assert np.array_equal(preds[i], predict_tree(listed[i][1], X))
    # canonical forms: distinct structures may share a canonical form, never the other way round
    assert len({tree_paths(t) for _, t in listed}) <= len(listed)


def test_count_within_mult_and_feature_usage_by_enumeration():
    X, y = random_data(6, n=60, n_features=5)
    rs = fit_rashomon(X, y, lam=0.02, depth=2, eps=0.3)
    listed = list(iter_trees(rs.root))
    best = listed[0][0]
    for mult in (0.0, 0.05, 0.3):
        assert count_within_mult(rs.root, mult) == sum(o <= round((1 + mult) * best) for o, _ in listed)

    def uses(t, j):
        return not isinstance(t, int) and (t[0] == j or uses(t[1], j) or uses(t[2], j))

    usage = feature_usage(rs.root, 5)
    assert [int(u) for u in usage] == [sum(uses(t, j) for _, t in listed) for j in range(5)]


def test_predictions_refuses_huge_sets():
    X, y = random_data(7, n=40, n_features=4)
    rs = fit_rashomon(X, y, lam=0.01, depth=2, eps=0.5)
    with pytest.raises(ValueError, match="max_trees"):
        predictions(rs.root, X, max_trees=count_trees(rs.root) - 1)


def test_bad_arguments():
    X, y = random_data(0)
    with pytest.raises(ValueError):
        fit_rashomon(X, y, lam=0.01, depth=-1, eps=0.1)
    with pytest.raises(ValueError):
        fit_rashomon(X, y[:-1], lam=0.01, depth=2, eps=0.1)


def test_contains_agrees_with_enumeration():
    from zoo.methods.praxis.enumerate import contains

    X, y = random_data(8, n=50, n_features=4)
    rs = fit_rashomon(X, y, lam=0.02, depth=2, eps=0.2)
    inside = {t for _, t in iter_trees(rs.root)}
    memo: dict = {}
    for t in all_trees(X, np.arange(len(y)), 2, 2):
        assert contains(rs.problem, rs.root, rs.problem.root, t, memo) == (t in inside)


@pytest.mark.parametrize("lookahead_k", [0, 1])
def test_both_set_sizes_by_brute_force(lookahead_k):
    """``n_trees`` counts what was enumerated (objective <= the proxy bound, minus what proxy pruning drops) and
    ``n_within_best`` the trees within (1 + eps) of the best objective; both checked against all 786 trees of
    depth <= 2. The greedy proxy (k = 0) is 8 where the optimum is 6, so its bound 10 admits 90 trees of which 19 are
    within 1.3 x 6; with k = 1 = depth - 1 the proxy is exact and both counts are 19."""
    X, y = random_data(1, n=24, n_features=4)
    rs = fit_rashomon(X, y, lam=0.04, depth=2, eps=0.3, lookahead_k=lookahead_k)
    objs = [objective(t, X, y, rs.problem.gamma) for t in all_trees(X, np.arange(len(y)), 2, 2)]
    assert len(objs) == 786 and min(objs) == rs.min_objective == 6
    ours = [o for o, _ in iter_trees(rs.root)]
    assert rs.n_trees == len(ours) == sum(o <= rs.bound for o in objs)
    assert rs.n_within_best == sum(o <= rashomon_bound(6, 0.3) for o in objs) == 19
    assert (rs.reference, rs.bound, rs.n_trees) == ((8, 10, 90) if lookahead_k == 0 else (6, 8, 19))
