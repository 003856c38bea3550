"""PRAXIS benchmark: ours vs the authors' ``tree-praxis`` (C++) vs ``treefarms`` (exact), same data and settings.

Each enumerator runs in its own forked child of this one process, so its CPU time and peak-RSS growth are measured
the same way (``zoo.core.measure``) and a TreeFARMS run that exceeds the time limit can be stopped. Times
are CPU seconds (user + system), the least of ``--repeats`` runs: the machine is shared, and wall time under other
load varies several-fold between runs.
Recall = share of the exact Rashomon set (TreeFARMS' trees with objective <= (1 + eps) x optimum; PRAXIS depth
d = TreeFARMS depth d + 1) that ours contains, matched by tree structure and objective in our AND/OR graph
(``enumerate.contains``); the share of all of TreeFARMS' output (which can overshoot that bound) is also printed.

    python benchmarks/praxis.py [--quick] [--timeout 240] [--json results/praxis]

With ``--json`` it writes ``time.json`` and ``memory.json`` (``kind: benchmark``) and ``recall.json`` (``kind: result``)
through :func:`zoo.core.results.write_result`.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
# this file is named praxis.py: drop its folder from the path so `import praxis` finds the tree-praxis package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from zoo.core.measure import measure
from zoo.core.results import write_result
from zoo.methods.praxis.enumerate import contains, count_trees, histogram
from zoo.methods.praxis.kernel import warm_up
from zoo.methods.praxis.peers import run_tree_praxis, run_treefarms, treefarms_source_to_tree, within_bound
from zoo.methods.praxis.problem import gamma_from_lambda
from zoo.methods.praxis.rashomon import fit_rashomon, resolve_backend

SETTINGS = [  # (data file, lambda, depth (PRAXIS convention), eps)
    ("monk2.csv", 0.005, 5, 0.05),
    ("car_evaluation.csv", 0.005, 4, 0.05),
    ("tic_tac_toe_onehot.csv", 0.01, 4, 0.03),
    ("compas_binned.csv", 0.01, 3, 0.03),
    ("compas_binned.csv", 0.005, 4, 0.05),
    ("compas_binned.csv", 0.005, 5, 0.05),
    ("fico_binary.csv", 0.01, 4, 0.03),
]
QUICK = SETTINGS[:1] + SETTINGS[3:4]


def load(name: str):
    df = pd.read_csv(ROOT / "data" / "treefarms-binary" / name)
    return df.iloc[:, :-1].to_numpy(np.uint8), df.iloc[:, -1].to_numpy(int)


def _ours(X, y, lam, d, eps, backend="auto"):
    def run():
        rs = fit_rashomon(X, y, lam, d, eps, backend=backend)
        histogram(rs.root)
        return rs

    m = measure(run)
    return {
        "n_trees": count_trees(m.result.root),
        "min_objective": m.result.min_objective,
        "seconds": m.cpu_seconds,
        "wall_seconds": m.seconds,
        **_memory(m),
    }


def _memory(m) -> dict:
    """A measured run's memory: its own (private) peak, the whole RSS growth and the file pages in it (MiB)."""
    return {"peak_mib": m.private_peak_mib, "rss_mib": m.peak_mib, "file_mib": m.file_mib, "how": m.how}


def _tree_praxis(X, y, lam, d, eps):
    import praxis  # noqa: F401  (import outside the measured region)

    m = measure(lambda: run_tree_praxis(X, y, lam, d, eps))
    return {
        "n_trees": m.result["n_trees"],
        "min_objective": m.result["min_objective"],
        "seconds": m.cpu_seconds,
        "wall_seconds": m.seconds,
        **_memory(m),
    }


def _treefarms(X, y, lam, d, eps, time_limit):
    from treefarms import TREEFARMS  # noqa: F401  (import outside the measured region)

    m = measure(lambda: run_treefarms(X, y, lam, d, eps, time_limit=time_limit, max_trees=0))
    return {
        "n_trees": m.result["n_trees"],
        "seconds": m.cpu_seconds,
        "wall_seconds": m.seconds,
        **_memory(m),
        "timeout": m.result["timeout"],
    }


def _tf_trees(X, y, lam, d, eps, time_limit):
    """TreeFARMS' trees in our ``(feature, left, right)`` form (not timed)."""
    from treefarms import TREEFARMS

    from zoo.methods.praxis.peers import quiet_stdout

    cols = [f"f{j}" for j in range(X.shape[1])]
    cfg = {
        "regularization": gamma_from_lambda(lam, len(y)) / len(y),
        "rashomon_bound_multiplier": eps,
        "depth_budget": d + 1,
        "verbose": False,
        "time_limit": time_limit,
    }
    m = TREEFARMS(cfg)
    with quiet_stdout():
        m.fit(pd.DataFrame(X.astype(int), columns=cols), pd.Series(y, name="label"))
    return [treefarms_source_to_tree(m[i].source) for i in range(m.get_tree_count())]


def _child(conn, fn, args):
    try:
        conn.send(("ok", fn(*args)))
    except Exception as e:  # noqa: BLE001  (report any failure, do not hang the parent)
        conn.send(("error", f"{type(e).__name__}: {e}"))


def ratio(row: dict, a: str, b: str) -> float | None:
    """``row[a] / row[b]``, or ``None`` when either is missing or zero."""
    return row[a] / row[b] if row.get(a) and row.get(b) else None


#: a private peak below this is within the noise of the page-granular measure (RSS less file pages): a ratio over it
#: is only a lower bound
MEMORY_RESOLUTION_MIB = 0.1


def memory_ratio(peer: float | None, ours: float | None) -> float | str | None:
    """``peer / ours``; ``"> peer / 0.1"`` (a lower bound) when ours is below ``MEMORY_RESOLUTION_MIB``."""
    if not peer or ours is None:
        return None
    if ours < MEMORY_RESOLUTION_MIB:
        return f"> {peer / MEMORY_RESOLUTION_MIB:.0f}"
    return peer / ours


def best_of(repeats: int, fn, args, timeout):
    """Run ``in_child`` ``repeats`` times; keep the run with the least CPU time (peak memory: the least too)."""
    return _best([in_child(fn, args, timeout) for _ in range(repeats)])


def _best(runs: list[dict]) -> dict:
    """The run with the least CPU time (peak memory: the least of all successful runs); the first error if none."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    best = min(ok, key=lambda r: r["seconds"])
    return dict(best, peak_mib=min(r["peak_mib"] for r in ok), rss_mib=min(r["rss_mib"] for r in ok), repeats=len(ok))


def interleaved_best(repeats: int, jobs: dict, timeout: float) -> list[dict]:
    """:func:`best_of` for several enumerators at once, interleaved: repeat r runs every job once, in the given order
    when r is even and reversed when odd (as ``zoo.core.timing.compare``; each run is a forked child here, so the
    timer is the child's own CPU time). Returns one result per job, in ``jobs`` order."""
    names = list(jobs)
    runs = {k: [] for k in names}
    for r in range(repeats):
        for k in names if r % 2 == 0 else names[::-1]:
            fn, args = jobs[k]
            runs[k].append(in_child(fn, args, timeout))
    return [_best(runs[k]) for k in names]


def in_child(fn, args, timeout):
    """Run ``fn(*args)`` in a forked child; ``{"error": ...}`` on failure or timeout."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args))
    proc.start()
    if parent.poll(timeout):
        status, value = parent.recv()
        proc.join()
        return value if status == "ok" else {"error": value}
    proc.kill()
    proc.join()
    return {"error": f"timeout after {timeout} s"}


MEMORY_KEYS = ("peak_mib", "rss_mib", "file_mib", "how")


def fresh_memory(fn, name: str, tail: tuple) -> dict:
    """``fn(X, y, *tail)`` (one of the measured enumerator calls) on data file ``name``, in this (freshly spawned)
    interpreter: its resident-memory growth is then its own need, not a reuse of memory an earlier call freed. The
    numba kernels are compiled or loaded first (a tiny problem), outside the measured call, as for the timed runs."""
    X, y = load(name)
    if fn is _ours and resolve_backend("auto") == "numba":
        warm_up()
    gc.collect()
    return fn(X, y, *tail)


def measure_setting(name: str, lam: float, d: int, eps: float, args) -> dict:
    """One setting's row: every enumerator timed and measured in forked children of this process, then recall.

    Memory is measured apart, each side's call alone in a freshly spawned interpreter (:func:`fresh_memory`): a
    forked child reuses whatever its parent freed (an earlier setting's 20-million-tree MONK-2 graph, a warm-up call)
    without growing its resident set, so the timed children's memory figures are not kept.
    """
    X, y = load(name)
    setting = f"{name.removesuffix('.csv')} lam={lam} d={d} eps={eps}"
    numba = resolve_backend("auto") == "numba"
    if numba:
        warm_up()  # compiles (or loads) the numba kernels before the timed children fork
        # the tiny warm_up left each forked child ~0.2 s of first-call work on MONK-2 with a cold cache: this exact
        # call, untimed, before forking
        fit_rashomon(X, y, lam, d, eps, backend="auto")
    # the parent's objects go to the permanent generation: otherwise the first full collection in each forked
    # child walks the whole inherited heap (torch, pandas, TreeFARMS imports), copying its pages: 0.13 s and
    # 3.3 MiB of a 0.06 s, 0.1 MiB MONK-2 call, charged to whichever side it hits (the Python sides, not C++)
    gc.collect()
    gc.freeze()
    ours, ref, cpp = interleaved_best(
        args.repeats,
        {
            "ours": (_ours, (X, y, lam, d, eps, "auto")),
            "numpy": (_ours, (X, y, lam, d, eps, "numpy")),
            "cpp": (_tree_praxis, (X, y, lam, d, eps)),
        },
        args.timeout,
    )
    tf = best_of(args.tf_repeats, _treefarms, (X, y, lam, d, eps, args.timeout), args.timeout + 30)
    for side, fn, tail in (
        (ours, _ours, (lam, d, eps, "auto")),
        (cpp, _tree_praxis, (lam, d, eps)),
        (tf, _treefarms, (lam, d, eps, args.timeout)),
    ):
        if "error" not in side:
            side.update({k: v for k, v in in_fresh_process(fresh_memory, (fn, name, tail)).items() if k in MEMORY_KEYS})
    rec = rec_all = n_exact = None
    if "error" not in tf and not tf.get("timeout"):
        trees = in_child(_tf_trees, (X, y, lam, d, eps, args.timeout), args.timeout + 30)
        if isinstance(trees, list):
            rs = fit_rashomon(X, y, lam, d, eps)
            exact, _ = within_bound(rs.problem, trees, eps)
            memo: dict = {}
            found = [contains(rs.problem, rs.root, rs.problem.root, t, memo) for t in trees]
            inside = {id(t) for t in exact}
            rec_all = sum(found) / len(trees) if trees else 1.0
            rec = (sum(f for t, f in zip(trees, found) if id(t) in inside) / len(exact)) if exact else 1.0
            n_exact = len(exact)
    row = {
        "setting": setting,
        "n": len(y),
        "features": int(X.shape[1]),
        "backend": resolve_backend("auto"),
        "ours_numpy_s": ref.get("seconds"),
        "numpy_same_set": (ref.get("n_trees"), ref.get("min_objective"))
        == (ours.get("n_trees"), ours.get("min_objective")),
        "ours_s": ours.get("seconds"),
        "tree_praxis_s": cpp.get("seconds"),
        "treefarms_s": tf.get("seconds"),
        "ours_wall_s": ours.get("wall_seconds"),
        "tree_praxis_wall_s": cpp.get("wall_seconds"),
        "treefarms_wall_s": tf.get("wall_seconds"),
        "ours_peak_mib": ours.get("peak_mib"),
        "tree_praxis_peak_mib": cpp.get("peak_mib"),
        "treefarms_peak_mib": tf.get("peak_mib"),
        "ours_rss_mib": ours.get("rss_mib"),
        "tree_praxis_rss_mib": cpp.get("rss_mib"),
        "treefarms_rss_mib": tf.get("rss_mib"),
        "ours_trees": ours.get("n_trees"),
        "tree_praxis_trees": cpp.get("n_trees"),
        "identical_to_tree_praxis": (
            ours.get("n_trees") == cpp.get("n_trees")
            and ours.get("min_objective") == cpp.get("min_objective")
            and "error" not in ours
        ),
        "treefarms_trees": tf.get("n_trees"),
        "treefarms_trees_within_bound": n_exact,
        "recall_of_treefarms": rec,
        "recall_of_all_treefarms_output": rec_all,
        "errors": {k: v["error"] for k, v in (("ours", ours), ("tree_praxis", cpp), ("treefarms", tf)) if "error" in v},
    }

    row["speedup_vs_treefarms"] = ratio(row, "treefarms_s", "ours_s")
    row["memory_ratio_vs_treefarms"] = memory_ratio(row["treefarms_peak_mib"], row["ours_peak_mib"])
    row["rss_ratio_vs_treefarms"] = ratio(row, "treefarms_rss_mib", "ours_rss_mib")
    row["slowdown_vs_tree_praxis"] = ratio(row, "ours_s", "tree_praxis_s")
    row["numpy_slowdown_vs_tree_praxis"] = ratio(row, "ours_numpy_s", "tree_praxis_s")
    return row


def in_fresh_process(fn, args):
    """``fn(*args)`` in a newly spawned interpreter (a clean heap); its return value."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args))
    proc.start()
    status, value = parent.recv()
    proc.join()
    if status != "ok":
        raise RuntimeError(value)
    return value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two small settings only")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per enumerator run")
    ap.add_argument("--json", default=None, help="folder for recall.json, time.json and memory.json")
    ap.add_argument("--repeats", type=int, default=3, help="runs of ours and tree-praxis (the least CPU time kept)")
    ap.add_argument("--tf-repeats", type=int, default=2, help="runs of TreeFARMS (the least CPU time kept)")
    args = ap.parse_args(argv)
    command = (
        "python benchmarks/praxis.py"
        + (" --quick" if args.quick else "")
        + f" --timeout {args.timeout}"
        + f" --repeats {args.repeats} --tf-repeats {args.tf_repeats}"
        + (f" --json {args.json}" if args.json else "")
    )
    rows = []
    print("times: CPU seconds, least of repeats; memory: private peak (RSS growth less file pages faulted in, MiB)")
    print(
        f"{'setting':42s} {'ours s':>8s} {'C++ s':>8s} {'TF s':>8s} {'ours MiB':>9s} {'C++ MiB':>8s} {'TF MiB':>8s}"
        f" {'trees':>10s} {'same':>5s} {'TF trees':>9s} {'TF in eps':>9s} {'recall':>7s} {'all TF':>7s} {'TF/ours t':>9s} {'TF/ours m':>9s}"
        f" {'ours/C++ t':>10s} {'numpy/C++':>9s}"
    )
    for name, lam, d, eps in QUICK if args.quick else SETTINGS:
        row = in_fresh_process(measure_setting, (name, lam, d, eps, args))
        rows.append(row)

        def f(v, fmt):
            if isinstance(v, str):
                return format(v, f">{fmt.split('.')[0]}s")
            return format(v, fmt) if isinstance(v, (int, float)) and v is not None else "-"

        print(
            f"{row['setting']:42s} {f(row['ours_s'], '8.3f')} {f(row['tree_praxis_s'], '8.3f')} "
            f"{f(row['treefarms_s'], '8.2f')} {f(row['ours_peak_mib'], '9.1f')} "
            f"{f(row['tree_praxis_peak_mib'], '8.1f')} {f(row['treefarms_peak_mib'], '8.1f')} "
            f"{f(row['ours_trees'], '10d')} {row['identical_to_tree_praxis']!s:>5s} "
            f"{f(row['treefarms_trees'], '9d')} {f(row['treefarms_trees_within_bound'], '9d')} {f(row['recall_of_treefarms'], '7.3f')} {f(row['recall_of_all_treefarms_output'], '7.3f')} {f(row['speedup_vs_treefarms'], '9.1f')} "
            f"{f(row['memory_ratio_vs_treefarms'], '9.1f')} {f(row['slowdown_vs_tree_praxis'], '10.1f')} "
            f"{f(row['numpy_slowdown_vs_tree_praxis'], '9.1f')}"
            + (f"  errors: {row['errors']}" if row["errors"] else ""),
            flush=True,
        )
    if args.json:
        write_tables(Path(args.json), rows, command)
    return 0


def write_tables(out: Path, rows: list[dict], command: str, converted_from: str | None = None) -> None:
    """``recall.json`` (result), ``time.json`` and ``memory.json`` (benchmarks) through the results writer."""

    notes = (
        "Each enumerator runs in a forked child of one process (times are CPU seconds, the least of several runs, "
        "with the matching wall time beside them). Memory (zoo.core.measure) is measured apart: each side's call alone in a "
        "freshly spawned interpreter (after the imports and, for ours, loading the numba kernels), since a forked "
        "child reuses what its parent freed (a warm-up call, an earlier setting) without growing its resident set. "
        "'MiB' is the call's private peak, the growth of resident memory less the file-backed pages faulted in "
        "during the call (library code running for the first time: ours 3.5 MiB on COMPAS d 3, nearly all of its "
        "growth there); 'RSS growth' is the whole growth, those pages included. 'ours' uses the compiled depth-2 kernel when numba is installed (compiled or loaded from its cache, and the setting's own call run once untimed in the parent, before the timed children fork, as the C++ package is compiled ahead: with a cold numba cache the tiny warm-up alone left each child ~0.2 s of first-call work on MONK-2; each setting runs in a freshly spawned interpreter; and the parent's objects frozen out of the garbage collector (gc.freeze) before forking, since a child's first full collection otherwise walks the whole inherited heap); ours, the numpy path and tree-praxis run interleaved, alternating order; 'ours numpy-path' is the reference path in the same run. TreeFARMS gets depth_budget = d + 1 and regularization = round(lam n)/n. Recall is over "
        "TreeFARMS' trees with objective <= (1 + eps) x optimum, the exact Rashomon set (TreeFARMS 0.2.4 also "
        "returned trees above that bound on some settings); 'share of all TreeFARMS output' counts every tree "
        "it returned. The machine is a shared "
        "2-core CPU."
    )

    def r3(v):
        return round(v, 3) if isinstance(v, float) else v

    tables = {
        "recall": (
            [
                {
                    "setting": r["setting"],
                    "TreeFARMS trees": r["treefarms_trees"],
                    "TreeFARMS trees within (1+eps) opt": r["treefarms_trees_within_bound"],
                    "ours trees": r["ours_trees"],
                    "recall of TreeFARMS": r3(r["recall_of_treefarms"]),
                    "share of all TreeFARMS output": r3(r["recall_of_all_treefarms_output"]),
                    "identical to tree-praxis (count, min objective)": r["identical_to_tree_praxis"],
                }
                for r in rows
            ],
            {
                "recall of TreeFARMS": ">= 0.98 on all 22 ground-truth data sets, mostly 1.000 (Table 2)",
                "identical to tree-praxis": "(our check, not in the paper)",
            },
        ),
        "time": (
            [
                {
                    "setting": r["setting"],
                    "ours CPU s": r3(r["ours_s"]),
                    "ours backend": r["backend"],
                    "ours numpy-path CPU s": r3(r["ours_numpy_s"]),
                    "tree-praxis CPU s": r3(r["tree_praxis_s"]),
                    "TreeFARMS CPU s": r3(r["treefarms_s"]),
                    "ours wall s": r3(r["ours_wall_s"]),
                    "tree-praxis wall s": r3(r["tree_praxis_wall_s"]),
                    "TreeFARMS wall s": r3(r["treefarms_wall_s"]),
                    "TreeFARMS / ours": r3(r["speedup_vs_treefarms"]),
                    "ours / tree-praxis": r3(r["slowdown_vs_tree_praxis"]),
                    "numpy path / tree-praxis": r3(r["numpy_slowdown_vs_tree_praxis"]),
                    "numpy path same set": r["numpy_same_set"],
                }
                for r in rows
            ],
            {
                "speed": "up to 5 orders of magnitude faster than TreeFARMS (abstract); COMPAS 0.09 s at "
                "lam=0.02, eps=0.03, d=5 on 44 features (paper note)",
                "targets (issue 5)": ">= 10x faster than TreeFARMS; within 3x of tree-praxis",
            },
        ),
        "memory": (
            [
                {
                    "setting": r["setting"],
                    "ours MiB": r3(r["ours_peak_mib"]),
                    "tree-praxis MiB": r3(r["tree_praxis_peak_mib"]),
                    "TreeFARMS MiB": r3(r["treefarms_peak_mib"]),
                    "TreeFARMS / ours": r3(r["memory_ratio_vs_treefarms"]),
                    "ours RSS growth MiB": r3(r.get("ours_rss_mib")),
                    "tree-praxis RSS growth MiB": r3(r.get("tree_praxis_rss_mib")),
                    "TreeFARMS RSS growth MiB": r3(r.get("treefarms_rss_mib")),
                    "TreeFARMS / ours (RSS growth)": r3(r.get("rss_ratio_vs_treefarms")),
                }
                for r in rows
            ],
            {
                "memory": "COMPAS 130 MB peak (PRAXIS) vs 163 MB (SORTeD) (paper note)",
                "target (issue 5)": ">= 10x less peak memory than TreeFARMS",
            },
        ),
    }
    for name, (table, paper) in tables.items():
        write_result(
            "praxis",
            name,
            table,
            paper=paper,
            notes=notes,
            command=command,
            kind="result" if name == "recall" else "benchmark",
            packages=["tree-praxis", "treefarms"],
            results_dir=out.resolve().parent,
            converted_from=converted_from,
        )


if __name__ == "__main__":
    raise SystemExit(main())
