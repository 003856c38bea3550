"""Census-tract commuting origin-destination flows (LODES 2018) with tract centroids and ACS/OSM features.

Shipped in ``data/commuting-od/`` (SOURCE.md there): per county FIPS ``<fips>_regions.csv`` and ``<fips>_od.csv``.
Shared by trsp (stop placement: commuters between tract centroids) and cond-dp (flow regression on public tract
features).

Schemas (one header row; every cell numeric except ``geoid``/``tract_name``):
- regions: ``geoid`` (11-digit tract id, unique), ``tract_name``, ``centroid_lon`` in [-180, 180] and
  ``centroid_lat`` in [-90, 90] (degrees, NAD83), ``aland_m2`` >= 0, ``awater_m2`` >= 0, then feature columns
  (``demo_*`` ACS, ``poi_*`` OSM counts). An empty feature cell is read as NaN (ACS suppresses some cells).
- od: ``origin_geoid`` (home tract), ``destination_geoid`` (work tract), ``commuters`` (integer >= 0),
  ``distance_m`` >= 0 (planar centroid distance). Only non-zero pairs are listed; both ends must be regions.

A bad cell raises :class:`zoo.core.data.DataError` naming file, line and column.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoo.core.data import DataError, read_csv_rows, repo_root

#: The four shipped counties: FIPS -> name.
COUNTIES = {
    "01001": "Autauga County, AL",
    "06075": "San Francisco County, CA",
    "48453": "Travis County, TX",
    "36061": "New York County (Manhattan), NY",
}
COUNTY_ALIASES = {"autauga": "01001", "sf": "06075", "san-francisco": "06075", "travis": "48453", "manhattan": "36061"}

REGION_COLUMNS = ("geoid", "tract_name", "centroid_lon", "centroid_lat", "aland_m2", "awater_m2")
OD_COLUMNS = ("origin_geoid", "destination_geoid", "commuters", "distance_m")


@dataclass
class Regions:
    """Tracts of one county, in file order.

    Attributes:
        geoid: (m,) tract ids.
        lonlat: (m, 2) centroid longitude, latitude in degrees.
        area_m2: (m,) land area in square metres.
        water_m2: (m,) water area in square metres.
        features: (m, f) float64 feature matrix (NaN where ACS left a cell empty).
        feature_names: the f column names, in file order.
    """

    geoid: list[str]
    lonlat: np.ndarray
    area_m2: np.ndarray
    water_m2: np.ndarray
    features: np.ndarray
    feature_names: list[str]

    def index(self) -> dict[str, int]:
        """geoid -> row."""
        return {g: i for i, g in enumerate(self.geoid)}


@dataclass
class Flows:
    """Non-zero OD pairs as region indices: origin (n,), destination (n,), commuters (n,) int, distance_m (n,)."""

    origin: np.ndarray
    destination: np.ndarray
    commuters: np.ndarray
    distance_m: np.ndarray


def county_fips(county: str) -> str:
    """A FIPS code from a FIPS code or a shipped alias (``sf``, ``travis``, ``manhattan``, ``autauga``).

    Raises:
        ValueError: neither a 5-digit code nor a known alias.
    """
    key = str(county).lower()
    if key in COUNTY_ALIASES:
        return COUNTY_ALIASES[key]
    if len(key) == 5 and key.isdigit():
        return key
    raise ValueError(f"unknown county {county!r}: a 5-digit FIPS code or one of {sorted(COUNTY_ALIASES)}")


def default_dir() -> Path:
    """``data/commuting-od`` of this checkout."""
    return repo_root() / "data" / "commuting-od"


def _number(
    raw: str, where: str, col: str, lo: float = -math.inf, hi: float = math.inf, allow_empty: bool = False
) -> float:
    if raw.strip() == "" and allow_empty:
        return math.nan
    try:
        v = float(raw)
    except ValueError:
        raise DataError(f"{where}: column {col!r}: {raw!r} is not a number") from None
    if not (lo <= v <= hi):
        raise DataError(f"{where}: column {col!r}: {v} is outside [{lo}, {hi}]")
    return v


def read_regions(path: str | os.PathLike) -> Regions:
    """Read a ``*_regions.csv`` (schema in the module docstring).

    Raises:
        DataError: missing file or column, a non-numeric or out-of-range cell, a repeated geoid.
    """
    header, rows = read_csv_rows(path, required=REGION_COLUMNS)
    names = [c for c in header if c not in REGION_COLUMNS]
    geoid, lonlat, area, water, feats, seen = [], [], [], [], [], {}
    for line, r in enumerate(rows, 2):
        where = f"{path}:{line}"
        g = r["geoid"].strip()
        if not g:
            raise DataError(f"{where}: column 'geoid' is empty")
        if g in seen:
            raise DataError(f"{where}: column 'geoid': {g} repeats line {seen[g]}")
        seen[g] = line
        geoid.append(g)
        lonlat.append(
            (
                _number(r["centroid_lon"], where, "centroid_lon", -180, 180),
                _number(r["centroid_lat"], where, "centroid_lat", -90, 90),
            )
        )
        area.append(_number(r["aland_m2"], where, "aland_m2", 0))
        water.append(_number(r["awater_m2"], where, "awater_m2", 0))
        feats.append([_number(r[c], where, c, allow_empty=True) for c in names])
    return Regions(
        geoid,
        np.asarray(lonlat, float).reshape(-1, 2),
        np.asarray(area, float),
        np.asarray(water, float),
        np.asarray(feats, float).reshape(len(geoid), len(names)),
        names,
    )


def read_flows(path: str | os.PathLike, regions: Regions) -> Flows:
    """Read a ``*_od.csv`` against its regions (schema in the module docstring).

    Raises:
        DataError: missing file or column, an unknown tract id, a negative or fractional count, a bad distance.
    """
    _, rows = read_csv_rows(path, required=OD_COLUMNS)
    index = regions.index()
    o, d, c, dist = [], [], [], []
    for line, r in enumerate(rows, 2):
        where = f"{path}:{line}"
        for col, out in (("origin_geoid", o), ("destination_geoid", d)):
            g = r[col].strip()
            if g not in index:
                raise DataError(f"{where}: column {col!r}: tract {g!r} is not in the regions file")
            out.append(index[g])
        n = _number(r["commuters"], where, "commuters", 0)
        if n != int(n):
            raise DataError(f"{where}: column 'commuters': {n} is not a whole number")
        c.append(int(n))
        dist.append(_number(r["distance_m"], where, "distance_m", 0))
    return Flows(np.asarray(o, np.int64), np.asarray(d, np.int64), np.asarray(c, np.int64), np.asarray(dist, float))


def load_county(county: str, root: str | os.PathLike | None = None) -> tuple[Regions, Flows]:
    """Regions and flows of a shipped county (``sf``, ``06075``, ...) from ``root`` (default ``data/commuting-od``)."""
    fips = county_fips(county)
    base = Path(root) if root is not None else default_dir()
    regions = read_regions(base / f"{fips}_regions.csv")
    return regions, read_flows(base / f"{fips}_od.csv", regions)
