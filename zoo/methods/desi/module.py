"""``DeSIModule``: deep single-index Fréchet regression (arXiv 2606.06957) as a LightningModule.

The estimator is our reconstruction (``index.py``): an index (``linear`` β on the sphere, or ``deep`` f_θ with its
AGOP direction) and ``log h`` trained by Adam on the cross-fitted local linear Fréchet risk; the training inputs and
embedded responses are buffers, so a checkpoint or release package predicts on its own.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import numpy as np
import torch

from zoo.core.constraints import NUMBER, DataFile, NonEmpty, NonNegative, NonNegativeInt, Positive, PositiveInt
from zoo.core.data import DataError
from zoo.core.datafiles import read_declared
from zoo.core.module import ZooModule
from zoo.core.prediction import tsv
from zoo.core.registry import register_method
from zoo.methods.desi.datamodule import FrechetDataModule
from zoo.methods.desi.index import SingleIndex, fit_index
from zoo.methods.desi.plots import plot_along_index, plot_heldout, plot_importance
from zoo.methods.desi.spaces import Space

#: ``zoo predict desi``'s input CSVs: the model's feature columns (``features``), each a finite number.
INPUTS = DataFile("csv", column_args=("features",), types={"features": NUMBER})

_SIZED = ("X_ref", "Z_ref", "x_mean", "x_sd", "meta_json", "g_ref")


@register_method("desi", datamodule=FrechetDataModule)
class DeSIModule(ZooModule):
    """DeSI (reconstruction, ours).

    Args:
        index: ``linear`` (index A, t = βᵀx) or ``deep`` (index B, t = f_θ(x), β̂ from the AGOP).
        hidden: hidden widths of the deep index.
        h_init: initial bandwidth (multiple of sd of the index).
        kernel: ``gaussian`` or ``epanechnikov``.
        lr, weight_decay: Adam on the cross-fitted risk.
        bootstrap: bootstrap refits for the index-weight CIs written after training (0 = none).
        bootstrap_epochs: epochs of each warm-started bootstrap refit.
        n_features, space, m, support: filled from the data at ``setup`` (kept so a package rebuilds itself).
    """

    export_formats = ("package",)
    fit_sized_buffers = _SIZED  # reference-set sizes are only known after setup

    def __init__(
        self,
        index: Literal["linear", "deep"] = "linear",
        hidden: Annotated[list[PositiveInt], NonEmpty] | None = None,
        h_init: Positive = 0.2,
        kernel: Literal["gaussian", "epanechnikov"] = "gaussian",
        lr: Positive = 0.02,
        weight_decay: NonNegative = 0.0,
        bootstrap: NonNegativeInt = 10,
        bootstrap_epochs: NonNegativeInt = 5,
        n_features: PositiveInt | None = None,
        space: Literal["distribution", "spd", "composition", "laplacian"] | None = None,
        m: PositiveInt | None = None,
        support: list[float] | None = None,
    ):
        super().__init__()
        if lr <= 0 or h_init <= 0 or bootstrap < 0:
            raise ValueError("model.lr and model.h_init must be > 0 and model.bootstrap >= 0")
        self.save_hyperparameters()
        self.net = self._build() if n_features else None
        for name in ("X_ref", "Z_ref", "x_mean", "x_sd"):
            self.register_buffer(name, torch.zeros(0))
        self.register_buffer("meta_json", torch.zeros(0, dtype=torch.uint8))
        self.register_buffer("g_ref", torch.zeros(0, dtype=torch.long))  # cross-fitting groups (empty: rows)
        self._artifacts: dict[str, str] = {}

    def _build(self) -> SingleIndex:
        hp = self.hparams
        return SingleIndex(hp.n_features, hp.index, tuple(hp.hidden or (32, 32)), hp.h_init, hp.kernel)

    @property
    def space(self) -> Space:
        hp = self.hparams
        return Space(hp.space, hp.m, tuple(hp.support) if hp.support else None)

    @property
    def meta(self) -> dict:
        return json.loads(bytes(self.meta_json.tolist()).decode()) if self.meta_json.numel() else {}

    # ---- fit --------------------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        """Take the training split from the datamodule as the reference set; build the index on first use."""
        dm = self.trainer.datamodule
        dm.setup(stage)
        sp = dm.space
        self.hparams.update(
            n_features=int(dm.X_train.shape[1]), space=sp.kind, m=sp.m, support=list(sp.support) if sp.support else None
        )
        self.X_ref = torch.as_tensor(dm.X_train, dtype=torch.float32)
        self.Z_ref = torch.as_tensor(dm.Z_train, dtype=torch.float32)
        self.x_mean = torch.as_tensor(dm.x_mean, dtype=torch.float64)
        self.x_sd = torch.as_tensor(dm.x_sd, dtype=torch.float64)
        if dm.groups_train is not None:
            self.g_ref = torch.as_tensor(dm.groups_train, dtype=torch.long)
        meta = {
            "feature_names": dm.feature_names,
            "dataset": dm.path or dm.dataset,
            "beta_true": None if dm.beta is None else [float(b) for b in dm.beta],
        }
        self.meta_json = torch.tensor(list(json.dumps(meta).encode()), dtype=torch.uint8)
        if self.net is None:
            self.net = self._build()
            self.net.init_direction(dm.X_train, dm.Z_train)

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    def training_step(self, rows, batch_idx):
        loss = self.net.risk(self.X_ref, self.Z_ref, self.space, rows, self.g_ref if self.g_ref.numel() else None)
        self.log("train/risk", loss, prog_bar=True, batch_size=len(rows))
        self.log("train/h", self.net.log_h.exp(), batch_size=len(rows))
        return loss

    def validation_step(self, rows, batch_idx):
        dm = self.trainer.datamodule
        Xq, Zq = dm.X_test[rows.cpu().numpy()], dm.Z_test[rows.cpu().numpy()]
        sp = self.space
        raw = self.net.predict(Xq, self.X_ref, self.Z_ref, sp, project=False)
        proj = sp.project(raw)
        self.log("val/mspe", float(sp.dist2(proj, Zq).mean()), batch_size=len(rows))
        self.log("val/mspe_unprojected", float(sp.dist2(raw, Zq).mean()), batch_size=len(rows))

    def on_train_end(self) -> None:
        self._artifacts = self.write_artifacts(self.artifact_dir("desi"), self.trainer.datamodule)

    # ---- outputs ----------------------------------------------------------------------------------------------
    def direction(self) -> np.ndarray:
        """``(p,)`` unit index direction (β for index A, top AGOP eigenvector for B) in standardised inputs."""
        return self.net.direction(self.X_ref)

    def bootstrap_directions(self, seed: int = 0) -> np.ndarray:
        """``(B, p)`` directions of warm-started refits on bootstrap resamples (sign-aligned to ``direction``)."""
        hp, base = self.hparams, self.direction()
        rng = np.random.default_rng(seed)
        X, Z = self.X_ref.cpu().numpy(), self.Z_ref.cpu().numpy()
        out = []
        for b in range(hp.bootstrap):
            idx = rng.integers(0, len(X), len(X))
            net = copy.deepcopy(self.net).cpu()
            groups = self.g_ref.cpu().numpy()[idx] if self.g_ref.numel() else idx  # resampled copies: one group
            fit_index(
                net,
                X[idx],
                Z[idx],
                self.space,
                epochs=hp.bootstrap_epochs,
                lr=hp.lr,
                weight_decay=hp.weight_decay,
                seed=b,
                groups=groups,
            )
            d = net.direction(torch.as_tensor(X[idx]))
            out.append(d * np.sign(d @ base or 1.0))
        return np.array(out).reshape(-1, len(base))

    def write_artifacts(self, out: Path, dm=None) -> dict[str, str]:
        """index.json (direction, 95% bootstrap CIs, bandwidth, held-out MSPE) and the PNGs; returns ``{name: path}``."""
        out.mkdir(parents=True, exist_ok=True)
        names, beta = self.meta["feature_names"], self.direction()
        boot = self.bootstrap_directions() if self.hparams.bootstrap else np.zeros((0, len(beta)))
        lo, hi = np.percentile(boot, [2.5, 97.5], axis=0) if len(boot) > 1 else (beta, beta)
        doc = {
            "index": self.hparams.index,
            "feature": names,
            "direction": beta.tolist(),
            "ci_low": lo.tolist(),
            "ci_high": hi.tolist(),
            "bootstrap": len(boot),
            "bandwidth_sd_units": float(self.net.log_h.detach().exp()),
            "n_reference": len(self.X_ref),
        }
        files = {
            "index.json": out / "index.json",
            "index_weights.png": out / "index_weights.png",
            "along_index.png": out / "along_index.png",
        }
        t_ref = self.net(self.X_ref).detach().cpu().numpy()
        grid_t = np.quantile(t_ref, np.linspace(0.05, 0.95, 7))
        along = self.predict_at_index(grid_t)
        if dm is not None and len(dm.X_test):
            sp = self.space
            pred = self.net.predict(dm.X_test, self.X_ref, self.Z_ref, sp)
            doc["heldout_mspe"] = float(sp.dist2(pred, dm.Z_test).mean())
            doc["heldout_n"] = len(dm.X_test)
            files["heldout.png"] = out / "heldout.png"
            show = np.unique(np.linspace(0, len(pred) - 1, 6).round().astype(int))  # spread over the split
            plot_heldout(
                sp, pred[show], dm.Z_test[show], [str(g) for g in dm.test_groups[show]], str(files["heldout.png"])
            )
        if self.meta.get("beta_true"):
            from zoo.methods.desi.index import angle_degrees

            doc["angle_to_planted_deg"] = angle_degrees(beta, np.array(self.meta["beta_true"]))
        files["index.json"].write_text(json.dumps(doc, indent=1))
        plot_importance(names, beta, lo, hi, str(files["index_weights.png"]), self.hparams.index)
        plot_along_index(self.space, grid_t, along, str(files["along_index.png"]))
        return {k: str(v) for k, v in files.items()}

    def package_extras(self) -> dict[str, str]:
        return dict(self._artifacts)

    # ---- inference --------------------------------------------------------------------------------------------
    def predict_at_index(self, t: np.ndarray) -> np.ndarray:
        """``(k, m)`` projected predictions at index values ``t (k,)``."""
        with torch.no_grad():
            t_ref = self.net(self.X_ref)
            from zoo.methods.desi.frechet import local_linear_weights

            tq = torch.as_tensor(t, dtype=t_ref.dtype, device=t_ref.device).clamp(t_ref.min(), t_ref.max())
            W = local_linear_weights(t_ref, tq, self.net.bandwidth(t_ref), kernel=self.net.kernel)
        return self.space.project(W.double().cpu().numpy() @ self.Z_ref.double().cpu().numpy())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Raw inputs ``x (k, p)`` (original units) -> projected embeddings ``(k, m)`` (quantiles for distributions)."""
        xs = ((x.double() - self.x_mean) / self.x_sd).float()
        return torch.as_tensor(self.net.predict(xs, self.X_ref, self.Z_ref, self.space))

    def example_input(self) -> tuple:
        return (self.x_mean[None].float(),)

    def predict_objects(self, X: np.ndarray) -> np.ndarray:
        """Raw inputs ``(k, p)`` -> objects: quantiles ``(k, m)``, SPD/Laplacian ``(k, r, r)`` or compositions."""
        return self.space.to_object(self(torch.as_tensor(np.asarray(X, dtype=np.float64))).numpy())

    predict_schema: ClassVar = {
        "files": [{"file": str, "columns": [str], "rows": [{"row": int, "values": [float]}], "wrote": [str]}]
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict desi.<tag> rows.csv ... --json``: per input file its columns (``q0..`` quantiles for
        distributions, else ``y0..``) and per row the predicted values; with ``out_dir`` also the files
        :meth:`predict_cli` describes (``wrote``).

        Raises:
            DataError: no input, a missing file or feature column, a non-numeric value.
        """
        if not inputs:
            raise DataError("zoo predict desi: give one or more CSV files with the model's input columns")
        names = self.meta["feature_names"]
        out = Path(out_dir) if out_dir else None  # files only where asked (never the current directory)
        if out:
            out.mkdir(parents=True, exist_ok=True)
        files = []
        for path in inputs:
            _, rows = read_declared(path, INPUTS, {"features": names})
            X = np.array([[r[c] for c in names] for _, r in rows], dtype=float).reshape(len(rows), len(names))
            Y = self.predict_objects(X).reshape(len(X), -1)
            head = [f"{'q' if self.space.kind == 'distribution' else 'y'}{j}" for j in range(Y.shape[1])]
            done = {
                "file": str(path),
                "columns": head,
                "rows": [{"row": i, "values": [float(v) for v in y]} for i, y in enumerate(Y)],
                "wrote": [],
            }
            files.append(done)
            if out is None:
                continue
            stem = Path(path).stem
            (out / f"{stem}.predicted.tsv").write_text(_table(done) + "\n")
            done["wrote"].append(str(out / f"{stem}.predicted.tsv"))
            if self.space.kind == "distribution":
                plot_heldout(self.space, Y, None, [f"row {i}" for i in range(len(Y))], str(out / f"{stem}.density.png"))
                done["wrote"].append(str(out / f"{stem}.density.png"))
        return {"files": files}

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """``zoo predict desi.<tag> rows.csv [--out-dir D]``: predicted responses per row, printed as TSV (the records
        of :meth:`predict_record`); with ``out_dir`` also written to ``D/<stem>.predicted.tsv`` with, for
        distributions, ``D/<stem>.density.png``."""
        lines = []
        for f in self.predict_record(inputs, out_dir)["files"]:
            lines += [f"## {f['file']}", _table(f)]
            lines += [f"# density plot: {w}" for w in f["wrote"] if w.endswith(".png")]
        return "\n".join(lines)

    def evaluate(self, datamodule) -> dict[str, float]:
        """Held-out MSPE (projected and not) and the training reference size."""
        datamodule.setup("validate")
        sp = self.space
        raw = self.net.predict(datamodule.X_test, self.X_ref, self.Z_ref, sp, project=False)
        return {
            "val/mspe": float(sp.dist2(sp.project(raw), datamodule.Z_test).mean()),
            "val/mspe_unprojected": float(sp.dist2(raw, datamodule.Z_test).mean()),
            "n_reference": float(len(self.X_ref)),
        }


def _table(prediction: dict) -> str:
    """One file's predictions (a record of ``predict_record``) as TSV: ``row`` then the value columns."""
    rows = [{"row": r["row"], **dict(zip(prediction["columns"], r["values"]))} for r in prediction["rows"]]
    return tsv(rows, ["row", *prediction["columns"]])
