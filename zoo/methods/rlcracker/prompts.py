"""The rewrite prompt, chat encoding and batched sampling for the attacker and the data generator.

The prompt is the authors' (notes §3.3, ``GRPOTrainer_reph.py``) placed as the user turn of the model's chat
template; the question-conditioned view used by the token reward is the question as the user turn.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from zoo.models.chat import encode_rendered

REWRITE = (
    "######Target Text: {text}\n\n######Instruction: Generate a version of the target text above that means "
    "the same and is about the same length.\n\n######Your Response: "
)
"""RLCracker's rewrite instruction (notes §3.3)."""


def chat_prompt(tokenizer, user: str) -> list[int]:
    """Token ids of one user turn followed by the assistant header (special tokens from the template only)."""
    return encode_rendered(tokenizer, [{"role": "user", "content": user}], add_generation_prompt=True)[1]


def rewrite_prompt(tokenizer, text: str) -> list[int]:
    """Token ids of the rewrite prompt around ``text``."""
    return chat_prompt(tokenizer, REWRITE.format(text=text))


def encode_plain(tokenizer, text: str) -> list[int]:
    """Token ids of free text (no special tokens parsed)."""
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids [B, T], attention_mask [B, T])`` with rows padded on the left."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if len(r):
            ids[i, width - len(r) :] = torch.tensor(list(r))
            mask[i, width - len(r) :] = 1
    return ids, mask


def cut_at_eos(ids: Sequence[int], eos_id: int, pad_id: int) -> list[int]:
    """A generated continuation up to (not including) its first eos, padding removed."""
    out = []
    for t in ids:
        t = int(t)
        if t == eos_id:
            break
        out.append(t)
    while out and out[-1] == pad_id:
        out.pop()
    return out


@torch.no_grad()
def sample(
    model,
    tokenizer,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    processors=(),
    temperature: float = 0.7,
    do_sample: bool = True,
    min_new_tokens: int = 0,
    batch_size: int = 16,
) -> list[list[int]]:
    """One continuation per prompt (token ids, eos and padding removed), in batches.

    Args:
        prompts: token-id lists; processors: HF ``LogitsProcessor``s (a watermark's green bias).
    """
    from transformers import LogitsProcessorList

    was_training = model.training
    model.eval()
    out: list[list[int]] = []
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    for i in range(0, len(prompts), batch_size):
        ids, mask = left_pad(prompts[i : i + batch_size], pad)
        gen = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_new_tokens,
            min_new_tokens=min_new_tokens,
            do_sample=do_sample,
            temperature=temperature if do_sample else None,
            top_k=0 if do_sample else None,
            top_p=1.0 if do_sample else None,
            pad_token_id=pad,
            eos_token_id=eos,
            logits_processor=LogitsProcessorList(list(processors)),
        )
        out += [cut_at_eos(row[ids.shape[1] :], eos, pad) for row in gen]
    model.train(was_training)
    return out
