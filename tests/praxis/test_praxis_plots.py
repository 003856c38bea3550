import json

import numpy as np
from praxis_brute import random_data

from zoo.methods.praxis.enumerate import count_trees, objective
from zoo.methods.praxis.peers import praxis_paths_to_canonical, recall, treefarms_source_to_tree, within_bound
from zoo.methods.praxis.plots import plot_size_vs_eps, plot_tree, size_vs_eps, tree_text
from zoo.methods.praxis.problem import make_problem
from zoo.methods.praxis.rashomon import fit_rashomon


def test_tree_text_by_hand():
    text = tree_text((0, 1, (1, 0, 1)), ["a", "b"], ["no", "yes"])
    assert text == (
        "if a:\n    predict yes\nelse:  # not a\n    if b:\n        predict no\n"
        "    else:  # not b\n        predict yes\n"
    )


def test_plots_are_written(tmp_path):
    X, y = random_data(1, n=40, n_features=4)
    rs = fit_rashomon(X, y, 0.02, 2, 0.2)
    rows = size_vs_eps(rs.root, [0.0, 0.1, 0.2])
    assert rows[-1][1] <= count_trees(rs.root) and [c for _, c in rows] == sorted(c for _, c in rows)
    plot_size_vs_eps(rows, str(tmp_path / "s.png"))
    plot_tree((0, 1, (1, 0, 1)), ["a", "b"], str(tmp_path / "t.png"))
    assert (tmp_path / "s.png").stat().st_size > 1000 and (tmp_path / "t.png").stat().st_size > 1000


def test_peer_tree_formats():
    src = json.loads(
        '{"feature": 2, "relation": "==", "reference": "true", "true": {"prediction": 1}, "false": {"prediction": 0}}'
    )
    assert treefarms_source_to_tree(src) == (2, 1, 0)
    # tree-praxis literals are 1-based and signed (+f: feature f-1 is 1)
    assert praxis_paths_to_canonical([[3], [-3]], [1, 0]) == frozenset(
        {(frozenset({(2, 1)}), 1), (frozenset({(2, 0)}), 0)}
    )
    assert recall([], []) == 1.0 and recall(["a", "b"], ["a"]) == 0.5


def test_within_bound_keeps_the_exact_set():
    X, y = random_data(2, n=40, n_features=3)
    p = make_problem(X, y, 0.05)
    trees = [0, 1, (0, 0, 1), (1, 1, 0), (2, (0, 1, 0), 1)]
    objs = [objective(t, X, y, p.gamma) for t in trees]
    kept, got = within_bound(p, trees, 0.1)
    assert got == objs
    assert kept == [t for t, o in zip(trees, objs) if o <= 1.1 * min(objs)]
    assert np.isclose(min(got), min(objs))
