"""Small real image datasets as float tensors, read the same way by every image method.

Shared by the image methods (saliency-bias, mad, ltc, sembind). Every reader returns ``(train, test)`` as
:class:`ImageSet` objects holding ``x`` float32 ``(N, C, H, W)`` in ``[0, 1]`` and ``y`` int64 ``(N,)``.

Datasets (``dataset=`` in :func:`read_images`):

- ``cifar10``: ``data/cifar10-subset/cifar10_subset_2200.npz`` (2,000 train / 200 test, 3×32×32, 10 classes).
- ``cifar10-6000``: ``data/cifar10-subset/cifar10_jpeg_subset.npz`` (5,000 train / 1,000 test; 500 / 100 per class;
  the 2,200-image file is cut from it, see its SOURCE.md).
- ``cifar10-large``: the 2,200 above plus ``data/cifar10-subset/cifar10_extra_1800.npz`` (the next 100 train and 80
  test images per class): 3,000 train (the 2,000 above first, then the 1,000 extra) / 1,000 test.
- ``mnist``: ``data/mnist-test/mnist_test_3000.npz`` (rows 0..2499 train, 2500..2999 test, 1×28×28).
- ``mnist-10k``: ``data/mnist-test/mnist_test_10000.npz``, the whole MNIST test set (rows 0..8999 train, 9000..9999
  test).
- ``digits``: scikit-learn's 8×8 digits (1,797 images; first 1,500 train, rest test; values 0..16 scaled to [0, 1]).
- ``folder``: a user's folder ``ROOT/<class name>/<image file>`` (png, jpg, jpeg, bmp, gif, webp); classes are the
  sorted sub-folder names, every image converted to RGB (or L with ``channels=1``) and resized to ``size``×``size``
  (one log line counts what was resized or converted, with an example); an image with a side under 8 pixels or sides
  more than 4:1 apart is refused, naming the file; a seeded 20 % of each class is the test split.
"""

from __future__ import annotations

import logging
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from zoo.core.data import DataError, repo_root

DEFAULT_PATHS = {
    "cifar10": "data/cifar10-subset/cifar10_subset_2200.npz",
    "cifar10-6000": "data/cifar10-subset/cifar10_jpeg_subset.npz",
    "cifar10-extra": "data/cifar10-subset/cifar10_extra_1800.npz",
    "mnist": "data/mnist-test/mnist_test_3000.npz",
    "mnist-10k": "data/mnist-test/mnist_test_10000.npz",
}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
#: A user's image whose sides differ more than this many times, or whose smaller side is under ``MIN_SIDE`` pixels, is
#: refused rather than squashed or blown up to the model's square input.
MAX_ASPECT, MIN_SIDE = 4.0, 8
log = logging.getLogger("zoo")


@dataclass
class ImageConversions:
    """What :func:`load_image` did to a folder's images, for one log line: ``resized`` / ``converted`` count the
    images changed, with the first file and its original size or mode as the example."""

    where: str
    n: int = 0
    resized: list = field(default_factory=list)
    converted: list = field(default_factory=list)

    def report(self) -> None:
        parts = [
            f"{len(self.resized)} resized (e.g. {self.resized[0]})" if self.resized else "",
            f"{len(self.converted)} converted (e.g. {self.converted[0]})" if self.converted else "",
        ]
        if any(parts):
            log.info("%s: of %d images, %s", self.where, self.n, " and ".join(p for p in parts if p))


def load_image(path: Path, size: int, channels: int, seen: ImageConversions, where: str | None = None) -> np.ndarray:
    """One user image as ``uint8 (size, size, channels)``: converted to RGB (``L`` for one channel) and resized
    (bilinear) to the square input, each change counted in ``seen`` for its log line.

    Raises:
        DataError: ``where`` (default the file) when the file is not a readable image, is more than
            :data:`MAX_ASPECT` times wider than tall (or the reverse), or has a side under :data:`MIN_SIDE` pixels.
    """
    from PIL import Image

    where = where or str(path)
    try:
        with Image.open(path) as im:
            w, h = im.size
            if max(w, h) > MAX_ASPECT * min(w, h) or min(w, h) < MIN_SIDE:
                raise DataError(
                    f"{where}: a {w}x{h} image ({im.mode}); images need sides of at least {MIN_SIDE} "
                    f"pixels and at most {MAX_ASPECT:g}:1 between them to be resized to {size}x{size} "
                    "(crop or pad it first)"
                )
            mode = "RGB" if channels == 3 else "L"
            seen.n += 1
            if im.mode != mode:
                seen.converted.append(f"{path.name}: {im.mode} -> {mode}")
                im = im.convert(mode)
            if (w, h) != (size, size):
                seen.resized.append(f"{path.name}: {w}x{h} -> {size}x{size}")
                im = im.resize((size, size), Image.BILINEAR)
            return np.asarray(im, dtype=np.uint8).reshape(size, size, channels)
    except DataError:
        raise
    except (OSError, ValueError) as e:  # PIL's UnidentifiedImageError is an OSError
        raise DataError(f"{where}: not a readable image ({e})") from None


DATASETS = ("cifar10", "cifar10-6000", "cifar10-large", "mnist", "mnist-10k", "digits", "folder")


@dataclass
class ImageSet:
    """Images and labels.

    Attributes:
        x: float32 ``(N, C, H, W)`` in ``[0, 1]``.
        y: int64 ``(N,)`` class indices.
        classes: class names, ``classes[y[i]]``.
    """

    x: torch.Tensor
    y: torch.Tensor
    classes: list[str]

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, n: int | None) -> ImageSet:
        """The first ``n`` images (all when ``n`` is None or larger than the set)."""
        return self if n is None else ImageSet(self.x[:n], self.y[:n], self.classes)


def _resolve(path: str | None, dataset: str) -> Path:
    p = Path(path or DEFAULT_PATHS[dataset])
    if not p.is_absolute() and not p.exists():
        p = repo_root() / p
    if not p.is_file():
        raise DataError(f"{p}: no such file (data.path for dataset {dataset!r})")
    return p


def _load_npz(p: Path, keys: tuple[str, ...]) -> dict:
    try:
        z = np.load(p, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as e:  # a truncated or non-npz file
        raise DataError(f"{p}: not a readable .npz file ({e})") from None
    missing = [k for k in keys if k not in z.files]
    if missing:
        raise DataError(f"{p}: missing array(s) {missing}; has {z.files}")
    return {k: z[k] for k in keys}


def _to_set(x: np.ndarray, y: np.ndarray, classes: list[str], channels_last: bool, scale: float) -> ImageSet:
    t = torch.from_numpy(np.ascontiguousarray(x)).float() / scale
    t = t.permute(0, 3, 1, 2) if channels_last else t.unsqueeze(1)
    return ImageSet(t.contiguous(), torch.from_numpy(y.astype(np.int64)), classes)


def read_cifar10(path: str | None = None, dataset: str = "cifar10") -> tuple[ImageSet, ImageSet]:
    """A CIFAR-10 subset file (default that of ``dataset``): ``cifar10`` train ``(2000, 3, 32, 32)``, test
    ``(200, 3, 32, 32)``; ``cifar10-6000`` train ``(5000, ...)``, test ``(1000, ...)``; both in class-sorted order.

    Raises:
        DataError: missing or unreadable file, missing arrays.
    """
    p = _resolve(path, dataset)
    z = _load_npz(p, ("x_train", "y_train", "x_test", "y_test", "classes"))
    classes = [str(c) for c in z["classes"]]
    return (
        _to_set(z["x_train"], z["y_train"], classes, True, 255.0),
        _to_set(z["x_test"], z["y_test"], classes, True, 255.0),
    )


def read_cifar10_large(path: str | None = None, extra_path: str | None = None) -> tuple[ImageSet, ImageSet]:
    """CIFAR-10 subset plus its extra file: train ``(3000, 3, 32, 32)`` (the 2,000 of :func:`read_cifar10` first,
    then 100 more per class), test ``(1000, 3, 32, 32)`` (the 200 first, then 80 more per class).

    Raises:
        DataError: missing or unreadable file, missing arrays.
    """
    train, test = read_cifar10(path)
    z = _load_npz(_resolve(extra_path, "cifar10-extra"), ("x_train", "y_train", "x_test", "y_test"))
    more_train = _to_set(z["x_train"], z["y_train"], train.classes, True, 255.0)
    more_test = _to_set(z["x_test"], z["y_test"], train.classes, True, 255.0)
    return (
        ImageSet(torch.cat([train.x, more_train.x]), torch.cat([train.y, more_train.y]), train.classes),
        ImageSet(torch.cat([test.x, more_test.x]), torch.cat([test.y, more_test.y]), train.classes),
    )


def read_mnist(path: str | None = None, n_train: int = 2500) -> tuple[ImageSet, ImageSet]:
    """MNIST (first 3,000 test-set images): rows ``[0, n_train)`` train, the rest test; ``(N, 1, 28, 28)``.

    Raises:
        DataError: missing or unreadable file, missing arrays.
    """
    z = _load_npz(_resolve(path, "mnist"), ("x", "y"))
    classes = [str(i) for i in range(10)]
    return (
        _to_set(z["x"][:n_train], z["y"][:n_train], classes, False, 255.0),
        _to_set(z["x"][n_train:], z["y"][n_train:], classes, False, 255.0),
    )


def read_digits(n_train: int = 1500) -> tuple[ImageSet, ImageSet]:
    """scikit-learn's digits (data inside the wheel): ``(N, 1, 8, 8)``, first ``n_train`` train."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x, y = d.images.astype(np.float32), d.target
    classes = [str(i) for i in range(10)]
    return (
        _to_set(x[:n_train], y[:n_train], classes, False, 16.0),
        _to_set(x[n_train:], y[n_train:], classes, False, 16.0),
    )


def read_image_folder(
    root: str, size: int = 32, channels: int = 3, test_fraction: float = 0.2, seed: int = 0
) -> tuple[ImageSet, ImageSet]:
    """A user's folder ``root/<class>/<image>``: images resized to ``(channels, size, size)``.

    Raises:
        DataError: ``root`` missing, fewer than one class folder with images, or an unreadable, degenerate or
            extremely elongated image (file named, :func:`load_image`); what was resized or converted is logged.
    """
    base = Path(root)
    if not base.is_dir():
        raise DataError(f"{base}: no such folder (data.path; expected <root>/<class name>/<image files>)")
    classes = sorted(d.name for d in base.iterdir() if d.is_dir())
    if not classes:
        raise DataError(f"{base}: no class sub-folders (expected <root>/<class name>/<image files>)")
    xs, ys, seen = [], [], ImageConversions(str(base))
    for c, name in enumerate(classes):
        files = sorted(f for f in (base / name).iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise DataError(f"{base / name}: no image files ({', '.join(IMAGE_SUFFIXES)})")
        for f in files:
            xs.append(load_image(f, size, channels, seen))
            ys.append(c)
    seen.report()
    x, y = np.stack(xs), np.array(ys)
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for c in range(len(classes)):
        idx = np.where(y == c)[0]
        test[rng.permutation(idx)[: round(test_fraction * len(idx))]] = True
    return (_to_set(x[~test], y[~test], classes, True, 255.0), _to_set(x[test], y[test], classes, True, 255.0))


def read_images(dataset: str, path: str | None = None, size: int = 32, channels: int = 3) -> tuple[ImageSet, ImageSet]:
    """Dispatch to the reader of ``dataset`` (one of :data:`DATASETS`); ``size``/``channels`` apply to ``folder``.

    Raises:
        DataError: an unknown dataset name, or the reader's errors.
    """
    if dataset in ("cifar10", "cifar10-6000"):
        return read_cifar10(path, dataset)
    if dataset == "cifar10-large":
        return read_cifar10_large(path)
    if dataset == "mnist":
        return read_mnist(path)
    if dataset == "mnist-10k":
        return read_mnist(path or DEFAULT_PATHS["mnist-10k"], n_train=9000)
    if dataset == "digits":
        return read_digits()
    if dataset == "folder":
        if not path:
            raise DataError("data.path: dataset 'folder' needs a folder <root>/<class name>/<image files>")
        return read_image_folder(path, size=size, channels=channels)
    raise DataError(f"data.dataset: unknown dataset {dataset!r}; one of {DATASETS}")
