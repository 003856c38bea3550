"""Theoretical path-count maps of a convolutional stack (the mechanism of notes §2; the formalisation is ours).

The gradient ``∂f/∂x_p`` of ``f(x) = wᵀ GAP(φ_L ∘ … ∘ φ_1(x))`` is a sum over paths from pixel ``p`` to the output.
With i.i.d. zero-mean weights the expected squared gradient grows with the number of such paths. The count follows
``N_{l+1} = N_l ∗ 1_{k×k}`` through every convolution, padded positions contributing nothing under zero padding,
folding back onto the border under reflect padding and wrapping around under circular padding (where every pixel
then has the same count). We compute it exactly as the input gradient of the *all-ones linear surrogate*: every
convolution becomes a one-channel convolution with a ``k × k`` kernel of ones (same stride, padding, padding mode
and dilation), ReLUs become the identity, pooling becomes window sums, and GAP a sum. Max-pooling routes one of its
``k²`` inputs at a time; counting all of them makes the map proportional to its expectation under random routing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _layers(model: nn.Module) -> list[nn.Module]:
    feats = getattr(model, "features", model)
    if not isinstance(feats, nn.Sequential):
        raise TypeError(f"path counts need an nn.Sequential of conv/activation/pool layers, got {type(feats).__name__}")
    return list(feats)


def path_count_map(model: nn.Module, hw: tuple[int, int]) -> torch.Tensor:
    """Number of input-to-output paths through ``model.features`` (or ``model`` itself) for each input pixel.

    Args:
        model: a :class:`zoo.models.vision.VGGNet` or an ``nn.Sequential`` of ``Conv2d``, ``ReLU``/``Identity``,
            ``BatchNorm2d`` (a per-channel affine map: counted as the identity), ``MaxPool2d``/``AvgPool2d``; global
            average pooling is implied at the end.
        hw: input height and width.
    Returns:
        ``(H, W)`` float64 counts (integers for stride-1 stacks).
    Raises:
        TypeError: a layer kind the surrogate does not cover (named).
    """
    x = torch.ones(1, 1, *hw, dtype=torch.float64, requires_grad=True)
    h = x
    for layer in _layers(model):
        if isinstance(layer, nn.Conv2d):
            k = layer.kernel_size
            w = torch.ones(1, 1, *k, dtype=torch.float64)
            if layer.padding_mode != "zeros" and any(layer.padding):
                ph, pw = layer.padding
                h = F.pad(h, (pw, pw, ph, ph), mode=layer.padding_mode)
                h = F.conv2d(h, w, stride=layer.stride, dilation=layer.dilation)
            else:
                h = F.conv2d(h, w, stride=layer.stride, padding=layer.padding, dilation=layer.dilation)
        elif isinstance(layer, (nn.MaxPool2d, nn.AvgPool2d)):
            k = layer.kernel_size if isinstance(layer.kernel_size, tuple) else (layer.kernel_size,) * 2
            h = F.avg_pool2d(h, k, stride=layer.stride, padding=layer.padding) * (k[0] * k[1])
        elif isinstance(layer, (nn.ReLU, nn.Identity, nn.GELU, nn.Tanh, nn.BatchNorm2d)):
            continue
        else:
            raise TypeError(f"path_count_map: no path-count rule for layer {type(layer).__name__}")
    h.sum().backward()
    return x.grad[0, 0].detach()


def corner_centre_ratio(m: torch.Tensor, k: int = 8) -> float:
    """Mean of ``m (H, W)`` over the four ``k × k`` corner patches divided by its mean over the central ``k × k``
    patch; 1 for a flat map, < 1 for a centre-heavy one."""
    H, W = m.shape
    m = m.double()
    corners = torch.stack([m[:k, :k], m[:k, -k:], m[-k:, :k], m[-k:, -k:]]).mean()
    r0, c0 = (H - k) // 2, (W - k) // 2
    return float(corners / m[r0 : r0 + k, c0 : c0 + k].mean())


def map_correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson correlation of two ``(H, W)`` maps (NaN when either is flat)."""
    a, b = a.double().flatten(), b.double().flatten()
    a, b = a - a.mean(), b - b.mean()
    den = a.norm() * b.norm()
    return float(a @ b / den) if den > 0 else float("nan")
