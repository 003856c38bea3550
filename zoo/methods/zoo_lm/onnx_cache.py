"""One decoding step of the LM with its KV cache as an exportable graph (``model_kv.onnx``), *ours*.

``CachedStep(lm)(input_ids, past_mask, attention_mask, position_ids, k_0, v_0, ..., k_{L-1}, v_{L-1})`` returns
``(logits, k'_0, v'_0, ...)``: ``input_ids (B, T)`` the new tokens, ``past_mask (B, P)`` / ``attention_mask (B, T)``
1 for real positions of the cache and of the new tokens, ``position_ids (B, T)`` their positions (``cumsum(mask) - 1``
over past and new), ``k_l, v_l (B, heads, P, head_dim)`` the cache; the outputs are the logits ``(B, T, V)`` and the
cache grown to ``P + T``. A first step has no cache: pass one position of zeros with ``past_mask`` 0 (it is never
attended to). Batch, ``T`` and ``P`` are free in the exported graph.
"""

from __future__ import annotations

import torch
from torch import nn


class CachedStep(nn.Module):
    """Wraps a transformers causal LM (Llama family) as ``(tokens, masks, positions, flat cache) -> (logits, cache)``."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, past_mask, attention_mask, position_ids, *past):
        from transformers import DynamicCache

        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        cache = DynamicCache(ddp_cache_data=pairs, config=self.lm.config)
        out = self.lm(
            input_ids=input_ids,
            attention_mask=torch.cat([past_mask, attention_mask], 1),
            position_ids=position_ids,
            cache=cache,
            use_cache=True,
        )
        grown = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        return (out.logits, *[t for layer in grown.layers for t in (layer.keys, layer.values)])


def empty_cache(lm: nn.Module, batch: int) -> list[torch.Tensor]:
    """The first step's cache: one zero position per layer, ``(batch, heads, 1, head_dim)`` each (mask it with 0)."""
    c = lm.config
    shape = (batch, c.num_key_value_heads, 1, c.hidden_size // c.num_attention_heads)
    return [torch.zeros(shape) for _ in range(2 * c.num_hidden_layers)]


def cached_step_graph(lm: nn.Module) -> tuple:
    """``(CachedStep, example inputs, dynamic shapes)`` for :meth:`zoo.core.module.ZooModule.export_graphs`: 2
    sequences of 3 new tokens after a 4-position cache (seeded values), batch / new / past lengths free."""
    from torch.export import Dim

    c, g = lm.config, torch.Generator().manual_seed(0)
    B, T, P = 2, 3, 4
    past = [
        torch.randn(B, c.num_key_value_heads, P, c.hidden_size // c.num_attention_heads, generator=g)
        for _ in range(2 * c.num_hidden_layers)
    ]
    args = (
        torch.randint(3, c.vocab_size, (B, T), generator=g),
        torch.ones(B, P, dtype=torch.long),
        torch.ones(B, T, dtype=torch.long),
        torch.arange(P, P + T).expand(B, T).clone(),
        *past,
    )
    batch, new, old = Dim("batch", min=1, max=1024), Dim("seq", min=1, max=4096), Dim("past", min=1, max=4096)
    dynamic = {
        "input_ids": {0: batch, 1: new},
        "past_mask": {0: batch, 1: old},
        "attention_mask": {0: batch, 1: new},
        "position_ids": {0: batch, 1: new},
        "past": tuple({0: batch, 2: old} for _ in past),
    }
    return CachedStep(lm).eval(), args, dynamic
