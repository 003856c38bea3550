"""The paper's protocol (authors' main.py; notes §5.5) on real commutes: JR and core factors per algorithm.

    python -m zoo.methods.trsp.experiments run --rounds 50 --deadline 16:30   # JR + core, round by round
    python -m zoo.methods.trsp.experiments run --only jr --rounds 50 --deadline 01:45   # JR rounds only
    python -m zoo.methods.trsp.experiments finish                             # write results from the rows so far
    python -m zoo.methods.trsp.experiments lower-bound --restarts 12 --steps 60   # worst optimal JR found (ours)

* JR: the authors' design (main.py, candidate mode 1): per county (Manhattan, Travis, SF) and round (= seed), a pool
  of 4,000 commuters sampled by flow, n = 400 travellers drawn from it, m = 800 candidates drawn from the pool's
  8,000 endpoints, k = 20; the authors' three rules (ECA, Greedy Capture, hybrid lambda = 0.5) and k-means,
  utilitarian greedy, random. (With tract centroids as candidates, 196-288 of them, every rule but ECA and the
  low-lambda hybrids was exactly 1-JR in every round: the instances could not separate the rules.)
* Core: n = 40, m = 80 seeded tracts, k = 20; the exact least alpha at beta = 1 per algorithm, and for Greedy
  Capture also at beta = 2 and 1 + sqrt 2 (the two readings of its (2, 1+sqrt 2) guarantee).

Rounds run until ``--rounds`` or the ``--deadline`` (UTC HH:MM; no new round starts after it); each finished
(county, round) is appended to ``runs/trsp-experiments/*.jsonl`` so that a stopped run loses nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from zoo.core.data import repo_root
from zoo.methods.trsp.audit import core_alpha, jr_factor, ratios
from zoo.methods.trsp.costs import Instance, best_routes, pair_costs, route_costs
from zoo.methods.trsp.instances import commuting_od_instance
from zoo.methods.trsp.placement import place

COUNTIES = ("manhattan", "travis", "sf")
RHO = 1 + math.sqrt(2)
SETTINGS = [("eca", 0.0), ("hybrid", 0.5), ("gc", None), ("kmeans", None), ("greedy", None), ("random", None)]
JR_STORE = "jr-pool"  # rows of the authors' design (runs/trsp-experiments/jr-pool.jsonl)
CORE_SETTINGS = [("eca", 0.0), ("gc", None), ("kmeans", None)]
PAPER = {
    "ECA JR factor": "<= 1 + sqrt 2 = 2.414 (tight; Theorem)",
    "any rule": ">= 1.366 on some instance",
    "clustering-induced": "cannot beat 3-JR in the worst case",
    "GC-TrSP": "in the (2, 1 + sqrt 2)-core; ECA: no bounded core guarantee",
    "experiments": "figures only (carpooling data not public): ECA <= 2.414, GC's JR up to ~3, hybrid between",
}


def _work() -> Path:
    out = repo_root() / "runs" / "trsp-experiments"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _figures() -> Path:
    out = repo_root() / "results" / "trsp" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    return out


def jr_round(
    county: str, rnd: int, n: int = 400, k: int = 20, m: int = 800, pool_size: int = 4000, figures: bool = False
) -> list[dict]:
    """All algorithms on one sampled instance (authors' design, module docstring); one row per algorithm with JR
    factor, mean minutes, stops, seconds."""
    inst = commuting_od_instance(county, n, m, seed=rnd, candidates="pool", pool_size=pool_size)
    C = pair_costs(inst)
    rows, costs = [], {}
    for algorithm, lam in SETTINGS:
        t0 = time.perf_counter()
        Y = place(inst, algorithm, k, lam or 0.0, seed=rnd, C=C).stops
        seconds = time.perf_counter() - t0
        cost, board, _ = best_routes(inst, Y)
        label = algorithm if lam is None or algorithm == "eca" else f"hybrid {lam:g}"
        costs[label] = 60 * cost
        rows.append(
            {
                "county": county,
                "round": rnd,
                "algorithm": algorithm,
                "lambda": lam,
                "jr_factor": jr_factor(inst, Y, k, C)[0],
                "mean_cost": 60 * float(cost.mean()),
                "walk_mean": 60 * float(inst.direct.mean()),
                "shuttle_share": float((board >= 0).mean()),
                "n_stops": len(Y),
                "seconds": seconds,
                "m": inst.m,
            }
        )
        if figures and algorithm in ("eca", "gc"):
            from zoo.methods.trsp.plots import plot_map

            plot_map(
                inst,
                Y,
                str(_figures() / f"map-{county}-{algorithm}.png"),
                f"{algorithm.upper()} on {inst.info['county']} (n = {n}, k = {k}, round {rnd}): {len(Y)} stops, "
                f"JR {rows[-1]['jr_factor']:.3f}, mean {rows[-1]['mean_cost']:.0f} min",
            )
    if figures:
        from zoo.methods.trsp.plots import plot_cost_cdfs

        plot_cost_cdfs(
            costs,
            str(_figures() / f"cost-cdf-{county}.png"),
            f"{inst.info['county']}: door-to-door minutes, n = {n}, k = {k}, round {rnd}",
        )
    return rows


def core_round(
    county: str, rnd: int, n: int = 40, m: int = 80, k: int = 20, solver: str = "cpsat", time_limit: float = 1.0
) -> list[dict]:
    """Least core alpha per algorithm (beta = 1; Greedy Capture also at beta = 2 and 1 + sqrt 2): exact, or a
    certified interval [core_alpha, core_alpha_upper) where an ILP step hit ``time_limit`` (CP-SAT deterministic time)."""
    inst = commuting_od_instance(county, n, m, seed=rnd)
    C = pair_costs(inst)
    rows = []
    for algorithm, lam in CORE_SETTINGS:
        Y = place(inst, algorithm, k, lam or 0.0, seed=rnd, C=C).stops
        for beta in (1.0, 2.0, RHO) if algorithm == "gc" else (1.0,):
            t0 = time.perf_counter()
            res = core_alpha(inst, Y, k, beta, solver, C, time_limit=time_limit, rel_tol=0.01)
            rows.append(
                {
                    "county": county,
                    "round": rnd,
                    "algorithm": algorithm,
                    "lambda": lam,
                    "beta": beta,
                    "core_alpha": res.alpha,
                    "core_alpha_upper": res.upper,
                    "exact": int(res.exact),
                    "jr_factor": jr_factor(inst, Y, k, C)[0],
                    "ilp_calls": res.calls,
                    "seconds": time.perf_counter() - t0,
                }
            )
    return rows


def _append(name: str, rows: list[dict]) -> None:
    with open(_work() / f"{name}.jsonl", "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def _read(name: str) -> list[dict]:
    path = _work() / f"{name}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def run(rounds: int, deadline: str | None, counties=COUNTIES, only: str | None = None) -> None:
    """JR rounds 0-2, core rounds 0-2, then JR and core round by round until ``rounds`` or the deadline, for every
    county, skipping (county, round) pairs already stored; ``only`` = ``"jr"`` or ``"core"`` runs one of them."""
    stop = None
    if deadline:
        h, mnt = map(int, deadline.split(":"))
        stop = datetime.now(UTC).replace(hour=h, minute=mnt, second=0, microsecond=0)
    done_jr = {(r["county"], r["round"]) for r in _read(JR_STORE)}
    done_core = {(r["county"], r["round"]) for r in _read("core")}

    def jr(rnd, county):
        if (county, rnd) not in done_jr:
            _append(JR_STORE, jr_round(county, rnd, figures=rnd == 0))
        print(f"{datetime.now(UTC):%H:%M:%S} JR round {rnd} {county} done", flush=True)

    def core(rnd, county):
        if (county, rnd) not in done_core:
            _append("core", core_round(county, rnd))
        print(f"{datetime.now(UTC):%H:%M:%S} core round {rnd} {county} done", flush=True)

    first = min(3, rounds)  # three seeds of each county before anything else (county by county)
    steps = [f for f, name in ((jr, "jr"), (core, "core")) if only in (None, name)]
    for step in steps:
        for county in counties:
            for rnd in range(first):
                step(rnd, county)
    for rnd in range(first, rounds):
        if stop and datetime.now(UTC) >= stop:
            print(f"deadline {deadline} reached before round {rnd}", flush=True)
            break
        for step in steps:
            for county in counties:
                step(rnd, county)


def finish() -> None:
    """Write results/trsp/jr.json and core.json (and the JR-vs-lambda figure) from the stored rows (each only when
    it has rows)."""
    from zoo.core.results import summarise, write_result
    from zoo.methods.trsp.plots import plot_jr_vs_lambda

    jr, core = _read(JR_STORE), _read("core")

    def rounds_of(rows):
        return ", ".join(f"{c} {len({r['round'] for r in rows if r['county'] == c})}" for c in COUNTIES)

    if jr:
        for r in jr:
            r["seed"] = r["round"]
        summary = summarise(
            jr, ["jr_factor", "mean_cost", "shuttle_share", "n_stops", "seconds"], by=["county", "algorithm", "lambda"]
        )
        for s in summary:
            vals = [
                r["jr_factor"]
                for r in jr
                if (r["county"], r["algorithm"], r["lambda"]) == (s["county"], s["algorithm"], s["lambda"])
            ]
            s["jr_max"] = max(vals)
        write_result(
            "trsp",
            "jr",
            jr,
            summary=summary,
            paper=PAPER,
            notes=(
                f"Rounds (seeds from 0) per county: {rounds_of(jr)}, of the authors' 50 (cut to fit the session on a shared "
                "2-core machine). The authors' design (main.py, candidate mode 1): each round samples a pool of 4,000 LODES "
                "2018 commuters by flow (endpoints jittered in their tract's land-area disc), draws n = 400 travellers from "
                "it and m = 800 candidate stops from the pool's 8,000 endpoints; k = 20. Walking = haversine x 1.3 at 5 km/h; "
                "shuttle = 0.2 x walking + 5 min wait (ours; the authors' car-time matrices are not public). jr_factor = "
                "least gamma >= 1 (exact one-pass audit); mean_cost in minutes (walk_mean = everyone walking); jr_max = "
                "worst round; seconds = placement time. lambda: 0 = ECA, 0.5 = the authors' hybrid, empty for the others."
            ),
        )
        pts = [dict(r, **{"lambda": r["lambda"]}) for r in jr if r["algorithm"] in ("eca", "hybrid")]
        plot_jr_vs_lambda(
            pts,
            str(_figures() / "jr-vs-lambda.png"),
            {"ECA bound 1 + sqrt 2": RHO, "worst-case lower bound for any rule 1.366": 1.366},
        )
    if core:
        for r in core:
            r["seed"] = r["round"]
        csum = summarise(core, ["core_alpha", "jr_factor", "ilp_calls", "seconds"], by=["county", "algorithm", "beta"])
        for s in csum:
            s["core_alpha_max"] = max(
                r["core_alpha"]
                for r in core
                if (r["county"], r["algorithm"], r["beta"]) == (s["county"], s["algorithm"], s["beta"])
            )
        write_result(
            "trsp",
            "core",
            core,
            summary=csum,
            paper=PAPER,
            packages=["ortools", "pulp"],
            notes=(
                f"Rounds per county: {rounds_of(core)}, of the issue's 20; n = 40 commuters, m = 80 seeded "
                "tracts, k = 20; ECA, GC and k-means audited (hybrid, greedy and random left out for time). "
                "core_alpha = least alpha >= 1 with no coalition S, stops Y' with |S| >= beta |Y'| n / k and "
                "alpha cost(Y') < cost(Y) for all of S (bisection over ratio values, each step the authors' ILP in "
                "OR-tools CP-SAT, 1 deterministic second per step, stopped at 1% relative width; exact = 0 marks an "
                "unfinished bisection, and then "
                "[core_alpha, core_alpha_upper) is a certified interval). Greedy Capture is audited at beta = 1, 2 (our "
                "reading of (2, 1+sqrt 2): size 2, cost 2.414) and 1 + sqrt 2 (the notes' order: cost 2, size 2.414)."
            ),
        )


def _optimal_jr(inst: Instance, k: int) -> float:
    """The best outcome's JR value before clamping at 1 (so that a climb can rise through values below 1)."""
    C, t = pair_costs(inst), math.ceil(2 * inst.n / k)

    def raw(Y):
        return float(np.partition(ratios(C, route_costs(inst, Y)), inst.n - t, axis=1)[:, inst.n - t].max())

    return min(raw(Y) for size in range(k + 1) for Y in itertools.combinations(range(inst.m), size))


def _graph_instance(W: np.ndarray, ends: np.ndarray, shuttle: float) -> Instance:
    from scipy.sparse.csgraph import shortest_path

    D = shortest_path(W, directed=False)
    a, b = ends[:, 0], ends[:, 1]
    return Instance(D[a], D[:, b].T, shuttle * D, D[a, b])


def lower_bound(restarts: int = 12, steps: int = 60, seed: int = 0) -> dict:
    """Seeded hill-climbing search (ours) for an instance whose best outcome has a large JR factor, beside the
    paper's 1.366 (its construction is not in our notes).

    Instances: shortest-path metrics on a complete graph of 6 points (walking) with the shuttle a multiple in
    {0, 0.1, 0.3} of it, every point a candidate, n = 6 travellers, k in {2, 3}. Each step re-weights one edge or moves
    one endpoint and keeps the change when the brute-force optimum (every Y with |Y| <= k) does not fall.
    Writes results/trsp/lower-bound.json.
    """
    from zoo.core.results import write_result

    rng = np.random.default_rng(seed)
    rows, nodes, n = [], 6, 6
    for restart in range(restarts):
        W = np.triu(rng.random((nodes, nodes)) * 10 + 0.1, 1)
        W = W + W.T
        ends = rng.integers(nodes, size=(n, 2))
        shuttle, k = float(rng.choice([0.0, 0.1, 0.3])), int(rng.choice([2, 3]))
        cur = _optimal_jr(_graph_instance(W, ends, shuttle), k)
        for _ in range(steps):
            W2, e2 = W.copy(), ends.copy()
            if rng.random() < 0.5:
                i, j = rng.choice(nodes, 2, replace=False)
                W2[i, j] = W2[j, i] = W[i, j] * float(np.exp(rng.normal(0, 0.7)))
            else:
                e2[rng.integers(n), rng.integers(2)] = rng.integers(nodes)
            val = _optimal_jr(_graph_instance(W2, e2, shuttle), k)
            if val >= cur:
                W, ends, cur = W2, e2, val
        rows.append({"restart": restart, "k": k, "shuttle": shuttle, "optimal_jr": max(cur, 1.0), "raw": cur})
    best = max(r["optimal_jr"] for r in rows)
    write_result(
        "trsp",
        "lower-bound",
        rows,
        paper={"lower bound": "some instance has no outcome better than 1.366-JR (construction not in notes)"},
        notes=(
            f"Hill-climbing search (ours, seed {seed}): {restarts} restarts x {steps} steps on 6-point "
            "shortest-path metrics, n = 6, k = 2 or 3, shuttle 0-0.3 x walking; optimal_jr = the best outcome's "
            f"JR factor (brute force over every |Y| <= k; the climb follows the value before clamping at 1, raw) at the end of each climb; largest found {best:.4f}. "
            "A search, not the paper's construction: a value below 1.366 says only that it found none."
        ),
    )
    return {"worst_optimal_jr": best}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["run", "finish", "lower-bound"])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--deadline", default=None, help="UTC HH:MM after which no new round starts")
    ap.add_argument("--restarts", type=int, default=12)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--only", choices=["jr", "core"], default=None, help="run only the JR or only the core rounds")
    args = ap.parse_args(argv)
    if args.what == "run":
        run(args.rounds, args.deadline, only=args.only)
        finish()
    elif args.what == "finish":
        finish()
    else:
        print(lower_bound(args.restarts, args.steps))


if __name__ == "__main__":
    main()
