"""Sampled rewrites and their distance from the initial policy (no detector here: the attacker's side).

:func:`rewrite_with_kl` returns rewrites plus the mean per-token ``KL(π_θ ‖ π_0)`` over the vocabulary at the
rewrite's positions (exact, not k3): the x-axis of the adaptive robustness radius (ours, notes §3.1).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch

from zoo.methods.rlcracker.prompts import left_pad, rewrite_prompt
from zoo.models import grpo


@torch.no_grad()
def rewrite_with_kl(
    module, texts: Sequence[str], samples: int = 1, reference=None, batch_size: int = 16
) -> tuple[list[str], float]:
    """``samples`` rewrites of each text (grouped: text i's are ``i*samples ..``) and the mean per-token KL.

    Args:
        module: an ``RLCrackerModule`` (its ``lm``, tokenizer and sampling settings).
        reference: π_0 (a causal LM); ``None``: the module's own (``module.reference_model()``: the frozen copy from
            the start of stage 1, or the base with the adapters disabled).
    """
    hp, tok = module.hparams, module.tokenizer
    out, kl_sum, kl_n = [], 0.0, 0.0
    for i in range(0, len(texts), batch_size):
        ids, mask = left_pad([rewrite_prompt(tok, t) for t in texts[i : i + batch_size]], tok.pad_token_id)
        ro = grpo.sample_rollouts(
            module.lm, ids, mask, samples, hp.max_new_tokens, [tok.eos_token_id], tok.pad_token_id, hp.temperature
        )
        out += module.decode(ro)
        n = ro.completion_ids.shape[1]
        pos = ro.attention_mask.long().cumsum(-1).sub(1).clamp(min=0)
        lp = torch.log_softmax(
            module.lm(input_ids=ro.input_ids, attention_mask=ro.attention_mask, position_ids=pos)
            .logits[:, -n - 1 : -1]
            .float(),
            -1,
        )
        with module.reference_model() if reference is None else contextlib.nullcontext(reference) as ref:
            lq = torch.log_softmax(
                ref(input_ids=ro.input_ids, attention_mask=ro.attention_mask, position_ids=pos)
                .logits[:, -n - 1 : -1]
                .float(),
                -1,
            )
        kl = (lp.exp() * (lp - lq)).sum(-1)
        kl_sum += float((kl * ro.completion_mask).sum())
        kl_n += float(ro.completion_mask.sum())
    return out, kl_sum / max(kl_n, 1.0)
