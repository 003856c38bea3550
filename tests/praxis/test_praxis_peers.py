"""Correctness against the authors' package (identical counts) and TreeFARMS (recall), on the real data."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from zoo.methods.praxis.enumerate import iter_trees, tree_paths
from zoo.methods.praxis.peers import recall, run_tree_praxis, run_treefarms, within_bound
from zoo.methods.praxis.rashomon import fit_rashomon

DATA = Path(__file__).resolve().parents[2] / "data" / "treefarms-binary"


def load(name):
    df = pd.read_csv(DATA / name)
    return df.iloc[:, :-1].to_numpy(np.uint8), df.iloc[:, -1].to_numpy(int)


@pytest.mark.parametrize(
    "name,lam,depth,eps",
    [
        ("monk2.csv", 0.01, 3, 0.03),
        ("monk2.csv", 0.005, 4, 0.05),
        ("monk1.csv", 0.01, 5, 0.03),
        ("car_evaluation.csv", 0.01, 3, 0.05),
        ("compas_binned.csv", 0.01, 3, 0.03),
        ("tic_tac_toe_onehot.csv", 0.02, 3, 0.03),
    ],
)
def test_identical_to_tree_praxis(name, lam, depth, eps):
    pytest.importorskip("praxis")
    X, y = load(name)
    ours = fit_rashomon(X, y, lam, depth, eps)
    ref = run_tree_praxis(X, y, lam, depth, eps, max_trees=200)
    assert ours.n_trees == ref["n_trees"]
    assert ours.min_objective == ref["min_objective"]
    assert [(int(o), int(c)) for o, c in zip(*ours.histogram())] == ref["histogram"]
    first = [tree_paths(t) for _, (_, t) in zip(range(200), iter_trees(ours.root))]
    assert first == ref["trees"]  # same trees in the same order


@pytest.mark.parametrize(
    "name,lam,depth,eps",
    [
        ("compas_binned.csv", 0.01, 3, 0.03),
        ("compas_binned.csv", 0.01, 3, 0.05),
        ("monk2.csv", 0.01, 3, 0.05),
    ],
)
def test_recall_of_treefarms_set(name, lam, depth, eps):
    pytest.importorskip("treefarms")
    X, y = load(name)
    ours = fit_rashomon(X, y, lam, depth, eps)
    tf = run_treefarms(X, y, lam, depth, eps, time_limit=60)
    assert tf["n_trees"] > 0 and not tf["timeout"]
    exact, objs = within_bound(ours.problem, tf["trees"], eps)
    assert min(objs) == ours.min_objective  # same optimum: the depth and regularisation mappings agree
    ours_canonical = [tree_paths(t) for _, t in iter_trees(ours.root)]
    assert recall([tree_paths(t) for t in exact], ours_canonical) >= 0.98
