"""RLCracker's rewards (notes §3.3, authors' ``GRPOTrainer_reph.py``): semantic reward, token-level KL reward, the
dynamic weight α and their per-token total. No detector or watermark key is involved.

* ``r_sem = 2σ(k(s − τ)) − 1`` with ``k = ln(y/(1−y))/(1−τ)``: 0 at ``s = τ`` and ``2y − 1`` (0.95) at ``s = 1``.
* ``k_t = KL3_wm,t − KL3_h,t`` with ``KL3_x,t = exp(log p_x − log π) − (log p_x − log π) − 1`` (k3,
  :func:`zoo.models.grpo.kl3`); ``p_wm`` is the frozen reference on the rewrite prompt (copying the marked text),
  ``p_h`` the reference on the bare question (an unmarked answer).
* ``α = max(1, w (1 − mean r_sem))`` and ``R_{i,t} = α A_i + w_KL k_{i,t}``.

Similarity ``s`` is MiniLM cosine (all-MiniLM-L6-v2, ``zoo.models.text_embedding``) instead of the authors' PSP
model (not shipped offline): ours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from zoo.models.grpo import kl3


def semantic_reward(s: torch.Tensor, tau: float = 0.85, y: float = 0.975) -> torch.Tensor:
    """``r_sem(s) = 2σ(k(s − τ)) − 1``, ``k = ln(y/(1−y))/(1−τ)``; any shape.

    Raises:
        ValueError: ``τ`` outside [0, 1) or ``y`` outside (0.5, 1).
    """
    if not 0 <= tau < 1 or not 0.5 < y < 1:
        raise ValueError(f"need 0 <= tau < 1 and 0.5 < y < 1, got tau={tau}, y={y}")
    k = math.log(y / (1 - y)) / (1 - tau)
    return 2 * torch.sigmoid(k * (s - tau)) - 1


def token_reward(logp_wm: torch.Tensor, logp_h: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """``k_t = KL3(p_wm, π)_t − KL3(p_h, π)_t`` per sampled token, ``[N, C]`` in, ``[N, C]`` out (nats).

    Positive where the reference on the question explains the token better than the reference copying the marked
    text (relative to the policy).
    """
    return kl3(logp_wm, logp) - kl3(logp_h, logp)


def semantic_weight(r_sem: torch.Tensor, w: float) -> float:
    """``α = max(1, w (1 − mean r_sem))``: the group advantage is amplified while meaning is being lost."""
    return max(1.0, w * (1.0 - float(r_sem.float().mean())))


def total_reward(advantages: torch.Tensor, k: torch.Tensor | None, alpha: float, w_kl: float) -> torch.Tensor:
    """``R_{i,t} = α A_i + w_KL k_{i,t}``: ``[N]`` advantages (and ``[N, C]`` token rewards) -> ``[N, C]`` (or ``[N]``
    when ``k`` is ``None``: GRPO without the token reward)."""
    if k is None:
        return alpha * advantages
    return alpha * advantages.unsqueeze(1) + w_kl * k


def similarity(texts: Sequence[str], references: Sequence[str], encoder: str | None = None) -> torch.Tensor:
    """MiniLM cosine of each text with its reference, ``[N]`` in [-1, 1]; an empty text scores 0.

    Raises:
        ValueError: the two lists differ in length.
    """
    from zoo.models.text_embedding import embed_texts

    if len(texts) != len(references):
        raise ValueError(f"{len(texts)} texts but {len(references)} references")
    a = embed_texts([t if t.strip() else "." for t in texts], model=encoder)
    b = embed_texts(list(references), model=encoder)
    sim = (a * b).sum(-1)
    return torch.where(torch.tensor([bool(t.strip()) for t in texts]), sim, torch.zeros_like(sim))
