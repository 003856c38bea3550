"""The frozen semantic encoder of the CPU reproduction (*ours*; a stand-in for DINOv2-Giant): a timm ResNet
(``zoo.models.vision.small_resnet``) trained on the shipped CIFAR-10 images to predict class and colour word; its
pooled pre-logit features ``(B, 8 * width)`` are what the masker hashes and what the FID (so labelled) is computed on.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.methods.sembind.captions import COLOURS
from zoo.models.vision import small_resnet

N_CLASSES = 10


class SemanticEncoder(nn.Module):
    """ResNet with a ``10 + len(COLOURS)`` head: class logits then colour logits.

    Args:
        width: ResNet stem width (features are ``8 * width`` wide).
    """

    def __init__(self, width: int = 16):
        super().__init__()
        self.net = small_resnet(3, N_CLASSES + len(COLOURS), width=width)
        self.dim = 8 * width

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled features ``(B, dim)`` of images ``x (B, 3, S, S)`` in ``[0, 1]``."""
        return self.net.forward_head(self.net.forward_features(x * 2 - 1), pre_logits=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, 10 + 7)``."""
        return self.net.forward_head(self.net.forward_features(x * 2 - 1))

    def loss(self, x: torch.Tensor, y: torch.Tensor, colour: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """Class CE (rows with ``y >= 0``) + colour CE, and the accuracies."""
        logits = self(x)
        known = y >= 0
        loss = F.cross_entropy(logits[:, N_CLASSES:], colour)
        acc = {"colour_acc": (logits[:, N_CLASSES:].argmax(1) == colour).float().mean()}
        if known.any():
            loss = loss + F.cross_entropy(logits[known, :N_CLASSES], y[known])
            acc["class_acc"] = (logits[known, :N_CLASSES].argmax(1) == y[known]).float().mean()
        return loss, acc
