"""Temporal cross-attention adapter: each patch position attends to the same position across frames.

WatchLog abstract: "a temporal cross-attention adapter lets each pixel attend to the same pixel across time ...
preserving the original behavioral semantics". The equations are the reconstruction of papers-1.md §1 (ours; the
closest published designs are CAST's temporal branch, ST-Adapter and TimeSformer's divided time attention):

    A^{(n)}_{t,.} = softmax((LN(Z_t[n]) + p_t) W_q ((LN(Z_.[n]) + p_.) W_k)^T / sqrt(d_h) + M)
    Delta_t[n]    = sum_{t'} A^{(n)}_{t,t'} (LN(Z_{t'}[n]) + p_{t'}) W_v
    Z'_t[n]       = Z_t[n] + tanh(g) * (Delta_t[n] W_o)

with a learned temporal position ``p_t`` and a per-channel gate ``g`` initialised at 0, so at initialisation the
adapter is the identity and the spatial (per-frame ViT) path is untouched. ``M`` masks padded frames (and the future
when ``causal``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class TemporalCrossAttention(nn.Module):
    """Gated residual attention along time, per patch position (``mode="pixel"``) or on frame means (``"pooled"``).

    Args:
        dim: token width ``D``.
        heads: attention heads (``dim % heads == 0``).
        max_frames: longest clip (size of the temporal position table).
        mode: ``pixel`` (each of the ``N`` positions attends over time on its own; the paper's design) or
            ``pooled`` (ablation, ours: attention over time on the per-frame mean token, the same update added to
            every position).
        causal: frame ``t`` sees only frames ``<= t`` (ours, off by default).

    Raises:
        ValueError: ``dim`` not divisible by ``heads`` or an unknown ``mode``.
    """

    def __init__(self, dim: int, heads: int = 2, max_frames: int = 64, mode: str = "pixel", causal: bool = False):
        super().__init__()
        if dim % heads:
            raise ValueError(f"adapter: dim {dim} is not divisible by heads {heads}")
        if mode not in ("pixel", "pooled"):
            raise ValueError(f"adapter mode must be 'pixel' or 'pooled', got {mode!r}")
        self.heads, self.mode, self.causal = heads, mode, causal
        self.norm = nn.LayerNorm(dim)
        self.time_pos = nn.Parameter(torch.zeros(max_frames, dim))
        nn.init.trunc_normal_(self.time_pos, std=0.02)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.gate = nn.Parameter(torch.zeros(dim))

    def _mask(self, mask: torch.Tensor | None, T: int) -> torch.Tensor | None:
        """Boolean ``(B, 1, T, T)`` attention mask (True = may attend) from a ``(B, T)`` frame mask, or None."""
        m = None
        # the all-valid shortcut reads a tensor value, which graph export (torch.export / ONNX) cannot trace
        if mask is not None and (torch.compiler.is_compiling() or not bool(mask.all())):
            keys = mask[:, None, :].expand(-1, T, -1)  # (B, T_q, T_k)
            m = (keys | ~mask[:, :, None])[:, None]  # padded queries attend anywhere
        if self.causal:
            c = torch.ones(T, T, dtype=torch.bool, device=self.gate.device).tril()
            m = c[None, None] if m is None else m & c
        return m

    def _qkv(self, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Queries, keys, values ``(B, n * heads, T, d_h)``: one sequence over time per position and head."""
        B, T, _, D = z.shape
        x = self.norm(z)
        if self.mode == "pooled":
            x = x.mean(2, keepdim=True)
        n, h = x.shape[2], self.heads
        x = x + self.time_pos[:T, None, :]
        qkv = self.qkv(x).view(B, T, n, 3, h, D // h).permute(3, 0, 2, 4, 1, 5)  # (3, B, n, h, T, d_h)
        return tuple(qkv.reshape(3, B, n * h, T, D // h))

    def _out(self, o: torch.Tensor, B: int, T: int) -> torch.Tensor:
        """``(B, n * heads, T, d_h)`` attention outputs -> the update ``(B, T, n, D)``."""
        h = self.heads
        n = o.shape[1] // h
        return self.proj(o.view(B, n, h, T, -1).permute(0, 3, 1, 2, 4).reshape(B, T, n, -1))

    def attend(self, z: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The update ``Delta W_o`` before gating, and the attention weights (explicit softmax; for inspection).

        Args:
            z: tokens ``(B, T, N, D)``.
            mask: ``(B, T)`` bool, True = real frame.

        Returns:
            ``(update, attn)``: ``update`` is ``(B, T, N, D)`` (``(B, T, 1, D)`` in pooled mode) and ``attn`` is
            ``(B, N', heads, T, T)`` with ``N' = N`` (pixel) or 1 (pooled); rows sum to 1 over the key frames.
        """
        B, T, _, D = z.shape
        q, k, v = self._qkv(z)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D // self.heads)  # (B, n*heads, T, T)
        m = self._mask(mask, T)
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf"))
        attn = F.softmax(scores, dim=-1)
        return self._out(attn @ v, B, T), attn.view(B, -1, self.heads, T, T)

    def forward(self, z: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``Z' = Z + tanh(g) * update``; shape ``(B, T, N, D)`` in and out (fused attention, same maths as
        :meth:`attend`)."""
        B, T = z.shape[:2]
        q, k, v = self._qkv(z)
        update = self._out(F.scaled_dot_product_attention(q, k, v, attn_mask=self._mask(mask, T)), B, T)
        return z + torch.tanh(self.gate) * update
