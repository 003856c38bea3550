"""``WaterbirdsDataModule``: image–caption pairs for CLIP pretraining, and the val/test splits LTC locates and scores
on, from a folder in Waterbirds' layout.

Input schema (``data.path``, a folder): ``metadata.csv`` with columns ``img_filename,y,place,split`` (+ optional
``caption``), images at ``<folder>/<img_filename>``; ``split`` 0 = train/pretrain, 1 = val, 2 = test;
``y``, ``place`` in {0, 1}; group ``g = 2 y + place`` (see :mod:`zoo.data.waterbirds`). Real Waterbirds
(``waterbird_complete95_forest2water2``) reads as is. ``path: null`` (default) reads our ``waterbirds-cifar`` split,
first written by :mod:`zoo.methods.ltc.waterbirds_cifar` into ``runs/data/waterbirds-cifar-r<rate>-s<data_seed>`` when
that folder has no ``metadata.csv``. Bad rows, missing images and a
group absent from val fail in ``setup()`` (``DataError`` naming file, line and column), before any training.

Batches: ``(x (B, 3, S, S) float normalised with CLIP's mean/std, tokens (B, context_length) int64)``.
"""

from __future__ import annotations

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from zoo.core.constraints import NonNegativeInt, PositiveInt, Probability
from zoo.core.data import DataError, repo_root
from zoo.data.waterbirds import GroupImageSet, read_waterbirds
from zoo.methods.ltc.waterbirds_cifar import ensure

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)  # open_clip.constants.OPENAI_DATASET_MEAN
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def normalise(x: torch.Tensor) -> torch.Tensor:
    """uint8 ``(N, 3, S, S)`` -> float, CLIP-normalised."""
    mean, std = torch.tensor(CLIP_MEAN).view(1, 3, 1, 1), torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    return (x.float() / 255.0 - mean) / std


class _Pairs(Dataset):
    def __init__(self, x: torch.Tensor, tokens: torch.Tensor):
        self.x, self.tokens = x, tokens

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return normalise(self.x[i : i + 1])[0], self.tokens[i]


class WaterbirdsDataModule(L.LightningDataModule):
    """Waterbirds-layout data for LTC.

    Args:
        path: a Waterbirds-layout folder (relative paths resolve against the repository root when absent from the
            cwd), or None for the built ``waterbirds-cifar``.
        rate: pretrain rate of ``place = y`` of the built split (0.95; 0.99 for the stronger bias).
        data_seed: seed of the built split.
        size: image side the images are resized to (48 for ``waterbirds-cifar``, 224 for ViT-B-16).
        batch_size: training batch size.
        n_train, n_eval: keep only ``n`` train (and val/test) images, round-robin over the groups (None = all; the
            tiny overlay). Captions are tokenised by the module's vocabulary (``tokenize``, set in the module's
            ``setup``).

    Attributes after ``setup()``: ``train_set``, ``val_set``, ``test_set`` (:class:`GroupImageSet`, uint8 images).

    Raises:
        DataError: from ``setup()``.
    """

    def __init__(
        self,
        path: str | None = None,
        rate: Probability = 0.95,
        data_seed: NonNegativeInt = 0,
        size: PositiveInt = 48,
        batch_size: PositiveInt = 128,
        n_train: PositiveInt | None = None,
        n_eval: PositiveInt | None = None,
    ):
        super().__init__()
        self.path, self.rate, self.data_seed = path, float(rate), int(data_seed)
        self.size, self.batch_size, self.n_train, self.n_eval = int(size), int(batch_size), n_train, n_eval
        self.tokenize = None  # set by the module: list[str] -> (n, context_length)
        self.train_set: GroupImageSet | None = None

    def folder(self):
        """The data folder (``path``, or the built split's folder when ``path`` is None)."""
        from pathlib import Path

        if self.path is None:
            return repo_root() / "runs" / "data" / f"waterbirds-cifar-r{self.rate:g}-s{self.data_seed}"
        p = Path(self.path)
        return p if p.is_absolute() or p.exists() else repo_root() / p

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        root = self.folder()
        if self.path is None:
            ensure(root, self.data_seed, self.rate)
        sets = read_waterbirds(root, self.size)
        self.train_set = _head(sets["train"], self.n_train)
        self.val_set, self.test_set = _head(sets["val"], self.n_eval), _head(sets["test"], self.n_eval)

    def train_dataloader(self) -> DataLoader:
        if self.tokenize is None:
            raise RuntimeError("WaterbirdsDataModule: the module sets `tokenize` before training")
        caps = self.train_set.captions
        if not all(caps):
            if self.trainer is not None and self.trainer.max_epochs == 0:  # post hoc only (a pretrained CLIP)
                return DataLoader(_Pairs(self.train_set.x[:0], torch.zeros(0, 1, dtype=torch.long)), batch_size=1)
            file = self.train_set.files[caps.index("")]
            raise DataError(
                f"{self.folder() / 'metadata.csv'}:{self._lines().get(file, '?')}: train image {file} has no "
                "caption (column 'caption'); pretraining needs one per train image (or set trainer.max_epochs=0 "
                "for a post-hoc run on a given CLIP)"
            )
        try:
            tokens = self.tokenize(caps)
        except ValueError:  # a caption the vocabulary cannot encode (too long): name its line
            raise self._caption_error(caps) from None
        return DataLoader(
            _Pairs(self.train_set.x, tokens),
            batch_size=self.batch_size,
            shuffle=True,
            drop_last=len(caps) > self.batch_size,
        )

    def _lines(self) -> dict[str, int]:
        """``{image file: its line in metadata.csv}``."""
        from zoo.data.waterbirds import read_metadata

        return {r["img_filename"]: r["line"] for r in read_metadata(self.folder())}

    def _caption_error(self, caps: list[str]) -> DataError:
        """``metadata.csv:LINE: column 'caption': why`` for the first training caption ``tokenize`` refuses."""
        meta, lines = self.folder() / "metadata.csv", self._lines()
        for file, caption in zip(self.train_set.files, caps):
            try:
                self.tokenize([caption])
            except ValueError as e:
                return DataError(
                    f"{meta}:{lines.get(file, '?')}: column 'caption': {e} (shorten it, or raise model.context_length)"
                )
        return DataError(f"{meta}: the training captions could not be tokenised")


def _head(s: GroupImageSet, n: int | None) -> GroupImageSet:
    """The first ``n`` images, taken round-robin over the 4 groups so every group stays present."""
    if n is None or n >= len(s):
        return s
    g = s.group
    order = torch.argsort(
        torch.stack([torch.cumsum(g == k, 0) for k in range(4)]).gather(0, g[None])[0] * 4 + g, stable=True
    )[:n]
    order = order.sort().values
    return GroupImageSet(
        s.x[order], s.y[order], s.place[order], [s.files[i] for i in order], [s.captions[i] for i in order]
    )
