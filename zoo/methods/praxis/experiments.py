"""Rashomon sets of every praxis recipe's data and settings: size, best objective, size vs epsilon, importance.

    python -m zoo.methods.praxis.experiments [--json results/praxis]

Writes ``sets.json`` (one row per recipe, through :func:`zoo.core.results.write_result`) and, per data set,
``<recipe>_size_vs_eps.png`` and ``<recipe>_importance.png`` plus the best tree as text and PNG under
``results/praxis/figures/``. The speed comparison with tree-praxis and TreeFARMS is ``benchmarks/praxis.py``.
"""
from __future__ import annotations

import argparse
import json

import yaml

from zoo.core.data import repo_root
from zoo.core.results import write_result
from zoo.methods.praxis.datamodule import BinaryCSVDataModule
from zoo.methods.praxis.enumerate import count_trees, feature_usage, histogram, tree_at
from zoo.methods.praxis.measure import measure
from zoo.methods.praxis.rashomon import fit_rashomon
from zoo.methods.praxis.render import plot_importance, plot_size_vs_eps, plot_tree, size_vs_eps, tree_text

RECIPES = ["praxis", "praxis-monk", "praxis-car", "praxis-tictactoe", "praxis-fico", "praxis-compas2016",
           "praxis-large"]
EPS_GRID = [0.0, 0.005, 0.01, 0.02, 0.03, 0.05]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="results/praxis")
    args = ap.parse_args(argv)
    root = repo_root()
    out = root / args.json
    figs = out / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in RECIPES:
        cfg = yaml.safe_load((root / "recipes" / f"{name}.yaml").read_text())
        m, d = cfg["model"], dict(cfg["data"])
        d["path"] = str(root / d["path"])
        dm = BinaryCSVDataModule(**d)
        dm.setup()

        def run(dm=dm, m=m):
            rs = fit_rashomon(dm.X_train, dm.y_train, m["lam"], m["depth"], m["eps"], m["lookahead_k"])
            histogram(rs.root)
            return rs

        m_ = measure(run)
        rs, seconds = m_.result, m_.cpu_seconds
        total = count_trees(rs.root)
        sizes = size_vs_eps(rs.root, [e for e in EPS_GRID if e <= m["eps"] + 1e-12])
        usage = feature_usage(rs.root, len(dm.feature_names))
        top = sorted(zip(dm.feature_names, usage), key=lambda t: -t[1])[:3]
        obj, best = tree_at(rs.root, 0)
        plot_size_vs_eps(sizes, str(figs / f"{name}_size_vs_eps.png"), title=name)
        plot_importance(usage, total, dm.feature_names, str(figs / f"{name}_importance.png"))
        plot_tree(best, dm.feature_names, str(figs / f"{name}_best_tree.png"), dm.classes, title=f"{name}: objective {obj}")
        (figs / f"{name}_best_tree.txt").write_text(tree_text(best, dm.feature_names, dm.classes))
        row = {"setting": f"{name}: lam={m['lam']} d={m['depth']} eps={m['eps']}", "rows": len(dm.y_train),
               "features": len(dm.feature_names), "n_trees": total, "min_objective": rs.min_objective,
               "bound": rs.bound, "cpu_seconds": round(seconds, 3),
               "best_tree_accuracy": round(1 - (obj - rs.problem.gamma * _leaves(best)) / len(dm.y_train), 4),
               "size_vs_eps": {f"{e:g}": c for e, c in sizes},
               "top_features_share": {n: round(int(u) / total, 3) for n, u in top}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_result("praxis", "sets", rows, results_dir=out.parent,
                 paper={"COMPAS": "PRAXIS 0.09 s, 130 MB peak at lam=0.02, eps=0.03, d=5 on 5K x 44 binarised "
                                  "features (Table, paper note); our COMPAS file has 12 features"},
                 notes="One fit per recipe (its data and model settings). size_vs_eps re-thresholds the one set "
                       "relative to the best tree found (count_within_mult); top_features_share is the share of the "
                       "set's trees that split on the feature (Rashomon importance by usage). cpu_seconds include "
                       "counting. best_tree_accuracy is on the training rows.")
    return 0


def _leaves(t) -> int:
    return 1 if isinstance(t, int) else _leaves(t[1]) + _leaves(t[2])


if __name__ == "__main__":
    raise SystemExit(main())
