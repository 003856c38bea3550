"""Link-prediction and explanation metrics (AP, AUC, MRR, fidelity/ACC-AUC, stability-prior agreement)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from scipy.stats import spearmanr
from sklearn.metrics import average_precision_score, roc_auc_score


def link_metrics(pos_logit: torch.Tensor, neg_logit: torch.Tensor) -> dict[str, float]:
    """AP and ROC-AUC of positives ``(P,)`` against negatives ``(Q,)`` (sklearn, over the whole set).

    The code averages per-batch AP/AUC instead; ranking over the whole split is the standard definition.
    Returns NaNs when either side is empty.
    """
    if pos_logit.numel() == 0 or neg_logit.numel() == 0:
        return {"ap": math.nan, "auc": math.nan}
    y = np.concatenate([np.ones(pos_logit.numel()), np.zeros(neg_logit.numel())])
    score = torch.cat([pos_logit, neg_logit]).double().cpu().numpy()
    return {"ap": float(average_precision_score(y, score)), "auc": float(roc_auc_score(y, score))}


def reciprocal_ranks(pos_logit: torch.Tensor, neg_logit: torch.Tensor) -> torch.Tensor:
    """TGB-style reciprocal rank of each positive among its own negatives (code: ``Evaluator.eval``).

    ``rank = 1 + 0.5·(#neg > pos) + 0.5·(#neg ≥ pos)`` (the mean of the optimistic and pessimistic ranks).

    Args:
        pos_logit: ``(B,)``; neg_logit: ``(B, M)``.

    Returns:
        ``(B,)`` values ``1 / rank``.
    """
    p = pos_logit.unsqueeze(1)
    rank = 1 + 0.5 * (neg_logit > p).sum(1).double() + 0.5 * (neg_logit >= p).sum(1).double()
    return 1.0 / rank


def top_fraction_keep(importance: torch.Tensor, valid: torch.Tensor, level: float) -> torch.Tensor:
    """Keep the ``ceil(level · n_valid)`` most important real tokens of each event.

    Args:
        importance: ``(B, T)`` scores (higher = more important).
        valid: bool ``(B, T)``.
        level: sparsity level in (0, 1].

    Returns:
        bool ``(B, T)`` keep mask (subset of ``valid``).

    Raises:
        ValueError: ``level`` outside (0, 1].
    """
    if not 0 < level <= 1:
        raise ValueError(f"fidelity level {level} must be in (0, 1]")
    n_keep = torch.ceil(valid.sum(1).double() * level).long()
    score = importance.masked_fill(~valid, -torch.inf)
    order = torch.argsort(score, dim=1, descending=True, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    return (rank < n_keep.unsqueeze(1)) & valid


def acc_auc(levels: list[float], accuracies: list[float]) -> float:
    """Area under the fidelity curve, normalised by the sparsity range (TempME's ACC-AUC; trapezoid rule).

    Raises:
        ValueError: fewer than two levels, or unsorted levels.
    """
    if len(levels) < 2 or any(b <= a for a, b in itertools.pairwise(levels)):
        raise ValueError(f"ACC-AUC needs >= 2 increasing sparsity levels, got {levels}")
    x, y = np.asarray(levels, float), np.asarray(accuracies, float)
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2) / (x[-1] - x[0]))


def stability_agreement(
    rho: torch.Tensor, seen: torch.Tensor, counts: torch.Tensor | None = None, stability: torch.Tensor | None = None
) -> dict[str, float]:
    """How well the stability prior ρ tracks ground-truth "seen before" on real tokens.

    Args:
        rho: ``(n,)`` stability probabilities of real tokens; seen: bool ``(n,)`` whether that interaction
            repeated an earlier one of the same pair; counts: ``(n,)`` the co-occurrence counts ρ is computed
            from (optional); stability: ``(n,)`` the oriented prior (optional).

    Returns:
        ``{"rho_spearman", "rho_auc", "seen_rate"}`` (Spearman correlation, ROC-AUC of ρ for "seen", base
        rate) and, with ``counts``, ``count_auc`` (the AUC of the raw count: what a ρ monotone in the count
        reaches) and, with ``stability``, ``stability_auc``; NaN where undefined (one class only).
    """
    rho, seen = rho.double().cpu().numpy(), seen.cpu().numpy().astype(bool)
    rate = float(seen.mean()) if seen.size else math.nan
    if seen.size < 2 or seen.all() or not seen.any():
        out = {"rho_spearman": math.nan, "rho_auc": math.nan, "seen_rate": rate}
        out |= {"count_auc": math.nan} if counts is not None else {}
        return out | ({"stability_auc": math.nan} if stability is not None else {})
    out = {
        "rho_spearman": float(spearmanr(rho, seen).statistic),
        "rho_auc": float(roc_auc_score(seen, rho)),
        "seen_rate": rate,
    }
    if counts is not None:
        out["count_auc"] = float(roc_auc_score(seen, counts.double().cpu().numpy()))
    if stability is not None:
        out["stability_auc"] = float(roc_auc_score(seen, stability.double().cpu().numpy()))
    return out
