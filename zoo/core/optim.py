"""Optimiser and learning-rate schedule from a plain dict (no class paths in recipes)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

_OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}
_SCHEDULES = ("constant", "cosine", "linear")


def build_optimizer(params: Iterable, cfg: dict[str, Any] | None, total_steps: int | None = None):
    """Build what ``configure_optimizers`` returns from ``cfg``.

    Args:
        params: parameters (or parameter groups) to optimise.
        cfg: ``{name: adamw|adam|sgd, lr, weight_decay, betas, momentum, warmup_steps, schedule}``;
            ``schedule`` is ``constant`` (default), ``cosine`` or ``linear`` decay to zero after warm-up.
        total_steps: steps the schedule spans (``trainer.estimated_stepping_batches``); needed for
            ``cosine`` and ``linear``.

    Returns:
        An optimiser, or ``{"optimizer", "lr_scheduler": {"scheduler", "interval": "step"}}``.

    Raises:
        ValueError: unknown optimiser or schedule name, or a decaying schedule without ``total_steps``.
    """
    cfg = dict(cfg or {})
    name = cfg.pop("name", "adamw")
    warmup = int(cfg.pop("warmup_steps", 0))
    schedule = cfg.pop("schedule", "constant")
    if name not in _OPTIMIZERS:
        raise ValueError(f"model.optimizer.name: unknown optimiser {name!r}; choose from {sorted(_OPTIMIZERS)}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"model.optimizer.schedule: unknown schedule {schedule!r}; choose from {_SCHEDULES}")
    if "betas" in cfg:
        cfg["betas"] = tuple(cfg["betas"])
    opt = _OPTIMIZERS[name](params, **cfg)
    if schedule == "constant" and warmup == 0:
        return opt
    if schedule != "constant" and not total_steps:
        raise ValueError(f"model.optimizer.schedule={schedule} needs the total number of steps")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if schedule == "constant":
            return 1.0
        frac = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return 0.5 * (1 + math.cos(math.pi * frac)) if schedule == "cosine" else 1.0 - frac

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
