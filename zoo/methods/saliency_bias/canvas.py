"""The corner-shift benchmark: each object pasted into the four corners and the centre of a larger canvas.

Protocol (ours, after the notes' §2 reconstruction; the paper's text is not public): an object image of size
``h × w`` (already normalised per channel, so 0 is the dataset mean) is pasted flush into a corner, or centred, of an
``H × W`` canvas (``H = factor * h``). The background is the dataset mean (``mean``), Gaussian noise (``noise``) or a
different, Gaussian-blurred image of the same set upsampled to the canvas (``blur``). The object box
``(y0, x0, y1, x1)`` (end-exclusive, pixels) is recorded. Random-input controls replace the whole canvas by i.i.d.
N(0, 1) noise and keep the boxes, so a map's pull towards the centre can be measured without any object.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torchvision.transforms.functional import gaussian_blur

POSITIONS = ("top_left", "top_right", "bottom_left", "bottom_right", "centre")
CORNERS = POSITIONS[:4]
BACKGROUNDS = ("mean", "noise", "blur")


def box_for(position: str, obj_hw: tuple[int, int], canvas_hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """The object box ``(y0, x0, y1, x1)`` (end-exclusive) of ``position`` in :data:`POSITIONS`.

    Raises:
        ValueError: unknown position, or an object larger than the canvas.
    """
    (h, w), (H, W) = obj_hw, canvas_hw
    if h > H or w > W:
        raise ValueError(f"object {h}x{w} does not fit a {H}x{W} canvas")
    corners = {
        "top_left": (0, 0),
        "top_right": (0, W - w),
        "bottom_left": (H - h, 0),
        "bottom_right": (H - h, W - w),
        "centre": ((H - h) // 2, (W - w) // 2),
    }
    if position not in corners:
        raise ValueError(f"unknown position {position!r}; one of {POSITIONS}")
    y0, x0 = corners[position]
    return y0, x0, y0 + h, x0 + w


def background(
    kind: str,
    n: int,
    shape: tuple[int, int, int],
    pool: torch.Tensor | None = None,
    noise_sd: float = 0.5,
    blur_sigma: float = 3.0,
    generator: torch.Generator | None = None,
    exclude: torch.Tensor | None = None,
) -> torch.Tensor:
    """``n`` backgrounds ``(n, C, H, W)`` in normalised units.

    Args:
        kind: ``mean`` (zeros), ``noise`` (N(0, noise_sd²)) or ``blur`` (an image of ``pool (M, C, h, w)`` chosen at
            random, never the one at index ``exclude[i]``, bilinearly upsampled to ``H × W`` and blurred with a
            Gaussian of ``blur_sigma`` pixels).
    Raises:
        ValueError: unknown kind, or ``blur`` without a pool of at least two images.
    """
    C, H, W = shape
    if kind == "mean":
        return torch.zeros(n, C, H, W)
    if kind == "noise":
        return noise_sd * torch.randn(n, C, H, W, generator=generator)
    if kind == "blur":
        if pool is None or len(pool) < 2:
            raise ValueError("background 'blur' needs a pool of at least two unrelated images")
        idx = torch.randint(0, len(pool) - 1, (n,), generator=generator)
        if exclude is not None:
            idx = idx + (idx >= exclude).long()  # skip the object's own image
        up = F.interpolate(pool[idx], size=(H, W), mode="bilinear", align_corners=False)
        k = 2 * min(round(3 * blur_sigma), min(H, W) - 1) + 1  # reflect padding must fit the image
        return gaussian_blur(up, [k, k], [blur_sigma, blur_sigma])
    raise ValueError(f"unknown background {kind!r}; one of {BACKGROUNDS}")


def paste(objects: torch.Tensor, boxes: torch.Tensor, canvases: torch.Tensor) -> torch.Tensor:
    """Write ``objects (N, C, h, w)`` into ``canvases (N, C, H, W)`` at ``boxes (N, 4)``; returns the canvases."""
    for i, (y0, x0, y1, x1) in enumerate(boxes.tolist()):
        canvases[i, :, y0:y1, x0:x1] = objects[i]
    return canvases


@dataclass
class CornerShiftSet:
    """A benchmark set: ``x (N, C, H, W)``, ``y (N,)``, ``boxes (N, 4)`` int, ``position (N,)`` index into
    :data:`POSITIONS`, ``source (N,)`` index of the object image; ``random_input`` marks the noise controls."""

    x: torch.Tensor
    y: torch.Tensor
    boxes: torch.Tensor
    position: torch.Tensor
    source: torch.Tensor
    random_input: bool = False

    def __len__(self) -> int:
        return len(self.y)


def corner_shift_set(
    objects: torch.Tensor,
    labels: torch.Tensor,
    kind: str = "mean",
    factor: int = 2,
    positions: tuple[str, ...] = POSITIONS,
    seed: int = 0,
    noise_sd: float = 0.5,
    pool: torch.Tensor | None = None,
) -> CornerShiftSet:
    """Every object at every position: ``len(objects) * len(positions)`` canvases, object-major.

    Args:
        objects: ``(N, C, h, w)`` normalised object images; labels ``(N,)``.
        kind, noise_sd: background (:func:`background`); ``blur`` draws from ``pool`` (default ``objects``), whose
            first ``N`` entries must be ``objects`` so an object never lies on its own image.
        factor: canvas side / object side.
    """
    n, C, h, w = objects.shape
    H, W = factor * h, factor * w
    g = torch.Generator().manual_seed(seed)
    pos = torch.arange(len(positions)).repeat(n)
    src = torch.arange(n).repeat_interleave(len(positions))
    boxes = torch.tensor([box_for(positions[p], (h, w), (H, W)) for p in pos.tolist()])
    bg = background(kind, len(src), (C, H, W), objects if pool is None else pool, noise_sd, generator=g, exclude=src)
    x = paste(objects[src], boxes, bg)
    pos_index = torch.tensor([POSITIONS.index(positions[p]) for p in pos.tolist()])
    return CornerShiftSet(x, labels[src].clone(), boxes, pos_index, src)


def random_input_set(like: CornerShiftSet, seed: int = 0) -> CornerShiftSet:
    """The random-input control of ``like``: i.i.d. N(0, 1) canvases of the same shape with the same boxes,
    positions and labels (the box marks where the object would have been)."""
    g = torch.Generator().manual_seed(10_007 + seed)
    return CornerShiftSet(
        torch.randn(like.x.shape, generator=g),
        like.y.clone(),
        like.boxes.clone(),
        like.position.clone(),
        like.source.clone(),
        random_input=True,
    )


class CornerShiftTrainSet(torch.utils.data.Dataset):
    """Training canvases drawn afresh at every access: a uniformly random position of :data:`POSITIONS` and a
    fresh background (global torch RNG, so ``zoo.core.data.set_seed`` makes an epoch reproducible).

    Items: ``(x (C, H, W), y ())``.
    """

    def __init__(
        self, objects: torch.Tensor, labels: torch.Tensor, kind: str = "mean", factor: int = 2, noise_sd: float = 0.5
    ):
        self.objects, self.labels, self.kind, self.noise_sd = objects, labels, kind, noise_sd
        _, C, h, w = objects.shape
        self.shape, self.obj_hw = (C, factor * h, factor * w), (h, w)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        p = POSITIONS[int(torch.randint(0, len(POSITIONS), ()))]
        box = torch.tensor([box_for(p, self.obj_hw, self.shape[1:])])
        bg = background(self.kind, 1, self.shape, self.objects, self.noise_sd, exclude=torch.tensor([i]))
        return paste(self.objects[i : i + 1], box, bg)[0], self.labels[i]
