"""``CaptionDataModule``: real images with one caption each, for SemBind's generator, semantic encoder and masker.

Data (``dataset``):

- ``cifar10-6000`` (default): the shipped CIFAR-10 subset (``zoo.data.images``: 5,000 train / 1,000 test, 32×32),
  resized to ``size``; captions made per image (:func:`captions.make_captions`: class word + colour word of the
  centre's hue + dark/bright, one of five templates and three synonyms).
- ``folder``: a user's folder ``path`` holding ``captions.csv`` with columns ``file,caption`` (``file`` relative to
  the folder; png/jpg/bmp/gif/webp, converted to RGB and resized to ``size``). Class labels are unknown there
  (``y = -1``); colour and brightness come from the pixels. A missing file, an unreadable image or an empty
  caption fails in ``setup()`` (before a run directory exists) as ``DataError: <csv>:<line>: column <name>: ...``,
  a missing file or an empty caption already in the recipe check, before torch is imported (``CAPTIONS``);
  a seeded 20 % of the rows is the test split.

``split`` picks the training images: ``provider`` (the first seeded half), ``proxy`` (the other half: the attacker's
proxy model trains on images the provider never saw) or ``all``.

Batches: ``(x (B, 3, size, size) in [0, 1], y (B,) class or -1, colour (B,), brightness (B,), e (B, 384))`` where
``e`` is the caption's unit-norm MiniLM embedding (``zoo.models.text_embedding``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from zoo.core.constraints import TEXT, Cell, DataFile, NonNegativeInt, OneOf, PositiveInt
from zoo.core.data import DataError, cache_dir
from zoo.core.datafiles import read_declared
from zoo.data.images import IMAGE_SUFFIXES, ImageConversions, load_image, read_images
from zoo.methods.sembind.captions import colour_attributes, make_captions

SPLITS = ("provider", "proxy", "all")
_EMBED_CACHE: dict[tuple, torch.Tensor] = {}


def _cache_file() -> Path:
    return cache_dir() / "sembind-minilm-captions.pt"


def embed_captions(texts: list[str], text_model: str | None = None) -> torch.Tensor:
    """MiniLM embeddings ``(N, 384)`` of ``texts``. Each distinct caption of the shipped MiniLM is embedded once and
    kept in ``zoo.core.data.cache_dir()/sembind-minilm-captions.pt`` (a plain tensor file; delete it any time)."""
    from zoo.models.text_embedding import embed_texts

    cache = _cache_file()
    if text_model is None and not _EMBED_CACHE and cache.is_file():
        saved = torch.load(cache, weights_only=True)
        _EMBED_CACHE.update({(None, t): e for t, e in zip(saved["texts"], saved["embeddings"])})
    todo = sorted({t for t in texts if (text_model, t) not in _EMBED_CACHE})
    if todo:
        for t, e in zip(todo, embed_texts(todo, model=text_model)):
            _EMBED_CACHE[(text_model, t)] = e
        if text_model is None:
            keys = [k for k in _EMBED_CACHE if k[0] is None]
            cache.parent.mkdir(parents=True, exist_ok=True)
            torch.save(
                {"texts": [k[1] for k in keys], "embeddings": torch.stack([_EMBED_CACHE[k] for k in keys])}, cache
            )
    return torch.stack([_EMBED_CACHE[(text_model, t)] for t in texts])


@dataclass
class CaptionSet:
    """Images ``x (N, 3, S, S)`` in ``[0, 1]``, labels ``y (N,)`` (-1 unknown), captions and their attributes."""

    x: torch.Tensor
    y: torch.Tensor
    captions: list[str]
    colour: torch.Tensor
    brightness: torch.Tensor

    def take(self, idx) -> CaptionSet:
        idx = torch.as_tensor(idx, dtype=torch.long)
        return CaptionSet(
            self.x[idx], self.y[idx], [self.captions[i] for i in idx.tolist()], self.colour[idx], self.brightness[idx]
        )


#: A user's captioned folder (``data.path`` with ``dataset: folder``): ``captions.csv`` naming an image file (relative to
#: the folder) and a non-empty caption per row, checked before torch too; an unreadable image is found when loaded.
CAPTIONS = DataFile(
    "csv",
    ("file", "caption"),
    types={"caption": TEXT, "file": Cell("file", choices=IMAGE_SUFFIXES)},
    inside="captions.csv",
    when={"dataset": "folder"},
)


def read_caption_folder(root: str, size: int) -> tuple[torch.Tensor, list[str]]:
    """Images ``(N, 3, size, size)`` in ``[0, 1]`` and captions from ``root/captions.csv`` (``file,caption``).

    Raises:
        DataError: no folder or csv, a missing column, or a row whose file is missing/unreadable or whose caption
            is empty, as ``<csv>:<line>: column <name>: ...``.
    """
    base = Path(root)
    if not base.is_dir():
        raise DataError(f"{base}: no such folder (data.path; expected a folder with captions.csv: file,caption)")
    csv = base / CAPTIONS.inside
    _, rows = read_declared(csv, CAPTIONS)
    if not rows:
        raise DataError(f"{csv}: no rows after the header")
    xs, caps, seen = [], [], ImageConversions(str(base))
    for line, row in rows:
        f = base / row["file"].strip()
        xs.append(load_image(f, size, 3, seen, f"{csv}:{line}: column 'file': {row['file']!r}"))
        caps.append(row["caption"].strip())
    seen.report()
    return torch.from_numpy(np.stack(xs)).permute(0, 3, 1, 2).float() / 255.0, caps


class CaptionDataModule(L.LightningDataModule):
    """Captioned images (see the module docstring for data, splits and batches).

    Args:
        dataset: ``cifar10-6000`` or ``folder``.
        path: the CIFAR ``.npz`` (default shipped) or the user's folder with ``captions.csv``.
        size: image side after resizing (16 by default: the CPU generator's resolution).
        split: ``provider`` | ``proxy`` | ``all`` training images.
        n_train: keep at most this many training images (None = all of the split).
        batch_size: loader batch size.
        seed: seed of the halves, the folder's test split and the caption words.
        text_model: a local sentence-transformers folder (None = the shipped MiniLM).

    Raises:
        DataError: from ``setup()``; an unknown dataset or split.
    """

    def __init__(
        self,
        dataset: Literal["cifar10-6000", "cifar10", "folder"] = "cifar10-6000",
        path: Annotated[str | None, CAPTIONS] = None,
        size: PositiveInt = 16,
        split: Annotated[str, OneOf(SPLITS)] = "provider",
        n_train: PositiveInt | None = None,
        batch_size: PositiveInt = 32,
        seed: NonNegativeInt = 0,
        text_model: str | None = None,
    ):
        super().__init__()
        if split not in SPLITS:
            raise DataError(f"data.split: {split!r} is not one of {SPLITS}")
        if dataset not in ("cifar10-6000", "cifar10", "folder"):
            raise DataError(f"data.dataset: {dataset!r}; one of cifar10-6000, cifar10, folder")
        self.dataset, self.path, self.size, self.split = dataset, path, int(size), split
        self.n_train, self.batch_size, self.seed, self.text_model = n_train, int(batch_size), int(seed), text_model
        self.train_set: CaptionSet | None = None
        self.test_set: CaptionSet | None = None

    def _resize(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] == self.size:
            return x
        return F.interpolate(x, size=(self.size, self.size), mode="bilinear", antialias=True).clamp(0, 1)

    def _caption_set(self, x: torch.Tensor, y: torch.Tensor, caps: list[str]) -> CaptionSet:
        colour, bright = colour_attributes(x)
        return CaptionSet(self._resize(x), y, caps, colour, bright)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        g = torch.Generator().manual_seed(self.seed)
        if self.dataset == "folder":
            if not self.path:
                raise DataError("data.path: dataset 'folder' needs a folder with captions.csv (file,caption)")
            x, caps = read_caption_folder(self.path, max(self.size, 32))
            perm = torch.randperm(len(caps), generator=g)
            n_test = max(1, round(0.2 * len(caps))) if len(caps) > 1 else 0
            full = self._caption_set(x, torch.full((len(caps),), -1), caps)
            train, self.test_set = full.take(perm[n_test:]), full.take(perm[:n_test] if n_test else perm)
        else:
            tr, te = read_images(self.dataset, self.path)
            self.classes = tr.classes
            train = self._caption_set(tr.x, tr.y, make_captions(tr.x, tr.y, tr.classes, self.seed))
            self.test_set = self._caption_set(te.x, te.y, make_captions(te.x, te.y, te.classes, self.seed + 1))
        perm = torch.randperm(len(train.captions), generator=g)
        half = len(perm) // 2
        idx = {"provider": perm[:half], "proxy": perm[half:], "all": perm}[self.split]
        self.train_set = train.take(idx[: self.n_train] if self.n_train else idx)

    def settings(self) -> dict:
        """The constructor arguments (saved with the weights)."""
        return {
            "dataset": self.dataset,
            "path": self.path,
            "size": self.size,
            "split": self.split,
            "n_train": self.n_train,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "text_model": self.text_model,
        }

    def _loader(self, s: CaptionSet, shuffle: bool) -> DataLoader:
        e = embed_captions(s.captions, self.text_model)
        return DataLoader(
            TensorDataset(s.x, s.y, s.colour, s.brightness, e), batch_size=self.batch_size, shuffle=shuffle
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.test_set, False)
