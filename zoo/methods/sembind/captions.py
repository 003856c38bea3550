"""Captions made per image for CIFAR-10 (*ours*; the paper uses COCO captions): class word + colour word of the
centre's hue histogram, with ``dark``/``bright`` from its mean value; five templates and class synonyms give
semantically matched prompts (same class, colour and brightness, different words).
"""

from __future__ import annotations

import random

import torch

COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "grey")
"""Colour words; the first six are hue bins (centres 0, 30, 60, 120, 220, 290 degrees), ``grey`` = unsaturated."""
HUE_CENTRES = torch.tensor([0.0, 30.0, 60.0, 120.0, 220.0, 290.0])
TEMPLATES = (
    "a photo of a {adj}{noun}",
    "a {adj}{noun}",
    "an image of a {adj}{noun}",
    "a picture showing a {adj}{noun}",
    "a small photo of the {adj}{noun}",
)
SYNONYMS = {
    "airplane": ("airplane", "plane", "aircraft"),
    "automobile": ("car", "automobile", "sedan"),
    "bird": ("bird", "songbird", "small bird"),
    "cat": ("cat", "kitten", "house cat"),
    "deer": ("deer", "stag", "doe"),
    "dog": ("dog", "puppy", "hound"),
    "frog": ("frog", "toad", "tree frog"),
    "horse": ("horse", "pony", "stallion"),
    "ship": ("ship", "boat", "vessel"),
    "truck": ("truck", "lorry", "pickup truck"),
}


def _hsv(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hue in degrees, saturation and value of RGB ``(N, 3, H, W)`` in ``[0, 1]``, each ``(N, H, W)``."""
    mx, arg = x.max(1)
    mn = x.min(1).values
    d = (mx - mn).clamp_min(1e-8)
    r, g, b = x.unbind(1)
    h = torch.where(arg == 0, ((g - b) / d) % 6, torch.where(arg == 1, (b - r) / d + 2, (r - g) / d + 4)) * 60
    return h, (mx - mn) / mx.clamp_min(1e-8), mx


def colour_attributes(x: torch.Tensor, min_saturated: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """Colour index into :data:`COLOURS` and brightness (0 dark, 1 plain, 2 bright) of each image's centre half.

    Args:
        x: RGB ``(N, 3, H, W)`` in ``[0, 1]``.
        min_saturated: fraction of centre pixels with saturation > 0.3 and value > 0.2 below which it is ``grey``.

    Returns:
        ``(colour (N,), brightness (N,))`` int64; the colour is the mode of the saturated pixels' hue bins.
    """
    h0, w0 = x.shape[-2] // 4, x.shape[-1] // 4
    c = x[..., h0 : x.shape[-2] - h0, w0 : x.shape[-1] - w0]
    hue, sat, val = _hsv(c)
    sel = (sat > 0.3) & (val > 0.2)
    dist = (hue.unsqueeze(-1) - HUE_CENTRES).abs()
    bins = torch.minimum(dist, 360 - dist).argmin(-1)  # (N, h, w)
    counts = torch.stack([((bins == k) & sel).flatten(1).sum(1) for k in range(len(HUE_CENTRES))], 1)
    colour = counts.argmax(1)
    colour[sel.flatten(1).float().mean(1) < min_saturated] = COLOURS.index("grey")
    v = val.flatten(1).mean(1)
    brightness = torch.where(v < 0.3, 0, torch.where(v > 0.7, 2, 1))
    return colour, brightness


def caption(cls: str, colour: int, brightness: int, template: int = 0, synonym: int = 0) -> str:
    """``TEMPLATES[template]`` filled with ``[dark |bright ]<colour> <synonym of cls>`` (``grey`` for class names
    outside CIFAR-10 uses the name itself)."""
    words = SYNONYMS.get(cls, (cls,))
    adj = ("dark ", "", "bright ")[brightness] + COLOURS[colour] + " "
    return TEMPLATES[template % len(TEMPLATES)].format(adj=adj, noun=words[synonym % len(words)])


def make_captions(x: torch.Tensor, y: torch.Tensor, classes: list[str], seed: int = 0) -> list[str]:
    """One caption per image ``x (N, 3, H, W)`` with labels ``y (N,)``: template and synonym drawn with ``seed``."""
    colour, bright = colour_attributes(x)
    rng = random.Random(seed)
    return [
        caption(classes[int(c)], int(k), int(b), rng.randrange(len(TEMPLATES)), rng.randrange(3))
        for c, k, b in zip(y, colour, bright)
    ]
