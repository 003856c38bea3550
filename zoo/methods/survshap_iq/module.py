"""``SurvShapIQModule``: a survival model (DeepSurv, DeepHit or a Cox PH fit) trained on survival data, then
explained with SurvFD and SurvSHAP-IQ (Langbein et al., ICML 2026) when training ends.

``model="deepsurv"``: MLP log-risk trained with the Cox partial likelihood (torchsurv), Breslow baseline hazard.
``model="deephit"``: MLP over ``n_bins`` quantile cuts of the training event times + "later", DeepHit loss.
``model="coxph"``: scikit-survival's Cox PH fitted once (no optimiser step), stored as coefficients + Breslow.
Inputs are standardised inside the module, so explanations are in the data's own units.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import numpy as np
import torch

from zoo.core.constraints import Fraction, Keys, NonEmpty, NonNegativeInt, Positive, PositiveInt, Probability
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.registry import register_method
from zoo.methods.survshap_iq import plots as art
from zoo.methods.survshap_iq.datamodule import SurvivalDataModule
from zoo.methods.survshap_iq.decomposition import survfd
from zoo.methods.survshap_iq.metrics import c_index, evaluation_times, integrated_brier_score
from zoo.methods.survshap_iq.networks import breslow, cox_loss, cox_survival, deephit_loss, deephit_survival, mlp
from zoo.methods.survshap_iq.survival_models import SurvivalInterface

_SIZED = ("x_mean", "x_scale", "background", "explain_times", "bh_times", "bh_cumhaz", "cuts")
EXPLAIN = {
    "n_points": 4,
    "n_times": 21,
    "index": "k-SII",
    "max_order": 2,
    "scales": ["survival", "log_hazard"],
    "n_background": 64,
    "approximator": "auto",
    "budget": None,
    "partition_rel_tol": 0.01,
    "seed": 0,
}
#: The ``explain`` block: each key's allowed values (shapiq's interaction indices; ``auto`` picks the approximator).
ExplainSettings = Annotated[
    dict | None,
    Keys(
        EXPLAIN,
        n_points=NonNegativeInt,
        n_times=PositiveInt,
        max_order=PositiveInt,
        n_background=PositiveInt,
        index=Literal["k-SII", "SII", "STII", "FSII", "FBII", "SV", "BV", "BII", "CHII"],
        scales=Annotated[list[Literal["survival", "hazard", "log_hazard"]], NonEmpty],
        approximator=Literal["auto", "exact", "kernel", "regression", "svarm", "permutation", "montecarlo"],
        budget=PositiveInt | None,
        partition_rel_tol=Positive,
        seed=NonNegativeInt,
    ),
]


@register_method("survshap-iq", datamodule=SurvivalDataModule)
class SurvShapIQModule(ZooModule, SurvivalInterface):
    """A survival model with SurvSHAP-IQ explanations.

    Args:
        model: ``deepsurv`` | ``deephit`` | ``coxph``.
        hidden: MLP hidden widths (``[]`` = linear); dropout: after each hidden layer.
        n_bins: DeepHit's number of time cuts; alpha, sigma: DeepHit's NLL weight and ranking-loss scale.
        optimizer: ``zoo.core.optim.build_optimizer`` dict.
        n_features, feature_names: filled from the data in ``setup`` (kept for packages).
        explain: what ``on_train_end`` explains (keys and defaults in ``EXPLAIN``): ``n_points`` test patients on
            ``n_times`` times between the 5 % and 80 % quantiles of the training event times, ``index`` and
            ``max_order`` (shapiq), ``scales``, a background of ``n_background`` training rows.
    Raises:
        ValueError: explain keys that are not in ``EXPLAIN``.
    """

    export_formats = ("package",)
    fit_sized_buffers = _SIZED  # sizes known only after reading the data

    def __init__(
        self,
        model: Literal["deepsurv", "deephit", "coxph"] = "deepsurv",
        hidden: list[PositiveInt] | None = None,
        dropout: Fraction = 0.1,
        n_bins: PositiveInt = 20,
        alpha: Probability = 0.2,
        sigma: Positive = 0.1,
        optimizer: dict | None = None,
        n_features: NonNegativeInt = 0,
        feature_names: list[str] | None = None,
        explain: ExplainSettings = None,
    ):
        super().__init__()
        unknown = sorted(set(explain or {}) - set(EXPLAIN))
        if unknown:
            raise ValueError(f"model.explain: unknown key(s) {unknown}; known: {sorted(EXPLAIN)}")
        self.save_hyperparameters()
        self.cfg = {**EXPLAIN, **(explain or {})}
        self.automatic_optimization = model != "coxph"
        for name in _SIZED:
            self.register_buffer(name, torch.zeros(0, dtype=torch.float64))
        self.net = None
        if n_features:
            self._build(n_features)
        self._artifacts: dict[str, str] = {}

    def _build(self, p: int) -> None:
        hp = self.hparams
        if hp.model == "coxph":
            self.net = mlp(p, [], 1, 0.0).double()
        else:
            self.net = mlp(p, list(hp.hidden or [32, 32]), 1 if hp.model == "deepsurv" else hp.n_bins + 1, hp.dropout)

    # ---- data-derived state ------------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        dm = self.trainer.datamodule
        if self.x_mean.numel() == 0:
            X, t, e = dm.X_train, dm.time_train, dm.event_train
            self.x_mean = torch.as_tensor(X.mean(0))
            self.x_scale = torch.as_tensor(np.where(X.std(0) > 0, X.std(0), 1.0))
            rng = np.random.default_rng(self.cfg["seed"])
            pick = rng.choice(len(X), min(self.cfg["n_background"], len(X)), replace=False)
            self.background = torch.as_tensor(X[pick])
            self.explain_times = torch.as_tensor(np.quantile(t[e], np.linspace(0.05, 0.8, self.cfg["n_times"])))
            self.cuts = torch.as_tensor(np.unique(np.quantile(t[e], np.linspace(0, 1, self.hparams.n_bins + 1)[1:])))
            self.hparams.n_features, self.hparams.feature_names = X.shape[1], list(dm.feature_names)
        if self.net is None:
            self._build(self.hparams.n_features)

    def _std(self, x: torch.Tensor) -> torch.Tensor:
        return (x.double() - self.x_mean) / self.x_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x (n, p)`` raw features -> DeepSurv/CoxPH log-risk ``(n,)`` or DeepHit logits ``(n, n_bins + 1)``."""
        z = self._std(x).to(next(self.net.parameters()).dtype)
        out = self.net(z)
        return out[:, 0] if self.hparams.model != "deephit" else out

    # ---- training ----------------------------------------------------------------------------------------------
    def configure_optimizers(self):
        if self.hparams.model == "coxph":
            return None
        return build_optimizer(
            self.parameters(), self.hparams.optimizer or {"name": "adamw", "lr": 1e-3, "weight_decay": 1e-4}
        )

    def _loss(self, x, time, event):
        out = self(x)
        if self.hparams.model == "deephit":
            return deephit_loss(out, time, event, self.cuts.to(time.dtype), self.hparams.alpha, self.hparams.sigma)
        return cox_loss(out.float(), time, event)

    def training_step(self, batch, batch_idx):
        if self.hparams.model == "coxph":
            if batch_idx == 0 and self.current_epoch == 0:
                self._fit_coxph()
            return None
        loss = self._loss(*batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch[0]))
        return loss

    def _fit_coxph(self) -> None:
        from sksurv.linear_model import CoxPHSurvivalAnalysis

        from zoo.methods.survshap_iq.metrics import structured_y

        dm = self.trainer.datamodule
        Z = self._std(torch.as_tensor(dm.X_train)).numpy()
        est = CoxPHSurvivalAnalysis(alpha=1e-4).fit(Z, structured_y(dm.time_train, dm.event_train))
        with torch.no_grad():
            self.net[0].weight.copy_(torch.as_tensor(est.coef_)[None, :])
            self.net[0].bias.zero_()

    def _refresh_baseline(self) -> None:
        """Breslow baseline from the whole training split (DeepSurv, CoxPH); kept in buffers for the checkpoint."""
        if self.hparams.model == "deephit":
            return
        dm = self.trainer.datamodule
        with torch.no_grad():
            was = self.training
            self.eval()
            r = self(torch.as_tensor(dm.X_train, dtype=torch.float64)).double()
            self.train(was)
        self.bh_times, self.bh_cumhaz = breslow(r, torch.as_tensor(dm.time_train), torch.as_tensor(dm.event_train))

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """The Breslow baseline a checkpoint holds is the one of the weights it holds (recomputed now), not the last
        validation's: it then depends on nothing but the weights, so a killed and resumed run saves what an
        uninterrupted one saves."""
        if self._trainer is None or self.trainer.datamodule is None or self.hparams.model == "deephit":
            return
        self._refresh_baseline()
        checkpoint["state_dict"]["bh_times"] = self.bh_times.detach().clone()
        checkpoint["state_dict"]["bh_cumhaz"] = self.bh_cumhaz.detach().clone()

    def _metrics(self, split: str) -> dict[str, float]:
        dm = self.trainer.datamodule
        X, t, e = (getattr(dm, f"{k}_{split}") for k in ("X", "time", "event"))
        grid = evaluation_times(dm.time_train, t)
        out = {"c_index": c_index(t, e, self.predict_risk(X))}
        try:
            out["ibs"] = integrated_brier_score(
                dm.time_train, dm.event_train, t, e, self.predict_survival(X, grid), grid
            )
        except ValueError:  # a split whose times fall outside the training follow-up
            pass
        return out

    def validation_step(self, batch, batch_idx):
        self._refresh_baseline()
        if self.hparams.model != "coxph":
            self.log("val/loss", self._loss(*batch), batch_size=len(batch[0]))
        for k, v in self._metrics("val").items():
            self.log(f"val/{k}", v, batch_size=len(batch[0]))

    def test_step(self, batch, batch_idx):
        for k, v in self._metrics("test").items():
            self.log(f"test/{k}", v, batch_size=len(batch[0]))

    def evaluate(self, datamodule) -> dict[str, float]:
        """C-index and integrated Brier score on the validation and test splits (for ``zoo eval``)."""
        import lightning as L

        trainer = L.Trainer(
            accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False
        )
        out = {}
        for m in trainer.validate(self, datamodule=datamodule, verbose=False) + trainer.test(
            self, datamodule=datamodule, verbose=False
        ):
            out.update(m)
        return {k: v for k, v in out.items() if not k.endswith("loss")}

    # ---- the survival interface (numpy, raw units) -------------------------------------------------------------
    @torch.no_grad()
    def _out(self, X: np.ndarray) -> torch.Tensor:
        was = self.training
        self.eval()
        out = self(torch.as_tensor(np.asarray(X, dtype=float), device=self.x_mean.device)).double()
        self.train(was)
        return out

    def predict_survival(self, X: np.ndarray, times: np.ndarray) -> np.ndarray:
        """``X (n, p)`` raw features, ``times (T,)`` in the data's unit -> ``S(t|x) (n, T)``."""
        t = torch.as_tensor(np.asarray(times, dtype=float), device=self.x_mean.device)
        if self.hparams.model == "deephit":
            return deephit_survival(self._out(X), self.cuts, t).cpu().numpy()
        return cox_survival(self._out(X), self.bh_times, self.bh_cumhaz, t).cpu().numpy()

    def predict_risk(self, X: np.ndarray) -> np.ndarray:
        """``(n,)`` risk score: the log-risk (Cox models) or the expected number of cuts passed (DeepHit, ours)."""
        out = self._out(X)
        if self.hparams.model == "deephit":
            pmf = torch.softmax(out, 1)
            return -(pmf * torch.arange(pmf.shape[1], dtype=pmf.dtype, device=pmf.device)).sum(1).cpu().numpy()
        return out.cpu().numpy()

    # ---- explanations ------------------------------------------------------------------------------------------
    def explain(self, X: np.ndarray, out_dir: Path, prefix: str = "point") -> dict[str, str]:
        """SurvSHAP-IQ curves of each row of ``X (n, p)`` on every configured scale, and SurvFD's partition of the
        log-hazard over those rows; writes CSV, JSON and PNG files into ``out_dir`` and returns ``{name: path}``."""
        cfg, names = self.cfg, list(self.hparams.feature_names)
        out_dir.mkdir(parents=True, exist_ok=True)
        times, bg = self.explain_times.cpu().numpy(), self.background.cpu().numpy()
        curves = {
            s: art.explain_points(
                self,
                X,
                bg,
                times,
                names,
                s,
                cfg["index"],
                cfg["max_order"],
                cfg["approximator"],
                cfg["budget"],
                cfg["seed"],
            )
            for s in cfg["scales"]
        }
        files = {"curves.csv": out_dir / "curves.csv"}
        art.write_curves_csv(files["curves.csv"], curves)
        for s, cs in curves.items():
            for i, c in enumerate(cs):
                files[f"{prefix}{i}_{s}.png"] = out_dir / f"{prefix}{i}_{s}.png"
                art.plot_curves(c, files[f"{prefix}{i}_{s}.png"], s, title=f"{prefix} {i}: {c.index} on {s}")
        if len(names) <= 12:
            dec = survfd(self.target("log_hazard", times), X, bg, times)
            rows = art.partition_table(dec, names, cfg["partition_rel_tol"])
            files["partition.json"], files["partition.png"] = out_dir / "partition.json", out_dir / "partition.png"
            art.write_json(files["partition.json"], rows)
            art.plot_partition(
                rows,
                files["partition.png"],
                f"SurvFD of log h ({self.hparams.model}): time-dependent (red) vs time-independent (blue)",
            )
        return {k: str(v) for k, v in files.items()}

    def on_train_end(self) -> None:
        """Explain ``explain.n_points`` test patients; files under ``<run>/survshap_iq/``."""
        dm = self.trainer.datamodule
        if not self.trainer.is_global_zero or dm is None or self.cfg["n_points"] <= 0:
            return
        self._refresh_baseline()
        root = Path(self.trainer.default_root_dir) / "survshap_iq"  # the run directory
        X = dm.X_test[: self.cfg["n_points"]]
        self._artifacts = self.explain(X, root, prefix="patient")
        metrics = self._metrics("test")
        art.write_json(root / "test_metrics.json", {"source": dm.source, **metrics})
        self._artifacts["test_metrics.json"] = str(root / "test_metrics.json")

    def package_extras(self) -> dict[str, str]:
        return dict(self._artifacts)

    predict_schema: ClassVar = {
        "patient": {str: float},
        "times": [float],
        "survival": [float],
        "index": str,
        "at_time": float,
        "baseline": float,
        "largest": [{"term": str, "value": float}],
        "plot": (str, None),
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict <id> feature=value ...`` (unnamed features take the background median): the patient's
        survival at every explanation time and, at the middle time, the baseline and its 6 largest SurvSHAP-IQ
        interactions; ``patient_survival.png`` into ``out_dir`` (``plot``).

        Raises:
            ValueError: an unknown feature name, a value that is not a number, or an input without ``=``.
        """
        names = list(self.hparams.feature_names)
        x = np.median(self.background.cpu().numpy(), axis=0)
        for item in inputs:
            if "=" not in item:
                raise ValueError(f"expected feature=value, got {item!r}; features: {names}")
            k, v = item.split("=", 1)
            if k not in names:
                raise ValueError(f"unknown feature {k!r}; features: {names}")
            try:
                x[names.index(k)] = float(v)
            except ValueError:
                raise ValueError(f"feature {k!r}: {v!r} is not a number (categories are coded 0, 1, ...)") from None
        out = Path(out_dir) if out_dir else None
        times, bg = self.explain_times.cpu().numpy(), self.background.cpu().numpy()
        c = art.explain_points(
            self,
            x[None],
            bg,
            times,
            names,
            "survival",
            self.cfg["index"],
            self.cfg["max_order"],
            self.cfg["approximator"],
            self.cfg["budget"],
            self.cfg["seed"],
        )[0]
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            art.plot_curves(c, out / "patient_survival.png", "survival", title="SurvSHAP-IQ of this patient")
        mid = len(times) // 2
        top = np.argsort(-np.abs(c.values[mid]))[:6]
        return {
            "patient": dict(zip(names, map(float, x))),
            "times": [float(t) for t in times],
            "survival": [float(v) for v in c.prediction],
            "index": str(c.index),
            "at_time": float(times[mid]),
            "baseline": float(c.baseline[mid]),
            "largest": [{"term": c.name(k), "value": float(c.values[mid, k])} for k in top],
            "plot": str(out / "patient_survival.png") if out is not None else None,
        }

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as text: the patient, S(t|x) at every fifth time, the largest interactions."""
        r = self.predict_record(inputs, out_dir)
        lines = [
            f"patient: {json.dumps(r['patient'])}",
            "S(t|x): " + ", ".join(f"t={t:.0f}: {v:.3f}" for t, v in zip(r["times"][::5], r["survival"][::5])),
            f"largest {r['index']} at t = {r['at_time']:.0f} (baseline {r['baseline']:.3f}):",
        ]
        lines += [f"  {t['term']:30s} {t['value']:+.4f}" for t in r["largest"]]
        return "\n".join(lines + ([f"plot: {r['plot']}"] if r["plot"] else []))
