"""ST-TGExplainer objectives (seed-repos.md §2.4; code: ``train_epoch``, ``compute_src_dst_node_temporal_embeddings``)."""

from __future__ import annotations

import torch


def r_schedule(
    epoch: int, init_r: float = 0.7, decay_interval: int = 5, decay_r: float = 0.1, final_r: float = 0.5
) -> float:
    """Prior keep-rate ``r = max(final_r, init_r - ⌊epoch / decay_interval⌋ · decay_r)`` (code: ``get_r``).

    Args:
        epoch: 1-based training epoch (the code passes ``epoch + 1``; evaluation uses 1).

    Raises:
        ValueError: ``epoch < 0`` or ``decay_interval < 1``.
    """
    if epoch < 0 or decay_interval < 1:
        raise ValueError(f"r_schedule: epoch={epoch} must be >= 0 and decay_interval={decay_interval} >= 1")
    return max(final_r, init_r - (epoch // decay_interval) * decay_r)


def bernoulli_kl(s: torch.Tensor, r: float, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Information-bottleneck term ``mean_i KL(Bern(s_i) || Bern(r))`` (GSAT-style; code: ``info_loss``).

    Uses the code's stabilisers: ``s log(s/r + 1e-6) + (1-s) log((1-s)/(1-r+1e-6) + 1e-6)``.

    Args:
        s: ``(B, T)`` mask values in (0, 1).
        r: prior keep-rate.
        valid: bool ``(B, T)``: average over real tokens only (*ours*; the code also averages over padding).

    Returns:
        scalar tensor.
    """
    kl = s * torch.log(s / r + 1e-6) + (1 - s) * torch.log((1 - s) / (1 - r + 1e-6) + 1e-6)
    if valid is None:
        return kl.mean()
    w = valid.to(kl.dtype)
    return (kl * w).sum() / w.sum().clamp(min=1)


def permute_within_groups(labels: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """A random permutation that only moves rows among rows with the same label.

    ``h_T[perm]`` then samples from ``p(h_T | Y)`` independently of ``h_S`` given ``Y`` (§2.4 "fake" tuples).

    Args:
        labels: ``(B,)`` discrete labels (any dtype).

    Returns:
        int64 ``(B,)`` permutation with ``labels[perm] == labels``.
    """
    perm = torch.arange(labels.numel(), device=labels.device)
    for value in torch.unique(labels):
        idx = torch.nonzero(labels == value).squeeze(1)
        shuffled = torch.randperm(idx.numel(), generator=generator).to(labels.device)
        perm[idx] = idx[shuffled]
    return perm


def discriminator_loss(d_real: torch.Tensor, d_fake: torch.Tensor) -> torch.Tensor:
    """``L_D = -[mean log D(real) + mean log(1 - D(fake))]`` (the discriminator's own step; inputs detached)."""
    return -(torch.log(d_real + 1e-6).mean() + torch.log(1 - d_fake + 1e-6).mean())


def redundancy_loss(d_real: torch.Tensor, d_fake: torch.Tensor) -> torch.Tensor:
    """Generator term ``L_dis = mean log D(real) + mean log(1 - D(fake))`` (added with weight λ_dis).

    Minimising it makes real ``(h_S, h_T, Y)`` tuples indistinguishable from label-conditionally permuted
    ones, i.e. pushes ``I(h_S; h_T | Y)`` down.
    """
    return torch.log(d_real + 1e-6).mean() + torch.log(1 - d_fake + 1e-6).mean()
