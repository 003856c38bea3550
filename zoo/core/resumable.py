"""What makes a killed run continue as if it had never stopped: atomic checkpoints that hold what the module set
after them, a resumable data order (:mod:`zoo.core.resumable_data`), and an RNG that depends on the position in
training rather than on the history of the process.

* :class:`LastCheckpoint` writes ``checkpoints/last.ckpt`` every ``checkpoint.every_n_train_steps`` optimiser steps,
  every ``checkpoint.every_n_minutes`` minutes, at each epoch end and at the end of fit; every write goes to a
  ``.part`` file that is then renamed (``os.replace``), so a kill at any moment leaves the previous complete file.
  State a module changes after that write at the same step (in its own ``on_train_batch_end``,
  ``on_train_epoch_end`` or ``on_train_end``, which Lightning calls after the callbacks': decoder columns
  renormalised, a threshold calibrated on validation, a retrieval index, directions found by a post-hoc pipeline) is
  written into that ``last.ckpt`` at the next epoch's or batch's start and at the end of the fit.
* :class:`AtomicModelCheckpoint` is Lightning's best-k ``ModelCheckpoint`` with the same write-then-rename; a best
  checkpoint chosen by the validation right after ``last.ckpt`` was written (at the same step) is recorded in that
  ``last.ckpt`` too, so a resume knows every best file and keeps honouring ``save_top_k``.
* :func:`prepare_dataloaders`: the training DataLoader's order and data-side draws depend on the seed, the epoch and
  the batch position only (:mod:`zoo.core.resumable_data`); under DDP every rank validates on the whole set.
* :class:`MainOptimizerSteps` makes ``trainer.max_steps`` count updates of the main optimiser only (a method's
  discriminator or other extra optimisers do not count), so ``max_steps`` means the same batches for every method.
* :class:`StepSeededRng` reseeds ``torch``, ``numpy`` and ``random`` at the start of every training batch from
  ``(seed, epoch, batch index, rank)``, so dropout masks and other draws of batch *k* are the same whether or not the
  process was restarted before it.

Not covered: what :mod:`zoo.core.resumable_data` lists; a kill in the moment between a checkpoint and the rewrite
that adds the state the module's own hooks set after it (the previous, complete file is kept).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from zoo.core import runs
from zoo.core.resumable_data import make_train_loader_resumable, make_val_loaders_whole, position_seed, seed_all

DEFAULT_EVERY_N_TRAIN_STEPS = 50
DEFAULT_EVERY_N_MINUTES = 10.0


def _atomic_save(trainer: L.Trainer, path: Path, weights_only: bool = False) -> None:
    """``trainer.save_checkpoint`` to ``path.part``, then rename onto ``path`` (rank 0), then wait for every rank."""
    part = Path(f"{path}.part")
    trainer.save_checkpoint(str(part), weights_only)
    if trainer.is_global_zero:
        os.replace(part, path)
        runs.mark(path.parent.parent, step=trainer.global_step)  # checkpoints/ is in the run directory
    trainer.strategy.barrier("zoo.atomic_save")


class AtomicModelCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose files appear only once complete (write to ``.part``, then rename)."""

    def _save_checkpoint(self, trainer: L.Trainer, filepath: str) -> None:
        _atomic_save(trainer, Path(filepath), self.save_weights_only)
        self._last_global_step_saved = trainer.global_step
        self._last_checkpoint_saved = filepath
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.after_save_checkpoint(self)
            for last in (cb for cb in trainer.callbacks if isinstance(cb, LastCheckpoint)):
                last.record_callback_state(trainer, self)


class LastCheckpoint(Callback):
    """``dirpath/last.ckpt`` (full training state) every ``every_n_steps`` optimiser steps and every ``every_n_minutes``
    minutes of training (either may be None to turn it off), at every ``every_n_epochs``-th epoch end and at the end of
    fit, written atomically. The time rule is decided on rank 0 and broadcast, so all ranks save together."""

    def __init__(
        self,
        dirpath: Path,
        every_n_steps: int | None = DEFAULT_EVERY_N_TRAIN_STEPS,
        every_n_minutes: float | None = DEFAULT_EVERY_N_MINUTES,
        every_n_epochs: int | None = 1,
    ):
        self.path = Path(dirpath) / "last.ckpt"
        self.every_n_steps, self.every_n_epochs = every_n_steps, every_n_epochs
        self.every_s = None if every_n_minutes is None else 60.0 * every_n_minutes
        self._saved_step, self._t, self._saved_state = -1, time.monotonic(), None

    def _skip(self, trainer: L.Trainer) -> bool:
        return bool(trainer.fast_dev_run) or trainer.sanity_checking or trainer.global_step == self._saved_step

    def save(self, trainer: L.Trainer) -> None:
        """Write ``last.ckpt`` now (all ranks must call this together)."""
        _atomic_save(trainer, self.path)
        for logger in trainer.loggers:  # rows up to the checkpoint reach the disk with it
            logger.save()
        self._saved_step, self._t = trainer.global_step, time.monotonic()
        self._saved_state = _fingerprint(trainer.lightning_module)

    def refresh_module_state(self, trainer: L.Trainer) -> None:
        """When ``last.ckpt`` was written at this step and the module's weights or buffers changed since (in its own
        ``on_train_batch_end`` / ``on_train_epoch_end`` / ``on_train_end``, which run after this callback's), write
        the module's current ``state_dict`` and hparams into it, keeping the loop, optimiser and callback state of
        the step (all ranks call this together; rank 0 rewrites the file atomically)."""
        if trainer.fast_dev_run or self._saved_step != trainer.global_step or self._saved_state is None:
            return
        changed = trainer.strategy.broadcast(_fingerprint(trainer.lightning_module) != self._saved_state, src=0)
        if not changed:
            return
        state = trainer.strategy.lightning_module_state_dict()  # a collective under sharded strategies
        if trainer.is_global_zero and self.path.is_file():
            ckpt = torch.load(self.path, map_location="cpu", weights_only=True)  # our own file; never unpickle code
            ckpt["state_dict"] = state
            if "hyper_parameters" in ckpt:  # sizes set with that state (a fitted index's row count)
                ckpt["hyper_parameters"] = dict(trainer.lightning_module.hparams)
            part = Path(f"{self.path}.part")
            torch.save(ckpt, part)
            os.replace(part, self.path)
        trainer.strategy.barrier("zoo.refresh_module_state")
        self._saved_state = _fingerprint(trainer.lightning_module)

    def record_callback_state(self, trainer: L.Trainer, callback: Callback) -> None:
        """Rank 0: when ``last.ckpt`` was written at this step (at the end of the training batch, before the validation
        that just chose a best checkpoint), store ``callback``'s new state in it (rewritten atomically), so a resume
        from it knows that best file (and deletes it when a better one comes, under ``save_top_k``)."""
        if self._saved_step != trainer.global_step or not self.path.is_file():
            return
        ckpt = torch.load(self.path, map_location="cpu", weights_only=True)  # our own file; never unpickle code
        ckpt.setdefault("callbacks", {})[callback.state_key] = callback.state_dict()
        part = Path(f"{self.path}.part")
        torch.save(ckpt, part)
        os.replace(part, self.path)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._skip(trainer):
            return
        due = bool(self.every_n_steps) and trainer.global_step % self.every_n_steps == 0
        # the step that reaches max_steps is saved here, mid-epoch: at on_train_end Lightning has already counted
        # the cut epoch as finished, and a run extended from that state would start the next epoch's order
        due = due or 0 < trainer.max_steps <= trainer.global_step
        if self.every_s is not None:
            due = trainer.strategy.broadcast(due or time.monotonic() - self._t >= self.every_s, src=0)
        if due:
            self.save(trainer)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if not self._skip(trainer) and self.every_n_epochs and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self.save(trainer)

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.refresh_module_state(trainer)  # the epoch-end checkpoint as the module's on_train_epoch_end left it

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.refresh_module_state(trainer)  # the step's checkpoint as the module's on_train_batch_end left it

    def on_train_end(self, trainer, pl_module) -> None:
        if not self._skip(trainer):
            self.save(trainer)

    def on_fit_end(self, trainer, pl_module) -> None:
        self.refresh_module_state(trainer)  # after the module's on_train_end


def _fingerprint(module) -> dict:
    """What identifies the module's current weights and buffers without copying them: each state-dict entry's
    object, in-place version counter and shape (an assignment or an in-place write changes one of them; a write
    through ``tensor.data`` does not, and is not seen)."""
    return {
        k: (id(v), v._version, tuple(v.shape))
        for k, v in module.state_dict(keep_vars=True).items()
        if isinstance(v, torch.Tensor)
    }


class RunStatus(Callback):
    """Rank 0 keeps the run's ``status.json`` (:mod:`zoo.core.runs`, read by ``zoo runs``): ``running`` from the start
    of the fit, ``finished`` with its step at the end, ``killed`` (interrupted) or ``failed`` (an exception); each
    checkpoint records its step (:func:`_atomic_save`)."""

    def on_fit_start(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            runs.mark(Path(trainer.default_root_dir), "running")

    def on_train_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            runs.mark(
                Path(trainer.default_root_dir),
                "killed" if trainer.interrupted else "finished",
                step=trainer.global_step,
            )

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if trainer.is_global_zero and (Path(trainer.default_root_dir) / runs.STATUS_FILE).is_file():
            runs.mark(
                Path(trainer.default_root_dir),
                "killed" if isinstance(exception, (KeyboardInterrupt, SystemExit)) else "failed",
            )


class StepSeededRng(Callback):
    """At the start of each training batch, seed ``torch`` (CPU and CUDA), ``numpy`` and ``random`` from
    ``(seed, epoch, batch_idx, global_rank)``: the draws of a batch depend on where training is, not on what the
    process did before, so a resumed run draws what the uninterrupted run drew."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        seed_all(position_seed(self.seed, trainer.current_epoch, batch_idx, trainer.global_rank))


def _do_nothing() -> None:
    return None


_IGNORED = property(lambda self: _do_nothing, lambda self, value: None)


class MainOptimizerSteps(Callback):
    """``trainer.max_steps`` (and ``global_step``, ``every_n_train_steps``, step schedules) count updates of the main
    optimiser only: the first one ``configure_optimizers`` returns. Under manual optimisation Lightning counts every
    ``optimizer.step()`` of every optimiser, so a method with a discriminator would train half the batches asked for;
    here the extra optimisers' steps are not counted. (Automatic optimisation has one optimiser; accumulation keeps
    Lightning's meaning: one update per ``accumulate_grad_batches`` batches.)"""

    def on_train_start(self, trainer, pl_module) -> None:
        if pl_module.automatic_optimization:
            return
        for lo in trainer.strategy._lightning_optimizers[1:]:
            # the manual loop re-assigns these progress hooks every batch: make them ignore it on extra optimisers
            lo.__class__ = type(
                f"Uncounted{type(lo).__name__}", (type(lo),), {"_on_before_step": _IGNORED, "_on_after_step": _IGNORED}
            )


def prepare_dataloaders(module, datamodule, seed: int) -> None:
    """Before ``trainer.fit``: the training DataLoader (the datamodule's, else the module's) gets a resumable order,
    and under DDP the validation DataLoaders the whole set on every rank."""
    if datamodule is not None and type(datamodule).train_dataloader is not L.LightningDataModule.train_dataloader:
        make_train_loader_resumable(datamodule, seed)
    elif type(module).train_dataloader is not L.LightningModule.train_dataloader:
        make_train_loader_resumable(module, seed)
    if datamodule is not None and type(datamodule).val_dataloader is not L.LightningDataModule.val_dataloader:
        make_val_loaders_whole(datamodule)
    elif type(module).val_dataloader is not L.LightningModule.val_dataloader:
        make_val_loaders_whole(module)
