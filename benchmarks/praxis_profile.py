"""Where ours spends its time against tree-praxis on one setting: a per-stage breakdown (issue #41).

On MONK-2 (lambda 0.005, depth 5, eps 0.05) ours takes about 3x tree-praxis's CPU time (``benchmarks/praxis.py``),
the one setting that misses the "within 3x" target. This script shows where that time goes. Three sides run in one
process through :func:`zoo.core.timing.compare` (interleaved, alternating order, one untimed warm-up each, the numba
kernels compiled or loaded from their cache by ``warm_up`` before anything is timed, one thread):

* ``ours``: ``fit_rashomon`` + ``histogram``, exactly the call ``benchmarks/praxis.py`` times;
* ``ours, stage-timed``: the same call with the module-level functions of each stage wrapped in a clock that
  charges every call its own time less that of the wrapped calls nested in it; whatever no wrapper claims is the
  Python recursion of CONSTRUCT / SOLVE_SIBLINGS itself (OR-node bookkeeping, budgets, the cache);
* ``tree-praxis``: the authors' C++ package (``peers.run_tree_praxis``), which has no stages to see from Python.

The graph's OR nodes are counted by depth afterwards: every node above depth 2 is built by the Python recursion,
the depth-2 nodes by the compiled kernel (``kernel.or2``).

    python benchmarks/praxis_profile.py [--setting monk2.csv 0.005 5 0.05] [--repeats 7] [--json results/praxis]

With ``--json`` it writes ``results/praxis/profile.json`` (``kind: benchmark``) through
:func:`zoo.core.results.write_result`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# this file sits beside praxis.py: drop the folder from the path so `import praxis` finds the tree-praxis package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from zoo.core.results import write_result  # noqa: E402
from zoo.core.timing import compare, machine_load  # noqa: E402
from zoo.methods.praxis import construct as construct_mod  # noqa: E402
from zoo.methods.praxis import problem as problem_mod  # noqa: E402
from zoo.methods.praxis import rashomon as rashomon_mod  # noqa: E402
from zoo.methods.praxis import shallow as shallow_mod  # noqa: E402
from zoo.methods.praxis.construct import LazySplitsNode  # noqa: E402
from zoo.methods.praxis.enumerate import histogram  # noqa: E402
from zoo.methods.praxis.kernel import warm_up  # noqa: E402
from zoo.methods.praxis.peers import run_tree_praxis  # noqa: E402
from zoo.methods.praxis.rashomon import fit_rashomon  # noqa: E402

#: stage -> the (module, attribute) call sites it owns; a stage's time excludes the wrapped calls nested in it
STAGES = {
    "compiled kernels (or2, exact2, split_counts)": [
        (construct_mod, "or2"),
        (shallow_mod, "compiled_exact2"),
        (problem_mod, "compiled_split_counts"),
    ],
    "proxy (LicketySPLIT lookahead, numpy)": [(construct_mod, "proxy"), (rashomon_mod, "proxy")],
    "depth-1 children of depth-2 nodes (numpy)": [(construct_mod, "depth1_children")],
    "class counts of subproblems (numpy popcounts)": [
        (construct_mod, "class_counts"),
        (construct_mod, "split_class_counts"),
    ],
    "data packing (make_problem)": [(rashomon_mod, "make_problem")],
}
RECURSION = "CONSTRUCT / SOLVE_SIBLINGS recursion (Python: OR nodes, budgets, cache)"
HISTOGRAM = "histogram of the set"


class StageClock:
    """Exclusive wall seconds and call counts per stage: a call's time less that of the wrapped calls inside it.

    Args:
        clock: seconds-valued clock (``time.perf_counter``; tests pass a fake).
    """

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter = Counter()
        self._nested: list[float] = []

    def wrap(self, stage: str, fn):
        def timed(*args, **kwargs):
            self._nested.append(0.0)
            t0 = self.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                dt = self.clock() - t0
                inner = self._nested.pop()
                self.seconds[stage] += dt - inner
                self.calls[stage] += 1
                if self._nested:
                    self._nested[-1] += dt

        return timed

    @contextmanager
    def installed(self):
        """Replace every call site of :data:`STAGES` by its timed wrapper for the duration of the block."""
        saved = []
        try:
            for stage, sites in STAGES.items():
                for mod, name in sites:
                    saved.append((mod, name, getattr(mod, name)))
                    setattr(mod, name, self.wrap(stage, getattr(mod, name)))
            yield self
        finally:
            for mod, name, fn in reversed(saved):
                setattr(mod, name, fn)


def or_nodes_by_depth(root, depth: int) -> dict[int, int]:
    """Distinct OR nodes reachable from ``root`` per remaining depth; a compiled depth-2 node's children are not
    built (they are made on first access), so the walk stops there."""
    seen: set[int] = set()
    out: Counter = Counter()
    stack = [(root, depth)]
    while stack:
        node, d = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out[d] += 1
        if isinstance(node, LazySplitsNode) or d == 0:
            continue
        for _, left, right in node.splits:
            stack += [(left, d - 1), (right, d - 1)]
    return dict(sorted(out.items(), reverse=True))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--setting", nargs=4, default=["monk2.csv", "0.005", "5", "0.05"], metavar=("CSV", "LAM", "D", "EPS")
    )
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", default=None, help="folder for profile.json")
    args = ap.parse_args(argv)
    name, lam, d, eps = args.setting[0], float(args.setting[1]), int(args.setting[2]), float(args.setting[3])
    df = pd.read_csv(ROOT / "data" / "treefarms-binary" / name)
    X, y = df.iloc[:, :-1].to_numpy(np.uint8), df.iloc[:, -1].to_numpy(int)
    warm_up()
    import praxis  # noqa: F401  (the C++ package's import outside the timed region)

    load_before = machine_load()
    clocks: list[StageClock] = []

    def ours():
        rs = fit_rashomon(X, y, lam, d, eps)
        histogram(rs.root)
        return rs

    def ours_staged():
        clock = StageClock()
        with clock.installed():
            rs = fit_rashomon(X, y, lam, d, eps)
            t0 = time.perf_counter()
            histogram(rs.root)
            clock.seconds[HISTOGRAM] += time.perf_counter() - t0
        clocks.append(clock)
        return rs

    t = compare(
        {"ours": ours, "ours, stage-timed": ours_staged, "tree-praxis": lambda: run_tree_praxis(X, y, lam, d, eps)},
        repeats=args.repeats,
        warmup=1,
    )
    clocks = clocks[1:]  # the warm-up call
    staged_total = t.median("ours, stage-timed")
    ours_s, cxx_s = t.median("ours"), t.median("tree-praxis")
    stages = {s: statistics.median(c.seconds[s] for c in clocks) for s in [*STAGES, HISTOGRAM]}
    stages[RECURSION] = staged_total - sum(stages.values())
    rs = t.outputs["ours"]
    nodes = or_nodes_by_depth(rs.root, d)
    rows = [
        {
            "stage": s,
            "ms": round(1e3 * v, 2),
            "share_of_ours_stage_timed": round(v / staged_total, 3),
            "calls": int(statistics.median(c.calls[s] for c in clocks)) if s in STAGES else None,
        }
        for s, v in sorted(stages.items(), key=lambda kv: -kv[1])
    ]
    totals = {
        "ours_ms": round(1e3 * ours_s, 2),
        "ours_stage_timed_ms": round(1e3 * staged_total, 2),
        "tree_praxis_ms": round(1e3 * cxx_s, 2),
        "ratio_ours_to_tree_praxis": round(ours_s / cxx_s, 2),
        "ratio_ours_to_tree_praxis_cpu": round(t.median("ours", "cpu") / t.median("tree-praxis", "cpu"), 2),
        "or_nodes_by_depth": {str(k): v for k, v in nodes.items()},
        "n_trees": rs.n_trees,
    }
    print(f"{name} lambda {lam} depth {d} eps {eps}: {t.describe()}")
    for r in rows:
        print(f"  {r['stage']:72s} {r['ms']:8.2f} ms  {r['share_of_ours_stage_timed']:6.1%}  calls {r['calls']}")
    print("  " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    if args.json:
        out = Path(args.json)
        write_result(
            "praxis",
            "profile",
            rows,
            kind="benchmark",
            notes=(
                f"{name}, lambda {lam}, depth {d}, eps {eps}: ms per fit_rashomon + histogram call, median of "
                f"{args.repeats} stage-timed calls; each stage's own time (its wrapped calls' time less the wrapped "
                "calls nested in them); the CONSTRUCT recursion row is what no wrapper claims. " + t.describe() + " "
                f"Machine: {load_before} -> {machine_load()}. Totals: {totals}."
            ),
            packages=["tree-praxis", "numba"],
            extra={"totals": totals, "setting": {"data": name, "lambda": lam, "depth": d, "eps": eps}},
            results_dir=out.resolve().parent,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
