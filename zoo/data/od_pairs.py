"""Origin-destination pair table on the commuting-od reader: public pair features and the flow label.

Built on :func:`zoo.data.commuting_od.load_county` (which it does not change). One row per **non-zero** OD pair as
listed in the shipped ``<fips>_od.csv`` (LODES lists only pairs with at least one commuter; zero-flow pairs are not
in the files and are not added here), so SF has 25,724 rows.

Features (271 for the shipped counties, all public): for the origin tract and then the destination tract, its 131
ACS/OSM feature columns plus centroid longitude, latitude, land area and water area (135 each), then the log of the
centroid distance in metres (``log1p``). Names are ``o_<column>``, ``d_<column>``, ``log_distance_m``. ACS cells
left empty (NaN) are replaced by that column's median over the county's tracts. Label: ``log(1 + commuters)``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoo.core.data import read_csv_rows
from zoo.data.commuting_od import Flows, Regions, county_fips, default_dir, load_county


@dataclass
class ODPairs:
    """One county's OD pairs.

    Attributes:
        X: (n, f) float64 public pair features (f = 2 * (tract features + 4) + 1).
        y: (n,) float64 label ``log(1 + commuters)``.
        commuters: (n,) int64 observed commuters.
        origin, destination: (n,) tract geoids.
        feature_names: the f names.
    """

    X: np.ndarray
    y: np.ndarray
    commuters: np.ndarray
    origin: list[str]
    destination: list[str]
    feature_names: list[str]


def tract_table(regions: Regions, water_m2: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(m, f + 4) per-tract features: the feature columns (NaN -> column median), lon, lat, land and water area."""
    feats = regions.features.copy()
    if np.isnan(feats).any():
        med = np.nanmedian(np.where(np.isnan(feats).all(0), 0.0, feats.T).T, axis=0)
        rows, cols = np.nonzero(np.isnan(feats))
        feats[rows, cols] = np.nan_to_num(med[cols])
    extra = np.column_stack([regions.lonlat, regions.area_m2, water_m2])
    return np.hstack([feats, extra]), list(regions.feature_names) + ["centroid_lon", "centroid_lat", "aland_m2",
                                                                      "awater_m2"]


def pair_features(regions: Regions, water_m2: np.ndarray, origin: np.ndarray, destination: np.ndarray,
                  distance_m: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(n, 2 * (f + 4) + 1) features of the pairs ``(origin[k], destination[k])`` (region row indices);
    ``water_m2`` (m,) is each tract's water area (not kept by the reader)."""
    table, names = tract_table(regions, water_m2)
    X = np.hstack([table[origin], table[destination], np.log1p(np.asarray(distance_m, float))[:, None]])
    return X, [f"o_{c}" for c in names] + [f"d_{c}" for c in names] + ["log_distance_m"]


def od_pairs(county: str, root: str | os.PathLike | None = None) -> ODPairs:
    """The pair table of a shipped county (``sf``, ``travis``, ``manhattan``, a FIPS code).

    Raises:
        zoo.core.data.DataError: from the reader (file, line and column named).
    """
    regions, flows = load_county(county, root)
    path = Path(root if root is not None else default_dir()) / f"{county_fips(county)}_regions.csv"
    return pair_table(regions, flows, water_area(path, regions))


def water_area(path: str | os.PathLike, regions: Regions) -> np.ndarray:
    """(m,) ``awater_m2`` of each tract of ``regions`` read from its regions CSV (the reader keeps land area only)."""
    _, rows = read_csv_rows(path, required=("geoid", "awater_m2"))
    water = {r["geoid"].strip(): float(r["awater_m2"]) for r in rows}
    return np.array([water[g] for g in regions.geoid], float)


def pair_table(regions: Regions, flows: Flows, water_m2: np.ndarray) -> ODPairs:
    """:class:`ODPairs` from a county's regions, their water areas (m,) and its non-zero flows."""
    X, names = pair_features(regions, water_m2, flows.origin, flows.destination, flows.distance_m)
    return ODPairs(X, np.log1p(flows.commuters.astype(float)), flows.commuters.copy(),
                   [regions.geoid[i] for i in flows.origin], [regions.geoid[i] for i in flows.destination], names)
