"""SemBind's semantic masker (notes §1.3; the losses of stage 2 are reconstructed: *ours*).

``Enc`` (input BatchNorm, linear, residual MLP blocks with BatchNorm and GELU) -> ``Proj`` (to an L2-normalised
``z``) -> ``Hash`` (``B`` logits ``ℓ``); the soft code is ``b = tanh(s·ℓ)`` and the code ``m = (sign(b) + 1) / 2``.

Training on frozen encoder features of generations, grouped by prompt:

1. feature contrast: supervised contrastive loss on ``z`` (positives: images of the same prompt), eq. (SupCon);
2. hashing (*ours*): on ``b`` with ``s`` annealed from 1 to ``scale``: same-prompt pairs pulled to agreement
   ``1 - <b_i, b_j>/B``, different-prompt pairs pushed to orthogonality ``(<b_i, b_j>/B)²``, bit balance
   ``mean_k (E_i b_ik)²``, quantisation ``E (1 - |b|)²``; the stage-1 loss is kept as a regulariser.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

MASKER_DEFAULTS = {
    "net": {"hidden": 256, "proj_dim": 64, "n_bits": 64, "n_blocks": 2},
    "contrast_epochs": 150,
    "hash_epochs": 300,
    "lr": 0.001,
    "temperature": 0.2,
    "scale": 10.0,
    "weights": {"orthogonal": 1.0, "balance": 0.1, "quantisation": 0.1, "contrast": 0.5},
}


def masker_settings(overrides: dict | None) -> dict:
    """:data:`MASKER_DEFAULTS` updated with ``overrides`` (one level deep for ``net`` and ``weights``).

    Raises:
        ValueError: an unknown key.
    """
    o = dict(overrides or {})
    unknown = sorted(set(o) - set(MASKER_DEFAULTS))
    if unknown:
        raise ValueError(f"model.masker: unknown keys {unknown}; choose from {sorted(MASKER_DEFAULTS)}")
    out = {**MASKER_DEFAULTS, **o}
    for k in ("net", "weights"):
        out[k] = {**MASKER_DEFAULTS[k], **(o.get(k) or {})}
    return out


class ResidualBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm1d(dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class SemanticMasker(nn.Module):
    """``Enc -> Proj -> Hash`` on encoder features ``(N, in_dim)``.

    Args:
        in_dim: encoder feature width.
        hidden, proj_dim, n_bits, n_blocks: widths of Enc, Proj, the code length ``B`` and residual blocks in Enc.
    """

    def __init__(self, in_dim: int, hidden: int = 256, proj_dim: int = 64, n_bits: int = 64, n_blocks: int = 2):
        super().__init__()
        self.n_bits = n_bits
        self.enc = nn.Sequential(
            nn.BatchNorm1d(in_dim),
            nn.Linear(in_dim, hidden),
            *[ResidualBlock(hidden) for _ in range(n_blocks)],
            nn.GELU(),
        )
        self.proj = nn.Linear(hidden, proj_dim)
        self.hash = nn.Linear(proj_dim, n_bits)

    def forward(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(z (N, proj_dim) unit norm, logits (N, n_bits))``."""
        z = F.normalize(self.proj(self.enc(feats)), dim=1)
        return z, self.hash(z)

    @torch.no_grad()
    def code(self, feats: torch.Tensor) -> torch.Tensor:
        """Binary codes ``(N, n_bits)`` int64 in {0, 1} (eval mode): ``m = (sign(ℓ) + 1) / 2``."""
        was = self.training
        self.eval()
        m = (self.forward(feats)[1] > 0).long()
        self.train(was)
        return m


def supcon_loss(z: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """Supervised contrastive loss (Khosla et al. 2020) of unit vectors ``z (N, D)`` with group ``labels (N,)``:
    mean over anchors with a positive of ``-mean_pos log softmax_{j != i}(z_i·z_j / T)``."""
    sim = z @ z.T / temperature
    eye = torch.eye(len(z), dtype=torch.bool, device=z.device)
    logp = sim.masked_fill(eye, float("-inf")).log_softmax(1)
    pos = (labels[:, None] == labels[None, :]) & ~eye
    has = pos.any(1)
    return -(logp.masked_fill(~pos, 0).sum(1)[has] / pos.sum(1)[has]).mean()


def hash_losses(b: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """The stage-2 terms (*ours*) on soft codes ``b (N, B)`` in ``[-1, 1]``: ``same``, ``orthogonal``, ``balance``,
    ``quantisation`` (each a scalar; see the module docstring)."""
    inner = b @ b.T / b.shape[1]
    eye = torch.eye(len(b), dtype=torch.bool, device=b.device)
    same = (labels[:, None] == labels[None, :]) & ~eye
    diff = labels[:, None] != labels[None, :]
    return {
        "same": (1 - inner[same]).mean(),
        "orthogonal": inner[diff].pow(2).mean(),
        "balance": b.mean(0).pow(2).mean(),
        "quantisation": (1 - b.abs()).pow(2).mean(),
    }


def hamming_stats(codes: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Mean normalised Hamming distance of codes ``(N, B)`` within (``intra``) and across (``inter``) prompts."""
    d = (codes[:, None, :] != codes[None, :, :]).float().mean(-1)
    eye = torch.eye(len(codes), dtype=torch.bool)
    same = (labels[:, None] == labels[None, :]) & ~eye
    diff = labels[:, None] != labels[None, :]
    return {"intra_hamming": float(d[same].mean()), "inter_hamming": float(d[diff].mean())}


def train_masker(
    masker: SemanticMasker, feats: torch.Tensor, labels: torch.Tensor, settings: dict, seed: int = 0
) -> dict[str, float]:
    """Two-stage training on features ``(N, in_dim)`` with prompt ``labels (N,)`` (full batch).

    Returns:
        final losses and the train codes' Hamming statistics.
    """
    cfg = masker_settings(settings)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(masker.parameters(), lr=cfg["lr"])
    masker.train()
    w = cfg["weights"]
    stats = {}
    for _ in range(cfg["contrast_epochs"]):
        z, _ = masker(feats)
        loss = supcon_loss(z, labels, cfg["temperature"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    stats["contrast_loss"] = float(loss.detach())
    n = max(cfg["hash_epochs"], 1)
    for epoch in range(cfg["hash_epochs"]):
        s = 1.0 + (cfg["scale"] - 1.0) * epoch / n
        z, logits = masker(feats)
        terms = hash_losses(torch.tanh(s * logits), labels)
        loss = (
            terms["same"]
            + w["orthogonal"] * terms["orthogonal"]
            + w["balance"] * terms["balance"]
            + w["quantisation"] * terms["quantisation"]
            + w["contrast"] * supcon_loss(z, labels, cfg["temperature"])
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    stats["hash_loss"] = float(loss.detach())
    stats.update(hamming_stats(masker.code(feats), labels))
    return stats
