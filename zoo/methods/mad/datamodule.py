"""``BackdoorDataModule``: a poisoned training set for the deployed model and the detector's split of clean images.

Splits (written into every result): the reader's train images minus the last ``n_sampling`` train the deployed
model (the first ``n_train`` of them when set), ``rate`` of which are poisoned; the last ``n_sampling`` train
images are held back to drive SGLD (ground-truth labels, never poisoned); the reader's test images are split
class-balanced (seeded) into ``n_trusted`` trusted and ``n_eval`` evaluation images, and every evaluation image gets a
triggered copy. A seeded ``calib_fraction`` of the evaluation images (with their copies) is held out to pick
detection thresholds; the rest is scored.

- ``cifar10-large``: 2,000 model-train (the shipped 200 per class) / 1,000 sampling / 300 trusted + 700 evaluation.
- ``mnist-10k``: 8,000 model-train (rows 0..7999 of the MNIST test set) / 1,000 sampling (8000..8999) / 300 + 700
  (9000..9999).

Your own data: ``dataset: folder`` and ``path: ROOT`` with ``ROOT/<class name>/<image file>`` (see
:func:`zoo.data.images.read_image_folder`: png/jpg/bmp/gif/webp, resized to ``size``, converted to ``channels``);
or an ``.npz`` for ``cifar10`` (``x_train, y_train, x_test, y_test`` uint8 HWC, ``classes``) or ``mnist``
(``x`` uint8 ``(N, 28, 28)``, ``y``). Bad files fail in ``setup()`` naming the file (``DataError``).

Batches: train ``(x (B, C, H, W) in [0, 1], y (B,))`` (poisoned); validation ``(x, y, x_triggered)``.
With ``n_train`` set, the model-train images are a class-balanced seeded subset of the model-train part.
"""

from __future__ import annotations

from typing import Annotated, Literal

import lightning as L
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.constraints import NonNegativeInt, OneOf, OpenUnit, PositiveInt, Probability
from zoo.core.data import DataError
from zoo.data.images import DATASETS, ImageSet, read_images
from zoo.methods.mad.attacks import ATTACKS, apply_trigger, poison


def balanced_order(y: torch.Tensor, seed: int) -> torch.Tensor:
    """Indices of ``y (N,)`` interleaving the classes (class 0, 1, ..., then again), each class shuffled with
    ``seed``; any prefix of length ``k * n_classes`` holds ``k`` images of every class present that often."""
    g = torch.Generator().manual_seed(seed)
    per = [torch.where(y == c)[0] for c in y.unique()]
    per = [p[torch.randperm(len(p), generator=g)] for p in per]
    rank = torch.cat([torch.arange(len(p)) for p in per])
    idx = torch.cat(per)
    return idx[torch.argsort(rank * len(per) + torch.cat([torch.full((len(p),), k) for k, p in enumerate(per)]))]


def convert_images(x: torch.Tensor, channels: int, size: int) -> torch.Tensor:
    """Images ``(N, C, H, W)`` to ``(N, channels, size, size)``: grey by ITU-R 601 luma (RGB -> 1) or repetition
    (1 -> 3), then bilinear resizing with antialiasing. The OOD check turns CIFAR into 28x28 grey this way."""
    if x.shape[1] == 3 and channels == 1:
        x = (x * torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True)
    elif x.shape[1] == 1 and channels == 3:
        x = x.expand(-1, 3, -1, -1)
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return x.clamp(0, 1).contiguous()


class BackdoorDataModule(L.LightningDataModule):
    """Poisoned training data, SGLD sampling set, trusted and evaluation images with triggered copies.

    Args:
        dataset: one of ``zoo.data.images.DATASETS`` (``cifar10-large``, ``mnist-10k`` for the recipes);
        path: its file or folder (default: the shipped one).
        attack: one of :data:`attacks.ATTACKS`; rate: poisoned fraction of the model-train images; target: class.
        trigger: keyword settings of :func:`attacks.apply_trigger`; hardness: label-consistent hardening.
        n_train: model-train images kept (None = all); n_sampling: held-back train images for SGLD.
        n_trusted, n_eval: trusted and evaluation images from the test split (class-balanced).
        calib_fraction: evaluation images held out for thresholds.
        ood_dataset: a dataset whose test images are converted to this one's format and traced as OOD inputs
            (``cifar10-large`` for the MNIST OOD check); n_ood: how many.
        size, channels: image size and channels for ``folder``.
        batch_size: training and sampling batch size; seed: split, poisoning and calibration seed.
    """

    def __init__(
        self,
        dataset: Annotated[str, OneOf(DATASETS)] | None = "cifar10-large",
        path: str | None = None,
        attack: Annotated[str, OneOf(ATTACKS)] | None = "badnets",
        rate: Probability | None = 0.1,
        target: NonNegativeInt | None = 0,
        trigger: dict | None = None,
        hardness: Probability = 0.5,
        n_train: PositiveInt | None = None,
        n_sampling: PositiveInt = 1000,
        n_trusted: PositiveInt = 300,
        n_eval: PositiveInt = 700,
        calib_fraction: OpenUnit = 0.3,
        ood_dataset: Annotated[str, OneOf(DATASETS)] | None = None,
        n_ood: PositiveInt = 300,
        size: PositiveInt = 32,
        channels: Literal[1, 3] = 3,
        batch_size: PositiveInt = 64,
        seed: NonNegativeInt = 0,
    ):
        super().__init__()
        unset = [
            k for k, v in (("dataset", dataset), ("attack", attack), ("rate", rate), ("target", target)) if v is None
        ]
        if unset:
            raise DataError(
                f"data.{', data.'.join(unset)}: unset (null is only for adopting a package's values with init_from)"
            )
        for key, value in (("dataset", dataset), ("ood_dataset", ood_dataset)):
            if value is not None and value not in DATASETS:
                raise DataError(f"data.{key}: unknown dataset {value!r}; one of {DATASETS}")
        if attack not in ATTACKS:
            raise ValueError(f"data.attack: unknown attack {attack!r}; one of {ATTACKS}")
        if not 0.0 < calib_fraction < 1.0:
            raise ValueError(f"data.calib_fraction must be in (0, 1), got {calib_fraction}")
        self.dataset, self.path, self.attack, self.rate, self.target = dataset, path, attack, float(rate), int(target)
        self.trigger, self.hardness = dict(trigger or {}), float(hardness)
        self.n_train, self.n_sampling, self.n_trusted, self.n_eval = (
            n_train,
            int(n_sampling),
            int(n_trusted),
            int(n_eval),
        )
        self.calib_fraction, self.ood_dataset, self.n_ood = float(calib_fraction), ood_dataset, int(n_ood)
        self.size, self.channels, self.batch_size, self.seed = int(size), int(channels), int(batch_size), int(seed)
        self.train_x: torch.Tensor | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_x is not None:
            return
        train, test = read_images(self.dataset, self.path, self.size, self.channels)
        where = f"data.dataset {self.dataset!r}"
        if len(train) <= self.n_sampling:
            raise DataError(f"{where}: {len(train)} train images, need more than n_sampling={self.n_sampling}")
        if len(test) < self.n_trusted + self.n_eval:
            raise DataError(
                f"{where}: {len(test)} test images, need n_trusted + n_eval = {self.n_trusted + self.n_eval}"
            )
        cut = len(train) - self.n_sampling
        model_x, model_y = train.x[:cut], train.y[:cut]
        if self.n_train is not None:  # a class-balanced subset (the shipped CIFAR file is sorted by class)
            keep = balanced_order(model_y, self.seed)[: self.n_train].sort().values
            model_x, model_y = model_x[keep], model_y[keep]
        self.train_x, self.train_y, self.poisoned = poison(
            model_x, model_y, self.attack, self.rate, self.target, self.seed, self.hardness, **self.trigger
        )
        self.sampling = ImageSet(train.x[cut:], train.y[cut:], train.classes)
        order = balanced_order(test.y, self.seed)
        tr, ev = order[: self.n_trusted], order[self.n_trusted : self.n_trusted + self.n_eval]
        self.trusted = ImageSet(test.x[tr], test.y[tr], test.classes)
        self.eval = ImageSet(test.x[ev], test.y[ev], test.classes)
        self.eval_triggered = apply_trigger(self.eval.x, self.attack, **self.trigger)
        g = torch.Generator().manual_seed(self.seed + 7)
        self.calib = torch.zeros(self.n_eval, dtype=torch.bool)
        self.calib[torch.randperm(self.n_eval, generator=g)[: round(self.calib_fraction * self.n_eval)]] = True
        self.classes, self.num_classes = train.classes, len(train.classes)
        self.in_channels, self.img_size = int(train.x.shape[1]), int(train.x.shape[-1])
        self.ood = None
        if self.ood_dataset:
            _, other = read_images(self.ood_dataset)
            pick = balanced_order(other.y, self.seed)[: self.n_ood]
            self.ood = convert_images(other.x[pick], self.in_channels, self.img_size)

    def settings(self) -> dict:
        """The constructor arguments (plain values), so a trained module can rebuild its trusted and sampling sets."""
        return {
            "dataset": self.dataset,
            "path": self.path,
            "attack": self.attack,
            "rate": self.rate,
            "target": self.target,
            "trigger": dict(self.trigger),
            "hardness": self.hardness,
            "n_train": self.n_train,
            "n_sampling": self.n_sampling,
            "n_trusted": self.n_trusted,
            "n_eval": self.n_eval,
            "calib_fraction": self.calib_fraction,
            "size": self.size,
            "channels": self.channels,
            "batch_size": self.batch_size,
            "seed": self.seed,
        }

    def split_summary(self) -> dict:
        """The split as plain numbers (written into results)."""
        return {
            "dataset": self.dataset,
            "n_model_train": len(self.train_y),
            "n_poisoned": len(self.poisoned),
            "n_sampling": len(self.sampling),
            "n_trusted": len(self.trusted),
            "n_eval": len(self.eval),
            "n_calibration": int(self.calib.sum()),
            "n_ood": 0 if self.ood is None else len(self.ood),
            "attack": self.attack,
            "rate": self.rate,
            "target": self.target,
            "seed": self.seed,
        }

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(self.train_x, self.train_y), batch_size=self.batch_size, shuffle=True)

    def sampling_dataloader(self, seed: int = 0) -> DataLoader:
        """Shuffled ``(x, y)`` batches of the held-back sampling set (SGLD's data)."""
        return DataLoader(
            TensorDataset(self.sampling.x, self.sampling.y),
            batch_size=self.batch_size,
            shuffle=True,
            generator=torch.Generator().manual_seed(seed),
            drop_last=len(self.sampling) > self.batch_size,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(self.eval.x, self.eval.y, self.eval_triggered), batch_size=256)
