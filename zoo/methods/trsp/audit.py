"""Fairness audits of an outcome Y (paper §3; notes §5.2, authors' check_JR / check_core).

* gamma-JR: no candidate pair p and group S, ``|S| >= ceil(2n/k)``, with ``gamma * cost_i(p) < cost_i(Y)`` for all i
  in S. The JR factor of Y is the least ``gamma >= 1`` for which Y is gamma-JR. :func:`jr_factor` computes it exactly
  in one pass (ours): per pair, the ``ceil(2n/k)``-th largest ratio ``cost_i(Y) / cost_i(p)``; the factor is the
  largest of these (and at least 1). :func:`jr_bisection` is the authors' route: bisection on gamma with a
  :func:`check_jr` call per step.
* (alpha, beta)-core: no coalition S and stop set Y' with ``|S| >= beta |Y'| n / k`` and
  ``alpha * cost_i(Y') < cost_i(Y)`` for all i in S (alpha multiplies cost, beta the coalition size, as in the
  notes). :func:`core_alpha` gives the least ``alpha >= 1`` at a given beta: bisection over the finitely many ratio
  values, each step the authors' ILP (travellers x, stops y, pairs z) solved by OR-tools CP-SAT or PuLP/CBC.
  :func:`core_alpha_bruteforce` enumerates every Y' for tiny instances.

Ratio convention: ``cost_i(Y) / cost_i(p)`` with ``c / 0 = inf`` for ``c > 0`` and ``0 / 0 = 0`` (never a violation).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from zoo.methods.trsp.costs import Instance, all_pairs, pair_costs, route_costs


def ratios(C: np.ndarray, cost_Y: np.ndarray) -> np.ndarray:
    """(P, n) ``cost_i(Y) / cost_i(p)`` with the module's 0/0 and c/0 convention. C: (P, n); cost_Y: (n,)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        R = cost_Y[None, :] / C
    R[(C <= 0) & (cost_Y[None, :] <= 0)] = 0.0
    return R


def _threshold(n: int, size: float) -> int:
    """Least integer coalition size ``>= size`` (a hair of slack so 2n/k = 40.0 stays 40)."""
    return max(1, math.ceil(size - 1e-9))


def jr_factor(inst: Instance, stops, k: int, C: np.ndarray | None = None) -> tuple[float, int]:
    """Exact JR factor of Y in one pass.

    Args:
        stops: Y as candidate indices. k: budget. C: optional ``pair_costs(inst)`` (P, n).

    Returns:
        ``(gamma, p)``: the least gamma >= 1 with Y gamma-JR, and the index (into ``all_pairs(m)``) of the pair that
        sets it (-1 when gamma = 1 with no pair above 1).
    """
    C = pair_costs(inst) if C is None else C
    n, t = inst.n, _threshold(inst.n, 2 * inst.n / k)
    if t > n:
        return 1.0, -1
    cost_Y = route_costs(inst, stops)
    rows = np.flatnonzero((C < cost_Y[None, :]).sum(1) >= t)  # the one full pass: pairs with t gainers at all
    if len(rows) == 0:
        return 1.0, -1

    def kth(r: np.ndarray) -> np.ndarray:
        return np.partition(ratios(C[r], cost_Y), n - t, axis=1)[:, n - t]

    seed = rows[:64]  # a lower bound L from a few rows; only rows with t ratios above L can beat it
    L = float(kth(seed).max())
    rest = rows[(L * C[rows] < cost_Y[None, :]).sum(1) >= t]
    cand = np.concatenate([seed, rest])
    vals = kth(cand)
    j = int(vals.argmax())
    return (float(vals[j]), int(cand[j])) if vals[j] > 1 else (1.0, -1)


def check_jr(C: np.ndarray, cost_Y: np.ndarray, gamma: float, t: int) -> bool:
    """True when Y is gamma-JR: no pair has ``>= t`` travellers with ``gamma * cost_i(p) < cost_i(Y)``."""
    return not bool(((gamma * C < cost_Y[None, :]).sum(1) >= t).any())


def jr_bisection(
    inst: Instance, stops, k: int, C: np.ndarray | None = None, iters: int = 30, hi: float | None = None
) -> tuple[float, int]:
    """The authors' JR approximation: bisection on gamma in [1, hi] with :func:`check_jr` per step.

    Returns:
        ``(gamma, calls)``: the upper end after ``iters`` halvings (within ``(hi - 1) / 2**iters`` of the exact
        factor) and the number of ``check_jr`` calls.
    """
    C = pair_costs(inst) if C is None else C
    cost_Y = route_costs(inst, stops)
    t = _threshold(inst.n, 2 * inst.n / k)
    lo, calls = 1.0, 1
    if hi is None:
        finite = ratios(C, cost_Y)
        hi = float(np.max(finite[np.isfinite(finite)], initial=1.0)) + 1.0
    if check_jr(C, cost_Y, lo, t):
        return lo, calls
    for _ in range(iters):
        mid = (lo + hi) / 2
        calls += 1
        lo, hi = (lo, mid) if check_jr(C, cost_Y, mid, t) else (mid, hi)
    return hi, calls


# ---- core ----------------------------------------------------------------------------------------------------------
def core_alpha_bruteforce(inst: Instance, stops, k: int, beta: float = 1.0) -> float:
    """Least alpha >= 1 with Y in the (alpha, beta)-core, by enumerating every Y' (2^m sets; m <= ~12).

    For each Y' the best coalition is the ``ceil(beta |Y'| n / k)`` travellers with the largest
    ``cost_i(Y) / cost_i(Y')``; the factor is the largest such s-th ratio over Y'.
    """
    cost_Y = route_costs(inst, stops)
    best = 1.0
    for size in range(2, inst.m + 1):
        s = _threshold(inst.n, beta * size * inst.n / k)
        if s > inst.n:
            break
        for Yp in itertools.combinations(range(inst.m), size):
            r = ratios(route_costs(inst, Yp)[None, :], cost_Y)[0]
            best = max(best, float(np.sort(r)[::-1][s - 1]))
    return best


def _vertex_cover(edges: np.ndarray) -> list[int]:
    """A vertex cover of the edge list (E, 2), greedily by degree: every improving pair of a traveller touches it, so
    a covered traveller has a stop of it in Y' (the cut ``x_i <= sum_{j in cover} y_j``)."""
    edges, cover = [tuple(e) for e in edges.tolist()], []
    while edges:
        ids, counts = np.unique(np.asarray(edges).ravel(), return_counts=True)
        j = int(ids[counts.argmax()])
        cover.append(j)
        edges = [e for e in edges if j not in e]
    return cover


def coalition_exists(
    improves: np.ndarray,
    pairs: np.ndarray,
    n: int,
    k: int,
    beta: float,
    solver: str = "cpsat",
    time_limit: float = 60.0,
) -> bool:
    """The authors' core ILP as a feasibility question: is there S, Y' with ``|S| >= beta (n/k) |Y'|``, every i in S
    improved by some pair inside Y'?

    Variables: ``x_i`` (traveller in S), ``y_j`` (stop in Y'), ``z_p <= y_u, y_v`` (pair inside Y');
    ``x_i <= sum_{p improves i} z_p``; ``k sum x >= beta n sum y``; ``sum x >= 1``.

    Args:
        improves: (P, n) bool, pair p improves traveller i enough. pairs: (P, 2) candidate indices.
        solver: ``"cpsat"`` (OR-tools; beta rounded down to 1e-6 so no coalition is missed) or ``"cbc"`` (PuLP).
        time_limit: CP-SAT deterministic time units (about seconds on an idle core), CBC wall seconds.

    Raises:
        ValueError: unknown solver. RuntimeError: the solver stopped without an answer within ``time_limit``.
    """
    P_used = np.flatnonzero(improves.any(1))
    agents = np.flatnonzero(improves.any(0))
    if len(P_used) == 0:
        return False
    stops = np.unique(pairs[P_used])
    if solver == "cpsat":
        from ortools.sat.python import cp_model

        md = cp_model.CpModel()
        x = {i: md.NewBoolVar(f"x{i}") for i in agents}
        y = {j: md.NewBoolVar(f"y{j}") for j in stops}
        z = {p: md.NewBoolVar(f"z{p}") for p in P_used}
        for p in P_used:
            u, v = pairs[p]
            md.AddImplication(z[p], y[u])
            md.AddImplication(z[p], y[v])
        for i in agents:
            mine = P_used[improves[P_used, i]]
            md.Add(x[i] <= sum(z[p] for p in mine))
            md.Add(x[i] <= sum(y[j] for j in _vertex_cover(pairs[mine])))  # valid cuts (ours): tighter LP
            md.Add(2 * x[i] <= sum(y[j] for j in np.unique(pairs[mine])))
        q = 10**6
        md.Add(q * k * sum(x.values()) >= math.floor(beta * q) * n * sum(y.values()))
        md.Add(sum(x.values()) >= 1)
        sv = cp_model.CpSolver()
        sv.parameters.num_workers = 1
        sv.parameters.linearization_level = 2  # use the LP relaxation with the cuts above
        sv.parameters.max_deterministic_time = time_limit  # machine-load independent (about seconds)
        status = sv.Solve(md)
        if status == cp_model.UNKNOWN:
            raise RuntimeError(f"CP-SAT gave no answer within deterministic time {time_limit}")
        return status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    if solver == "cbc":
        import pulp

        prob = pulp.LpProblem("core", pulp.LpMaximize)
        x = {i: pulp.LpVariable(f"x{i}", cat="Binary") for i in agents}
        y = {j: pulp.LpVariable(f"y{j}", cat="Binary") for j in stops}
        z = {p: pulp.LpVariable(f"z{p}", cat="Binary") for p in P_used}
        prob += pulp.lpSum(x.values())
        for p in P_used:
            u, v = pairs[p]
            prob += z[p] <= y[u]
            prob += z[p] <= y[v]
        for i in agents:
            mine = P_used[improves[P_used, i]]
            prob += x[i] <= pulp.lpSum(z[p] for p in mine)
            prob += x[i] <= pulp.lpSum(y[j] for j in _vertex_cover(pairs[mine]))
            prob += 2 * x[i] <= pulp.lpSum(y[j] for j in np.unique(pairs[mine]))
        prob += k * pulp.lpSum(x.values()) >= beta * n * pulp.lpSum(y.values())
        prob += pulp.lpSum(x.values()) >= 1
        status = prob.solve(pulp.PULP_CBC_CMD(msg=0, threads=1, timeLimit=time_limit))
        name = pulp.LpStatus[status]
        if name not in ("Optimal", "Infeasible"):
            raise RuntimeError(f"CBC stopped with status {name}")
        return name == "Optimal"
    raise ValueError(f"solver: 'cpsat' or 'cbc', got {solver!r}")


class CoreAudit(NamedTuple):
    """Result of :func:`core_alpha`: ``alpha`` is attained by a violating coalition (a certified lower bound, and
    the exact least factor when ``exact``); no coalition improves every member by a ratio ``>= upper``."""

    alpha: float
    upper: float
    calls: int
    exact: bool


def core_alpha(
    inst: Instance,
    stops,
    k: int,
    beta: float = 1.0,
    solver: str = "cpsat",
    C: np.ndarray | None = None,
    time_limit: float = 60.0,
    rel_tol: float = 0.0,
) -> CoreAudit:
    """Least alpha >= 1 with Y in the (alpha, beta)-core: bisection over the sorted distinct ratio values, one
    :func:`coalition_exists` per step (improvement = ratio >= value, so the answer is a ratio attained).

    Bounds (ours) narrow the search: the pair-only coalitions give a lower end (the JR-style s-th largest ratio
    with ``s = ceil(2 beta n / k)``), each member needing some ratio >= alpha gives an upper end. A step whose ILP
    hits ``time_limit`` is skipped downward (the result is then a certified interval, ``exact = False``);
    ``rel_tol > 0`` stops once ``upper / alpha - 1 <= rel_tol`` (also a certified interval).
    """
    C = pair_costs(inst) if C is None else C
    pairs = all_pairs(inst.m)
    R = ratios(C, route_costs(inst, stops))
    n = inst.n
    s = _threshold(n, 2 * beta * n / k)
    if s > n:
        return CoreAudit(1.0, 1.0, 0, True)
    lo = max(float(np.partition(R, n - s, axis=1)[:, n - s].max()), 1.0)
    hi = float(np.sort(R.max(0))[::-1][s - 1])
    values = np.unique(R[(R > lo) & (R <= hi)])
    calls, best, upper, exact = 0, lo, float(np.nextafter(hi, np.inf)), True
    a, b = 0, len(values) - 1  # find the largest value v with a coalition at ratio >= v
    while a <= b and upper / best - 1 > rel_tol:
        mid = (a + b) // 2
        calls += 1
        try:
            found = coalition_exists(R >= values[mid], pairs, n, k, beta, solver, time_limit)
        except RuntimeError:
            exact, b = False, mid - 1
            continue
        if found:
            best, a = float(values[mid]), mid + 1
        else:
            upper, b = min(upper, float(values[mid])), mid - 1
    exact = exact and not (a <= b)  # stopped by rel_tol with values left between
    return CoreAudit(best, upper, calls, exact)
