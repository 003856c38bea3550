"""``TrSPDataModule``: one TrSP instance (travellers, candidate stops, walking and shuttle times) as a single batch.

``format`` picks the reader (one per input format, in ``instances.py``):

* ``commuting-od`` (default): the shipped LODES 2018 commutes of ``county``, ``n_travellers`` sampled by flow,
  candidates = tract centroids (``candidates: tracts``; ``n_candidates`` of them, seeded, or all), or the authors'
  design (``candidates: pool``: ``n_candidates`` drawn from the endpoints of a pool of ``pool_size`` commuters the
  travellers are drawn from; ``endpoints``: from the travellers' own endpoints). ``path`` may name another folder holding
  ``<fips>_regions.csv`` / ``<fips>_od.csv`` in the schema of ``zoo.data.commuting_od``.
* ``authors``: ``path`` is a folder with the authors' ``agents_routes.csv`` (``pickup_point_id, dropoff_point_id``),
  ``matrix_pedestrian_sec.npz``, ``matrix_auto_sec.npz``; shuttle = ``transit_scaling`` x car seconds;
  ``candidate_mode`` 0 (travellers' own endpoints) or 1 (all points).
* ``csv``: ``path`` is a trips CSV with ``a_lon, a_lat, b_lon, b_lat`` and ``stops_path`` a CSV with ``lon, lat``
  (degrees).

Walking is haversine x ``circuity`` / ``speed_kmh``; shuttle between coordinates is ``shuttle_factor`` x walking +
``wait_minutes`` (ours). Bad files fail in ``setup()`` (run by zoo before a run directory exists) naming file, line
and column; the ``csv`` format's files already in the recipe check, before torch is imported (``TRIPS``, ``STOPS``).
"""

from __future__ import annotations

from typing import Annotated

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.constraints import NonNegative, NonNegativeInt, OneOf, Positive, PositiveInt, Range
from zoo.core.data import DataError
from zoo.methods.trsp.costs import Instance
from zoo.methods.trsp.instances import (
    CANDIDATES,
    STOPS,
    TRIPS,
    authors_instance,
    commuting_od_instance,
    csv_instance,
)

FORMATS = ("commuting-od", "authors", "csv")


class TrSPDataModule(L.LightningDataModule):
    """A TrSP instance for the ``trsp`` module (schemas in the module docstring).

    Args:
        format: ``commuting-od``, ``authors`` or ``csv``.
        county: county alias or FIPS (``commuting-od``).
        path: data folder (``commuting-od``: default ``data/commuting-od``; ``authors``: required) or trips CSV.
        stops_path: candidate stops CSV (``csv``).
        n_travellers: n (sampled; ``authors``: a seeded subset, None = all).
        n_candidates: m (a seeded subset of candidates; None = all).
        candidates, pool_size: the candidate set of ``commuting-od`` (``tracts``, ``pool``, ``endpoints``) and the
            commuters in the point pool (``instances.commuting_od_instance``).
        seed: seeds sampling and jitter.
        circuity, speed_kmh, shuttle_factor, wait_minutes: the metric (coordinates formats).
        transit_scaling, candidate_mode, allow_non_metric: the authors' format.

    Attributes after ``setup()``: ``instance`` (:class:`~zoo.methods.trsp.costs.Instance`).

    Raises:
        DataError: from ``setup()``: unknown format, missing path, any bad file.
    """

    def __init__(
        self,
        format: Annotated[str, OneOf(FORMATS)] = "commuting-od",
        county: str = "manhattan",
        path: Annotated[str | None, TRIPS] = None,
        stops_path: Annotated[str | None, STOPS] = None,
        n_travellers: PositiveInt | None = 400,
        n_candidates: PositiveInt | None = None,
        seed: NonNegativeInt = 0,
        circuity: Annotated[float, Range(1)] = 1.3,
        speed_kmh: Positive = 5.0,
        shuttle_factor: NonNegative = 0.2,
        wait_minutes: NonNegative = 5.0,
        transit_scaling: Positive = 1.0,
        candidate_mode: NonNegativeInt = 0,
        allow_non_metric: bool = False,
        candidates: Annotated[str, OneOf(CANDIDATES)] = "tracts",
        pool_size: PositiveInt = 4000,
    ):
        super().__init__()
        if format not in FORMATS:
            raise ValueError(f"data.format: one of {FORMATS}, got {format!r}")
        self.format, self.county, self.path, self.stops_path = format, county, path, stops_path
        self.n_travellers, self.n_candidates, self.seed = n_travellers, n_candidates, seed
        self.candidates, self.pool_size = candidates, pool_size
        self.metric = {
            "circuity": circuity,
            "speed_kmh": speed_kmh,
            "shuttle_factor": shuttle_factor,
            "wait_hours": wait_minutes / 60,
        }
        self.transit_scaling, self.candidate_mode, self.allow_non_metric = (
            transit_scaling,
            candidate_mode,
            allow_non_metric,
        )
        self.instance: Instance | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.instance is not None:
            return
        if self.format == "commuting-od":
            self.instance = commuting_od_instance(
                self.county,
                self.n_travellers or 400,
                self.n_candidates,
                self.seed,
                self.path,
                candidates=self.candidates,
                pool_size=self.pool_size,
                **self.metric,
            )
        elif self.format == "authors":
            if not self.path:
                raise DataError("data.path: the authors' format needs the folder of agents_routes.csv and the .npz")
            self.instance = authors_instance(
                self.path,
                self.transit_scaling,
                self.candidate_mode,
                self.n_travellers,
                self.n_candidates,
                self.seed,
                self.allow_non_metric,
            )
        else:
            if not self.path or not self.stops_path:
                raise DataError("data.path and data.stops_path: the csv format needs a trips CSV and a stops CSV")
            self.instance = csv_instance(self.path, self.stops_path, **self.metric)

    def train_dataloader(self) -> DataLoader:
        """One batch holding only the traveller indices; the module reads the instance from this DataModule."""
        self.setup()
        idx = torch.arange(self.instance.n)
        return DataLoader(TensorDataset(idx), batch_size=len(idx), shuffle=False)
