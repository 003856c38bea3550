"""``cond-dp``: label-DP regression with DP-SGD conditioned on the public-feature spectrum (Jiang, Krichene and
Mayoraz, arXiv 2606.18773; update rule reconstructed, *ours*, see README.md)."""

from __future__ import annotations

import logging
import math
from typing import Annotated, ClassVar, Literal

import numpy as np
import torch

from zoo.core.constraints import NonNegative, OpenUnit, Positive, PositiveInt, Range
from zoo.core.module import ZooModule
from zoo.core.recipe import RecipeError
from zoo.core.registry import register_method
from zoo.methods.cond_dp.conditioning import conditioning_matrix, psd_sqrt
from zoo.methods.cond_dp.datamodule import LabelDPDataModule
from zoo.methods.cond_dp.networks import Regressor
from zoo.methods.cond_dp.privacy import add_preconditioner, calibrate_noise, make_private

log = logging.getLogger("zoo")

#: The privacy record kept as a buffer (so checkpoints and packages carry it), in this order.
PRIVACY_FIELDS = ("epsilon_spent", "delta", "noise_multiplier", "sample_rate", "steps")


@register_method("cond-dp", datamodule=LabelDPDataModule)
class CondDPModule(ZooModule):
    """Cond-DP (or DP-SGD with ``conditioning="none"``) on a linear model or a d → 64 → 64 → 1 MLP.

    Args:
        model: ``mlp`` or ``linear``; hidden: MLP widths.
        conditioning: ``precondition`` (privatised first-layer gradient multiplied by C), ``reparam`` (plain DP-SGD
            on inputs C^{1/2} x) or ``none`` (DP-SGD).
        ridge, rank, normalize: how C is built from the public training features
            (:func:`~zoo.methods.cond_dp.conditioning.conditioning_matrix`).
        epsilon, delta: privacy target; σ is calibrated for the planned number of Poisson steps.
        max_grad_norm: per-example clip c; neighbouring: ``substitution`` (one label changed; noise for
            sensitivity 2c) or ``add_remove``.
        private: False trains without clipping or noise (the non-private ceiling).
        lr, momentum: SGD step size and momentum.
        in_features, label_offset, dataset: filled from the data in ``setup`` (saved so packages rebuild).
        feature_names: the feature columns in order, filled in ``setup`` for a CSV or diabetes (not for the
            commuting tables, whose models predict tract pairs): ``zoo predict`` reads rows by these names.
    """

    head_keys = ()
    export_formats = ("package", "onnx", "torch_export")
    trainer_rules = (
        {
            "when": {},
            "max_processes": 1,
            "why": "cond-dp runs on one device (its Poisson DP loader and, for private runs, DP-SGD would "
            "need opacus' distributed sampler and optimiser, not wired here); set trainer.devices=1",
        },
    )

    def __init__(
        self,
        model: Literal["mlp", "linear"] = "mlp",
        hidden: list[PositiveInt] | None = None,
        conditioning: Literal["precondition", "reparam", "none"] = "precondition",
        ridge: NonNegative = 0.01,
        rank: PositiveInt | None = None,
        normalize: bool = True,
        epsilon: Positive = 1.0,
        delta: OpenUnit = 1e-5,
        max_grad_norm: Positive = 1.0,
        neighbouring: Literal["substitution", "add_remove"] = "substitution",
        private: bool = True,
        lr: Positive = 0.5,
        momentum: Annotated[float, Range(0, 1, max_open=True)] = 0.9,
        in_features: PositiveInt | None = None,
        label_offset: float = 0.0,
        dataset: str | None = None,
        feature_names: list[str] | None = None,
    ):
        super().__init__()  # the values' ranges are declared in the signature and checked before construction
        self.save_hyperparameters()
        self.net: Regressor | None = None
        self._dp = None
        self._history = None
        if in_features is not None:
            self._build(int(in_features))

    def _build(self, d: int) -> None:
        hp = self.hparams
        hidden = [] if hp.model == "linear" else list(hp.hidden or [64, 64])
        placeholder = torch.eye(d + 1) if hp.conditioning == "reparam" else None
        self.net = Regressor(d, hidden, input_map=placeholder, offset=hp.label_offset)
        if hp.conditioning == "precondition":
            self.register_buffer("conditioning", torch.eye(d + 1))  # C of [X, 1]: weights and bias
        self.register_buffer("x_mean", torch.zeros(d))
        self.register_buffer("x_scale", torch.ones(d))
        self.register_buffer("privacy", torch.zeros(len(PRIVACY_FIELDS), dtype=torch.float64))

    def setup(self, stage: str | None = None) -> None:
        dm = self.trainer.datamodule
        if self.net is None:
            self.hparams.in_features = dm.num_features
            self.hparams.label_offset = (dm.y_min + dm.y_max) / 2
            self.hparams.dataset = dm.dataset
            if not dm.dataset.startswith("commuting-"):
                self.hparams.feature_names = list(dm.feature_names)
            self._build(dm.num_features)
        if self.hparams.conditioning != "none":
            C = conditioning_matrix(
                dm.X_train, self.hparams.ridge, self.hparams.rank, self.hparams.normalize, intercept=True
            )
            if self.hparams.conditioning == "reparam":
                self.net.input_map.copy_(torch.as_tensor(psd_sqrt(C)))
            else:
                self.conditioning.copy_(torch.as_tensor(C))
        self.x_mean.copy_(torch.as_tensor(dm.mean))
        self.x_scale.copy_(torch.as_tensor(dm.scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, d) standardised features -> (B,) predicted labels."""
        return self.net(x)

    def example_input(self) -> tuple:
        return (torch.zeros(2, self.hparams.in_features),)

    # ---- training ---------------------------------------------------------------------------------------------
    def _planned_steps(self) -> int:
        tr = self.trainer
        per_epoch = tr.datamodule.steps_per_epoch
        if isinstance(tr.limit_train_batches, int):
            per_epoch = min(per_epoch, tr.limit_train_batches)
        planned = per_epoch * max(1, tr.max_epochs or 1)
        return min(planned, tr.max_steps) if tr.max_steps and tr.max_steps > 0 else planned

    def configure_optimizers(self):
        hp = self.hparams
        opt = torch.optim.SGD(self.net.parameters(), lr=hp.lr, momentum=hp.momentum)
        if not hp.private:
            if hp.conditioning == "precondition":
                add_preconditioner(opt, self.net.first, self.conditioning)
            return opt
        dm = self.trainer.datamodule
        if not dm.poisson:
            raise ValueError("data.poisson must be true for private training (the accountant assumes it)")
        sigma = calibrate_noise(hp.epsilon, hp.delta, dm.sample_rate, self._planned_steps())
        if self._history and not math.isclose(sigma, float(self._history[-1][0]), rel_tol=1e-6):
            raise RecipeError(  # resumed with another plan: the steps already taken used the old sigma
                f"cond-dp: this run's sigma {float(self._history[-1][0]):.4f} was calibrated for epsilon "
                f"{hp.epsilon:g} over its planned steps; {self._planned_steps()} planned steps now need sigma "
                f"{sigma:.4f}, and mixing the two would spend more than epsilon. Resume with the run's trainer "
                "settings, or start a new run (without resume) with the new ones"
            )
        pre = (self.net.first, self.conditioning) if hp.conditioning == "precondition" else None
        self._dp = make_private(
            self.net,
            opt,
            sample_rate=dm.sample_rate,
            expected_batch_size=dm.batch_size,
            noise_multiplier=sigma,
            max_grad_norm=hp.max_grad_norm,
            neighbouring=hp.neighbouring,
            preconditioner=pre,
        )
        log.info(
            "cond-dp: sigma %.4f, q %.5f, %d planned steps, clip %g, %s neighbours",
            sigma,
            dm.sample_rate,
            self._planned_steps(),
            hp.max_grad_norm,
            hp.neighbouring,
        )
        return self._dp.optimizer

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.mean((self.net(x) - y) ** 2) if len(x) else self.net(x).sum() * 0.0
        self.log("train/mse", loss, prog_bar=True, batch_size=max(1, len(x)))
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val/mse", torch.mean((self.net(x) - y) ** 2), batch_size=len(x))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test/mse", torch.mean((self.net(x) - y) ** 2), batch_size=len(x))

    # ---- privacy record -----------------------------------------------------------------------------------------
    def privacy_record(self) -> dict[str, float]:
        """ε spent, δ, σ, q and steps of this training (from the live accountant, else the saved buffer)."""
        if self._dp is not None:
            values = (
                self._dp.epsilon(self.hparams.delta),
                self.hparams.delta,
                self._dp.noise_multiplier,
                self._dp.sample_rate,
                self._dp.steps,
            )
            self.privacy.copy_(torch.tensor(values, dtype=torch.float64))
        return dict(zip(PRIVACY_FIELDS, self.privacy.tolist()))

    def on_train_start(self) -> None:
        if self._dp is not None and self._history:
            self._dp.accountant.history = [tuple(h) for h in self._history]  # resumed: continue the account

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        self.privacy_record()
        checkpoint["state_dict"]["privacy"] = self.privacy.clone()
        if self._dp is not None:
            checkpoint["accountant_history"] = [list(h) for h in self._dp.accountant.history]

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self._history = checkpoint.get("accountant_history")

    def on_train_end(self) -> None:
        dm = self.trainer.datamodule
        rec = self.privacy_record()
        test = self.mse(dm.X_test, dm.y_test)
        self.trainer.callback_metrics.update(
            {"test/mse": torch.tensor(test), "privacy/epsilon_spent": torch.tensor(rec["epsilon_spent"])}
        )
        eps = (
            f"ε spent {rec['epsilon_spent']:.3f} (δ = {self.hparams.delta:g}, σ = {rec['noise_multiplier']:.4f}, "
            f"q = {rec['sample_rate']:.5f}, {int(rec['steps'])} steps, {self.hparams.neighbouring})"
            if self.hparams.private
            else (
                f"labels randomised by {dm.label_mechanism} at ε = {dm.label_epsilon:g} "
                "(pure label DP), then non-private SGD"
                if dm.label_mechanism != "none"
                else "non-private (ε = ∞)"
            )
        )
        mode = self.hparams.conditioning if self.hparams.private else "no DP-SGD"
        print(f"cond-dp [{mode}, {self.hparams.model}] on {dm.dataset}: test MSE {test:.4f} | {eps}")

    def mse(self, X: np.ndarray, y: np.ndarray) -> float:
        """MSE on standardised (n, d) features and (n,) labels."""
        with torch.no_grad():
            pred = self.net(torch.as_tensor(X, dtype=torch.float32, device=self.device))
        return float(torch.mean((pred.cpu() - torch.as_tensor(y, dtype=torch.float32)) ** 2))

    def evaluate(self, datamodule) -> dict[str, float]:
        """Validation and test MSE on the recipe's data, with the privacy record the weights were trained under."""
        rec = self.privacy_record()
        return {
            "val/mse": self.mse(datamodule.X_val, datamodule.y_val),
            "test/mse": self.mse(datamodule.X_test, datamodule.y_test),
            **{f"privacy/{k}": v for k, v in rec.items()},
        }

    # ---- zoo predict ----------------------------------------------------------------------------------------------
    predict_schema: ClassVar = {
        "pairs": [
            {"origin": str, "destination": str, "predicted_commuters": float, "log1p": float, "observed": (int, None)}
        ],
        "files": [{"file": str, "rows": [{"row": int, "prediction": float}]}],
        "model": {"conditioning": str, "model": str, "private": bool, "epsilon": (float, None), "delta": (float, None)},
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict ID ORIGIN DESTINATION --json`` (or ``origin=G destination=G``) for a commuting-od model: one
        pair's predicted and observed commuters (``pairs``); ``zoo predict RUN rows.csv --json`` for a model trained
        on a CSV (or diabetes): each row's predicted label (``files``, :func:`.predict.predict_rows`); with how the
        model was trained (``model``)."""
        from zoo.methods.cond_dp.predict import model_record, predict_pair, predict_rows

        rows = self.hparams.get("feature_names")
        return {
            "pairs": [] if rows else [predict_pair(self, inputs)],
            "files": predict_rows(self, inputs) if rows else [],
            "model": model_record(self),
        }

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record`'s records as text: ``ORIGIN -> DESTINATION: predicted ... commuters`` or a TSV per
        file, then the model line."""
        from zoo.methods.cond_dp.predict import as_text

        return as_text(self.predict_record(inputs, out_dir))
