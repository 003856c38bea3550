"""The paper's protocol (authors' main.py; notes §5.5) on real commutes: JR and core factors per algorithm.

    python -m zoo.methods.trsp.experiments run --rounds 50 --deadline 16:30   # JR + core, round by round
    python -m zoo.methods.trsp.experiments finish                             # write results from the rows so far
    python -m zoo.methods.trsp.experiments lower-bound --trials 1500          # worst optimal JR found (ours)

* JR: per county (Manhattan, Travis, SF) and round (= seed), n = 400 commuters sampled by flow, every tract centroid
  a candidate, k = 20; ECA, Greedy Capture, hybrid lambda in {.25, .5, .75}, k-means, utilitarian greedy, random.
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
from zoo.methods.trsp.audit import core_alpha, jr_factor
from zoo.methods.trsp.costs import Instance, best_routes, pair_costs
from zoo.methods.trsp.instances import commuting_od_instance
from zoo.methods.trsp.placement import place

COUNTIES = ("manhattan", "travis", "sf")
RHO = 1 + math.sqrt(2)
SETTINGS = [("eca", 0.0), ("hybrid", 0.25), ("hybrid", 0.5), ("hybrid", 0.75), ("gc", None), ("kmeans", None),
            ("greedy", None), ("random", None)]
CORE_SETTINGS = [("eca", 0.0), ("gc", None), ("kmeans", None)]
PAPER = {"ECA JR factor": "<= 1 + sqrt 2 = 2.414 (tight; Theorem)", "any rule": ">= 1.366 on some instance",
         "clustering-induced": "cannot beat 3-JR in the worst case",
         "GC-TrSP": "in the (2, 1 + sqrt 2)-core; ECA: no bounded core guarantee",
         "experiments": "figures only (carpooling data not public): ECA <= 2.414, GC's JR up to ~3, hybrid between"}


def _work() -> Path:
    out = repo_root() / "runs" / "trsp-experiments"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _figures() -> Path:
    out = repo_root() / "results" / "trsp" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    return out


def jr_round(county: str, rnd: int, n: int = 400, k: int = 20, figures: bool = False) -> list[dict]:
    """All algorithms on one sampled instance; one row per algorithm with JR factor, mean minutes, stops, seconds."""
    inst = commuting_od_instance(county, n, None, seed=rnd)
    C = pair_costs(inst)
    rows, costs = [], {}
    for algorithm, lam in SETTINGS:
        t0 = time.perf_counter()
        Y = place(inst, algorithm, k, lam or 0.0, seed=rnd, C=C).stops
        seconds = time.perf_counter() - t0
        cost, board, _ = best_routes(inst, Y)
        label = algorithm if lam is None or algorithm == "eca" else f"hybrid {lam:g}"
        costs[label] = 60 * cost
        rows.append({"county": county, "round": rnd, "algorithm": algorithm, "lambda": lam,
                     "jr_factor": jr_factor(inst, Y, k, C)[0], "mean_cost": 60 * float(cost.mean()),
                     "walk_mean": 60 * float(inst.direct.mean()), "shuttle_share": float((board >= 0).mean()),
                     "n_stops": len(Y), "seconds": seconds, "m": inst.m})
        if figures and algorithm in ("eca", "gc"):
            from zoo.methods.trsp.render import plot_map

            plot_map(inst, Y, str(_figures() / f"map-{county}-{algorithm}.png"),
                     f"{algorithm.upper()} on {inst.info['county']} (n = {n}, k = {k}, round {rnd}): {len(Y)} stops, "
                     f"JR {rows[-1]['jr_factor']:.3f}, mean {rows[-1]['mean_cost']:.0f} min")
    if figures:
        from zoo.methods.trsp.render import plot_cost_cdfs

        plot_cost_cdfs(costs, str(_figures() / f"cost-cdf-{county}.png"),
                       f"{inst.info['county']}: door-to-door minutes, n = {n}, k = {k}, round {rnd}")
    return rows


def core_round(county: str, rnd: int, n: int = 40, m: int = 80, k: int = 20, solver: str = "cpsat",
               time_limit: float = 1.0) -> list[dict]:
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
            rows.append({"county": county, "round": rnd, "algorithm": algorithm, "lambda": lam, "beta": beta,
                         "core_alpha": res.alpha, "core_alpha_upper": res.upper, "exact": int(res.exact),
                         "jr_factor": jr_factor(inst, Y, k, C)[0], "ilp_calls": res.calls,
                         "seconds": time.perf_counter() - t0})
    return rows


def _append(name: str, rows: list[dict]) -> None:
    with open(_work() / f"{name}.jsonl", "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


def _read(name: str) -> list[dict]:
    path = _work() / f"{name}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def run(rounds: int, deadline: str | None, counties=COUNTIES) -> None:
    """JR rounds 0-2, core rounds 0-2, then JR and core round by round until ``rounds`` or the deadline, for every
    county, skipping (county, round) pairs already stored."""
    stop = None
    if deadline:
        h, mnt = map(int, deadline.split(":"))
        stop = datetime.now(UTC).replace(hour=h, minute=mnt, second=0, microsecond=0)
    done_jr = {(r["county"], r["round"]) for r in _read("jr")}
    done_core = {(r["county"], r["round"]) for r in _read("core")}
    def jr(rnd):
        for county in counties:
            if (county, rnd) not in done_jr:
                _append("jr", jr_round(county, rnd, figures=rnd == 0))
            print(f"{datetime.now(UTC):%H:%M:%S} JR round {rnd} {county} done", flush=True)

    def core(rnd):
        for county in counties:
            if (county, rnd) not in done_core:
                _append("core", core_round(county, rnd))
            print(f"{datetime.now(UTC):%H:%M:%S} core round {rnd} {county} done", flush=True)

    first = min(3, rounds)  # three seeds of each before anything else
    for rnd in range(first):
        jr(rnd)
    for rnd in range(first):
        core(rnd)
    for rnd in range(first, rounds):
        if stop and datetime.now(UTC) >= stop:
            print(f"deadline {deadline} reached before round {rnd}", flush=True)
            break
        jr(rnd)
        core(rnd)


def finish() -> None:
    """Write results/trsp/jr.json and core.json (and the JR-vs-lambda figure) from the stored rows."""
    from zoo.core.results import summarise, write_result
    from zoo.methods.trsp.render import plot_jr_vs_lambda

    jr, core = _read("jr"), _read("core")
    rounds = len({r["round"] for r in jr})
    for r in jr:
        r["seed"] = r["round"]
    summary = summarise(jr, ["jr_factor", "mean_cost", "shuttle_share", "n_stops", "seconds"],
                        by=["county", "algorithm", "lambda"])
    for s in summary:
        vals = [r["jr_factor"] for r in jr if (r["county"], r["algorithm"], r["lambda"]) ==
                (s["county"], s["algorithm"], s["lambda"])]
        s["jr_max"] = max(vals)
    write_result("trsp", "jr", jr, summary=summary, paper=PAPER, notes=(
        f"{rounds} rounds (seeds 0-{rounds - 1}) per county of the authors' 50 (cut to fit the session on a shared "
        "2-core machine); each round samples n = 400 LODES 2018 commuters by flow with endpoints jittered in their "
        "tract's land-area disc, every tract centroid is a candidate (Manhattan 288, Travis 218, SF 196), k = 20. "
        "Walking = haversine x 1.3 at 5 km/h; shuttle = 0.2 x walking + 5 min wait (ours). jr_factor = least "
        "gamma >= 1 (exact one-pass audit); mean_cost in minutes (walk_mean = everyone walking); jr_max = worst round. "
        "lambda: 0 = ECA, hybrid 0.25-0.75, empty for the others."))
    for r in core:
        r["seed"] = r["round"]
    csum = summarise(core, ["core_alpha", "jr_factor", "ilp_calls", "seconds"], by=["county", "algorithm", "beta"])
    for s in csum:
        s["core_alpha_max"] = max(r["core_alpha"] for r in core if (r["county"], r["algorithm"], r["beta"]) ==
                                  (s["county"], s["algorithm"], s["beta"]))
    write_result("trsp", "core", core, summary=csum, paper=PAPER, packages=["ortools", "pulp"], notes=(
        f"{len({r['round'] for r in core})} rounds per county of the issue's 20; n = 40 commuters, m = 80 seeded "
        "tracts, k = 20; ECA, GC and k-means audited (hybrid, greedy and random left out for time). "
        "core_alpha = least alpha >= 1 with no coalition S, stops Y' with |S| >= beta |Y'| n / k and "
        "alpha cost(Y') < cost(Y) for all of S (bisection over ratio values, each step the authors' ILP in "
        "OR-tools CP-SAT, 1 deterministic second per step, stopped at 1% relative width; exact = 0 marks an "
        "unfinished bisection, and then "
        "[core_alpha, core_alpha_upper) is a certified interval). Greedy Capture is audited at beta = 1, 2 (our "
        "reading of (2, 1+sqrt 2): size 2, cost 2.414) and 1 + sqrt 2 (the notes' order: cost 2, size 2.414)."))
    pts = [dict(r, **{"lambda": r["lambda"]}) for r in jr if r["algorithm"] in ("eca", "hybrid")]
    plot_jr_vs_lambda(pts, str(_figures() / "jr-vs-lambda.png"), {"ECA bound 1 + sqrt 2": RHO,
                                                                  "no rule beats 1.366": 1.366})


def lower_bound(trials: int = 1500, seed: int = 0) -> dict:
    """Seeded search (ours) for an instance whose best outcome has a large JR factor, beside the paper's 1.366.

    Tiny clustered Euclidean instances (n = 6-8 travellers, m = 5-6 candidates, k = 2-3); for each, the optimum
    over every Y with |Y| <= k by brute force. Writes results/trsp/lower-bound.json.
    """
    from zoo.core.results import write_result

    rng = np.random.default_rng(seed)
    rows, best = [], 0.0
    for trial in range(trials):
        n, m, k = int(rng.integers(6, 9)), int(rng.integers(5, 7)), int(rng.integers(2, 4))
        pts = rng.random((2 * n + m, 2)) * rng.choice([1.0, 5.0])
        a, b, c = pts[:n], pts[n:2 * n], pts[2 * n:]
        D = lambda p, q: np.linalg.norm(p[:, None] - q[None], axis=2)
        inst = Instance(D(a, c), D(c, b).T, float(rng.choice([0.0, 0.1, 0.5])) * D(c, c),
                        np.linalg.norm(a - b, axis=1))
        C = pair_costs(inst)
        opt = min(jr_factor(inst, Y, k, C)[0] for size in range(k + 1)
                  for Y in itertools.combinations(range(m), size))
        best = max(best, opt)
        rows.append({"trial": trial, "n": n, "m": m, "k": k, "optimal_jr": opt})
    write_result("trsp", "lower-bound", [{"trials": trials, "worst_optimal_jr": best,
                                          "share_above_1": float(np.mean([r["optimal_jr"] > 1 for r in rows]))}],
                 paper={"lower bound": "some instance has no outcome better than 1.366-JR (construction not in notes)"},
                 notes=(f"Seeded random search (ours, seed {seed}): {trials} tiny Euclidean instances (n 6-8, m 5-6, "
                        "k 2-3, shuttle 0-0.5 x Euclidean); the best outcome over every |Y| <= k found by brute "
                        "force; worst_optimal_jr = the largest optimum seen. Random search, not the paper's "
                        "construction: a value below 1.366 says only that random instances are easy."))
    return {"worst_optimal_jr": best}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["run", "finish", "lower-bound"])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--deadline", default=None, help="UTC HH:MM after which no new round starts")
    ap.add_argument("--trials", type=int, default=1500)
    args = ap.parse_args(argv)
    if args.what == "run":
        run(args.rounds, args.deadline)
        finish()
    elif args.what == "finish":
        finish()
    else:
        print(lower_bound(args.trials))


if __name__ == "__main__":
    main()
