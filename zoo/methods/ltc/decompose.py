"""Exact direct-effect decomposition of an open_clip ViT image embedding (Gandelsman et al., ICLR 2024; notes §1.2).

The CLS token of a pre-LN ViT is a sum of residual updates:
``z_cls = e_cls + Σ_l Σ_h [MSA^{l,h}]_cls + Σ_l [MLP^l]_cls`` with ``e_cls`` the (``ln_pre``-ed) embedding term and
``[MSA^{l,h}]_cls = Σ_i α^{l,h}_{cls,i} (W_V^{l,h} LN_1^l(z_i) + b_V^{l,h}) W_O^{l,h}ᵀ + b_O / H``
(the out-projection bias split evenly over the ``H`` heads). ``ln_post`` is linear once its per-image mean ``μ`` and
standard deviation ``σ`` of ``z_cls`` are fixed, so with ``K`` summands each summand ``x`` maps to
``post(x) = (γ ⊙ (x − μ/K) / σ + β/K) P`` and ``Σ post(x) = LN_post(z_cls) P = encode_image`` exactly (the fold of the
authors' ``prs_hook.py``). :func:`decompose` returns ``heads (B, L, H, D)`` and ``others (B, L + 1, D)`` (index 0
the embedding term, ``l + 1`` the MLP of block ``l``), optionally ``tokens (B, L, H, N, D)`` with
``Σ_i tokens[..., i, :] = heads`` (per-token terms ``c_{i,l,h}``; the head's bias and ``μ/K`` share split evenly
over the ``N`` tokens).

Works for any open_clip ``VisionTransformer`` with ``ResidualAttentionBlock`` blocks (``nn.MultiheadAttention``,
optional LayerScale), CLS-token pooling and no attentional pooler: the tiny CLIP here and ViT-B-16 alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class Decomposition:
    """``heads (B, L, H, D)``, ``others (B, L + 1, D)`` (embedding, then MLPs), optional ``tokens (B, L, H, N, D)``;
    ``embedding()`` = their sum ``(B, D)``."""

    heads: torch.Tensor
    others: torch.Tensor
    tokens: torch.Tensor | None = None

    def embedding(self) -> torch.Tensor:
        return self.heads.sum((1, 2)) + self.others.sum(1)


def _check(visual: nn.Module) -> None:
    if getattr(visual, "attn_pool", None) is not None or getattr(visual, "pool_type", "tok") != "tok":
        raise ValueError("decompose: only CLS-token pooling without an attentional pooler is supported")
    for blk in visual.transformer.resblocks:
        if not isinstance(getattr(blk, "attn", None), nn.MultiheadAttention):
            raise ValueError(  # noqa: TRY004  (an unsupported architecture, documented as ValueError)
                f"decompose: block {type(blk).__name__} has no nn.MultiheadAttention `attn`"
            )
        if getattr(blk, "ln_1_kv", None) is not None or type(getattr(blk, "ln_attn", nn.Identity())) is not nn.Identity:
            raise ValueError("decompose: cross-attention / scaled attention blocks are not supported")


def head_outputs(
    attn: nn.MultiheadAttention, h: torch.Tensor, n_tokens: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Self-attention of ``h (B, N, W)`` split by head (batch first, no mask).

    Returns:
        ``(out (B, N, W), cls_heads (B, H, W), cls_tokens (B, H, N, W) | None)``: the full attention output
        (``attn(h, h, h)[0]``), each head's CLS output including ``b_O / H``, and (with ``n_tokens``) its split
        over source tokens ``i`` (``α_{cls,i} W_O^h (W_V^h h_i + b_V^h) + b_O / (H N)``).
    """
    B, N, W = h.shape
    H = attn.num_heads
    dh = W // H
    q, k, v = F.linear(h, attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)
    q, k, v = (t.view(B, N, H, dh).transpose(1, 2) for t in (q, k, v))  # (B, H, N, dh)
    alpha = torch.softmax(q @ k.transpose(-1, -2) / dh**0.5, dim=-1)  # (B, H, N, N)
    ctx = alpha @ v  # (B, H, N, dh)
    w_o = attn.out_proj.weight.view(W, H, dh)  # (W_out, H, dh)
    b_o = attn.out_proj.bias if attn.out_proj.bias is not None else h.new_zeros(W)
    out = ctx.transpose(1, 2).reshape(B, N, W) @ attn.out_proj.weight.T + b_o
    cls_heads = torch.einsum("bhd,whd->bhw", ctx[:, :, 0], w_o) + b_o / H
    cls_tokens = None
    if n_tokens:
        vo = torch.einsum("bhnd,whd->bhnw", v, w_o)  # (B, H, N, W)
        cls_tokens = alpha[:, :, 0, :, None] * vo + b_o / (H * N)
    return out, cls_heads, cls_tokens


def _layer_scale(ls: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return x if isinstance(ls, nn.Identity) else x * ls.gamma


@torch.no_grad()
def decompose(visual: nn.Module, images: torch.Tensor, tokens: bool = False) -> Decomposition:
    """Per-head direct effects of an open_clip ViT on ``images (B, 3, S, S)`` (already normalised).

    Returns:
        :class:`Decomposition` in the joint image/text space (``D = visual.output_dim``), each part folded through
        ``ln_post`` and the projection; ``Decomposition.embedding()`` equals ``visual(images)``.

    Raises:
        ValueError: an unsupported architecture (attentional pooler, average pooling, custom blocks).
    """
    _check(visual)
    x = visual._embeds(images)  # (B, N, W), after ln_pre
    cls_terms = [x[:, None, 0]]  # list of (B, k, W)
    head_terms, tok_terms = [], []
    for blk in visual.transformer.resblocks:
        out, cls_heads, cls_tok = head_outputs(blk.attn, blk.ln_1(x), tokens)
        head_terms.append(_layer_scale(blk.ls_1, cls_heads))
        if tokens:
            tok_terms.append(_layer_scale(blk.ls_1, cls_tok))
        x = x + _layer_scale(blk.ls_1, out)
        mlp = _layer_scale(blk.ls_2, blk.mlp(blk.ln_2(x)))
        cls_terms.append(mlp[:, None, 0])
        x = x + mlp
    heads = torch.stack(head_terms, 1)  # (B, L, H, W)
    others = torch.cat(cls_terms, 1)  # (B, L + 1, W)
    ln, proj = visual.ln_post, visual.proj
    z = x[:, 0]
    mu = z.mean(-1)
    sigma = torch.sqrt(z.var(-1, unbiased=False) + ln.eps)
    K = heads.shape[1] * heads.shape[2] + others.shape[1]
    gamma = ln.weight if ln.weight is not None else torch.ones_like(z[0])
    beta = ln.bias if ln.bias is not None else torch.zeros_like(z[0])

    def post(t: torch.Tensor, share: int) -> torch.Tensor:
        shape = (-1,) + (1,) * (t.dim() - 2)
        y = gamma * (t - (mu / share).view(shape + (1,))) / sigma.view(shape + (1,)) + beta / share
        return y @ proj if proj is not None else y

    tok = None
    if tokens:
        t = torch.stack(tok_terms, 1)  # (B, L, H, N, W)
        tok = post(t, K * t.shape[3])
    return Decomposition(post(heads, K), post(others, K), tok)
