"""``RLCrackerDataModule``: watermarked texts to rewrite (stage 1), or Alpaca outputs to copy (stage 0).

Inputs (UTF-8):

- ``path`` / ``val_path`` / ``test_path`` (stage ``grpo``; the user's own data goes here): JSON lines, one object
  per line with ``question`` (the instruction the text answers; non-empty string) and ``watermarked`` (the text to
  rewrite; non-empty string of at most ``max_text_tokens`` tokens). Other keys are ignored. The shipped files are
  ``data/rlcracker/<watermark>_{train,val,test_short}.jsonl`` (made by ``python -m zoo.methods.rlcracker.watermarked_answers``).
  ``test_path`` may be ``null`` (no held-out report at the end of training).
- ``alpaca_path`` (stage ``copy``): the Alpaca JSON list ``[{"instruction", "input", "output"}]``; records
  ``< copy_records`` with an output of 1..``max_text_tokens`` tokens become conversations "rewrite prompt around
  the output -> the output" (stage 0 teaches zoo-lm.chat to copy; ours), the last ``copy_val`` of them validate.

A bad line fails in the constructor, before a run directory exists: ``DataError("file:line: key ...")``. Batches
are lists of row dicts (stage ``grpo``) or padded ``{"input_ids", "labels", "attention_mask"}`` (stage ``copy``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import lightning as L
import torch
from torch.utils.data import DataLoader

from zoo.core.constraints import DataFile, NonNegativeInt, OneOf, PositiveInt
from zoo.core.data import DataError, read_jsonl
from zoo.methods.rlcracker.prompts import REWRITE, encode_plain

STAGES = ("copy", "grpo")
#: What a texts JSONL holds (checked before torch too: :mod:`zoo.core.datafiles`).
TEXTS = DataFile("jsonl", ("question", "watermarked"), text=("question", "watermarked"))


def read_texts(path: str, tokenizer, max_text_tokens: int) -> list[dict]:
    """Rows ``{question, watermarked, ...}`` of a JSONL file, each checked.

    Raises:
        DataError: ``file:line: key ...`` for a missing, non-string or empty ``question``/``watermarked``, or a
            ``watermarked`` text longer than ``max_text_tokens`` tokens.
    """
    rows = read_jsonl(path, required=TEXTS.columns, types=dict.fromkeys(TEXTS.text, str))
    lines = [i for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
    for line, row in zip(lines, rows):
        for key in ("question", "watermarked"):
            if not row[key].strip():
                raise DataError(f"{path}:{line}: key {key!r} is empty")
        n = len(encode_plain(tokenizer, row["watermarked"]))
        if n > max_text_tokens:
            raise DataError(
                f"{path}:{line}: key 'watermarked' has {n} tokens, more than data.max_text_tokens="
                f"{max_text_tokens} (the rewrite prompt must hold it twice)"
            )
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


def copy_conversations(alpaca_path: str, tokenizer, copy_records: int, max_text_tokens: int) -> list[dict]:
    """Stage-0 conversations from Alpaca records ``< copy_records``: user = rewrite prompt around the output,
    assistant = the output unchanged (ours: a 5M model cannot paraphrase; it first learns to reproduce)."""
    recs = json.loads(Path(alpaca_path).read_text(encoding="utf-8"))
    out = []
    for rec in recs[:copy_records]:
        text = rec["output"].strip()
        if text and len(encode_plain(tokenizer, text)) <= max_text_tokens:
            out.append(
                {
                    "messages": [
                        {"role": "user", "content": REWRITE.format(text=text)},
                        {"role": "assistant", "content": text},
                    ]
                }
            )
    return out


class RLCrackerDataModule(L.LightningDataModule):
    """Args:
    stage: ``copy`` (stage 0, SFT) or ``grpo`` (stage 1, RL).
    path, val_path, test_path, alpaca_path: see the module docstring.
    tokenizer: the tokenizer that counts ``max_text_tokens`` and encodes stage 0: a base id (its own tokenizer), a
        tokenizer or model directory, a Hub name, or ``null`` / a preset name (the shipped zoo-lm tokenizer). Recipes
        over a base set it to ``${model.arch}``.
    max_text_tokens: longest text to rewrite (224: twice fits in the 512-token rewrite).
    max_length: longest stage-0 conversation in tokens (cut on the right).
    copy_records, copy_val: Alpaca records used by stage 0 and how many of them validate.
    batch_size: prompts (stage 1) or conversations (stage 0) per step.
    n_val: validate on the first n val rows (``null``: all).
    num_workers: DataLoader worker processes.
    seed: seed of the training order.
    """

    def __init__(
        self,
        stage: Annotated[str, OneOf(STAGES)] = "grpo",
        path: Annotated[str | None, TEXTS] = "data/rlcracker/unigram_train.jsonl",
        val_path: Annotated[str | None, TEXTS] = "data/rlcracker/unigram_val.jsonl",
        test_path: Annotated[str | None, TEXTS] = "data/rlcracker/unigram_test_short.jsonl",
        alpaca_path: str = "data/alpaca-subset/alpaca_5000.json",
        tokenizer: str | None = None,
        max_text_tokens: PositiveInt = 224,
        max_length: PositiveInt = 512,
        copy_records: PositiveInt = 4517,
        copy_val: PositiveInt = 64,
        batch_size: PositiveInt = 4,
        n_val: PositiveInt | None = None,
        num_workers: NonNegativeInt = 0,
        seed: NonNegativeInt = 0,
    ):
        super().__init__()
        if stage not in STAGES:
            raise ValueError(f"data.stage must be one of {STAGES}, got {stage!r}")
        from zoo.models.causal_lm import load_tokenizer, tokenizer_for

        self.stage, self.batch_size, self.num_workers, self.seed = stage, batch_size, num_workers, seed
        self.max_length, self.test_path = max_length, test_path
        self.tokenizer = load_tokenizer(tokenizer_for(tokenizer, None) if tokenizer else None)
        if stage == "grpo":
            if path is None or val_path is None:
                raise ValueError("data.path and data.val_path are required for stage grpo")
            self.train_rows = read_texts(path, self.tokenizer, max_text_tokens)
            self.val_rows = read_texts(val_path, self.tokenizer, max_text_tokens)[:n_val]
            self.test_rows = read_texts(test_path, self.tokenizer, max_text_tokens) if test_path else []
        else:
            from zoo.models.chat import encode_chat

            convs = copy_conversations(alpaca_path, self.tokenizer, copy_records, max_text_tokens)
            enc = [encode_chat(self.tokenizer, c["messages"], max_length) for c in convs]
            self.train_rows, self.val_rows, self.test_rows = enc[:-copy_val], enc[-copy_val:][:n_val], []

    def _collate(self, rows):
        if self.stage == "grpo":
            return rows
        width = max(len(r["input_ids"]) for r in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r["input_ids"])
            ids[i, :n], labels[i, :n], mask[i, :n] = torch.tensor(r["input_ids"]), torch.tensor(r["labels"]), 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    def train_dataloader(self):
        g = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            self.train_rows,
            batch_size=self.batch_size,
            shuffle=True,
            generator=g,
            collate_fn=self._collate,
            num_workers=self.num_workers,
            drop_last=True,
        )

    def val_dataloader(self):
        return DataLoader(
            self.val_rows,
            batch_size=self.batch_size if self.stage == "copy" else len(self.val_rows),
            shuffle=False,
            collate_fn=self._collate,
            num_workers=self.num_workers,
        )
