"""Preference accuracy of an implicit-reward margin, with a zero margin counted as a tie.

DPO-family papers report the share of held-out pairs whose implicit reward prefers the chosen reply. A strict
``margin > 0`` test scores the starting policy (policy == reference, every margin exactly 0) as 0.0 although it
has no preference at all; here a zero margin counts 0.5, so the start scores chance (0.5).
"""

from __future__ import annotations

import torch


def preference_accuracy(margin: torch.Tensor) -> torch.Tensor:
    """Per-pair preference score: 1 for ``margin > 0``, 0.5 for ``margin == 0`` (a tie), 0 for ``margin < 0``.

    Args:
        margin: ``(n,)`` implicit-reward margins ``beta * (h_chosen - h_rejected)`` (nats x beta).
    Returns:
        ``(n,)`` float tensor in {0, 0.5, 1}; its mean is the preference accuracy with ties counted as half.
    """
    return (torch.sign(margin.float()) + 1) / 2
