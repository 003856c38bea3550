"""Baseline input-level detectors on the same deployed model and inputs; every score is higher = more anomalous.

- STRIP (Gao et al. 2019): superimpose the input on ``n_overlays`` trusted clean images (pixel average) and take
  the mean entropy of the predictions; a trigger keeps the prediction fixed, so *low* entropy is anomalous.
  ``n_overlays`` defaults to 8 (the paper uses 100) to fit our CPU budget.
- Mahalanobis (Lee et al. 2018): penultimate features (the input of the last ``nn.Linear``); class means from the
  correctly classified trusted inputs, one tied covariance (ridge ``1e-3 * mean variance``); score = the smallest
  class-wise Mahalanobis distance.
- Spectral signatures (Tran et al. 2018), as a batch detector (*ours*: the original scores a poisoned training set;
  here it scores the untrusted evaluation pool): group the pool by predicted class, centre each group's penultimate
  features, score = squared projection on the group's top right singular vector.
"""

from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def penultimate(model: nn.Module, x: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """Inputs of the model's last ``nn.Linear`` for ``x (N, C, H, W)`` -> ``(N, D)``.

    Raises:
        ValueError: the model has no ``nn.Linear``.
    """
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError("penultimate features need a model ending in nn.Linear")
    feats = []
    hook = linears[-1].register_forward_hook(lambda m, inp, out: feats.append(inp[0].detach().flatten(1)))
    try:
        for i in range(0, len(x), batch):
            model(x[i : i + batch])
    finally:
        hook.remove()
    return torch.cat(feats)


@torch.no_grad()
def strip_scores(
    model: nn.Module, x: torch.Tensor, clean: torch.Tensor, n_overlays: int = 8, seed: int = 0, batch: int = 512
) -> torch.Tensor:
    """STRIP anomaly score ``(N,)`` = minus the mean prediction entropy (nats) over ``n_overlays`` blends
    ``(x + c) / 2`` with clean images ``c`` drawn (seeded) from ``clean (M, C, H, W)``."""
    g = torch.Generator().manual_seed(seed)
    picks = clean[torch.randint(len(clean), (n_overlays,), generator=g)]
    ent = torch.zeros(len(x), dtype=torch.float64)
    for c in picks:
        for i in range(0, len(x), batch):
            p = torch.softmax(model((x[i : i + batch] + c) / 2).double(), 1)
            ent[i : i + batch] += -(p * p.clamp_min(1e-12).log()).sum(1)
    return (-ent / n_overlays).float()


class Mahalanobis:
    """Class-conditional Gaussian with a tied covariance on penultimate features.

    Args:
        feats: trusted features ``(M, D)``; labels: their classes ``(M,)``.
    """

    def __init__(self, feats: torch.Tensor, labels: torch.Tensor):
        f = feats.double()
        self.classes = labels.unique()
        self.means = torch.stack([f[labels == c].mean(0) for c in self.classes])
        centred = f - self.means[torch.searchsorted(self.classes, labels)]
        cov = centred.T @ centred / len(f)
        cov += 1e-3 * cov.diagonal().mean().clamp_min(1e-12) * torch.eye(f.shape[1], dtype=f.dtype)
        self.precision = torch.linalg.inv(cov)

    def score(self, feats: torch.Tensor) -> torch.Tensor:
        """Smallest squared Mahalanobis distance to a class mean ``(N,)``."""
        d = feats.double()[:, None, :] - self.means[None]
        return torch.einsum("nkd,de,nke->nk", d, self.precision, d).min(1).values.float()


def spectral_scores(feats: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """Spectral-signature score ``(N,)`` of a pool: per predicted class, squared projection of the centred features
    on their top right singular vector (0 for a class seen once)."""
    out = torch.zeros(len(feats))
    for c in predicted.unique():
        idx = torch.where(predicted == c)[0]
        if len(idx) < 2:
            continue
        centred = feats[idx].double() - feats[idx].double().mean(0)
        v = torch.linalg.svd(centred, full_matrices=False).Vh[0]
        out[idx] = ((centred @ v) ** 2).float()
    return out
