"""The corner-shift benchmark of one trained model: five states × saliency methods -> metric rows and maps.

States (Adebayo et al. 2018's randomisation tests plus the random-input control of notes §2):

- ``trained``: the trained model on the corner-shift canvases;
- ``cascade_half``: its top half of parameter layers re-initialised (cascading randomisation);
- ``random``: every layer re-initialised (full randomisation = a freshly initialised model);
- ``trained_random_input`` / ``random_random_input``: the trained / random model on i.i.d. noise canvases with the
  same boxes (no object at all).

Per state and method the row holds means over canvases: CSI (centroid form, uncorrected; distance form, minus its
uniform value) over corner placements, object mass and pointing game over corner and centre placements, and for the
randomised states the Spearman rank correlation and SSIM of their maps against the trained model's maps.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from zoo.methods.saliency_bias.canvas import POSITIONS, CornerShiftSet
from zoo.methods.saliency_bias.metrics import (
    csi_centroid,
    csi_distance_corrected,
    object_mass,
    pointing_game,
    spearman_abs,
    ssim_abs,
)
from zoo.methods.saliency_bias.path_count import corner_centre_ratio, map_correlation, path_count_map
from zoo.methods.saliency_bias.randomise import cascading_randomisation, parameter_layers
from zoo.methods.saliency_bias.saliency import saliency_maps, supports

CENTRE = POSITIONS.index("centre")


def _mean(v: torch.Tensor) -> float | None:
    v = v.double()
    v = v[~torch.isnan(v)]
    return float(v.mean()) if len(v) else None


def canvas_metrics(maps: torch.Tensor, data: CornerShiftSet) -> dict[str, float | None]:
    """Means over ``data``'s canvases of CSI (corner placements only), object mass and pointing game (corner and
    centre placements apart). ``maps: (N, H, W)``."""
    corner = data.position != CENTRE
    mass, hit = object_mass(maps, data.boxes), pointing_game(maps, data.boxes).double()
    return {
        "csi_centroid": _mean(csi_centroid(maps[corner], data.boxes[corner])),
        "csi_distance": _mean(csi_distance_corrected(maps[corner], data.boxes[corner])),
        "mass_corner": _mean(mass[corner]),
        "mass_centre": _mean(mass[~corner]),
        "pointing_corner": _mean(hit[corner]),
        "pointing_centre": _mean(hit[~corner]),
    }


@torch.no_grad()
def accuracy(model: nn.Module, data: CornerShiftSet, batch_size: int = 256) -> float:
    """Top-1 accuracy of ``model`` on ``data``'s canvases."""
    model.eval()
    pred = torch.cat([model(data.x[i : i + batch_size]).argmax(1) for i in range(0, len(data), batch_size)])
    return float((pred == data.y).double().mean())


def benchmark_model(
    model: nn.Module,
    fresh: nn.Module,
    real: CornerShiftSet,
    noise: CornerShiftSet,
    methods: tuple[str, ...] | list[str],
    **options,
) -> tuple[list[dict], dict]:
    """Run every state × method on one model.

    Args:
        model: the trained model; ``fresh``: a freshly initialised model of the same architecture.
        real, noise: the corner-shift set and its random-input control.
        options: ``ig_steps``, ``sg_samples``, ``sg_sd``, ``batch_size`` of :func:`saliency.saliency_maps`.
    Returns:
        ``(rows, maps)``: one row per (state, method) with ``state``, ``method``, ``accuracy`` (real canvases) and the
        metrics of :func:`canvas_metrics` (+ ``spearman_vs_trained``, ``ssim_vs_trained`` for randomised states);
        ``maps[(state, method)]`` the ``(N, H, W)`` maps.
    """
    half = cascading_randomisation(model, fresh, len(parameter_layers(model)) // 2)
    cases = {
        "trained": (model, real),
        "cascade_half": (half, real),
        "random": (fresh, real),
        "trained_random_input": (model, noise),
        "random_random_input": (fresh, noise),
    }
    acc = {state: accuracy(m, real) for state, (m, _) in cases.items()}
    rows, maps = [], {}
    for method in methods:
        if not supports(model, method):
            continue
        for state, (m, data) in cases.items():
            s = saliency_maps(m, data.x, data.y, method, **options)
            maps[(state, method)] = s
            row = {"state": state, "method": method, "accuracy": acc[state], **canvas_metrics(s, data)}
            if state in ("cascade_half", "random"):
                ref = maps[("trained", method)]
                row["spearman_vs_trained"] = _mean(spearman_abs(s, ref))
                row["ssim_vs_trained"] = _mean(ssim_abs(s, ref))
            rows.append(row)
    return rows, maps


def path_count_comparison(model: nn.Module, measured_maps: torch.Tensor) -> dict[str, float | None]:
    """Theoretical path-count map of ``model`` vs the measured mean squared saliency of its random-init version.

    Args:
        model: a :class:`zoo.models.vision.VGGNet` (any conv/pool stack).
        measured_maps: ``(N, H, W)`` gradient maps of the randomly initialised model on random inputs.
    Returns:
        ``pearson`` (map correlation), ``ratio_theory`` and ``ratio_measured`` (mean of the four 8×8 corners over the
        central 8×8; 1 = flat).
    """
    measured = (measured_maps.double() ** 2).mean(0)
    theory = path_count_map(model, tuple(measured.shape))
    corr = map_correlation(theory, measured)
    return {
        "pearson": None if math.isnan(corr) else corr,
        "ratio_theory": corner_centre_ratio(theory),
        "ratio_measured": corner_centre_ratio(measured),
    }
