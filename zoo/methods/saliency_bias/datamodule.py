"""``CornerShiftDataModule``: corner-shift canvases of a real image set for training and for the benchmark."""

from __future__ import annotations

from typing import Annotated, Literal

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.constraints import NonNegative, NonNegativeInt, OneOf, PositiveInt
from zoo.core.data import DataError
from zoo.data.images import DATASETS, read_images
from zoo.methods.saliency_bias.canvas import BACKGROUNDS, CornerShiftTrainSet, corner_shift_set, random_input_set


def balanced_order(labels: torch.Tensor) -> torch.Tensor:
    """Indices ``(N,)`` taking the classes round-robin (first of each class, then second, ...), stable within a class."""
    rank = torch.zeros_like(labels)
    for c in labels.unique():
        idx = (labels == c).nonzero().flatten()
        rank[idx] = torch.arange(len(idx))
    return torch.from_numpy(np.lexsort((labels.numpy(), rank.numpy())))


class CornerShiftDataModule(L.LightningDataModule):
    """Objects from a real image set pasted onto ``factor``× larger canvases.

    Training batches ``(x (B, C, H, W), y (B,))`` place every object at a uniformly random one of the five
    positions on a fresh background; validation uses every test object at all five positions. ``eval_set`` (the
    benchmark: the first ``n_eval_objects`` test objects × 5 positions) and ``random_set`` (its random-input control)
    are built in ``setup``. Pixels are normalised per channel with the training split's mean and sd, so the
    ``mean`` background is 0.

    Args:
        dataset: ``cifar10`` | ``mnist`` | ``digits`` | ``folder`` (see :mod:`zoo.data.images`).
        path: the dataset file, or for ``folder`` a folder ``<root>/<class name>/<image files>`` (png/jpg/...).
        size, channels: image side and channels a ``folder`` is resized/converted to (others keep theirs).
        upscale: integer nearest-neighbour upscaling of every object (``digits`` are 8×8).
        factor: canvas side / object side (2: a 32×32 object on a 64×64 canvas).
        background: ``mean`` | ``noise`` | ``blur`` (an unrelated, blurred image of the same split).
        noise_sd: sd of the ``noise`` background in normalised units.
        n_train: keep the first ``n_train`` training images (None = all).
        n_eval_objects: test objects in the benchmark set.
        eval_selection: ``balanced`` takes them round-robin over classes (test splits are often sorted by class),
            ``first`` the first ``n_eval_objects`` of the test split.
        batch_size, seed: loader batch size; seed of the benchmark backgrounds and random inputs.

    Attributes after ``setup()``: ``in_channels``, ``num_classes``, ``img_size`` (canvas side), ``mean``, ``std``
    (``(C,)``), ``classes``, ``eval_set``, ``random_set``.

    Raises:
        DataError: from the constructor (bad option) or ``setup()`` (file named).
    """

    def __init__(
        self,
        dataset: Annotated[str, OneOf(DATASETS)] = "cifar10",
        path: str | None = None,
        size: PositiveInt = 32,
        channels: Literal[1, 3] = 3,
        upscale: PositiveInt = 1,
        factor: PositiveInt = 2,
        background: Annotated[str, OneOf(BACKGROUNDS)] = "mean",
        noise_sd: NonNegative = 0.5,
        n_train: PositiveInt | None = None,
        n_eval_objects: PositiveInt = 8,
        eval_selection: Literal["balanced", "first"] = "balanced",
        batch_size: PositiveInt = 64,
        seed: NonNegativeInt = 0,
    ):
        super().__init__()
        if dataset not in DATASETS:
            raise DataError(f"data.dataset: unknown dataset {dataset!r}; one of {DATASETS}")
        if background not in BACKGROUNDS:
            raise DataError(f"data.background: unknown background {background!r}; one of {BACKGROUNDS}")
        if eval_selection not in ("balanced", "first"):
            raise DataError(f"data.eval_selection: one of 'balanced', 'first'; got {eval_selection!r}")
        if factor < 2 or upscale < 1:
            raise DataError(f"data.factor must be >= 2 and data.upscale >= 1, got {factor}, {upscale}")
        self.dataset, self.path, self.size, self.channels = dataset, path, int(size), int(channels)
        self.upscale, self.factor, self.background, self.noise_sd = int(upscale), int(factor), background, noise_sd
        self.n_train, self.n_eval_objects, self.batch_size, self.seed = n_train, int(n_eval_objects), batch_size, seed
        self.eval_selection = eval_selection
        self.train_objects = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_objects is not None:
            return
        train, test = read_images(self.dataset, self.path, self.size, self.channels)
        train = train.subset(self.n_train)
        if len(test) == 0:
            raise DataError(f"{self.path or self.dataset}: the test split is empty (need images to benchmark)")
        self.mean = train.x.mean((0, 2, 3))
        self.std = train.x.std((0, 2, 3)).clamp_min(1e-3)
        self.train_objects, self.train_labels = self.normalise_image(train.x), train.y
        self.test_objects, self.test_labels = self.normalise_image(test.x), test.y
        self.classes = train.classes
        self.in_channels, self.num_classes = train.x.shape[1], len(train.classes)
        self.img_size = self.factor * self.train_objects.shape[-1]
        self.val_set = corner_shift_set(
            self.test_objects,
            self.test_labels,
            self.background,
            self.factor,
            seed=self.seed + 1,
            noise_sd=self.noise_sd,
        )
        pick = balanced_order(self.test_labels) if self.eval_selection == "balanced" else torch.arange(len(test))
        order = torch.cat([pick[: self.n_eval_objects], pick[self.n_eval_objects :]])  # benchmark objects first
        pool = self.test_objects[order]
        n = min(self.n_eval_objects, len(test))
        self.eval_set = corner_shift_set(
            pool[:n],
            self.test_labels[order[:n]],
            self.background,
            self.factor,
            seed=self.seed,
            noise_sd=self.noise_sd,
            pool=pool if self.background == "blur" else None,
        )
        self.random_set = random_input_set(self.eval_set, seed=self.seed)

    def train_dataloader(self) -> DataLoader:
        ds = CornerShiftTrainSet(self.train_objects, self.train_labels, self.background, self.factor, self.noise_sd)
        return DataLoader(ds, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(self.val_set.x, self.val_set.y), batch_size=256)

    def normalise_image(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, C, h, w)`` in [0, 1] -> normalised and upscaled like the training objects."""
        x = (x - self.mean.view(1, -1, 1, 1)) / self.std.view(1, -1, 1, 1)
        return x.repeat_interleave(self.upscale, 2).repeat_interleave(self.upscale, 3)
