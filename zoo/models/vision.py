"""Small image classifiers shared by the image methods: a VGG-style CNN, a ResNet and a ViT (timm), an MLP.

Every model maps ``x (B, C, H, W)`` to logits ``(B, num_classes)`` and carries ``cam_layer_name``: the dotted name of the
module whose output Grad-CAM uses (the last convolutional feature map), or ``None`` where the architecture has no
spatial feature map (ViT, MLP); :func:`cam_layer` returns that module. A name, not a module attribute, so the
state dict holds every tensor once. All ReLUs are ``nn.ReLU`` modules and not in-place, so hook-based attribution (captum's
Guided Backprop) can see them. :func:`build_vision_model` builds any of them from plain arguments (recipes).
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

PADDINGS = ("zeros", "reflect", "circular", "replicate", "valid")
ARCHS = ("vgg", "resnet", "vit", "mlp")


class VGGNet(nn.Module):
    """VGG-style CNN: ``depth`` 3×3 convolutions (stride 1) with ReLU, max-pool 2×2 after every ``pool_every``
    convolutions (at most ``n_pools`` times, width doubling after each), global average pooling, a linear head.

    Args:
        in_channels, num_classes: input channels and classes.
        depth: number of convolutions (receptive field ``1 + 2 * depth`` before pooling is taken into account).
        width: channels of the first convolutions.
        padding_mode: ``zeros`` | ``reflect`` | ``circular`` | ``replicate`` (SAME, 1 pixel) or ``valid`` (none:
            every convolution shrinks the map by 2).
        pool_every, n_pools: pooling schedule.
        kernel_size: odd kernel size.
        batch_norm: a ``BatchNorm2d`` after every convolution (before its ReLU); off by default. BatchNorm's
            initialisation draws no random numbers, so a seeded model's convolution and head weights are the same
            with or without it, and at initialisation (eval mode: running mean 0, variance 1) it is the identity up
            to ``1/sqrt(1 + eps)``.

    Shapes: ``(B, in_channels, H, W) -> (B, num_classes)``; needs ``H, W`` large enough that a ``valid`` stack keeps
    at least one pixel.

    Raises:
        ValueError: unknown padding, even kernel, depth < 1.
    """

    def __init__(
        self,
        in_channels: int = 3,
        num_classes: int = 10,
        depth: int = 4,
        width: int = 16,
        padding_mode: str = "zeros",
        pool_every: int = 2,
        n_pools: int = 2,
        kernel_size: int = 3,
        batch_norm: bool = False,
    ):
        super().__init__()
        if padding_mode not in PADDINGS:
            raise ValueError(f"padding_mode must be one of {PADDINGS}, got {padding_mode!r}")
        if kernel_size % 2 == 0 or depth < 1:
            raise ValueError(f"need an odd kernel_size and depth >= 1, got {kernel_size}, {depth}")
        layers: list[nn.Module] = []
        c_in, c_out, pools = in_channels, width, 0
        pad = 0 if padding_mode == "valid" else kernel_size // 2
        for i in range(1, depth + 1):
            layers += [
                nn.Conv2d(
                    c_in,
                    c_out,
                    kernel_size,
                    padding=pad,
                    padding_mode="zeros" if padding_mode == "valid" else padding_mode,
                )
            ]
            layers += [nn.BatchNorm2d(c_out), nn.ReLU()] if batch_norm else [nn.ReLU()]
            c_in = c_out
            if i % pool_every == 0 and pools < n_pools and i < depth:
                layers.append(nn.MaxPool2d(2))
                pools, c_out = pools + 1, c_out * 2
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(c_in, num_classes)
        self.cam_layer_name = f"features.{len(layers) - 1}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.features(x)).flatten(1))


class MLP(nn.Module):
    """Flatten -> ``n_hidden`` × (Linear, ReLU) -> Linear. ``(B, C, H, W) -> (B, num_classes)``."""

    def __init__(self, in_features: int, num_classes: int = 10, hidden: int = 256, n_hidden: int = 2):
        super().__init__()
        dims = [in_features] + [hidden] * n_hidden
        layers: list[nn.Module] = [nn.Flatten()]
        for a, b in itertools.pairwise(dims):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(dims[-1], num_classes))
        self.cam_layer_name = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _no_inplace(model: nn.Module) -> nn.Module:
    for m in model.modules():
        if isinstance(m, nn.ReLU):
            m.inplace = False
    return model


def small_resnet(in_channels: int = 3, num_classes: int = 10, width: int = 16) -> nn.Module:
    """timm ResNet with one BasicBlock per stage (ResNet-10 layout), channels ``width × (1, 2, 4, 8)``.

    The stem (7×7 stride-2 conv + max-pool) divides the input size by 4 and each later stage by 2, so a 64×64
    input ends in a 2×2 map (``cam_layer_name`` = the last stage). Zero padding throughout (timm's).
    """
    from timm.models.resnet import BasicBlock, ResNet

    model = ResNet(
        BasicBlock,
        (1, 1, 1, 1),
        num_classes=num_classes,
        in_chans=in_channels,
        channels=tuple(width * m for m in (1, 2, 4, 8)),
        stem_width=width,
    )
    model.cam_layer_name = "layer4"
    return _no_inplace(model)


def small_vit(
    img_size: int = 64,
    in_channels: int = 3,
    num_classes: int = 10,
    patch_size: int = 8,
    embed_dim: int = 64,
    depth: int = 4,
    num_heads: int = 4,
) -> nn.Module:
    """timm VisionTransformer: non-overlapping ``patch_size`` patches, learned position embeddings, mean-pooled
    tokens (no class token). ``(B, C, img_size, img_size) -> (B, num_classes)``; no Grad-CAM layer."""
    from timm.models.vision_transformer import VisionTransformer

    model = VisionTransformer(
        img_size=img_size,
        patch_size=patch_size,
        in_chans=in_channels,
        num_classes=num_classes,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=num_heads,
        mlp_ratio=2.0,
        class_token=False,
        global_pool="avg",
    )
    model.cam_layer_name = None
    return model


def build_vision_model(arch: str, in_channels: int, num_classes: int, img_size: int, **kwargs) -> nn.Module:
    """One of :data:`ARCHS` from plain arguments.

    Args:
        arch: ``vgg`` (kwargs of :class:`VGGNet`), ``resnet`` (``width``), ``vit`` (kwargs of :func:`small_vit`) or
            ``mlp`` (``hidden``, ``n_hidden``).
        in_channels, num_classes, img_size: input channels, classes and (square) input size.

    Raises:
        ValueError: unknown ``arch`` or keyword.
    """
    if arch == "vgg":
        return VGGNet(in_channels, num_classes, **kwargs)
    if arch == "resnet":
        return small_resnet(in_channels, num_classes, **kwargs)
    if arch == "vit":
        return small_vit(img_size, in_channels, num_classes, **kwargs)
    if arch == "mlp":
        return MLP(in_channels * img_size * img_size, num_classes, **kwargs)
    raise ValueError(f"unknown arch {arch!r}; one of {ARCHS}")


def cam_layer(model: nn.Module) -> nn.Module | None:
    """The module named by ``model.cam_layer_name`` (Grad-CAM's layer), or None."""
    name = getattr(model, "cam_layer_name", None)
    return model.get_submodule(name) if name else None
