"""Plain text as token documents, shared by the pre-training datamodules (zoo-lm's ``pretrain`` mode, FAST's block
pipelines)."""

from __future__ import annotations

from collections.abc import Sequence


def wrap_document(tokenizer, ids: Sequence[int]) -> list[int]:
    """``<bos> ids <eos>`` with the boundary tokens ``tokenizer`` has: a Qwen-style tokenizer without a BOS
    (``bos_token_id`` None) gives ``ids <eos>``, one without an EOS leaves that end open (trl#1885)."""
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    return [*([bos] if bos is not None else []), *ids, *([eos] if eos is not None else [])]
