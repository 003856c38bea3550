"""Removal metrics (notes §3.3 item 5): removal (z ≤ threshold), success (removal and similarity > 0.7), Pass@K and
the detector's AUC. Inputs are tensors of z-scores and similarities, one per text (or ``[texts, K]``)."""

from __future__ import annotations

import torch


def removed(z: torch.Tensor, threshold: float = 4.0) -> torch.Tensor:
    """bool, same shape: the detector no longer flags the text (``z ≤ threshold``; a nan z, no scored token,
    counts as removed)."""
    return ~(z > threshold)


def succeeded(z: torch.Tensor, sim: torch.Tensor, threshold: float = 4.0, min_sim: float = 0.7) -> torch.Tensor:
    """bool, same shape: removed and the meaning kept (``sim > min_sim``)."""
    return removed(z, threshold) & (sim > min_sim)


def pass_at_k(success: torch.Tensor) -> float:
    """Share of texts (rows of ``[texts, K]``) with at least one successful attempt among their K."""
    return float(success.bool().any(1).float().mean())


def detector_auc(z_marked: torch.Tensor, z_unmarked: torch.Tensor) -> float:
    """ROC AUC of z as a score separating marked (positive) from unmarked texts (torchmetrics)."""
    from torchmetrics.functional.classification import binary_auroc

    scores = torch.cat([z_marked, z_unmarked]).float().nan_to_num(0.0)
    labels = torch.cat([torch.ones(len(z_marked)), torch.zeros(len(z_unmarked))]).long()
    return float(binary_auroc(scores, labels))
