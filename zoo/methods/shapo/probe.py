"""Stage A of ShaPO: a linear safety probe on frozen mean-pooled last-layer states, and its direction.

Protocol of the authors' ``train_probe_pku_30k.py`` / ``gen_probe_vector.py``: every reply, in its prompt,
is one example; label 0 = safe (the chosen reply), 1 = unsafe (the rejected reply); features are the
last-layer hidden states averaged over the non-padding tokens; a ``Linear(d, 2)`` head is trained with
negative log-likelihood and Adam on the frozen encoder; the direction is v = W[1] - W[0], which points
towards *unsafe* (increasing v . h raises the unsafe logit relative to the safe one).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@torch.no_grad()
def mean_pooled_states(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean over non-padding tokens of the last hidden layer.

    Args:
        model: an HF causal LM, or a peft wrapper of one (the backbone's ``last_hidden_state`` is the final-norm
            output, the authors' ``hidden_layer = -1``).
        input_ids, attention_mask: ``(N, T)`` right-padded token ids and 0/1 mask.

    Returns:
        ``(N, d)`` float32 features.
    """
    from zoo.methods.shapo.lm import unwrap
    from zoo.models.sharding import call_as_root

    def pooled(input_ids, attention_mask):
        backbone, _ = unwrap(model)
        h = backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.float()
        m = attention_mask.to(h.dtype).unsqueeze(-1)
        return (h * m).sum(1) / m.sum(1).clamp_min(1.0)

    return call_as_root(model, pooled, input_ids, attention_mask)  # FSDP2: inside the root's forward


@dataclass
class ProbeResult:
    """A trained probe.

    Attributes:
        weight: ``(2, d)`` head weight (row 0 = safe, row 1 = unsafe).
        bias: ``(2,)`` head bias.
        direction: ``(d,)`` v = weight[1] - weight[0].
        train_accuracy: accuracy on the examples it was fitted on.
        heldout_accuracy: accuracy on the held-out examples (NaN when there are none).
    """

    weight: torch.Tensor
    bias: torch.Tensor
    direction: torch.Tensor
    train_accuracy: float
    heldout_accuracy: float


def train_probe(
    features: torch.Tensor,
    labels: torch.Tensor,
    epochs: int = 10,
    lr: float = 1e-3,
    batch_size: int = 256,
    heldout: int = 0,
    seed: int = 0,
) -> ProbeResult:
    """Fit ``Linear(d, 2)`` with NLL on log-softmax and Adam (the authors' probe; lr and size are ours, see README).

    Args:
        features: ``(N, d)`` from :func:`mean_pooled_states`.
        labels: ``(N,)`` long, 0 = safe, 1 = unsafe.
        epochs: passes over the training examples.
        lr: Adam learning rate.
        batch_size: examples per step.
        heldout: number of examples kept out (the last ones after a seeded shuffle) for the held-out accuracy.
        seed: seeds the shuffle, the head's init and the batch order.

    Returns:
        The fitted :class:`ProbeResult`.

    Raises:
        ValueError: shapes disagree, labels outside {0, 1}, or no training examples.
    """
    if features.ndim != 2 or labels.shape != features.shape[:1]:
        raise ValueError(f"features {tuple(features.shape)} and labels {tuple(labels.shape)} disagree")
    if labels.numel() and not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("probe labels must be 0 (safe) or 1 (unsafe)")
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(labels), generator=gen)
    train_idx, held_idx = order[: len(order) - heldout], order[len(order) - heldout :]
    if len(train_idx) == 0:
        raise ValueError("no examples left to train the probe")
    x, y = features.float(), labels.long()
    head = nn.Linear(x.shape[1], 2)
    with torch.no_grad():
        bound = 1.0 / x.shape[1] ** 0.5
        head.weight.copy_(torch.empty_like(head.weight).uniform_(-bound, bound, generator=gen))
        head.bias.zero_()
    opt = torch.optim.Adam(head.parameters(), lr=lr)
    for _ in range(epochs):
        perm = train_idx[torch.randperm(len(train_idx), generator=gen)]
        for i in range(0, len(perm), batch_size):
            b = perm[i : i + batch_size]
            loss = nn.functional.nll_loss(torch.log_softmax(head(x[b]), -1), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        pred = head(x).argmax(-1)
        acc_train = (pred[train_idx] == y[train_idx]).float().mean().item()
        acc_held = (pred[held_idx] == y[held_idx]).float().mean().item() if len(held_idx) else float("nan")
        w, b = head.weight.detach().clone(), head.bias.detach().clone()
    return ProbeResult(w, b, w[1] - w[0], acc_train, acc_held)
