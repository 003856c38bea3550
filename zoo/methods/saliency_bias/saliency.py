"""Saliency maps through captum: Gradient, Gradient×Input, Integrated Gradients, SmoothGrad, Grad-CAM, Guided Backprop.

Every method returns a non-negative pixel map ``(N, H, W)``: the attribution's absolute value summed over input
channels (Grad-CAM: the ReLU'd class activation map of ``zoo.models.vision.cam_layer(model)``, bilinearly upsampled to
the input). Inputs are in normalised units, so the Integrated Gradients baseline ``0`` is the dataset mean.
Guided Backprop is included as the known failure case of Adebayo et al. (2018); it only changes ReLU modules, so on
a ViT (GELU) it equals the plain gradient.
"""

from __future__ import annotations

import torch
from torch import nn

from zoo.models.vision import cam_layer

METHODS = ("gradient", "gradient_x_input", "integrated_gradients", "smoothgrad", "grad_cam", "guided_backprop")


def supports(model: nn.Module, method: str) -> bool:
    """Whether ``method`` is defined for ``model`` (Grad-CAM needs a convolutional feature map)."""
    return method != "grad_cam" or cam_layer(model) is not None


def attributor(model: nn.Module, method: str, ig_steps: int = 16, sg_samples: int = 8, sg_sd: float = 0.5):
    """A function ``(x (N, C, H, W), target (N,)) -> attribution`` of captum for ``method``.

    Args:
        ig_steps: Riemann steps of Integrated Gradients (Sundararajan et al. 2017, Eq. 3).
        sg_samples, sg_sd: SmoothGrad's noise samples and their standard deviation in normalised units
            (Smilkov et al. 2017).
    Raises:
        ValueError: an unknown method, or Grad-CAM on a model without a convolutional layer.
    """
    from captum.attr import (
        GuidedBackprop,
        InputXGradient,
        IntegratedGradients,
        LayerAttribution,
        LayerGradCam,
        NoiseTunnel,
        Saliency,
    )

    if method == "gradient":
        sal = Saliency(model)
        return lambda x, t: sal.attribute(x, target=t, abs=False)
    if method == "gradient_x_input":
        ixg = InputXGradient(model)
        return lambda x, t: ixg.attribute(x, target=t)
    if method == "integrated_gradients":
        ig = IntegratedGradients(model)
        return lambda x, t: ig.attribute(x, baselines=0.0, target=t, n_steps=ig_steps)
    if method == "smoothgrad":
        nt = NoiseTunnel(Saliency(model))
        return lambda x, t: nt.attribute(
            x, nt_type="smoothgrad", nt_samples=sg_samples, stdevs=sg_sd, target=t, abs=False
        )
    if method == "guided_backprop":
        gbp = GuidedBackprop(model)
        return lambda x, t: gbp.attribute(x, target=t)
    if method == "grad_cam":
        layer = cam_layer(model)
        if layer is None:
            raise ValueError(f"grad_cam needs a convolutional layer; {type(model).__name__} has none")
        cam = LayerGradCam(model, layer)
        return lambda x, t: LayerAttribution.interpolate(
            cam.attribute(x, target=t, relu_attributions=True), tuple(x.shape[-2:]), interpolate_mode="bilinear"
        )
    raise ValueError(f"unknown saliency method {method!r}; one of {METHODS}")


def to_map(attribution: torch.Tensor) -> torch.Tensor:
    """``(N, C, H, W)`` attribution -> ``(N, H, W)`` map ``Σ_c |a_c|``."""
    return attribution.detach().abs().sum(1)


def saliency_maps(
    model: nn.Module, x: torch.Tensor, target: torch.Tensor, method: str, batch_size: int = 64, **options
) -> torch.Tensor:
    """Maps ``(N, H, W)`` of ``model`` (put in eval mode) for ``x (N, C, H, W)`` and classes ``target (N,)``.

    Args:
        options: ``ig_steps``, ``sg_samples``, ``sg_sd`` of :func:`attributor`.
    """
    model.eval()
    attr = attributor(model, method, **options)
    out = [
        to_map(attr(x[i : i + batch_size].clone().requires_grad_(True), target[i : i + batch_size]))
        for i in range(0, len(x), batch_size)
    ]
    return torch.cat(out)
