"""What a run prints: periodic progress lines when stdout is not a terminal, a closing summary, and no steady noise.

A log file or a cluster job gets no progress bar, so :class:`ProgressLines` logs one line every ``every_s`` seconds
of training (step, share done, steps/s, ETA, the logged train metrics) and one after each validation. The closing
summary (:func:`summary`) names the run directory, steps and time, the final metrics, the checkpoints and the
exports. A terminal gets :class:`ProgressBar`. :func:`quiet_lightning_noise` drops Lightning's advertising tip and
warnings that say nothing about the run.
"""

from __future__ import annotations

import json
import logging
import math
import time
import warnings
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar

log = logging.getLogger("zoo")

_NOISE_WARNINGS = (
    r".*isinstance\(treespec, LeafSpec\)` is deprecated.*",  # lightning's own pytree use under torch 2.14
    r".*`LightningModule.configure_optimizers` returned `None`.*",  # analysis methods take no optimiser step
    r".*You passed in a `val_dataloader` but have no `validation_step`.*",
    r"`torch.jit.script` is deprecated.*",  # PyTorch Geometric's import under torch 2.14 (st-tgexplainer)
    r"Checkpoint directory .* exists and is not empty",  # a resume writes into its run's checkpoints/ on purpose
)


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip: For seamless cloud" not in record.getMessage()


def quiet_lightning_noise() -> None:
    """Silence Lightning's litlogger/litmodels tips and the warnings listed in ``_NOISE_WARNINGS`` (idempotent)."""
    for pattern in _NOISE_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _DropTips) for f in rank_zero.filters):
        rank_zero.addFilter(_DropTips())


def _fmt_seconds(s: float) -> str:
    s = round(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _fmt_metrics(metrics: dict, prefix: str | tuple[str, ...] = ("train/", "val/")) -> str:
    parts = []
    for k, v in sorted(metrics.items()):
        if k.startswith(prefix):
            v = float(v)
            parts.append(f"{k} {v:.4g}" if math.isfinite(v) else f"{k} {v}")
    return " · ".join(parts)


def _has_optimiser(trainer) -> bool:
    """False for a fit whose ``configure_optimizers`` returned None (Lightning then holds a stand-in optimiser)."""
    from lightning.pytorch.core.optimizer import _MockOptimizer

    return any(not isinstance(o, _MockOptimizer) for o in trainer.optimizers)


class ProgressBar(RichProgressBar):
    """Lightning's rich progress bar, without an epoch total where there is none (``max_epochs: -1`` showed
    ``Epoch 0/-2``)."""

    def _get_train_description(self, current_epoch: int) -> str:
        if self.trainer.max_epochs is None or self.trainer.max_epochs >= 0:
            return super()._get_train_description(current_epoch)
        return f"Epoch {current_epoch}".ljust(len(self.validation_description))  # padded as Lightning's


class ProgressLines(L.Callback):
    """Log a progress line every ``every_s`` seconds of training and one after each validation (rank zero only).

    Used instead of the progress bar when stdout is not a terminal (``zoo.core.build.build_trainer``). A fit without an
    optimiser (an enumeration, a closed-form estimator: no optimiser step) counts the batches of the epoch instead.
    """

    def __init__(self, every_s: float = 30.0):
        self.every_s = float(every_s)
        self._t0 = self._last = 0.0
        self._step0 = self._batches = 0

    def on_train_start(self, trainer, pl_module) -> None:
        self._t0 = self._last = time.perf_counter()
        self._step0 = trainer.global_step
        if trainer.is_global_zero:
            log.info(
                "training %s from step %d (%s)",
                pl_module.method_name or type(pl_module).__name__,
                trainer.global_step,
                self._target(trainer),
            )

    @staticmethod
    def _target(trainer) -> str:
        if not _has_optimiser(trainer):
            return f"no optimiser steps: {trainer.num_training_batches} batch(es) per epoch"
        total = trainer.estimated_stepping_batches
        if math.isfinite(total):
            return f"{int(total)} steps"
        return f"{trainer.max_epochs} epochs" if trainer.max_epochs >= 0 else "no step or epoch limit"

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        now = time.perf_counter()
        self._batches += 1
        if now - self._last < self.every_s or not trainer.is_global_zero:
            return
        self._last = now
        if _has_optimiser(trainer):
            unit, step, total, rate = (
                "step",
                trainer.global_step,
                trainer.estimated_stepping_batches,
                (trainer.global_step - self._step0) / max(now - self._t0, 1e-9),
            )
        else:  # no optimiser steps to count: this epoch's batches
            unit, step, total, rate = (
                "batch",
                batch_idx + 1,
                trainer.num_training_batches,
                self._batches / max(now - self._t0, 1e-9),
            )
        done = f"{unit} {step}/{int(total)} ({100 * step / total:.0f}%)" if math.isfinite(total) else f"{unit} {step}"
        eta = f" · ETA {_fmt_seconds((total - step) / rate)}" if math.isfinite(total) and rate > 0 else ""
        line = _fmt_metrics(trainer.callback_metrics, "train/")
        log.info(
            "%s · epoch %d · %.2f %s/s%s%s",
            done,
            trainer.current_epoch,
            rate,
            "steps" if unit == "step" else "batches",
            eta,
            f" · {line}" if line else "",
        )

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        line = _fmt_metrics(trainer.callback_metrics, "val/")
        if line:
            log.info("validation at step %d: %s", trainer.global_step, line)


def previous_metrics(run_dir: Path) -> dict:
    """The metrics an earlier segment of a resumed run wrote to ``metrics.json`` (``{}`` when none), so a resume
    that trains little or nothing keeps them; the new segment's values replace the ones it logs again."""
    path = Path(run_dir) / "metrics.json"
    return json.loads(path.read_text()).get("metrics", {}) if path.is_file() else {}


def _epochs(trainer) -> str:
    """The epochs a run has trained in, counted from its batches (Lightning's epoch counter calls an epoch that
    ``max_steps`` cut short done, and a resume that trains nothing leaves it unset): ``", 2 epochs"``, with a note
    when the last is partial; empty when the epoch length is unknown (an iterable dataset, a fit that did not start).
    """
    per_epoch, done = trainer.num_training_batches, trainer.fit_loop.epoch_loop.batch_progress.total.completed
    if not done or not math.isfinite(per_epoch) or per_epoch <= 0:
        return ""
    n = math.ceil(done / per_epoch)
    return f", {n} epoch{'s' if n != 1 else ''}" + (" (the last partial)" if done % per_epoch else "")


def summary(
    run_dir: Path, trainer, metrics: dict, seconds: float, exports: list[str], curves: Path | None = None
) -> str:
    """The closing lines of a run: where it is, what it did, what it measured, what it wrote.

    Args:
        run_dir: the run directory. metrics: the floats written to ``metrics.json``. seconds: wall time of the fit.
        exports: the export formats written under ``run_dir/export``. curves: the run's ``curves.png``, if written.
    """
    ckdir = Path(run_dir) / "checkpoints"
    best = [
        f"best by {cb.monitor} ({float(cb.best_model_score):.4g}) {Path(cb.best_model_path).name}"
        for cb in trainer.checkpoint_callbacks
        if cb.monitor and cb.best_model_path and cb.best_model_score is not None
    ]
    lines = [
        f"run {run_dir}: step {trainer.global_step}{_epochs(trainer)}, {_fmt_seconds(seconds)}",
        f"metrics (metrics.json): {_fmt_metrics(metrics) or 'none logged'}",
        "checkpoints: " + (", ".join(best + (["last.ckpt"] if (ckdir / "last.ckpt").is_file() else [])) or "none"),
        f"exports: {', '.join(exports)} in {Path(run_dir) / 'export'}" if exports else "exports: none",
        f"curves: {curves}"
        if curves
        else "curves: none ("
        + (
            "no metric in logs/metrics.csv)"
            if (Path(run_dir) / "logs" / "metrics.csv").is_file()
            else "no logs/metrics.csv: logger.kind is not csv)"
        ),
    ]
    return "\n".join(lines)
