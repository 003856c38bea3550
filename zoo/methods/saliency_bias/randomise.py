"""Adebayo et al. (2018) model-parameter randomisation: cascading (top layer first) and full re-initialisation.

A *layer* is a module that owns parameters directly (a convolution, a linear layer, a norm, or the model root for
free parameters such as a ViT's position embedding), in registration order, which is the forward order for our
models (root first, as its free parameters sit at the input). Re-initialisation copies the layer's own parameters
and buffers from ``fresh``: a freshly initialised model of the same architecture (another seed), so every layer is
re-drawn from the model's own initialiser.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


def parameter_layers(model: nn.Module) -> list[str]:
    """Names of the modules that own parameters directly, input side first (``""`` is the root)."""
    return [name for name, m in model.named_modules() if any(True for _ in m.parameters(recurse=False))]


def cascading_randomisation(model: nn.Module, fresh: nn.Module, n_top: int) -> nn.Module:
    """A copy of ``model`` whose top ``n_top`` layers (output side) are replaced by ``fresh``'s.

    ``n_top = 0`` returns an unchanged copy; ``n_top >= len(parameter_layers(model))`` gives ``fresh``'s weights
    everywhere (full randomisation). Raises ValueError when the two models' layers differ.
    """
    layers = parameter_layers(model)
    if layers != parameter_layers(fresh):
        raise ValueError("cascading_randomisation: model and fresh have different layers")
    out = copy.deepcopy(model)
    chosen = layers[len(layers) - min(n_top, len(layers)) :] if n_top > 0 else []
    with torch.no_grad():
        for name in chosen:
            dst, src = out.get_submodule(name), fresh.get_submodule(name)
            for (_k, p), (_, q) in zip(dst.named_parameters(recurse=False), src.named_parameters(recurse=False)):
                p.copy_(q)
            for (_k, b), (_, c) in zip(dst.named_buffers(recurse=False), src.named_buffers(recurse=False)):
                b.copy_(c)
    return out
