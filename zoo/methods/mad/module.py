"""``MadModule``: a deployed image classifier (trained here on poisoned data) and mechanistic anomaly detection by
functional attribution on it (Lyons Keenan, Leckie & Erfani, ICML 2026; notes §3).

Two uses, one module:

- ``fit_classifier: true`` (``recipes/mad-badnets.yaml``): ordinary cross-entropy training on the datamodule's
  poisoned training set; validation logs clean accuracy ``val/acc`` and attack success rate ``val/asr``.
- ``fit_classifier: false`` (``recipes/mad.yaml``, weights from ``init_from``): no optimiser step; the single training
  step runs every detector (:func:`detect.run_detection`), logs ``detect/<detector>/<metric>`` and writes
  ``<run_dir>/mad/{detection.json, table.md, anomalies.png}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, ClassVar

import torch
import torch.nn.functional as F

from zoo.core.constraints import (
    Keys,
    NonEmpty,
    NonNegative,
    NonNegativeInt,
    OneOf,
    OpenUnit,
    Positive,
    PositiveInt,
    Range,
)
from zoo.core.data import DataError
from zoo.core.module import ZooModule
from zoo.core.optim import build_optimizer
from zoo.core.prediction import tsv
from zoo.core.registry import register_method
from zoo.core.results import render_table
from zoo.methods.mad.datamodule import BackdoorDataModule, convert_images
from zoo.methods.mad.detect import BASELINES, run_detection
from zoo.methods.mad.plots import plot_extremes
from zoo.methods.mad.scores import SCORES
from zoo.models.vision import build_vision_model

DETECTOR_DEFAULTS = {
    "detectors": [*SCORES, *BASELINES],
    "draws": 2000,
    "burn_in": 250,
    "chunk": 32,
    "fpr": 0.05,
    "strip_overlays": 8,
    "seed": 42,
    "sgld": {"lr": 1e-6, "localization": 1e4, "nbeta": 100.0},
}
#: The ``detector`` block: each key's allowed values.
DetectorSettings = Annotated[
    dict | None,
    Keys(
        DETECTOR_DEFAULTS,
        detectors=Annotated[list[Annotated[str, OneOf(DETECTOR_DEFAULTS["detectors"])]], NonEmpty],
        draws=PositiveInt,
        burn_in=NonNegativeInt,
        chunk=PositiveInt,
        fpr=OpenUnit,
        strip_overlays=PositiveInt,
        seed=NonNegativeInt,
        sgld=Keys(DETECTOR_DEFAULTS["sgld"], lr=Positive, localization=NonNegative, nbeta=Positive),
    ),
]
TABLE_COLUMNS = ["detector", "auroc", "der_fixed", "der_best", "der_backdoorbench", "tpr", "fpr"]


@register_method("mad", datamodule=BackdoorDataModule)
class MadModule(ZooModule):
    """Deployed classifier + functional-attribution anomaly detector.

    Args:
        arch, arch_kwargs: a ``zoo.models.vision.build_vision_model`` network (default a width-16 VGG).
        in_channels, num_classes, img_size: input and class sizes (checked against the data in ``setup``).
        fit_classifier: train the classifier (True) or run the detectors on the loaded weights (False).
        detector: overrides of :data:`DETECTOR_DEFAULTS` (``detectors``, ``draws``, ``burn_in``, ``chunk``, ``fpr``,
            ``strip_overlays``, ``seed``, ``sgld``: kwargs of :class:`sgld.RMSpropSGLD`).
        data: the datamodule's settings, filled in ``setup`` (``zoo predict`` rebuilds the trusted set from them).
        optimizer: ``zoo.core.optim.build_optimizer`` dict (default AdamW, lr 2e-3).
    Raises:
        ValueError: unknown detector keys, or sizes left null without ``init_from``.
    """

    export_formats = ("package",)
    weight_settings: ClassVar[dict[str, str]] = {
        "arch": "model.arch",
        "arch_kwargs": "model.arch_kwargs",
        "in_channels": "model.in_channels",
        "num_classes": "model.num_classes",
        "img_size": "model.img_size",
        "dataset": "data.dataset",
        "attack": "data.attack",
        "target": "data.target",
        "rate": "data.rate",
        "trigger": "data.trigger",
    }

    def __init__(
        self,
        arch: str | None = "vgg",
        arch_kwargs: dict | None = None,
        in_channels: PositiveInt | None = 3,
        num_classes: Annotated[int, Range(2)] | None = 10,
        img_size: PositiveInt | None = 32,
        fit_classifier: bool = True,
        detector: DetectorSettings = None,
        data: dict | None = None,
        optimizer: dict | None = None,
    ):
        super().__init__()
        unset = [
            k
            for k, v in (
                ("arch", arch),
                ("in_channels", in_channels),
                ("num_classes", num_classes),
                ("img_size", img_size),
            )
            if v is None
        ]
        if unset:
            raise ValueError(
                f"model.{', model.'.join(unset)}: unset (null is only for adopting a package's values with init_from)"
            )
        unknown = sorted(set(detector or {}) - set(DETECTOR_DEFAULTS))
        if unknown:
            raise ValueError(f"model.detector: unknown keys {unknown}; choose from {sorted(DETECTOR_DEFAULTS)}")
        self.save_hyperparameters()
        self.net = build_vision_model(arch, in_channels, num_classes, img_size, **(arch_kwargs or {"width": 16}))
        self.automatic_optimization = bool(fit_classifier)
        self.detection: dict | None = None

    @property
    def detector_settings(self) -> dict:
        """:data:`DETECTOR_DEFAULTS` updated with ``model.detector``."""
        return {**DETECTOR_DEFAULTS, **(self.hparams.detector or {})}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, num_classes)`` of images ``(B, C, H, W)`` in ``[0, 1]``."""
        return self.net(x)

    def setup(self, stage: str) -> None:
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is None:
            return
        dm.setup(stage)
        hp = self.hparams
        if (dm.in_channels, dm.num_classes, dm.img_size) != (hp.in_channels, hp.num_classes, hp.img_size):
            raise DataError(
                f"data {dm.dataset!r} has (channels, classes, size) = "
                f"{(dm.in_channels, dm.num_classes, dm.img_size)}; model.in_channels/num_classes/img_size "
                f"are {(hp.in_channels, hp.num_classes, hp.img_size)}"
            )
        hp.data = dm.settings()

    # ---- training the deployed model ---------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        if not self.hparams.fit_classifier:
            if self.detection is None:
                self._detect(self.trainer.datamodule, Path(self.trainer.default_root_dir) / "mad")
            return None
        x, y = batch
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(y))
        self.log("train/acc", (logits.argmax(1) == y).float().mean(), batch_size=len(y))
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, xt = batch
        target = self.trainer.datamodule.target if self._trainer is not None else 0
        self.log("val/acc", (self.net(x).argmax(1) == y).float().mean(), batch_size=len(y))
        keep = y != target
        if keep.any():
            self.log("val/asr", (self.net(xt[keep]).argmax(1) == target).float().mean(), batch_size=int(keep.sum()))

    def configure_optimizers(self):
        if not self.hparams.fit_classifier:
            return None  # detection only: no optimiser step, zoo still writes last.ckpt
        # a warm-up or cosine schedule needs the run's length (recipes/paper/ sets cosine; it failed at step 0)
        steps = self.trainer.estimated_stepping_batches if self._trainer is not None else None
        return build_optimizer(
            self.parameters(), self.hparams.optimizer or {"name": "adamw", "lr": 2e-3}, total_steps=steps
        )

    # ---- detection ---------------------------------------------------------------------------------------------
    def _detect(self, dm: BackdoorDataModule, out: Path) -> None:
        cfg = self.detector_settings
        result = run_detection(
            self.net,
            dm,
            cfg["detectors"],
            cfg["draws"],
            cfg["burn_in"],
            cfg["chunk"],
            cfg["sgld"],
            cfg["fpr"],
            cfg["strip_overlays"],
            cfg["seed"],
        )
        self.detection = result
        for name, m in result["metrics"].items():
            for key in ("auroc", "der_fixed", "der_best", "der_backdoorbench"):
                if m.get(key) is not None:
                    self.log(f"detect/{name}/{key}", float(m[key]), batch_size=1)
        self.log("detect/clean_acc", result["clean_acc"], batch_size=1)
        self.log("detect/asr", result["asr"], batch_size=1)
        out.mkdir(parents=True, exist_ok=True)
        doc = {
            k: result[k]
            for k in ("metrics", "clean_acc", "asr", "n_benign", "n_anomalous", "n_references", "seconds", "split")
        }
        (out / "detection.json").write_text(json.dumps(doc, indent=1))
        rows = [{"detector": k, **v} for k, v in result["metrics"].items()]
        (out / "table.md").write_text(
            f"# Detection on {result['split']['dataset']} / {result['split']['attack']}\n\n"
            f"clean accuracy {result['clean_acc']:.3f}, ASR {result['asr']:.3f}; der_best "
            "is at the post-hoc best threshold\n\n" + render_table(rows, TABLE_COLUMNS) + "\n"
        )
        best = next((d for d in ("clc", *result["scores"]) if d in result["scores"]), None)
        if best:
            s = result["scores"][best]
            plot_extremes(
                out / "anomalies.png",
                torch.cat([dm.eval.x, dm.eval_triggered]),
                torch.cat([s["eval"], s["triggered"]]),
                title=f"{best} anomaly score",
            )

    # ---- prediction --------------------------------------------------------------------------------------------
    predict_schema: ClassVar = {
        "threshold": (float, None),
        "wrote": [str],
        "rows": [
            {"image": str, "predicted": str, "clc_anomaly": float, "mean_corr_anomaly": float, "flagged": (bool, None)}
        ],
    }

    def predict_record(self, inputs: list[str], out_dir: str | None = None) -> dict:
        """``zoo predict mad.<tag> IMAGE ... [--out-dir D]``: trace the images with the trusted set of the data the
        model was trained on; per image its predicted class, anomaly scores (CLC and Mean-Corr) and whether CLC
        passes the calibration threshold (``None`` when the calibration images leave none); ``anomalies.png`` (most
        and least anomalous) into ``D``. Uses the package's ``model.detector`` settings (draws, SGLD).

        Raises:
            DataError: no input, an unreadable image, or a model saved without its data settings.
        """
        from PIL import Image

        if not inputs:
            raise DataError("zoo predict mad: give one or more image files")
        if not self.hparams.data:
            raise DataError("zoo predict mad: this model was saved without its data settings (train it with zoo)")
        xs = []
        for path in inputs:
            try:
                with Image.open(path) as im:
                    x = torch.tensor(list(im.convert("RGB").getdata()), dtype=torch.float32)
                    xs.append(x.view(im.size[1], im.size[0], 3).permute(2, 0, 1) / 255.0)
            except (OSError, ValueError) as e:
                raise DataError(f"{path}: not a readable image ({e})") from None
        hp = self.hparams
        x = torch.cat([convert_images(v[None], hp.in_channels, hp.img_size) for v in xs])
        dm = BackdoorDataModule(**hp.data)
        dm.setup()
        dm.ood = x  # the user's images are traced as the "ood" group
        cfg = {**self.detector_settings, "detectors": ["clc", "mean-corr"]}
        result = run_detection(
            self.net,
            dm,
            cfg["detectors"],
            cfg["draws"],
            cfg["burn_in"],
            cfg["chunk"],
            cfg["sgld"],
            cfg["fpr"],
            cfg["strip_overlays"],
            cfg["seed"],
        )
        with torch.no_grad():
            pred = self.net(x).argmax(1)
        tau = result["metrics"]["clc"]["threshold"]
        rows = []
        for i, path in enumerate(inputs):
            clc, mc = (float(result["scores"][k]["ood"][i]) for k in ("clc", "mean-corr"))
            rows.append(
                {
                    "image": Path(path).name,
                    "predicted": dm.classes[int(pred[i])],
                    "clc_anomaly": clc,
                    "mean_corr_anomaly": mc,
                    "flagged": None if tau is None else bool(clc > tau),
                }
            )
        wrote = []
        if out_dir:
            wrote.append(
                str(
                    plot_extremes(
                        Path(out_dir) / "anomalies.png",
                        x,
                        result["scores"]["clc"]["ood"],
                        labels=[Path(p).name for p in inputs],
                        title="CLC anomaly score",
                    )
                )
            )
        return {"threshold": None if tau is None else float(tau), "rows": rows, "wrote": wrote}

    def predict_cli(self, inputs: list[str], out_dir: str | None = None) -> str:
        """:meth:`predict_record` as TSV (``flagged``: yes, no, or n/a without a threshold)."""
        out = self.predict_record(inputs, out_dir)
        flag = {True: "yes", False: "no", None: "n/a"}
        rows = [{**r, "flagged": flag[r["flagged"]]} for r in out["rows"]]
        return "\n".join([tsv(rows), *(f"# wrote {w}" for w in out["wrote"])])
