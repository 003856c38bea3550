"""Travel costs of TrSP (Aziz, Gai, Guo, Vollen, arXiv 2602.06776, §2): walk, or walk-ride-walk between two stops.

A traveller ``i`` goes from ``a_i`` to ``b_i``. With open stops ``Y`` their cost is (paper §2, notes §5.1)

    cost_i(Y) = min{ d(a_i, b_i),  min_{y != y' in Y} d(a_i, y) + d'(y, y') + d(y', b_i) }

with ``d`` the walking metric and ``d'`` the shuttle metric on candidates; both orientations of a pair count.
An :class:`Instance` holds only the distances the costs need (travellers x candidates, candidates x candidates), so
every algorithm here works for any metric: haversine walking between coordinates (the shipped commutes) or the
authors' own travel-time matrices. Every placement rule (``placement.py``, ``baselines.py``) returns a
:class:`Placement` and opens stops with :func:`open_stop`, which keeps the travellers' costs current.

Units: hours throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from zoo.core.data import DataError

EARTH_RADIUS_KM = 6371.0088


def walking_hours(p: np.ndarray, q: np.ndarray, circuity: float = 1.3, speed_kmh: float = 5.0) -> np.ndarray:
    """Walking time between points: great-circle (haversine, scikit-learn) km x ``circuity`` / ``speed_kmh``.

    Args:
        p: (P, 2) lon, lat in degrees. q: (Q, 2) lon, lat in degrees.

    Returns:
        (P, Q) hours. The defaults (1.3 circuity, 5 km/h) are ours.
    """
    from sklearn.metrics.pairwise import haversine_distances

    rad = lambda x: np.radians(np.asarray(x, float).reshape(-1, 2)[:, ::-1])
    return haversine_distances(rad(p), rad(q)) * EARTH_RADIUS_KM * circuity / speed_kmh


def paired_walking_hours(p: np.ndarray, q: np.ndarray, circuity: float = 1.3, speed_kmh: float = 5.0) -> np.ndarray:
    """Row-wise walking time ``p[i] -> q[i]`` (same haversine as :func:`walking_hours`): (N, 2), (N, 2) -> (N,) hours."""
    p, q = (np.radians(np.asarray(x, float).reshape(-1, 2)) for x in (p, q))
    h = np.sin((q[:, 1] - p[:, 1]) / 2) ** 2 + np.cos(p[:, 1]) * np.cos(q[:, 1]) * np.sin((q[:, 0] - p[:, 0]) / 2) ** 2
    return 2 * np.arcsin(np.sqrt(np.clip(h, 0, 1))) * EARTH_RADIUS_KM * circuity / speed_kmh


def shuttle_hours(walk: np.ndarray, factor: float = 0.2, wait_hours: float = 5 / 60) -> np.ndarray:
    """Shuttle time between candidates (ours): ``factor * d(y, y') + wait`` for ``y != y'``, 0 on the diagonal.

    A positive multiple of a metric plus a constant off the diagonal is again a metric, so the paper's bounds apply.

    Args:
        walk: (m, m) walking hours between candidates.
    """
    s = factor * np.asarray(walk, float) + wait_hours
    np.fill_diagonal(s, 0.0)
    return s


@dataclass
class Instance:
    """One TrSP instance: n travellers, m candidate stops.

    Attributes:
        walk_a: (n, m) walking hours from each origin ``a_i`` to each candidate.
        walk_b: (n, m) walking hours from each candidate to each destination ``b_i``.
        shuttle: (m, m) shuttle hours ``d'`` between candidates (zero diagonal).
        direct: (n,) walking hours ``d(a_i, b_i)``.
        trips: optional (n, 4) lon/lat of ``a_i`` then ``b_i`` (degrees), for maps and k-means.
        stops: optional (m, 2) lon/lat of candidates (degrees).
        names: optional (m,) candidate names (tract ids, point ids).
        metric: True when both matrices were checked for the triangle inequality (the bounds then apply).
    """

    walk_a: np.ndarray
    walk_b: np.ndarray
    shuttle: np.ndarray
    direct: np.ndarray
    trips: np.ndarray | None = None
    stops: np.ndarray | None = None
    names: list[str] | None = None
    metric: bool = True
    info: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.walk_a.shape[0]

    @property
    def m(self) -> int:
        return self.walk_a.shape[1]

    @property
    def endpoint_walk(self) -> np.ndarray:
        """(2n, m) walking hours from each endpoint (origins, then destinations) to each candidate."""
        return np.concatenate([self.walk_a, self.walk_b], axis=0)

    def subset(self, travellers: np.ndarray | None = None, candidates: np.ndarray | None = None) -> Instance:
        """The instance restricted to some travellers (rows) and candidates (columns)."""
        t = np.arange(self.n) if travellers is None else np.asarray(travellers)
        c = np.arange(self.m) if candidates is None else np.asarray(candidates)
        return Instance(
            self.walk_a[np.ix_(t, c)],
            self.walk_b[np.ix_(t, c)],
            self.shuttle[np.ix_(c, c)],
            self.direct[t],
            None if self.trips is None else self.trips[t],
            None if self.stops is None else self.stops[c],
            None if self.names is None else [self.names[j] for j in c],
            self.metric,
            dict(self.info),
        )


def from_points(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    shuttle_factor: float = 0.2,
    wait_hours: float = 5 / 60,
    circuity: float = 1.3,
    speed_kmh: float = 5.0,
    names: list[str] | None = None,
) -> Instance:
    """Instance from lon/lat trips and candidates with haversine walking and the shuttle of :func:`shuttle_hours`.

    Args:
        a, b: (n, 2) origins and destinations (lon, lat degrees). c: (m, 2) candidates.
    """
    walk_c = walking_hours(c, c, circuity, speed_kmh)
    direct = paired_walking_hours(a, b, circuity, speed_kmh)
    return Instance(
        walking_hours(a, c, circuity, speed_kmh),
        walking_hours(c, b, circuity, speed_kmh).T,
        shuttle_hours(walk_c, shuttle_factor, wait_hours),
        direct,
        np.hstack([a, b]),
        np.asarray(c, float),
        names,
    )


def all_pairs(m: int) -> np.ndarray:
    """(P, 2) unordered candidate pairs ``u < v``, P = m(m-1)/2, in ``np.triu_indices`` order."""
    u, v = np.triu_indices(m, 1)
    return np.stack([u, v], axis=1)


def pair_costs(inst: Instance, pairs: np.ndarray | None = None, chunk: int = 4096) -> np.ndarray:
    """``cost_i({u, v})`` for every pair and traveller: min of walking and both ride orientations.

    Returns:
        (P, n) hours, float64.
    """
    pairs = all_pairs(inst.m) if pairs is None else np.asarray(pairs)
    out = np.empty((len(pairs), inst.n))
    A, B, S = inst.walk_a.T, inst.walk_b.T, inst.shuttle  # (m, n), (m, n), (m, m)
    for s in range(0, len(pairs), chunk):
        u, v = pairs[s : s + chunk, 0], pairs[s : s + chunk, 1]
        uv = A[u] + S[u, v][:, None] + B[v]
        vu = A[v] + S[v, u][:, None] + B[u]
        out[s : s + chunk] = np.minimum(np.minimum(uv, vu), inst.direct[None, :])
    return out


def best_routes(inst: Instance, stops) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each traveller's cheapest way under open stops ``Y``.

    Args:
        stops: candidate indices of ``Y`` (any iterable of ints).

    Returns:
        ``cost (n,)`` hours, ``board (n,)`` and ``alight (n,)`` candidate indices of the ride (-1 where walking wins).
    """
    Y = np.asarray(sorted({int(s) for s in stops}), dtype=np.int64)
    cost = inst.direct.copy()
    board = np.full(inst.n, -1)
    alight = np.full(inst.n, -1)
    if len(Y) < 2:
        return cost, board, alight
    ride = inst.walk_a[:, Y][:, :, None] + inst.shuttle[np.ix_(Y, Y)][None] + inst.walk_b[:, Y][:, None, :]
    idx = np.arange(len(Y))
    ride[:, idx, idx] = np.inf  # y != y'
    flat = ride.reshape(inst.n, -1)
    j = flat.argmin(1)
    best = flat[np.arange(inst.n), j]
    take = best < cost
    cost[take] = best[take]
    board[take], alight[take] = Y[j[take] // len(Y)], Y[j[take] % len(Y)]
    return cost, board, alight


def route_costs(inst: Instance, stops) -> np.ndarray:
    """``cost_i(Y)`` for every traveller: (n,) hours (see :func:`best_routes`)."""
    return best_routes(inst, stops)[0]


def check_metric(D: np.ndarray, name: str, tol: float = 1e-6) -> None:
    """Check a square distance matrix is a (pseudo)metric: non-negative, zero diagonal, triangle inequality.

    Args:
        D: (N, N) distances. name: file or matrix name for the message. tol: allowed violation (same units).

    Raises:
        DataError: naming the worst triple ``D[i, k] > D[i, j] + D[j, k] + tol`` (or a negative / diagonal cell).
    """
    D = np.asarray(D, float)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise DataError(f"{name}: expected a square matrix, got shape {D.shape}")
    if (D < 0).any():
        i, j = np.argwhere(D < 0)[0]
        raise DataError(f"{name}: cell ({i}, {j}) is negative ({D[i, j]})")
    if np.abs(np.diag(D)).max(initial=0) > tol:
        i = int(np.abs(np.diag(D)).argmax())
        raise DataError(f"{name}: diagonal cell ({i}, {i}) is {D[i, i]}, not 0")
    worst, triple = 0.0, None
    for j in range(len(D)):  # via j: D[i, j] + D[j, k] - D[i, k]
        gap = D[:, None, j] + D[None, j, :] - D
        w = gap.argmin()
        if gap.flat[w] < -worst:
            worst, (i, k) = -gap.flat[w], np.unravel_index(w, gap.shape)
            triple = (int(i), j, int(k))
    if worst > tol:
        i, j, k = triple
        raise DataError(
            f"{name}: triangle inequality broken by {worst:.6g} at (i={i}, j={j}, k={k}): "
            f"D[i,k]={D[i, k]:.6g} > D[i,j]+D[j,k]={D[i, j] + D[j, k]:.6g}; set "
            f"data.allow_non_metric: true to run anyway (no bound is then claimed)"
        )


@dataclass
class Placement:
    """An outcome: ``stops`` (candidate indices, in opening order) and the ``events`` that opened them
    as ``(radius_hours, kind, stops)``."""

    stops: list[int]
    events: list[tuple[float, str, tuple[int, ...]]] = field(default_factory=list)


def open_stop(inst: Instance, cost: np.ndarray, Y: list[int], c: int) -> None:
    """Add stop ``c`` to ``Y`` and lower ``cost`` (n,) in place by the rides that use it."""
    if Y:
        Yi = np.asarray(Y)
        out = inst.walk_a[:, [c]] + inst.shuttle[c, Yi][None] + inst.walk_b[:, Yi]
        back = inst.walk_a[:, Yi] + inst.shuttle[Yi, c][None] + inst.walk_b[:, [c]]
        np.minimum(cost, np.minimum(out.min(1), back.min(1)), out=cost)
    Y.append(int(c))
