"""A training DataLoader whose order and random draws depend on the seed, the epoch and the batch position only, so
a resumed run reads what the uninterrupted run read (:func:`make_train_loader_resumable`), and evaluation loaders
that read the whole set on every DDP rank (:func:`make_val_loaders_whole`); both applied by
``zoo.core.resumable.prepare_dataloaders``.

* The shuffling (``RandomSampler``), sequential or weighted (``WeightedRandomSampler``) sampler becomes
  :class:`ResumableSampler` (:class:`ResumableWeightedSampler`): an epoch's order (or draws) is a function of
  ``(seed, epoch)``, and after a mid-epoch resume the batches the checkpoint had already trained on are skipped (the
  count comes from the restored loop state). The random draws made while batch *k* is read (a random placement in
  ``__getitem__``, negatives drawn in ``collate_fn``) come from ``torch``, ``numpy`` and ``random`` seeded from
  ``(seed, epoch, k, rank)`` just before, so they too are the same after a resume (Lightning reads a batch ahead of
  the step that trains on it, and a resumed process reads its first batches without the steps before them having
  run). Under DDP it is also the distributed sampler (each rank its share, as Lightning's would be). Such a
  DataLoader tells Lightning it is resumable (an empty ``state_dict``: its position is the loop's), so a mid-epoch
  resume does not warn that the data order may differ.
* On one process, a batch sampler of the method's own (Opacus' Poisson sampler) is wrapped in
  :class:`SeededBatches`: the global RNGs are seeded by batch position before each batch is drawn, so a sampler that
  draws from them (and any draw made while reading) repeats itself after a resume.
* Under DDP every rank validates on the whole validation set (:func:`make_val_loaders_whole`), so logged validation
  equals a single-process evaluation for every metric (``ZooModule.log`` also defaults to ``sync_dist=True``).

Not covered: samplers other than random / sequential / weighted (a custom sampler under a plain ``BatchSampler``,
iterable datasets) keep their own order and are logged as not resumable mid-epoch; a custom batch sampler that draws
from a generator of its own; random transforms drawn inside DataLoader worker processes; generators a dataset keeps
for itself (use the global RNG, which the sampler seeds).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import random

import lightning as L
import numpy as np
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    WeightedRandomSampler,
)

log = logging.getLogger("zoo")


def position_seed(*parts: int) -> int:
    """A 63-bit seed from integers (stable across processes and Python versions, unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little") >> 1


def seed_all(s: int) -> None:
    """Seed ``torch`` (CPU and CUDA), ``numpy`` and ``random`` with ``s``."""
    torch.manual_seed(s)
    np.random.seed(s % 2**32)
    random.seed(s)


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

    def __init__(
        self,
        dataset,
        num_replicas: int,
        rank: int,
        shuffle: bool,
        seed: int,
        epoch,
        skip: int = 0,
        batch_size: int | None = None,
    ):
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
                seed_all(position_seed(self.seed, "data", self.epoch, j // self.batch_size, self.rank))
            yield indices[j]


class ResumableWeightedSampler(ResumableSampler):
    """:class:`ResumableSampler` over what ``WeightedRandomSampler(weights, num_samples, replacement)`` draws: each
    epoch's ``num_samples`` draws come from a generator seeded with ``seed + epoch`` (epoch 0 draws what the
    original sampler seeded with ``seed`` drew first), and each rank takes its share of them, padded as
    ``DistributedSampler`` pads."""

    def __init__(
        self,
        weights: torch.Tensor,
        num_samples: int,
        replacement: bool,
        dataset,
        num_replicas: int,
        rank: int,
        seed: int,
        epoch,
        skip: int = 0,
        batch_size: int | None = None,
    ):
        super().__init__(dataset, num_replicas, rank, True, seed, epoch, skip, batch_size)
        self.weights, self.draws, self.replacement = weights, int(num_samples), replacement
        self.num_samples = -(-self.draws // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def _epoch_indices(self) -> list[int]:
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        drawn = torch.multinomial(self.weights, self.draws, self.replacement, generator=g).tolist()
        drawn += drawn[: self.total_size - len(drawn)]
        return drawn[self.rank : self.total_size : self.num_replicas]


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
            seed_all(position_seed(self.seed, "data", epoch, k, self.rank))
            batch = next(it, None)
            if batch is None:
                return
            if k >= skip:
                yield batch


def _seeded_batches(dl: DataLoader, trainer: L.Trainer, seed: int) -> DataLoader:
    """``dl`` with its own batch sampler wrapped in :class:`SeededBatches` (same dataset, collate and workers)."""
    epoch_loop = trainer.fit_loop.epoch_loop
    done = epoch_loop.batch_progress.current.ready if epoch_loop.restarting else 0
    batches = SeededBatches(
        dl.batch_sampler,
        seed,
        lambda: trainer.current_epoch,
        trainer.global_rank,
        done if done < len(dl.batch_sampler) else 0,
    )
    loader = DataLoader(
        dl.dataset,
        batch_sampler=batches,
        num_workers=dl.num_workers,
        collate_fn=dl.collate_fn,
        pin_memory=dl.pin_memory,
        timeout=dl.timeout,
        worker_init_fn=dl.worker_init_fn,
        multiprocessing_context=dl.multiprocessing_context,
        generator=dl.generator,
        prefetch_factor=dl.prefetch_factor,
        persistent_workers=dl.persistent_workers,
    )
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
        new = ResumableWeightedSampler(
            sampler.weights,
            sampler.num_samples,
            sampler.replacement,
            dl.dataset,
            world,
            rank,
            own,
            epoch,
            batch_size=dl.batch_size,
        )
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
