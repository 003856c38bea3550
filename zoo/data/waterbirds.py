"""Reader of the Waterbirds folder layout (Sagawa et al., 2020): ``ROOT/metadata.csv`` + image files.

``metadata.csv`` needs the columns ``img_filename`` (path relative to ROOT), ``y`` (0/1 class), ``place`` (0/1
spurious attribute) and ``split`` (0 train, 1 val, 2 test); an optional ``caption`` column holds a training caption
(our generated ``waterbirds-cifar`` split writes one; real Waterbirds has none). Other columns (``img_id``,
``place_filename`` in the real file) are ignored. Group ``g = 2 y + place`` (Waterbirds' convention: groups 1 and 2
are the bias-conflicting ones, landbird on water and waterbird on land).

Everything is checked before any image is decoded: a bad value fails naming file, line and column, a missing image
its path, a group absent from the validation split its id.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from zoo.core.data import DataError, read_csv_rows

SPLITS = {"train": 0, "val": 1, "test": 2}
COLUMNS = ("img_filename", "y", "place", "split")


@dataclass
class GroupImageSet:
    """Images of one split with class, place and group.

    Attributes:
        x: uint8 ``(N, 3, S, S)``.
        y, place, group: int64 ``(N,)``; ``group = 2 y + place``.
        files: image paths relative to the root.
        captions: one caption per image ('' where the metadata has none).
    """

    x: torch.Tensor
    y: torch.Tensor
    place: torch.Tensor
    files: list[str]
    captions: list[str]

    @property
    def group(self) -> torch.Tensor:
        return 2 * self.y + self.place

    def __len__(self) -> int:
        return len(self.y)


def read_metadata(root: str | Path) -> list[dict]:
    """Validated rows of ``ROOT/metadata.csv``: ``{img_filename, y, place, split, caption, line}`` (ints parsed).

    Raises:
        DataError: missing file/column (``path:1``), a bad value (``path:line: column 'y' ...``), a missing image
            (its path), or a group 0..3 with no validation image (``group g``).
    """
    root = Path(root)
    path = root / "metadata.csv"
    _, raw = read_csv_rows(path, required=COLUMNS)
    rows = []
    for line, r in enumerate(raw, 2):
        row = {"img_filename": r["img_filename"].strip(), "caption": r.get("caption", "").strip(), "line": line}
        for col, allowed in (("y", (0, 1)), ("place", (0, 1)), ("split", (0, 1, 2))):
            try:
                row[col] = int(r[col])
            except ValueError:
                raise DataError(f"{path}:{line}: column {col!r}: {r[col]!r} is not an integer") from None
            if row[col] not in allowed:
                raise DataError(f"{path}:{line}: column {col!r}: {row[col]} not in {allowed}")
        if not row["img_filename"]:
            raise DataError(f"{path}:{line}: column 'img_filename' is empty")
        rows.append(row)
    for row in rows:
        if not (root / row["img_filename"]).is_file():
            raise DataError(f"{root / row['img_filename']}: no such image (metadata.csv line {row['line']})")
    val_groups = {2 * r["y"] + r["place"] for r in rows if r["split"] == SPLITS["val"]}
    for g in range(4):
        if g not in val_groups:
            raise DataError(f"{path}: group {g} (y={g // 2}, place={g % 2}) has no image in the val split")
    return rows


def read_waterbirds(
    root: str | Path, size: int = 48, splits: tuple[str, ...] = ("train", "val", "test")
) -> dict[str, GroupImageSet]:
    """Every requested split of a Waterbirds-layout folder, images resized to ``size``×``size`` RGB (bilinear).

    Raises:
        DataError: see :func:`read_metadata`; an unreadable image (named).
    """
    from PIL import Image

    root = Path(root)
    rows = read_metadata(root)
    out = {}
    for name in splits:
        part = [r for r in rows if r["split"] == SPLITS[name]]
        xs = np.zeros((len(part), size, size, 3), dtype=np.uint8)
        for i, r in enumerate(part):
            try:
                with Image.open(root / r["img_filename"]) as im:
                    im = im.convert("RGB")
                    xs[i] = np.asarray(im if im.size == (size, size) else im.resize((size, size), Image.BILINEAR))
            except (OSError, ValueError) as e:
                raise DataError(f"{root / r['img_filename']}: not a readable image ({e})") from None
        y, place = (torch.tensor([r[k] for r in part], dtype=torch.long) for k in ("y", "place"))
        out[name] = GroupImageSet(
            torch.from_numpy(xs).permute(0, 3, 1, 2).contiguous(),
            y,
            place,
            [r["img_filename"] for r in part],
            [r["caption"] for r in part],
        )
    return out
