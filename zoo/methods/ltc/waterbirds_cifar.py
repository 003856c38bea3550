"""``waterbirds-cifar`` (ours, generated from real images): a Waterbirds-style split of real CIFAR-10 objects pasted
on two real photographs that scikit-learn ships.

Recipe (issue 19, built exactly):

- classes: ``y = 1`` vehicle {airplane, automobile, ship, truck}, ``y = 0`` animal {cat, deer, dog, horse}, from
  ``data/cifar10-subset/cifar10_jpeg_subset.npz`` (500 train / 100 test images per class);
- splits: each class's train images are split 80/20 (seeded permutation) into ``pretrain`` (split 0, 3,200 images)
  and ``val`` (split 1, 800); ``test`` (split 2) = the 800 test images of the 8 classes;
- background (48×48): a seeded square crop, side uniform in [96, 192] px, of ``china.jpg`` (place 1, temple) or
  ``flower.jpg`` (place 0), resized bilinearly;
- object: the 32×32 image under a feathered disc ``α = clip((14 − d)/4, 0, 1)``, ``d`` the distance of a pixel
  centre to the image centre (15.5, 15.5), pasted at a seeded offset in [0, 16]²;
- place: in ``pretrain`` exactly ``round(0.95 n)`` images of each class are on ``place = y`` (an exact 0.95 rate;
  which ones is seeded); in ``val`` and ``test`` exactly half of each class is on each place;
- captions (pretrain): one of 8 class templates, 30 % (seeded) ending "in front of a temple" / "in front of flowers".

``python -m zoo.methods.ltc.waterbirds_cifar --out DIR`` writes ``DIR/images/<split>/<index>_<class>.png`` and
``DIR/metadata.csv`` (``img_filename,y,place,split,caption``), readable by :func:`zoo.data.waterbirds.read_waterbirds`.
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoo.data.images import read_cifar10

VEHICLES = ("airplane", "automobile", "ship", "truck")
ANIMALS = ("cat", "deer", "dog", "horse")
PHOTOS = {1: "china.jpg", 0: "flower.jpg"}
PLACE_WORDS = {1: "in front of a temple", 0: "in front of flowers"}
TEMPLATES = (
    "a photo of a {}",
    "a picture of a {}",
    "an image of a {}",
    "a photo of the {}",
    "a small {}",
    "a close-up photo of a {}",
    "a blurry photo of a {}",
    "a good photo of a {}",
)
SIDE, OBJ, CROP = 48, 32, (96, 192)


@dataclass
class WaterbirdsCifar:
    """The built split: ``x`` uint8 ``(N, 48, 48, 3)``; ``y, place, split, cls`` int64 ``(N,)`` (``cls`` the CIFAR-10
    label); ``captions`` (pretrain only, '' elsewhere)."""

    x: np.ndarray
    y: np.ndarray
    place: np.ndarray
    split: np.ndarray
    cls: np.ndarray
    captions: list[str]
    classes: list[str]


def feathered_disc(side: int = OBJ, radius: float = 14.0, feather: float = 4.0) -> np.ndarray:
    """``α (side, side)`` = ``clip((radius − d)/feather, 0, 1)``, ``d`` the distance to the centre."""
    c = (side - 1) / 2
    yy, xx = np.mgrid[:side, :side]
    return np.clip((radius - np.hypot(yy - c, xx - c)) / feather, 0.0, 1.0)


def background(photo: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A seeded square crop (side uniform in [96, 192]) of ``photo (H, W, 3)`` resized to 48×48: uint8."""
    from PIL import Image

    s = int(rng.integers(CROP[0], CROP[1] + 1))
    top, left = int(rng.integers(0, photo.shape[0] - s + 1)), int(rng.integers(0, photo.shape[1] - s + 1))
    crop = Image.fromarray(photo[top : top + s, left : left + s])
    return np.asarray(crop.resize((SIDE, SIDE), Image.BILINEAR))


def composite(obj: np.ndarray, bg: np.ndarray, offset: tuple[int, int], alpha: np.ndarray) -> np.ndarray:
    """``obj (32, 32, 3)`` over ``bg (48, 48, 3)`` at ``offset = (row, col)`` with ``alpha``: uint8 (rounded)."""
    out = bg.astype(np.float64)
    r, c = offset
    a = alpha[..., None]
    out[r : r + OBJ, c : c + OBJ] = a * obj + (1 - a) * out[r : r + OBJ, c : c + OBJ]
    return np.rint(out).astype(np.uint8)


def assign_places(
    y: np.ndarray, cls: np.ndarray, split: np.ndarray, rate: float, rng: np.random.Generator
) -> np.ndarray:
    """Per CIFAR class: in split 0 exactly ``round(rate n)`` images get ``place = y`` (seeded choice); in splits 1
    and 2 exactly half (the first ``n // 2`` of a seeded permutation) get place 0, the rest place 1."""
    place = np.zeros_like(y)
    for s in (0, 1, 2):
        for c in np.unique(cls):
            idx = np.where((cls == c) & (split == s))[0]
            perm = rng.permutation(idx)
            if s == 0:
                n_major = round(rate * len(idx))
                place[perm[:n_major]] = y[perm[:n_major]]
                place[perm[n_major:]] = 1 - y[perm[n_major:]]
            else:
                place[perm[len(idx) // 2 :]] = 1
    return place


def build(seed: int = 0, rate: float = 0.95, caption_place: float = 0.3, path: str | None = None) -> WaterbirdsCifar:
    """Build ``waterbirds-cifar`` in memory (deterministic for a seed; see the module docstring).

    Args:
        seed: seed of every random choice (split, places, crops, offsets, captions).
        rate: fraction of pretrain images whose place equals their class (0.95; 0.99 for the stronger bias).
        caption_place: fraction of pretrain captions naming the place.
        path: the CIFAR-10 file (default the shipped 6,000-image subset).
    """
    from sklearn.datasets import load_sample_image

    train, test = read_cifar10(path, "cifar10-6000")
    names = list(train.classes)
    keep = [names.index(c) for c in VEHICLES + ANIMALS]
    rng = np.random.default_rng(seed)
    xs, cls, split = [], [], []
    for c in keep:  # 80/20 per class, then the class's test images
        idx = np.where(train.y.numpy() == c)[0]
        perm = rng.permutation(idx)
        n_pre = round(0.8 * len(idx))
        for part, s in ((np.sort(perm[:n_pre]), 0), (np.sort(perm[n_pre:]), 1)):
            xs.append(train.x[part]), cls.append(np.full(len(part), c)), split.append(np.full(len(part), s))
        tidx = np.where(test.y.numpy() == c)[0]
        xs.append(test.x[tidx]), cls.append(np.full(len(tidx), c)), split.append(np.full(len(tidx), 2))
    objs = (np.concatenate([x.numpy() for x in xs]).transpose(0, 2, 3, 1) * 255).round().astype(np.uint8)
    cls, split = np.concatenate(cls), np.concatenate(split)
    y = np.isin(cls, [names.index(c) for c in VEHICLES]).astype(np.int64)
    place = assign_places(y, cls, split, rate, rng)
    photos = {p: load_sample_image(f) for p, f in PHOTOS.items()}
    alpha = feathered_disc()
    x = np.zeros((len(y), SIDE, SIDE, 3), dtype=np.uint8)
    captions = [""] * len(y)
    for i in range(len(y)):
        bg = background(photos[int(place[i])], rng)
        offset = (int(rng.integers(0, SIDE - OBJ + 1)), int(rng.integers(0, SIDE - OBJ + 1)))
        x[i] = composite(objs[i], bg, offset, alpha)
        template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        with_place = rng.random() < caption_place
        if split[i] == 0:
            text = template.format(names[cls[i]])
            captions[i] = f"{text} {PLACE_WORDS[int(place[i])]}" if with_place else text
    return WaterbirdsCifar(x, y, place.astype(np.int64), split.astype(np.int64), cls.astype(np.int64), captions, names)


def write(data: WaterbirdsCifar, out: str | Path) -> Path:
    """Write PNGs and ``metadata.csv`` (Waterbirds layout plus ``caption``) under ``out``; returns the CSV path."""
    from PIL import Image

    out = Path(out)
    split_names = {0: "pretrain", 1: "val", 2: "test"}
    rows = []
    for i in range(len(data.y)):
        rel = f"images/{split_names[int(data.split[i])]}/{i:05d}_{data.classes[data.cls[i]]}.png"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(data.x[i]).save(out / rel)
        rows.append([rel, int(data.y[i]), int(data.place[i]), int(data.split[i]), data.captions[i]])
    meta = out / "metadata.csv"
    with open(meta, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["img_filename", "y", "place", "split", "caption"])
        w.writerows(rows)
    return meta


def ensure(out: str | Path, seed: int = 0, rate: float = 0.95) -> Path:
    """Build and write the split into ``out`` unless ``out/metadata.csv`` exists; returns ``out``."""
    out = Path(out)
    if not (out / "metadata.csv").is_file():
        write(build(seed, rate), out)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (PNGs + metadata.csv)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rate", type=float, default=0.95, help="pretrain rate of place = y")
    a = ap.parse_args(argv)
    print(write(build(a.seed, a.rate), a.out))


if __name__ == "__main__":
    main()
