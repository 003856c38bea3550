"""``TrSPModule``: fair transit stop placement (Aziz, Gai, Guo, Vollen, arXiv 2602.06776) as a LightningModule.

Nothing is trained: ``fit`` runs one step that places at most ``k`` stops on the DataModule's instance with the chosen
rule, audits the outcome (JR factor; core factor when n <= ``core_max_n``), logs the audit and keeps the stops,
their coordinates and the audit in buffers so that a checkpoint can answer ``zoo predict`` (each trip's best route).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import numpy as np
import torch

from zoo.core.constraints import NonNegativeInt, OneOf, Positive, PositiveInt, Probability, Range
from zoo.core.data import DataError
from zoo.core.module import ZooModule
from zoo.core.registry import register_method
from zoo.methods.trsp.audit import core_alpha, jr_factor
from zoo.methods.trsp.costs import Instance, best_routes, from_points, pair_costs, paired_walking_hours
from zoo.methods.trsp.datamodule import TrSPDataModule
from zoo.methods.trsp.instances import TRIPS, read_lonlat_csv
from zoo.methods.trsp.placement import ALGORITHMS, place
from zoo.methods.trsp.plots import plot_map

_BUFFERS = ("stops", "stop_lonlat", "meta_json")


def audit(
    inst: Instance,
    stops,
    k: int,
    core_max_n: int = 60,
    core_betas=(1.0,),
    solver: str = "cpsat",
    C: np.ndarray | None = None,
) -> dict[str, float]:
    """The numbers the module logs: JR factor, core factor per beta (n <= core_max_n), mean cost, shuttle share.

    Returns:
        ``{"jr_factor", "mean_cost_min", "shuttle_share", "n_stops", "core_alpha_beta<b>"...}``.
    """
    C = pair_costs(inst) if C is None else C
    cost, board, _ = best_routes(inst, stops)
    out = {
        "jr_factor": jr_factor(inst, stops, k, C)[0],
        "mean_cost_min": 60 * float(cost.mean()),
        "walk_mean_min": 60 * float(inst.direct.mean()),
        "shuttle_share": float((board >= 0).mean()),
        "n_stops": float(len(stops)),
    }
    if inst.n <= core_max_n:
        for beta in core_betas:
            out[f"core_alpha_beta{beta:g}"] = core_alpha(inst, stops, k, beta, solver, C)[0]
    return out


@register_method("trsp", datamodule=TrSPDataModule)
class TrSPModule(ZooModule):
    """Place at most ``k`` transit stops fairly and audit the outcome.

    Args:
        algorithm: ``eca`` (Expanding Cost), ``gc`` (Greedy Capture on endpoints), ``hybrid`` (lambda-hybrid),
            ``kmeans``, ``greedy`` (utilitarian, ours), ``random``.
        k: stop budget (>= 2).
        lam: the hybrid's lambda in [0, 1] (0 = ECA).
        seed: seeds k-means++ and random.
        core_max_n: audit the core only when n is at most this (the ILP grows with n x m^2).
        core_betas: coalition-size factors of the core audit.
        core_solver: ``cpsat`` (OR-tools) or ``cbc`` (PuLP).
    """

    export_formats = ("package",)
    fit_sized_buffers = _BUFFERS  # sizes are known only after fit

    def __init__(
        self,
        algorithm: Annotated[str, OneOf(ALGORITHMS)] = "eca",
        k: Annotated[int, Range(2)] = 20,
        lam: Probability = 0.5,
        seed: NonNegativeInt = 0,
        core_max_n: PositiveInt = 60,
        core_betas: list[Positive] | None = None,
        core_solver: Literal["cpsat", "cbc"] = "cpsat",
    ):
        super().__init__()
        if algorithm not in ALGORITHMS:
            raise ValueError(f"model.algorithm: one of {ALGORITHMS}, got {algorithm!r}")
        if k < 2:
            raise ValueError(f"model.k: need at least 2 stops, got {k}")
        if not 0 <= lam <= 1:
            raise ValueError(f"model.lam: must be in [0, 1], got {lam}")
        if core_solver not in ("cpsat", "cbc"):
            raise ValueError(f"model.core_solver: 'cpsat' or 'cbc', got {core_solver!r}")
        self.save_hyperparameters()
        self.automatic_optimization = False  # no gradients: fit places stops once; zoo writes its checkpoint
        self.register_buffer("stops", torch.zeros(0, dtype=torch.int64))
        self.register_buffer("stop_lonlat", torch.zeros(0, 2, dtype=torch.float64))
        self.register_buffer("meta_json", torch.zeros(0, dtype=torch.uint8))
        self.instance: Instance | None = None
        self._artifacts: dict[str, str] = {}

    @property
    def meta(self) -> dict:
        """Audit, metric settings and stop names of the fitted outcome (from the buffer)."""
        return json.loads(bytes(self.meta_json.tolist()).decode()) if self.meta_json.numel() else {}

    def configure_optimizers(self):
        """No optimiser: stop placement is combinatorial."""
        return

    def fit_instance(self, inst: Instance, metric: dict | None = None) -> dict[str, float]:
        """Place and audit on ``inst``; fill the buffers. Returns the audit (see :func:`audit`)."""
        hp = self.hparams
        C = pair_costs(inst)
        t0 = time.perf_counter()
        result = place(inst, hp.algorithm, hp.k, hp.lam, hp.seed, C)
        seconds = time.perf_counter() - t0
        self.instance = inst
        metrics = audit(inst, result.stops, hp.k, hp.core_max_n, tuple(hp.core_betas or (1.0,)), hp.core_solver, C)
        metrics["place_seconds"] = seconds
        self.stops = torch.tensor(result.stops, dtype=torch.int64)
        if inst.stops is not None:
            self.stop_lonlat = torch.from_numpy(inst.stops[result.stops].reshape(-1, 2).astype(np.float64))
        names = [inst.names[s] for s in result.stops] if inst.names else [str(s) for s in result.stops]
        meta = {
            "audit": metrics,
            "stop_names": names,
            "metric": metric or {},
            "n": inst.n,
            "m": inst.m,
            "info": {k: v for k, v in inst.info.items() if not isinstance(v, list)},
            "bound_applies": inst.metric,
            "events": [(r, kind, list(s)) for r, kind, s in result.events],
        }
        self.meta_json = torch.tensor(list(json.dumps(meta).encode()), dtype=torch.uint8)
        return metrics

    def training_step(self, batch, batch_idx):
        """Place stops once on the DataModule's instance; later steps do nothing."""
        if self.stops.numel() or self.meta_json.numel():
            return
        dm = self.trainer.datamodule
        metrics = self.fit_instance(dm.instance, dict(dm.metric))
        for key, value in metrics.items():
            self.log(f"train/{key}", float(value), batch_size=1, on_step=True, on_epoch=False)

    def on_train_end(self) -> None:
        """Write ``audit.json`` and (with coordinates) ``map.png`` into ``<run>/trsp/``."""
        if self.instance is None:
            return
        out = self.artifact_dir("trsp")
        self._artifacts = self.write_artifacts(out)

    def write_artifacts(self, out: Path) -> dict[str, str]:
        """``audit.json`` (audit, stops, settings) and ``map.png``; returns ``{name: path}``."""
        out.mkdir(parents=True, exist_ok=True)
        files = {"audit.json": out / "audit.json"}
        files["audit.json"].write_text(
            json.dumps(
                dict(self.meta, algorithm=self.hparams.algorithm, k=self.hparams.k, lam=self.hparams.lam), indent=1
            )
        )
        inst = self.instance
        if inst is not None and inst.trips is not None:
            files["map.png"] = out / "map.png"
            a = self.meta["audit"]
            plot_map(
                inst,
                self.stops.tolist(),
                str(files["map.png"]),
                f"{self.hparams.algorithm} on {inst.info.get('county', 'trips')}: {len(self.stops)} stops, "
                f"JR {a['jr_factor']:.3f}, mean {a['mean_cost_min']:.0f} min (walk {a['walk_mean_min']:.0f})",
            )
        return {k: str(v) for k, v in files.items()}

    def package_extras(self) -> dict[str, str]:
        return dict(self._artifacts)

    # ---- inference ------------------------------------------------------------------------------------------------
    def forward(self, trips: torch.Tensor) -> torch.Tensor:
        """Best cost of trips under the stored stops: ``trips (N, 4)`` a_lon, a_lat, b_lon, b_lat -> (N,) hours."""
        return torch.from_numpy(self.routes(trips.detach().cpu().numpy())[0])

    def routes(self, trips: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per trip: ``(cost, walk, board, alight)``; hours, hours, stop rows (-1 = walk). Needs stored coordinates.

        Raises:
            DataError: the model holds no stops or was fitted on matrices without coordinates.
        """
        if not self.meta_json.numel():
            raise DataError("this trsp model holds no stops: it was never fitted")
        if self.stop_lonlat.shape[0] != self.stops.shape[0]:
            raise DataError("this trsp model was fitted on travel-time matrices: trips by coordinates cannot be routed")
        metric = self.meta["metric"]
        if not self.stops.numel():  # the fit opened no stop: every trip walks
            walk = paired_walking_hours(
                trips[:, :2], trips[:, 2:], metric.get("circuity", 1.3), metric.get("speed_kmh", 5.0)
            )
            none = np.full(len(trips), -1)
            return walk, walk, none, none
        inst = from_points(trips[:, :2], trips[:, 2:], self.stop_lonlat.numpy(), **metric)
        cost, board, alight = best_routes(inst, range(inst.m))
        return cost, inst.direct, board, alight

    predict_schema: ClassVar = {
        "open_stops": int,
        "algorithm": str,
        "k": int,
        "files": [
            {
                "file": str,
                "trips": [
                    {"trip": int, "walk_min": float, "best_min": float, "board": (str, None), "alight": (str, None)}
                ],
            }
        ],
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict RUN_DIR trips.csv --json``: per trip of each file its walking and best minutes and the stops
        it boards and alights at (``None`` for both when walking is best); ``out_dir`` as :meth:`predict_cli`.

        Raises:
            DataError: no input, a bad trips CSV (file:line:column), a model without stops or coordinates.
        """
        if not inputs:
            raise DataError("zoo predict trsp: give a trips CSV with columns a_lon, a_lat, b_lon, b_lat")
        names = self.meta.get("stop_names", [])
        files = []
        for path in inputs:
            trips = read_lonlat_csv(path, TRIPS)
            cost, walk, board, alight = self.routes(trips)
            files.append(
                {
                    "file": str(path),
                    "trips": [
                        {
                            "trip": i,
                            "walk_min": float(60 * walk[i]),
                            "best_min": float(60 * cost[i]),
                            "board": None if board[i] < 0 else str(names[board[i]]),
                            "alight": None if board[i] < 0 else str(names[alight[i]]),
                        }
                        for i in range(len(trips))
                    ],
                }
            )
        out = {"open_stops": len(names), "algorithm": self.hparams.algorithm, "k": int(self.hparams.k), "files": files}
        if out_dir:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            (Path(out_dir) / "routes.tsv").write_text(_routes_text(out) + "\n")
        return out

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """``zoo predict RUN_DIR trips.csv``: each trip's best route (stops, minutes) beside walking, as TSV per file
        (the records of :meth:`predict_record`); with ``out_dir`` also ``D/routes.tsv``."""
        return _routes_text(self.predict_record(inputs, out_dir))

    def evaluate(self, datamodule) -> dict[str, float]:
        """The audit of the stored stops on the DataModule's instance (same data settings as the fit)."""
        datamodule.setup("validate")
        hp = self.hparams
        return audit(
            datamodule.instance,
            self.stops.tolist(),
            hp.k,
            hp.core_max_n,
            tuple(hp.core_betas or (1.0,)),
            hp.core_solver,
        )


def _routes_text(prediction: dict) -> str:
    """``TrSPModule.predict_record``'s records as the TSV ``zoo predict`` prints, one table per trips file."""
    lines = [f"# {prediction['open_stops']} open stops ({prediction['algorithm']}, k = {prediction['k']})"]
    for f in prediction["files"]:
        lines += [f"## {f['file']}", "trip\twalk_min\tbest_min\troute"]
        lines += [
            f"{t['trip']}\t{t['walk_min']:.1f}\t{t['best_min']:.1f}\t"
            + ("walk" if t["board"] is None else f"stop {t['board']} -> stop {t['alight']}")
            for t in f["trips"]
        ]
    return "\n".join(lines)
