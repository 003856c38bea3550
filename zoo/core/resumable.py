"""What makes a killed run continue as if it had never stopped: atomic checkpoints, a resumable data order, and an
RNG that depends on the position in training rather than on the history of the process.

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
* :func:`make_train_loader_resumable` swaps the training DataLoader's shuffling (``RandomSampler``), sequential or
  weighted (``WeightedRandomSampler``) sampler for :class:`ResumableSampler` (:class:`ResumableWeightedSampler`): the
  order (or the draws) of an epoch is a function of ``(seed, epoch)`` only, and after a
  mid-epoch resume the batches the checkpoint had already trained on are skipped (the count comes from the restored
  loop state). The random draws made while batch *k* is read (a random placement in ``__getitem__``, negatives drawn
  in ``collate_fn``) come from ``torch``, ``numpy`` and ``random`` seeded from ``(seed, epoch, k, rank)`` just before,
  so they too are the same after a resume (Lightning reads a batch ahead of the step that trains on it, and a
  resumed process reads its first batches without the steps before them having run). Under DDP it is also the
  distributed sampler (each rank its share, as Lightning's would be). Such a DataLoader tells Lightning it is resumable (an empty ``state_dict``: its position is the loop's), so a mid-epoch
  resume does not warn that the data order may differ. On one process, a batch sampler of the method's own
  (Opacus' Poisson sampler) is wrapped in :class:`SeededBatches`: the global RNGs are seeded by batch position before each batch is
  drawn, so a sampler that draws from them (and any draw made while reading) repeats itself after a resume.
* :func:`make_val_loaders_whole`: under DDP every rank validates on the whole validation set, so logged validation
  equals a single-process evaluation for every metric (``ZooModule.log`` also defaults to ``sync_dist=True``).
* :class:`MainOptimizerSteps` makes ``trainer.max_steps`` count updates of the main optimiser only (a method's
  discriminator or other extra optimisers do not count), so ``max_steps`` means the same batches for every method.
* :class:`StepSeededRng` reseeds ``torch``, ``numpy`` and ``random`` at the start of every training batch from
  ``(seed, epoch, batch index, rank)``, so dropout masks and other draws of batch *k* are the same whether or not the
  process was restarted before it.

Not covered: samplers other than random / sequential / weighted (a custom sampler under a plain ``BatchSampler``,
iterable datasets) keep their own order and are logged as not resumable mid-epoch; a custom batch sampler that draws
from a generator of its own; random transforms drawn inside DataLoader worker processes; generators a
dataset keeps for itself (use the global RNG, which the sampler seeds); a kill in the moment between a checkpoint
and the rewrite that adds the state the module's own hooks set after it (the previous, complete file is kept).
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import random
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    WeightedRandomSampler,
)

from zoo.core import runs

log = logging.getLogger("zoo")

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

    def __init__(self, dirpath: Path, every_n_steps: int | None = DEFAULT_EVERY_N_TRAIN_STEPS,
                 every_n_minutes: float | None = DEFAULT_EVERY_N_MINUTES, every_n_epochs: int | None = 1):
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
    return {k: (id(v), v._version, tuple(v.shape)) for k, v in module.state_dict(keep_vars=True).items()
            if isinstance(v, torch.Tensor)}


class RunStatus(Callback):
    """Rank 0 keeps the run's ``status.json`` (:mod:`zoo.core.runs`, read by ``zoo runs``): ``running`` from the start
    of the fit, ``finished`` with its step at the end, ``killed`` (interrupted) or ``failed`` (an exception); each
    checkpoint records its step (:func:`_atomic_save`)."""

    def on_fit_start(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            runs.mark(Path(trainer.default_root_dir), "running")

    def on_train_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            runs.mark(Path(trainer.default_root_dir), "killed" if trainer.interrupted else "finished",
                      step=trainer.global_step)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if trainer.is_global_zero and (Path(trainer.default_root_dir) / runs.STATUS_FILE).is_file():
            runs.mark(Path(trainer.default_root_dir),
                      "killed" if isinstance(exception, (KeyboardInterrupt, SystemExit)) else "failed")


def _mix(*parts: int) -> int:
    """A 63-bit seed from integers (stable across processes and Python versions, unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little") >> 1


def _seed_all(s: int) -> None:
    torch.manual_seed(s)
    np.random.seed(s % 2**32)
    random.seed(s)


class StepSeededRng(Callback):
    """At the start of each training batch, seed ``torch`` (CPU and CUDA), ``numpy`` and ``random`` from
    ``(seed, epoch, batch_idx, global_rank)``: the draws of a batch depend on where training is, not on what the
    process did before, so a resumed run draws what the uninterrupted run drew."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        _seed_all(_mix(self.seed, trainer.current_epoch, batch_idx, trainer.global_rank))


class ResumableSampler(DistributedSampler):
    """Each rank's share of a permutation drawn from ``seed + epoch`` (or of ``range(n)`` when not shuffling), as
    ``DistributedSampler``; the first ``skip`` indices of the first epoch iterated are left out (batches a resumed
    checkpoint had already trained on). With one replica it is a plain seeded sampler.

    With ``batch_size``, the global RNGs (``torch``, ``numpy``, ``random``) are seeded from ``(seed, "data", epoch,
    k, rank)`` when the first index of batch *k* is handed out, i.e. just before the DataLoader reads that batch in
    the main process: what ``__getitem__`` and ``collate_fn`` draw for batch *k* is then the same in a resumed run.

    The epoch is read from ``epoch()`` (the trainer's ``current_epoch``) each time an epoch starts, not taken from
    Lightning's ``set_epoch``: after a resume from a checkpoint written at an epoch's end, Lightning passes the
    epoch just finished (its ``processed`` count was not yet incremented), which would replay that epoch's order."""

    def __init__(self, dataset, num_replicas: int, rank: int, shuffle: bool, seed: int, epoch, skip: int = 0,
                 batch_size: int | None = None):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=False)
        self._epoch_of, self._skip, self.batch_size = epoch, skip, batch_size

    def set_epoch(self, epoch: int) -> None:
        """Ignored: the epoch comes from ``epoch()`` (see the class docstring)."""

    def _epoch_indices(self) -> list[int]:
        return list(super().__iter__())

    def __iter__(self):
        self.epoch = int(self._epoch_of())
        indices = self._epoch_indices()
        skip, self._skip = self._skip, 0
        start = skip if skip < len(indices) else 0
        return self._seeding(indices, start) if self.batch_size else iter(indices[start:])

    def _seeding(self, indices: list[int], start: int):
        for j in range(start, len(indices)):
            if j % self.batch_size == 0:
                _seed_all(_mix(self.seed, "data", self.epoch, j // self.batch_size, self.rank))
            yield indices[j]


class ResumableWeightedSampler(ResumableSampler):
    """:class:`ResumableSampler` over what ``WeightedRandomSampler(weights, num_samples, replacement)`` draws: each
    epoch's ``num_samples`` draws come from a generator seeded with ``seed + epoch`` (epoch 0 draws what the
    original sampler seeded with ``seed`` drew first), and each rank takes its share of them, padded as
    ``DistributedSampler`` pads."""

    def __init__(self, weights: torch.Tensor, num_samples: int, replacement: bool, dataset, num_replicas: int,
                 rank: int, seed: int, epoch, skip: int = 0, batch_size: int | None = None):
        super().__init__(dataset, num_replicas, rank, True, seed, epoch, skip, batch_size)
        self.weights, self.draws, self.replacement = weights, int(num_samples), replacement
        self.num_samples = -(-self.draws // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def _epoch_indices(self) -> list[int]:
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        drawn = torch.multinomial(self.weights, self.draws, self.replacement, generator=g).tolist()
        drawn += drawn[: self.total_size - len(drawn)]
        return drawn[self.rank:self.total_size:self.num_replicas]


class SeededBatches:
    """A batch sampler of the method's own (Opacus' Poisson sampler) whose batch *k* of an epoch is drawn just after
    the global RNGs are seeded from ``(seed, "data", epoch, k, rank)``: a sampler that draws each batch from the
    global RNG (and any ``__getitem__`` / ``collate_fn`` draw) then gives batch *k* whatever ran before; the first
    ``skip`` batches of the first epoch iterated are drawn and left out (the checkpoint had trained on them)."""

    def __init__(self, batches, seed: int, epoch, rank: int, skip: int = 0):
        self.batches, self.seed, self._epoch_of, self.rank, self._skip = batches, seed, epoch, rank, skip

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        epoch, skip, self._skip = int(self._epoch_of()), self._skip, 0
        it = iter(self.batches)
        for k in itertools.count():
            _seed_all(_mix(self.seed, "data", epoch, k, self.rank))
            batch = next(it, None)
            if batch is None:
                return
            if k >= skip:
                yield batch


def _seeded_batches(dl: DataLoader, trainer: L.Trainer, seed: int) -> DataLoader:
    """``dl`` with its own batch sampler wrapped in :class:`SeededBatches` (same dataset, collate and workers)."""
    epoch_loop = trainer.fit_loop.epoch_loop
    done = epoch_loop.batch_progress.current.ready if epoch_loop.restarting else 0
    batches = SeededBatches(dl.batch_sampler, seed, lambda: trainer.current_epoch, trainer.global_rank,
                            done if done < len(dl.batch_sampler) else 0)
    loader = DataLoader(dl.dataset, batch_sampler=batches, num_workers=dl.num_workers, collate_fn=dl.collate_fn,
                        pin_memory=dl.pin_memory, timeout=dl.timeout, worker_init_fn=dl.worker_init_fn,
                        multiprocessing_context=dl.multiprocessing_context, generator=dl.generator,
                        prefetch_factor=dl.prefetch_factor, persistent_workers=dl.persistent_workers)
    loader.state_dict, loader.load_state_dict = dict, _ignore
    return loader


def _resumable(dl, trainer: L.Trainer, seed: int):
    from lightning.pytorch.trainer.states import RunningStage
    from lightning.pytorch.utilities.data import _update_dataloader

    if not isinstance(dl, DataLoader) or dl.batch_sampler is None:  # not a DataLoader, or no batching (iterable)
        return dl
    if type(dl.batch_sampler) is not BatchSampler:  # under DDP Lightning's own rules apply to it, as before
        sized = hasattr(type(dl.batch_sampler), "__len__")
        return _seeded_batches(dl, trainer, seed) if sized and trainer.world_size == 1 else dl
    sampler, world, rank, epoch = dl.sampler, trainer.world_size, trainer.global_rank, lambda: trainer.current_epoch
    if isinstance(sampler, RandomSampler) and not sampler.replacement and sampler._num_samples is None:
        new = ResumableSampler(dl.dataset, world, rank, True, seed, epoch, batch_size=dl.batch_size)
    elif isinstance(sampler, SequentialSampler):
        new = ResumableSampler(dl.dataset, world, rank, False, seed, epoch, batch_size=dl.batch_size)
    elif type(sampler) is WeightedRandomSampler:  # its own seed (the datamodule's), else the run's
        own = seed if sampler.generator is None else sampler.generator.initial_seed()
        new = ResumableWeightedSampler(sampler.weights, sampler.num_samples, sampler.replacement, dl.dataset, world,
                                       rank, own, epoch, batch_size=dl.batch_size)
    else:
        log.info("train dataloader with %s: its order is not resumable mid-epoch", type(sampler).__name__)
        return dl
    epoch_loop = trainer.fit_loop.epoch_loop
    done = epoch_loop.batch_progress.current.ready if epoch_loop.restarting else 0
    new._skip = done * dl.batch_size if done * dl.batch_size < len(new) else 0
    loader = _update_dataloader(dl, new, RunningStage.TRAINING)
    # stateful for Lightning (no mid-epoch resume warning): the position it would store is the loop's own
    loader.state_dict, loader.load_state_dict = dict, _ignore
    return loader


def _ignore(state: dict) -> None:
    return None


def _whole(dl, trainer: L.Trainer):
    """Under DDP, a sequential evaluation DataLoader reads the whole set on every rank (a one-replica
    ``DistributedSampler``, which Lightning leaves alone) instead of a padded shard."""
    from lightning.pytorch.trainer.states import RunningStage
    from lightning.pytorch.utilities.data import _update_dataloader

    if isinstance(dl, (list, tuple)):
        return type(dl)(_whole(d, trainer) for d in dl)
    if isinstance(dl, dict):
        return {k: _whole(d, trainer) for k, d in dl.items()}
    if trainer.world_size == 1 or not isinstance(dl, DataLoader) or not isinstance(dl.sampler, SequentialSampler):
        return dl
    whole = DistributedSampler(dl.dataset, num_replicas=1, rank=0, shuffle=False)
    return _update_dataloader(dl, whole, RunningStage.VALIDATING)


def _wrap_hook(owner, name: str, transform) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def hook():
        return transform(original(), owner.trainer)

    setattr(owner, name, hook)


def make_train_loader_resumable(owner, trainer_seed: int) -> None:
    """Wrap ``owner.train_dataloader`` (the datamodule's, else the module's) so the DataLoader Lightning requests uses
    :class:`ResumableSampler`. Call before ``trainer.fit``; the owner's ``trainer`` is set by then."""
    _wrap_hook(owner, "train_dataloader", lambda dl, trainer: _resumable(dl, trainer, trainer_seed))


def make_val_loaders_whole(owner) -> None:
    """Wrap ``owner.val_dataloader`` so that under DDP every rank validates on the whole validation set: logged
    validation metrics are then exactly those of one process (and of ``zoo eval``) for any metric, averages or not
    (AP, AUC...), at the cost of repeating validation on each rank."""
    _wrap_hook(owner, "val_dataloader", _whole)


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
            lo.__class__ = type(f"Uncounted{type(lo).__name__}", (type(lo),),
                                {"_on_before_step": _IGNORED, "_on_after_step": _IGNORED})


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
