"""Group metrics: worst-group accuracy WG, average accuracy Avg, Gap = Avg − WG (notes §1.5), from torchmetrics'
``BinaryGroupStatRates`` (per group: the rates of tp, fp, tn, fn; accuracy = tp + tn; it numbers only the groups
present, so absent groups are mapped back by id)."""

from __future__ import annotations

import torch
from torchmetrics.classification import BinaryGroupStatRates


def group_accuracy(pred: torch.Tensor, y: torch.Tensor, group: torch.Tensor, num_groups: int = 4) -> torch.Tensor:
    """Accuracy per group ``(num_groups,)`` (NaN for a group with no sample). ``pred, y`` 0/1, ``group`` ints."""
    metric = BinaryGroupStatRates(num_groups=num_groups)
    rates = metric(pred.long(), y.long(), group.long())
    acc = torch.full((num_groups,), float("nan"))
    # torchmetrics numbers the groups that occur, in sorted order: its ``group_i`` is the i-th present group
    for i, g in enumerate(torch.unique(group.long()).tolist()):
        r = rates[f"group_{i}"]
        acc[g] = r[0] + r[2]
    return acc


def wg_avg_gap(pred: torch.Tensor, y: torch.Tensor, group: torch.Tensor, num_groups: int = 4) -> dict[str, float]:
    """``{wg, avg, gap}`` in percent: WG = min over non-empty groups of the group accuracy, Avg = accuracy over all
    samples, Gap = Avg − WG."""
    acc = group_accuracy(pred, y, group, num_groups)
    wg = float(acc[~acc.isnan()].min()) * 100
    avg = float((pred.long() == y.long()).float().mean()) * 100
    return {"wg": wg, "avg": avg, "gap": avg - wg}
