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

import numpy as np

from zoo.data.commuting_od import Flows, Regions, load_county


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


def tract_table(regions: Regions) -> tuple[np.ndarray, list[str]]:
    """(m, f + 4) per-tract features: the feature columns (NaN -> column median), lon, lat, land and water area."""
    feats = regions.features.copy()
    if np.isnan(feats).any():
        med = np.nanmedian(np.where(np.isnan(feats).all(0), 0.0, feats.T).T, axis=0)
        rows, cols = np.nonzero(np.isnan(feats))
        feats[rows, cols] = np.nan_to_num(med[cols])
    extra = np.column_stack([regions.lonlat, regions.area_m2, regions.water_m2])
    return np.hstack([feats, extra]), list(regions.feature_names) + [
        "centroid_lon",
        "centroid_lat",
        "aland_m2",
        "awater_m2",
    ]


def pair_features(
    regions: Regions, origin: np.ndarray, destination: np.ndarray, distance_m: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """(n, 2 * (f + 4) + 1) features of the pairs ``(origin[k], destination[k])`` (region row indices)."""
    table, names = tract_table(regions)
    X = np.hstack([table[origin], table[destination], np.log1p(np.asarray(distance_m, float))[:, None]])
    return X, [f"o_{c}" for c in names] + [f"d_{c}" for c in names] + ["log_distance_m"]


def od_pairs(county: str, root: str | os.PathLike | None = None) -> ODPairs:
    """The pair table of a shipped county (``sf``, ``travis``, ``manhattan``, a FIPS code).

    Raises:
        zoo.core.data.DataError: from the reader (file, line and column named).
    """
    return pair_table(*load_county(county, root))


def pair_table(regions: Regions, flows: Flows) -> ODPairs:
    """:class:`ODPairs` from a county's regions and its non-zero flows."""
    X, names = pair_features(regions, flows.origin, flows.destination, flows.distance_m)
    return ODPairs(
        X,
        np.log1p(flows.commuters.astype(float)),
        flows.commuters.copy(),
        [regions.geoid[i] for i in flows.origin],
        [regions.geoid[i] for i in flows.destination],
        names,
    )
