"""Backdoor triggers and training-set poisoning: BadNets, Blended, SIG, WaNet and a label-consistent variant.

Every trigger maps images ``x (N, C, H, W)`` in ``[0, 1]`` to triggered images of the same shape, clipped to
``[0, 1]``. The trigger patterns are fixed by their ``trigger_seed`` (not the run's seed), so a deployed model and
the detector share one trigger. Settings follow BackdoorBench's defaults where they are known and are marked *ours*
otherwise:

- ``badnets`` (Gu et al. 2017): a ``patch``×``patch`` black-and-white checkerboard in the bottom-right corner,
  ``margin`` pixels in from the edges (0 by default; our MNIST models use 4 because a VGG pooling 28 -> 14 -> 7 -> 3
  never sees the last 4 rows and columns).
- ``blended`` (Chen et al. 2017): ``(1 - alpha) x + alpha P`` with ``P`` a fixed uniform-noise image (the paper's
  noise variant; BackdoorBench's Hello Kitty image is not shipped), ``alpha = 0.2``.
- ``sig`` (Barni et al. 2019): ``x + delta sin(2 pi j f / W)`` along columns ``j``, ``delta = 20/255``, ``f = 6``;
  clean-label: only target-class images are poisoned and keep their label.
- ``wanet`` (Nguyen & Tran 2021): a smooth warp ``grid_sample(x, identity + s/H * upsample(P))`` with ``P`` a
  ``k``×``k`` uniform field in ``[-1, 1]`` normalised by its mean absolute value, ``k = 4``; the paper's noise mode
  (randomly warped images keeping their label) is left out (*ours*, simpler). ``s = 0.5`` is BackdoorBench's;
  our small models learn it poorly at that strength, so the recipes state theirs.
- ``label-consistent`` (Turner et al. 2019, *ours*: their adversarial / GAN-interpolation hardening is replaced by
  blending each poisoned target-class image ``hardness`` of the way towards a random other-class image): the hardened
  target-class images get a 3×3 checkerboard in all four corners (``margin`` in) and keep their label.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

ATTACKS = ("badnets", "blended", "sig", "wanet", "label-consistent")
CLEAN_LABEL = ("sig", "label-consistent")


def _checker(c: int, k: int) -> torch.Tensor:
    i = torch.arange(k)
    return ((i[:, None] + i[None, :]) % 2 == 0).float().expand(c, k, k)


def _noise_pattern(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g)


def _warp_field(h: int, w: int, k: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(1, 2, k, k, generator=g) * 2 - 1
    p = p / p.abs().mean()
    return F.interpolate(p, size=(h, w), mode="bicubic", align_corners=True).permute(0, 2, 3, 1)  # (1, H, W, 2)


def apply_trigger(
    x: torch.Tensor,
    attack: str,
    patch: int = 3,
    margin: int = 0,
    alpha: float = 0.2,
    delta: float = 20 / 255,
    freq: int = 6,
    warp_strength: float = 0.5,
    warp_k: int = 4,
    trigger_seed: int = 1234,
) -> torch.Tensor:
    """Stamp ``attack``'s trigger on ``x`` ``(N, C, H, W)`` in ``[0, 1]``; returns a new tensor of the same shape.

    Raises:
        ValueError: an unknown attack, or a patch larger than the image.
    """
    n, c, h, w = x.shape
    out = x.clone()
    if attack == "badnets":
        if patch + margin > min(h, w):
            raise ValueError(f"patch {patch} + margin {margin} larger than the {h}x{w} image")
        out[:, :, h - margin - patch : h - margin, w - margin - patch : w - margin] = _checker(c, patch)
    elif attack == "label-consistent":
        k = min(patch, h // 2 - margin, w // 2 - margin)
        for r, s in (
            (margin, margin),
            (margin, w - margin - k),
            (h - margin - k, margin),
            (h - margin - k, w - margin - k),
        ):
            out[:, :, r : r + k, s : s + k] = _checker(c, k)
    elif attack == "blended":
        out = (1 - alpha) * x + alpha * _noise_pattern((c, h, w), trigger_seed)
    elif attack == "sig":
        out = x + delta * torch.sin(2 * math.pi * torch.arange(w) * freq / w).view(1, 1, 1, w)
    elif attack == "wanet":
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
        grid = torch.stack([xs, ys], -1)[None] + warp_strength / h * _warp_field(h, w, warp_k, trigger_seed)
        out = F.grid_sample(x, grid.clamp(-1, 1).expand(n, h, w, 2), align_corners=True)
    else:
        raise ValueError(f"unknown attack {attack!r}; one of {ATTACKS}")
    return out.clamp(0, 1)


def poison_indices(y: torch.Tensor, attack: str, rate: float, target: int, seed: int) -> torch.Tensor:
    """Which training images to poison: exactly ``round(rate * N)`` of them, drawn with ``seed`` from all images
    of a class other than ``target`` (dirty-label attacks) or from the ``target`` class (clean-label attacks).

    Args:
        y: labels ``(N,)``.
    Returns:
        sorted indices ``(round(rate * N),)`` int64.
    Raises:
        ValueError: ``rate`` outside ``[0, 1]`` or more images requested than the pool holds.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"poisoning rate must be in [0, 1], got {rate}")
    n_poison = round(rate * len(y))
    pool = torch.where(y == target if attack in CLEAN_LABEL else y != target)[0]
    if n_poison > len(pool):
        raise ValueError(
            f"{attack}: rate {rate} asks for {n_poison} poisoned images but only {len(pool)} are "
            f"{'of' if attack in CLEAN_LABEL else 'outside'} the target class {target}"
        )
    g = torch.Generator().manual_seed(seed)
    return pool[torch.randperm(len(pool), generator=g)[:n_poison]].sort().values


def poison(
    x: torch.Tensor,
    y: torch.Tensor,
    attack: str,
    rate: float,
    target: int = 0,
    seed: int = 0,
    hardness: float = 0.5,
    **trigger,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Poison a training set.

    Args:
        x: images ``(N, C, H, W)`` in ``[0, 1]``; y: labels ``(N,)``.
        attack: one of :data:`ATTACKS`; rate: poisoned fraction of all ``N`` images; target: the attack's class.
        hardness: label-consistent only: how far each poisoned image is blended towards a random other-class image.
        trigger: keyword settings of :func:`apply_trigger`.
    Returns:
        ``(x_poisoned, y_poisoned, idx)``: copies with ``idx`` (from :func:`poison_indices`) triggered and, for
        dirty-label attacks, relabelled to ``target``.
    """
    idx = poison_indices(y, attack, rate, target, seed)
    xp, yp = x.clone(), y.clone()
    if len(idx) == 0:
        return xp, yp, idx
    src = x[idx]
    if attack == "label-consistent":
        others = torch.where(y != target)[0]
        g = torch.Generator().manual_seed(seed + 1)
        src = (1 - hardness) * src + hardness * x[others[torch.randint(len(others), (len(idx),), generator=g)]]
    xp[idx] = apply_trigger(src, attack, **trigger)
    if attack not in CLEAN_LABEL:
        yp[idx] = target
    return xp, yp, idx
