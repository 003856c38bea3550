"""``zoo eval``'s flow: metrics of a trained module on its recipe's data, as plain floats."""

from __future__ import annotations

import math

import lightning as L
import torch

from zoo.core.build import build_datamodule
from zoo.core.progress import quiet_lightning_noise


def plain_metrics(metrics: dict) -> dict[str, float]:
    """``{name: float}`` of ``metrics`` (one-element tensors read out; NaNs and non-numbers left out): what
    ``metrics.json`` holds."""
    vals = {k: v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v for k, v in metrics.items()}
    return {
        k: float(v)
        for k, v in vals.items()
        if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))
    }


def evaluate(module, cfg: dict, overrides_data: dict | None = None) -> dict[str, float]:
    """Metrics of a trained module on its recipe's data: ``module.evaluate(datamodule)`` where it returns metrics
    (:meth:`zoo.core.module.ZooModule.evaluate`; the default returns ``None``), else ``trainer.validate`` (and
    ``trainer.test`` given a ``test_step``)."""
    quiet_lightning_noise()
    data_cfg = dict(cfg.get("data") or {}, **(overrides_data or {}))
    datamodule = build_datamodule(dict(cfg, data=data_cfg))
    if (own := module.evaluate(datamodule)) is not None:
        return plain_metrics(own)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    metrics: dict = {}
    if type(module).validation_step is not L.LightningModule.validation_step:
        for m in trainer.validate(module, datamodule=datamodule, verbose=False):
            metrics.update(m)
    if type(module).test_step is not L.LightningModule.test_step:
        for m in trainer.test(module, datamodule=datamodule, verbose=False):
            metrics.update(m)
    return plain_metrics(metrics)
