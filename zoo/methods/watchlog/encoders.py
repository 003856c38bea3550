"""Window encoders: the per-frame ViT + temporal adapter (WatchLog) and the detection head it shares with the
serialised-token transformer baseline (``baselines.TokenEncoder``).
"""

from __future__ import annotations

from collections.abc import Sequence

import timm
import torch
from torch import nn

from zoo.methods.watchlog.adapter import TemporalCrossAttention


class FrameEncoder(nn.Module):
    """Per-frame ViT patch tokens with temporal cross-attention adapters after chosen blocks.

    The paper uses a video-LLM's pretrained ViT; here a small timm ``VisionTransformer`` is built from scratch
    (``pretrained=False``; sizes ours). Each frame is encoded by the spatial blocks alone (frames never mix inside
    a block); after block ``i`` in ``adapter_layers`` the tokens of all frames go through a
    :class:`TemporalCrossAttention`.

    Args:
        img_size: ``(H, W)`` canvas.
        patch_size: ``(ph, pw)`` patch (should tile the key slots so a patch never straddles two keys).
        dim, depth, heads: ViT width, blocks, heads.
        adapter: ``pixel`` (paper), ``pooled`` or ``none`` (ablations, ours).
        adapter_layers: block indices followed by an adapter (default: every block).
        max_frames: longest clip.

    Raises:
        ValueError: an unknown ``adapter`` or an adapter layer index outside ``[0, depth)``.
    """

    def __init__(
        self,
        img_size: Sequence[int] = (32, 128),
        patch_size: Sequence[int] = (8, 16),
        dim: int = 48,
        depth: int = 2,
        heads: int = 2,
        adapter: str = "pixel",
        adapter_layers: Sequence[int] | None = None,
        max_frames: int = 64,
    ):
        super().__init__()
        if adapter not in ("pixel", "pooled", "none"):
            raise ValueError(f"model.encoder.adapter must be pixel | pooled | none, got {adapter!r}")
        self.vit = timm.create_model(
            "vit_tiny_patch16_224",
            pretrained=False,
            img_size=tuple(img_size),
            patch_size=tuple(patch_size),
            in_chans=1,
            embed_dim=dim,
            depth=depth,
            num_heads=heads,
            num_classes=0,
            class_token=False,
            global_pool="avg",
        )
        layers = list(range(depth)) if adapter_layers is None else list(adapter_layers)
        if any(i < 0 or i >= depth for i in layers):
            raise ValueError(f"model.encoder.adapter_layers {layers} must lie in [0, {depth})")
        self.adapters = (
            nn.ModuleDict()
            if adapter == "none"
            else nn.ModuleDict({str(i): TemporalCrossAttention(dim, heads, max_frames, adapter) for i in layers})
        )
        self.mask_token = nn.Parameter(torch.zeros(dim))
        self.dim = dim
        self.grid = (img_size[0] // patch_size[0], img_size[1] // patch_size[1])

    @property
    def num_patches(self) -> int:
        """Patch tokens per frame ``N``."""
        return self.grid[0] * self.grid[1]

    def forward(
        self, frames: torch.Tensor, mask: torch.Tensor | None = None, hide: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Encode a clip.

        Args:
            frames: ``(B, T, H, W)`` images in [0, 1].
            mask: ``(B, T)`` bool, True = real frame (padding frames are excluded from temporal attention).
            hide: optional ``(B, T)`` bool; these frames' patch embeddings are replaced by a learned mask token
                (masked-frame modelling, stage 1).

        Returns:
            Patch tokens ``(B, T, N, D)``.
        """
        B, T, H, W = frames.shape
        v = self.vit
        x = v.patch_embed(frames.reshape(B * T, 1, H, W))  # (B*T, N, D)
        if hide is not None:
            x = torch.where(hide.reshape(B * T, 1, 1), self.mask_token.to(x.dtype), x)
        x = v.norm_pre(v.patch_drop(v._pos_embed(x)))
        for i, blk in enumerate(v.blocks):
            x = blk(x)
            if str(i) in self.adapters:
                x = self.adapters[str(i)](x.view(B, T, -1, self.dim), mask).reshape(B * T, -1, self.dim)
        return v.norm(x).view(B, T, -1, self.dim)


class DetectionHead(nn.Module):
    """Per-event and per-window attack logits from tokens ``(B, T, N, D)`` (ours).

    Frame vector ``f_t = mean_n Z'_t[n]``; event logit ``w_e . f_t``; window vector = attention pooling of the
    ``f_t`` over real frames; window logit from a 2-layer MLP.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.event = nn.Linear(dim, 1)
        self.score = nn.Linear(dim, 1)
        self.mlp = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 1))

    def forward(self, z: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns ``(window_logit (B,), event_logits (B, T), frame_vectors (B, T, D))``."""
        f = z.mean(2)
        s = self.score(f).squeeze(-1).masked_fill(~mask, float("-inf"))
        pooled = (torch.softmax(s, dim=1)[..., None] * f).sum(1)
        return self.mlp(pooled).squeeze(-1), self.event(f).squeeze(-1), f
