"""The causal-LM objective of zoo-lm: summed next-token negative log-likelihood (training loss, perplexity and
the reference NLL of ``zoo predict --json`` all come from it)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from zoo.models.chat import IGNORE_INDEX


def causal_lm_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed next-token negative log-likelihood and the number of predicted tokens.

    ``nll = -sum_{b,t: labels[b,t+1] != -100} log softmax(logits[b,t])[labels[b,t+1]]`` (natural log), the
    standard causal-LM objective (Radford et al. 2018, eq. 1); the mean ``nll / n`` is the training loss and
    ``exp(nll / n)`` the perplexity.

    Args:
        logits: ``[B, T, V]``.
        labels: ``[B, T]`` token ids, ``-100`` where no loss is taken (prompt, user turns, padding).

    Returns:
        ``(nll, n)``: a scalar float tensor (nats) and a scalar long tensor.

    The labels are shifted, not the logits: ``logits[:, :-1]`` would copy the whole ``[B, T - 1, V]`` tensor (and its
    backward would fill and copy another): for a 49k vocabulary that made a SmolLM2 LoRA step on a CPU ~10 % slower
    than a bare loop's (7.00 vs 6.36 s in the issue-44 profile on SmolLM2's shape; with this loss
    results/zoo-lm/train-throughput-smollm2-135m-instruct-lora16.json measures 0.994x the bare loop). The last position
    gets the ignored label, so the sum runs over the same terms.
    """
    shift_labels = F.pad(labels[:, 1:], (0, 1), value=IGNORE_INDEX).reshape(-1)
    nll = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(), shift_labels, ignore_index=IGNORE_INDEX, reduction="sum"
    )
    return nll, (shift_labels != IGNORE_INDEX).sum()
