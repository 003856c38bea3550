import numpy as np
import pytest
from praxis_brute import all_trees, random_data

from zoo.methods.praxis.enumerate import objective
from zoo.methods.praxis.problem import class_counts, gamma_from_lambda, leaf_cost, make_problem
from zoo.methods.praxis.proxy import exact, greedy, lookahead
from zoo.methods.praxis.shallow import exact1


def test_gamma_rounds_half_away_from_zero():
    assert gamma_from_lambda(0.01, 6907) == 69  # 69.07
    assert gamma_from_lambda(0.5, 5) == 3  # 2.5 -> 3 (llround), not banker's 2
    with pytest.raises(ValueError):
        gamma_from_lambda(-0.1, 5)


def test_leaf_cost_by_hand():
    # 7 rows: 4 of class 0, 3 of class 1 -> best leaf predicts 0, 3 mistakes; gamma 2 -> 5
    assert leaf_cost(2, np.array([4, 3])) == 5
    assert leaf_cost(2, np.array([0, 0])) == 0


def test_class_counts_and_root():
    X, y = random_data(0)
    p = make_problem(X, y, 0.05)
    assert np.array_equal(class_counts(p, p.root[None])[0], np.bincount(y, minlength=2))


def _brute_best(X, y, depth, gamma, n_classes=2):
    return min(objective(t, X, y, gamma) for t in all_trees(X, np.arange(len(y)), depth, n_classes))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lam", [0.0, 0.03])
def test_exact_matches_brute_force(seed, lam):
    X, y = random_data(seed, n=30, n_features=4)
    p = make_problem(X, y, lam)
    assert exact1(p, p.root[None])[0] == _brute_best(X, y, 1, p.gamma)
    assert exact(p, p.root[None], 2)[0] == _brute_best(X, y, 2, p.gamma)


def test_exact_multiclass():
    X, y = random_data(3, n=30, n_features=3, n_classes=3)
    p = make_problem(X, y, 0.02)
    assert exact(p, p.root[None], 2)[0] == _brute_best(X, y, 2, p.gamma, n_classes=3)


@pytest.mark.parametrize("seed", [0, 4])
def test_proxies_are_upper_bounds_and_ordered(seed):
    X, y = random_data(seed, n=50, n_features=5)
    p = make_problem(X, y, 0.02)
    root = p.root[None]
    opt = exact(p, root, 3)[0]
    g = greedy(p, root, 3)[0]
    k1 = lookahead(p, root, 3, 1)[0]
    assert opt <= k1 <= leaf_cost(p.gamma, class_counts(p, root))[0]
    assert opt <= g
    assert lookahead(p, root, 3, 2)[0] == opt  # k = depth - 1 is exact


def test_greedy_depth2_picks_entropy_split_by_hand():
    # feature 0 separates the classes perfectly, feature 1 is noise: greedy at depth 2 must find 2 leaves, 0 errors
    X = np.array([[1, 0], [1, 1], [0, 0], [0, 1]] * 5, dtype=np.uint8)
    y = X[:, 0].astype(int)
    p = make_problem(X, y, 0.05)  # gamma = 1
    assert greedy(p, p.root[None], 2)[0] == 2


@pytest.mark.parametrize("n_classes", [2, 3])
def test_exact2_pair_counts_match_brute_force(n_classes):
    from zoo.methods.praxis.shallow import exact2

    X, y = random_data(9, n=40, n_features=4, n_classes=n_classes)
    p = make_problem(X, y, 0.03)
    masks = np.stack([p.root, p.root & p.X[0], p.root & p.notX[2]])
    for m, got in zip(masks, exact2(p, masks)):
        rows = np.flatnonzero(np.unpackbits(m.view(np.uint8), bitorder="little")[: len(y)])
        best = min(objective(t, X[rows], y[rows], p.gamma) for t in all_trees(X, rows, 2, n_classes))
        assert got == best
