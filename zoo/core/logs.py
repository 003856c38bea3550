"""The run's logger (``logger.kind``: csv, tensorboard, wandb, none), continued across ``resume``.

A resumed run restarts from the checkpoint's step ``S``; whatever the killed process logged at steps ``>= S`` was
never part of the run that continues, so each logger drops it and appends the new segment:

* csv: ``logs/metrics.csv`` keeps its rows with ``step < S`` and the resumed rows are appended (Lightning's own
  CSVLogger deletes the file). Buffered rows are flushed whenever ``last.ckpt`` is written, so a kill loses none of
  the steps the checkpoint holds.
* tensorboard: the new event file is opened with ``purge_step=S`` (TensorBoard hides the older events at ``>= S``).
* wandb: one run id per run directory (``wandb_id.txt``) and every record logged at ``step=global_step``, so the
  offline segments of a resumed run carry one id and steps that only increase (``wandb sync`` joins them); a
  resumed segment is marked resumed (``run.resumed``, the run record's ``resumed``), which offline wandb cannot
  learn from a server.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment

from zoo.core import run


class _ContinuingWriter(ExperimentWriter):
    def __init__(self, log_dir: str, keep_before_step: int | None):
        self._keep_before = keep_before_step
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:
        if self._keep_before is None or not os.path.isfile(self.metrics_file_path):
            return super()._check_log_dir_exists()
        with open(self.metrics_file_path, newline="") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            rows = [r for r in reader if r.get("step") not in (None, "") and int(float(r["step"])) < self._keep_before]
        with open(self.metrics_file_path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)
        self.metrics_keys = sorted(header)


class ContinuingCSVLogger(CSVLogger):
    """``CSVLogger`` that, given ``keep_before_step``, keeps the earlier rows of ``metrics.csv`` and appends."""

    def __init__(self, *args, keep_before_step: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self._keep_before = keep_before_step

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _ContinuingWriter(self.log_dir, self._keep_before)
        return self._experiment


class SteppedWandbLogger(WandbLogger):
    """``WandbLogger`` that logs each record at ``step=global_step`` (wandb's own counter restarts in every process)."""

    def log_metrics(self, metrics, step: int | None = None) -> None:
        if step is None:
            return super().log_metrics(metrics, step)
        from lightning.fabric.utilities.logger import _add_prefix

        metrics = _add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR)
        self.experiment.log(dict(metrics, **{"trainer/global_step": step}), step=step)


def resume_step(ckpt: dict) -> int:
    """The logging step a resumed fit starts at: Lightning's ``_batches_that_stepped``, plus the step it adds back on
    restart when the checkpoint was written at the end of a training batch (that batch's step had not been counted)."""
    fit = (ckpt.get("loops") or {}).get("fit_loop", {})
    step = int(fit.get("epoch_loop.state_dict", {}).get("_batches_that_stepped", ckpt.get("global_step", 0)))
    total = fit.get("epoch_loop.batch_progress", {}).get("total", {})
    if total and total.get("completed") == total.get("processed", 0) - 1:
        step += 1
    return step


def build_logger(cfg: dict, run_dir: Path, resume_step: int | None = None):
    """The Lightning logger for ``cfg["logger"]`` writing under ``run_dir`` (``False`` for ``kind: none``).

    Args:
        resume_step: the step the resumed checkpoint ends at (``None`` for a fresh run).
    """
    lg = cfg.get("logger") or {}
    kind = lg.get("kind", "csv")
    if kind == "none":
        return False
    if kind == "tensorboard":
        extra = {"purge_step": resume_step} if resume_step is not None else {}
        return TensorBoardLogger(save_dir=str(run_dir), name="logs", version="", **extra)
    if kind == "wandb":
        mode = os.environ.get("WANDB_MODE") or lg.get("mode", "offline")
        os.environ["WANDB_MODE"] = mode
        extra = {}
        if resume_step is not None:
            import wandb

            extra["settings"] = wandb.Settings(resumed=True)
        return SteppedWandbLogger(
            save_dir=str(run_dir),
            project=lg.get("project", "zoo"),
            name=cfg["name"],
            id=run.wandb_run_id(run_dir),
            resume="allow",
            offline=mode == "offline",
            config={k: v for k, v in cfg.items() if not k.startswith("_")},
            **extra,
        )
    return ContinuingCSVLogger(save_dir=str(run_dir), name="logs", version="", keep_before_step=resume_step)
