"""The paper's three placement rules as one expanding-radius event loop (paper §4-5; notes §5.4, authors' model.py).

A radius ``r`` grows from 0. Four kinds of event can fire at ``r``:

* **served** - an active traveller with ``cost_i(Y) <= r`` leaves (ECA's "already served within r");
* **pair** - a pair ``{y, y'}`` with both stops closed has ``>= ceil(2n/k)`` active travellers (by weight) with
  ``cost_i({y, y'}) <= r``: open both, those travellers leave;
* **half pair** - a pair with exactly one open stop has ``>= ceil(n/k)`` such travellers: open the other;
* **stop** (Greedy Capture on the 2n endpoints, radius ``lam * r``) - a closed candidate has ``>= ceil(2n/k)`` live
  endpoints within walking distance ``lam * r``: open it, those endpoints leave; live endpoints within
  ``lam * r`` of an open stop leave too.

ECA = pair + half pair + served (``lam = 0``). GC-TrSP = stop events only at radius ``r`` (``lam = 1``, no pair
events). The lambda-hybrid runs all four. Every opened stop retires at least ``2n/k`` endpoint-units (a pair
retires ``>= 2 ceil(2n/k)`` endpoints for 2 stops, a half pair ``>= 2 ceil(n/k)`` for 1, a GC stop ``ceil(2n/k)``),
so ``|Y| <= k`` always.

Choices that are ours (the notes leave them open): the next radius is the minimum over *all* event kinds (the notes'
loop advances ``r`` by pair events only and checks half pairs at those radii). Pair events count travellers by
their live endpoints ("endpoint weight"): a traveller one of whose endpoints a Greedy Capture stop has taken weighs
1/2, so thresholds are ``2 ceil(2n/k)`` and ``2 ceil(n/k)`` endpoints and no endpoint is counted twice (which keeps
``|Y| <= k``); a served or captured traveller's endpoints leave with them. Without stop events (ECA) every
unserved traveller weighs 1, as in the notes.
"""

from __future__ import annotations

import math

import numpy as np

from zoo.methods.trsp.baselines import greedy_stops, kmeans_stops, random_stops
from zoo.methods.trsp.costs import Instance, Placement, all_pairs, open_stop, pair_costs

_TOL = 1e-12


_SORTED: dict = {}


def sorted_rows(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, values)`` of each row of M sorted ascending; the last two sorts are kept, so that ECA and the
    hybrids on one pair-cost matrix sort it once (the key holds the array's id, shape and corner values)."""
    key = (id(M), M.shape, float(M.flat[0]) if M.size else 0.0, float(M.flat[-1]) if M.size else 0.0)
    if key not in _SORTED:
        if len(_SORTED) >= 2:
            _SORTED.pop(next(iter(_SORTED)))
        order = np.argsort(M, axis=1, kind="stable").astype(np.int32)
        _SORTED[key] = (order, np.take_along_axis(M, order, 1))
    return _SORTED[key]


class _LazyKth:
    """Per row of a cost matrix, the least value at which the columns' weights add up to t, with lazy
    re-evaluation (ours). With 0/1 weights this is the t-th smallest value over the active columns.

    Weights only ever fall, so a stored value is a lower bound of the current one; only rows whose bound is
    smallest are re-evaluated, in batches, until the smallest exact value is below every other bound. A row whose
    threshold ``t`` drops (a pair becoming half-open) must be refreshed with :meth:`refresh`.

    Args:
        M: (R, N) costs (rows: pairs or candidates; columns: travellers or endpoints).
    """

    def __init__(self, M: np.ndarray, t: np.ndarray, active: np.ndarray, batch: int = 256):
        self.order, self.vals = sorted_rows(M)
        self.t = np.asarray(t, np.int64).copy()
        self.batch = batch
        self.key = self._exact(np.arange(len(M)), active)

    def _exact(self, rows: np.ndarray, active: np.ndarray, width: int | None = None) -> np.ndarray:
        t = self.t[rows]
        width = width or min(self.vals.shape[1], max(64, 3 * int(t.max(initial=1))))
        cs = np.cumsum(active[self.order[rows, :width]], axis=1, dtype=np.int32)
        idx = np.argmax(cs >= t[:, None], axis=1)
        out = np.where((cs[:, -1] >= t) & (t > 0), self.vals[rows, idx], np.inf)
        short = (cs[:, -1] < t) & (t > 0)  # not reached within the first columns: look at the whole row
        if short.any() and width < self.vals.shape[1]:
            out[short] = self._exact(rows[short], active, self.vals.shape[1])
        return out

    def refresh(self, rows: np.ndarray, active: np.ndarray) -> None:
        self.key[rows] = self._exact(rows, active)

    def argmin(self, active: np.ndarray) -> tuple[float, int]:
        """The row with the least exact t-th smallest active value: ``(value, row)``; ``(inf, -1)`` if none.

        Rows are re-evaluated in ascending order of their stored bounds (one sort per call), a batch at a time,
        until the best exact value found is at most the next unvisited bound.
        """
        order = np.argsort(self.key, kind="stable")
        best, arg = np.inf, -1
        for s in range(0, len(order), self.batch):
            rows = order[s : s + self.batch]
            if not np.isfinite(self.key[rows[0]]):
                break  # an infinite bound stays infinite: weights only fall
            self.refresh(rows, active)
            i = int(self.key[rows].argmin())
            if self.key[rows[i]] < best:
                best, arg = float(self.key[rows[i]]), int(rows[i])
            nxt = self.key[order[s + self.batch]] if s + self.batch < len(order) else np.inf
            if best <= nxt:
                break
        return (best, arg) if np.isfinite(best) else (np.inf, -1)

    def cost_row(self, row: int) -> np.ndarray:
        """Row ``row`` of M in column order."""
        out = np.empty(self.vals.shape[1])
        out[self.order[row]] = self.vals[row]
        return out


def expand(
    inst: Instance, k: int, lam: float = 0.0, pair_events: bool = True, C: np.ndarray | None = None
) -> Placement:
    """Run the event loop (module docstring) and return the opened stops.

    Args:
        inst: the instance (n travellers, m candidates).
        k: stop budget, ``k >= 2``.
        lam: Greedy Capture radius factor; 0 turns stop events off (ECA).
        pair_events: False turns pair, half-pair and served events off (pure Greedy Capture).
        C: optional precomputed ``pair_costs(inst)`` (P, n), reused across runs on one instance.

    Returns:
        A :class:`Placement` with ``len(stops) <= k``.

    Raises:
        ValueError: ``k < 2``, ``lam < 0``, or no event kind enabled.
    """
    if k < 2:
        raise ValueError(f"k: need a budget of at least 2 stops, got {k}")
    if lam < 0 or (lam == 0 and not pair_events):
        raise ValueError(f"lam: must be >= 0 and some event kind must be on, got lam={lam}, pairs={pair_events}")
    n, m = inst.n, inst.m
    t2, t1 = math.ceil(2 * n / k), math.ceil(n / k)
    opened, Y, events = np.zeros(m, bool), [], []
    served, live = np.zeros(n, bool), np.ones(2 * n, bool)
    cost = inst.direct.copy()
    if pair_events:
        pairs = all_pairs(m)
        pk = _LazyKth(
            pair_costs(inst, pairs) if C is None else C, np.full(len(pairs), 2 * t2), np.full(n, 2, np.int32)
        )  # weights and thresholds in endpoints
        ends = pairs.ravel(order="F")  # stop of each (pair, side): all u, then all v
        by_stop = np.argsort(ends, kind="stable")
        touching = np.split(by_stop % len(pairs), np.cumsum(np.bincount(ends, minlength=m))[:-1])  # pairs of stop j
    if lam > 0:
        E = inst.endpoint_walk.T  # (m, 2n)
        gk = _LazyKth(E, np.full(m, t2), live)
    r = 0.0
    while True:
        reach = r * (1 + _TOL) + _TOL
        if pair_events:
            gone = ~served & (cost <= reach)
            served |= gone
            live &= ~np.concatenate([gone, gone])
        if lam > 0 and Y:
            live &= ~(E[Y].min(0) <= lam * reach)
        weight = live[:n].astype(np.int32) + live[n:]  # a traveller's live endpoints (0 once served)
        best, kind, arg = np.inf, None, -1
        if pair_events and weight.any():
            best, arg = pk.argmin(weight)
            kind = "pair" if not opened[pairs[arg]].any() else "half pair"
        if lam > 0 and live.any():
            g, j = gk.argmin(live)
            if g / lam < best:
                best, kind, arg = g / lam, "stop", j
        if not np.isfinite(best):
            break  # nothing can open any more: r grows to infinity and everyone walks or rides what is open
        if best > reach:
            r = float(best)
            continue
        if kind == "stop":
            new = (arg,)
            live &= ~(E[arg] <= lam * reach)
        else:
            new = tuple(int(s) for s in pairs[arg] if not opened[s])
            got = (weight > 0) & (pk.cost_row(arg) <= reach)
            served |= got
            live &= ~np.concatenate([got, got])
        for s in new:
            opened[s] = True
            open_stop(inst, cost, Y, s)
            if lam > 0:
                gk.t[s] = 0  # an open stop no longer captures
                gk.key[s] = np.inf
            if pair_events:
                rows = touching[s]
                state = opened[pairs[rows]].sum(1)
                pk.t[rows] = np.where(state == 1, 2 * t1, 0)
                pk.refresh(rows, live[:n].astype(np.int32) + live[n:])
        events.append((r, kind, new))
    if len(Y) > k:  # the budget argument of the module docstring; a failure here is a bug
        raise AssertionError(f"opened {len(Y)} stops with budget k={k}")
    return Placement(Y, events)


def eca(inst: Instance, k: int, C: np.ndarray | None = None) -> Placement:
    """Expanding Cost Algorithm (paper §4): tight (1+sqrt 2)-JR, no bounded core guarantee."""
    return expand(inst, k, lam=0.0, pair_events=True, C=C)


def greedy_capture(inst: Instance, k: int) -> Placement:
    """GC-TrSP (paper §5): Greedy Capture (Chen et al. 2019) on the 2n endpoints with threshold ceil(2n/k)."""
    return expand(inst, k, lam=1.0, pair_events=False)


def hybrid(inst: Instance, k: int, lam: float, C: np.ndarray | None = None) -> Placement:
    """lambda-hybrid (paper §5.4): ECA events plus Greedy Capture at radius ``lam * r``; ``lam = 0`` is ECA."""
    return expand(inst, k, lam=lam, pair_events=True, C=C)


ALGORITHMS = ("eca", "gc", "hybrid", "kmeans", "greedy", "random")


def place(
    inst: Instance, algorithm: str, k: int, lam: float = 0.5, seed: int = 0, C: np.ndarray | None = None
) -> Placement:
    """Run one of :data:`ALGORITHMS` (baselines from ``baselines.py``).

    Raises:
        ValueError: unknown algorithm.
    """
    runs = {
        "eca": lambda: eca(inst, k, C),
        "gc": lambda: greedy_capture(inst, k),
        "hybrid": lambda: hybrid(inst, k, lam, C),
        "kmeans": lambda: kmeans_stops(inst, k, seed),
        "greedy": lambda: greedy_stops(inst, k, C),
        "random": lambda: random_stops(inst, k, seed),
    }
    if algorithm not in runs:
        raise ValueError(f"algorithm: one of {ALGORITHMS}, got {algorithm!r}")
    return runs[algorithm]()
