"""TrSP instances from three input formats; each reader fails naming file, line and column.

* ``commuting-od`` (shipped, real): LODES 2018 tract commutes of one county (``zoo.data.commuting_od``). Travellers
  are sampled with replacement in proportion to the flow of each home->work tract pair; each endpoint is the tract
  centroid plus a uniform draw in a disc of the tract's land area (*ours*). Candidates are tract centroids.
* ``authors``: the authors' files in one folder: ``agents_routes.csv`` (columns ``pickup_point_id``,
  ``dropoff_point_id``), ``matrix_pedestrian_sec.npz`` and ``matrix_auto_sec.npz`` (one square array each, seconds,
  indexed by point id); shuttle time = ``transit_scaling`` x car time. Candidates: the travellers' own endpoints
  (``candidate_mode: 0``) or every point (``1``), as in their main.py.
* ``csv``: a trips CSV (``a_lon, a_lat, b_lon, b_lat``) and a stops CSV (``lon, lat``), degrees, haversine walking.

Non-metric matrices (authors' format) fail naming the worst triple unless ``allow_non_metric``; then
``Instance.metric`` is False and no bound is claimed.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from zoo.core.constraints import Cell, DataFile, Range
from zoo.core.data import DataError, read_csv_rows
from zoo.core.datafiles import check_cell, read_declared
from zoo.data.commuting_od import COUNTIES, county_fips, load_county
from zoo.methods.trsp.costs import Instance, check_metric, from_points

METRES_PER_DEGREE = 111_320.0


def _jitter(lonlat: np.ndarray, radius_m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform points in discs of ``radius_m`` (metres) around ``lonlat`` (N, 2) degrees (local flat earth)."""
    rho = radius_m * np.sqrt(rng.random(len(lonlat)))
    theta = rng.random(len(lonlat)) * 2 * np.pi
    dlat = rho * np.sin(theta) / METRES_PER_DEGREE
    dlon = rho * np.cos(theta) / (METRES_PER_DEGREE * np.cos(np.radians(lonlat[:, 1])))
    return lonlat + np.stack([dlon, dlat], 1)


@lru_cache(maxsize=4)
def _load_county(county: str, root: str | None):
    return load_county(county, root)  # parsed once per process: the experiment samples many rounds


CANDIDATES = ("tracts", "pool", "endpoints")


def commuting_od_instance(
    county: str = "manhattan",
    n_travellers: int = 400,
    n_candidates: int | None = None,
    seed: int = 0,
    root: str | None = None,
    jitter: bool = True,
    candidates: str = "tracts",
    pool_size: int = 4000,
    **metric,
) -> Instance:
    """Real commutes of one county as a TrSP instance (see module docstring).

    Args:
        county: FIPS code or alias (``manhattan``, ``travis``, ``sf``, ``autauga``).
        n_travellers: n, sampled with replacement in proportion to LODES commuters per tract pair (``tracts``), or
            drawn without replacement from the sampled pool (``pool``, ``endpoints``).
        n_candidates: m, a seeded subset of the candidate set (None = all tracts; the whole pool's endpoints; the
            travellers' 2n endpoints).
        seed: seeds the sample, the jitter and the candidate subset.
        root: folder of the shipped CSVs (default ``data/commuting-od``).
        candidates: ``tracts``, ``pool`` or ``endpoints`` (module docstring).
        pool_size: commuters in the point pool (``pool``, ``endpoints``; ours: the authors' pool is their whole
            carpooling dataset, not public). Must be ``>= n_travellers``.
        metric: ``shuttle_factor``, ``wait_hours``, ``circuity``, ``speed_kmh`` of :func:`costs.from_points`.

    Raises:
        ValueError: unknown ``candidates``, a pool smaller than n, or more candidates asked than the pool holds.
    """
    if candidates not in CANDIDATES:
        raise ValueError(f"candidates: one of {CANDIDATES}, got {candidates!r}")
    regions, flows = _load_county(county, root)
    rng = np.random.default_rng(seed)
    w = flows.commuters / flows.commuters.sum()
    size = n_travellers if candidates == "tracts" else pool_size
    if size < n_travellers:
        raise ValueError(f"pool_size: need at least n_travellers = {n_travellers} commuters, got {pool_size}")
    pick = rng.choice(len(w), size=size, p=w)
    o, d = flows.origin[pick], flows.destination[pick]
    radius = np.sqrt(regions.area_m2 / np.pi)
    a, b = regions.lonlat[o], regions.lonlat[d]
    if jitter:
        a, b = _jitter(a, radius[o], rng), _jitter(b, radius[d], rng)
    if candidates == "tracts":
        m = len(regions.geoid)
        cand = (
            np.sort(rng.choice(m, size=n_candidates, replace=False))
            if n_candidates and n_candidates < m
            else np.arange(m)
        )
        stops, names = regions.lonlat[cand], [regions.geoid[j] for j in cand]
    else:  # the authors' sample_function: travellers from the pool, candidates from a point set
        who = np.sort(rng.choice(size, n_travellers, replace=False))
        pool_pts = np.concatenate([a, b])  # point p < size: origin of commuter p, else destination of p - size
        own = np.concatenate([who, who + size])
        from_pts = own if candidates == "endpoints" and (n_candidates or 0) <= len(own) else np.arange(2 * size)
        m = n_candidates or len(from_pts)
        if m > len(from_pts):
            raise ValueError(f"n_candidates: {m} asked, the point set holds {len(from_pts)}")
        cand = np.sort(rng.choice(from_pts, m, replace=False))
        stops, names = pool_pts[cand], [f"{'o' if p < size else 'd'}{p % size}" for p in cand]
        a, b, o, d = a[who], b[who], o[who], d[who]
    inst = from_points(a, b, stops, names=names, **metric)
    inst.info = {
        "source": "commuting-od",
        "county": COUNTIES[county_fips(county)],
        "fips": county_fips(county),
        "seed": seed,
        "candidates": candidates,
        "origin_tract": o.tolist(),
        "destination_tract": d.tolist(),
    }
    if candidates != "tracts":
        inst.info["pool_size"] = pool_size
    return inst


LON, LAT = Cell("number", Range(-180, 180)), Cell("number", Range(-90, 90))
#: The ``csv`` format's files (``data.path``: trips, ``data.stops_path``: candidate stops), degrees; checked before
#: torch too.
TRIPS = DataFile(
    "csv",
    ("a_lon", "a_lat", "b_lon", "b_lat"),
    types={"a_lon": LON, "a_lat": LAT, "b_lon": LON, "b_lat": LAT},
    when={"format": "csv"},
)
STOPS = DataFile("csv", ("lon", "lat"), types={"lon": LON, "lat": LAT}, when={"format": "csv"})


def read_lonlat_csv(path: str, spec: DataFile) -> np.ndarray:
    """(N, len(columns)) floats from a CSV declared by ``spec`` (``TRIPS`` or ``STOPS``), in its column order.

    Raises:
        DataError: missing file or column, an empty file, a non-number or an out-of-range coordinate.
    """
    _, rows = read_declared(path, spec)
    if not rows:
        raise DataError(f"{path}:2: no data rows")
    return np.array([[r[c] for c in spec.columns] for _, r in rows], dtype=float)


def csv_instance(trips_path: str, stops_path: str, **metric) -> Instance:
    """Trips ``a_lon, a_lat, b_lon, b_lat`` and candidate stops ``lon, lat`` (degrees) with haversine walking."""
    trips = read_lonlat_csv(trips_path, TRIPS)
    stops = read_lonlat_csv(stops_path, STOPS)
    inst = from_points(trips[:, :2], trips[:, 2:], stops, **metric)
    inst.info = {"source": "csv", "trips": str(trips_path), "stops": str(stops_path)}
    return inst


def _matrix(path: Path) -> np.ndarray:
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    with np.load(path) as z:
        if len(z.files) != 1:
            raise DataError(f"{path}: expected one array, found {z.files}")
        M = np.asarray(z[z.files[0]], float)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise DataError(f"{path}: expected a square matrix, got shape {M.shape}")
    bad = np.argwhere(~np.isfinite(M) | (M < 0))
    if len(bad):
        i, j = bad[0]
        raise DataError(f"{path}: cell (row {i}, column {j}) is {M[i, j]}: need a finite time >= 0")
    return M


def authors_instance(
    folder: str,
    transit_scaling: float = 1.0,
    candidate_mode: int = 0,
    n_travellers: int | None = None,
    n_candidates: int | None = None,
    seed: int = 0,
    allow_non_metric: bool = False,
) -> Instance:
    """The authors' carpooling format (module docstring); times in seconds become hours.

    Raises:
        DataError: a missing file or column, a non-integer or out-of-range point id (file:line:column), a bad
            matrix cell, or a broken triangle inequality (worst triple named) unless ``allow_non_metric``.
    """
    base = Path(folder)
    routes = base / "agents_routes.csv"
    walk = _matrix(base / "matrix_pedestrian_sec.npz") / 3600
    car = _matrix(base / "matrix_auto_sec.npz") / 3600
    if walk.shape != car.shape:
        raise DataError(f"{base}: pedestrian matrix {walk.shape} and auto matrix {car.shape} differ in shape")
    _, rows = read_csv_rows(routes, required=("pickup_point_id", "dropoff_point_id"))
    ab = []
    for line, r in enumerate(rows, 2):
        point = {"type": "integer", "min": 0, "max": len(walk) - 1}  # a point id: a row of the matrices
        ab.append(
            [
                check_cell(r[c], point, f"{routes}:{line}", f"column {c!r}")
                for c in ("pickup_point_id", "dropoff_point_id")
            ]
        )
    if not ab:
        raise DataError(f"{routes}:2: no data rows")
    ab = np.asarray(ab)
    rng = np.random.default_rng(seed)
    if n_travellers and n_travellers < len(ab):
        ab = ab[np.sort(rng.choice(len(ab), n_travellers, replace=False))]
    if candidate_mode not in (0, 1):
        raise DataError(f"data.candidate_mode: 0 (travellers' endpoints) or 1 (all points), got {candidate_mode}")
    pool = np.unique(ab) if candidate_mode == 0 else np.arange(len(walk))
    if n_candidates and n_candidates < len(pool):
        pool = np.sort(rng.choice(pool, n_candidates, replace=False))
    shuttle = transit_scaling * car[np.ix_(pool, pool)]
    metric = not allow_non_metric
    if metric:
        check_metric(walk, str(base / "matrix_pedestrian_sec.npz"), 1e-6)
        check_metric(shuttle, str(base / "matrix_auto_sec.npz") + " (candidates, scaled)", 1e-6)
    inst = Instance(
        walk[np.ix_(ab[:, 0], pool)],
        walk[np.ix_(pool, ab[:, 1])].T,
        shuttle,
        walk[ab[:, 0], ab[:, 1]],
        names=[str(p) for p in pool],
        metric=metric,
    )
    inst.info = {"source": "authors", "folder": str(base), "transit_scaling": transit_scaling}
    return inst
