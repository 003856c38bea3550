"""Data for zoo-lm: packed plain text (pre-training) or chat JSONL with assistant-only labels (SFT).

``mode: pretrain`` — ``path`` is one or more UTF-8 text files. Without ``val_path``, the last ``val_fraction`` of
each file's lines is validation (the usual tinyshakespeare 90/10 convention). Each file part is tokenised as one
document ``<bos> text <eos>``; the documents of a split are concatenated in file order and cut into
non-overlapping blocks of ``max_length`` tokens, the tail shorter than a block is dropped (*packing*). Attention
runs across document boundaries inside a block (as in GPT-2 pre-training); every token is a target.

``mode: chat`` — ``path`` is one or more JSON-lines files, one conversation per line:
``{"messages": [{"role": "system"|"user"|"assistant", "content": str}, ...]}`` (other keys are ignored). The
conversation is rendered with the tokenizer's chat template and only assistant tokens (reply + end-of-turn token)
are targets (:func:`zoo.models.chat.encode_chat`). Conversations are cut to ``max_length`` tokens on the right;
one with no assistant token left is dropped (counted in ``dropped``). Without ``val_path``, a seeded
``val_fraction`` of conversations is validation. Batches are padded on the right to their longest sequence with
the pad token (``attention_mask`` 0, label -100).

A bad line raises :class:`zoo.core.data.DataError` naming ``file:line`` and the key; a chat file's, in the recipe check
before torch is imported (``CHAT``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from zoo.core.constraints import DataFile, Fraction, NonNegativeInt, OneOf, PositiveInt
from zoo.core.data import DataError, repo_root, seeded_split
from zoo.data.chat import read_conversations
from zoo.data.text import wrap_document
from zoo.models.causal_lm import load_tokenizer
from zoo.models.chat import IGNORE_INDEX, encode_chat

MODES = ("pretrain", "chat")
#: What a conversation with an empty message does: kept (zoo-lm-chat's shipped data holds three empty replies).
EMPTY_CONTENT = "keep"
#: ``mode: chat``'s files: conversations as :func:`zoo.data.chat.read_conversations` reads them (checked before torch).
CHAT = DataFile(
    "jsonl", reader="zoo.data.chat:read_conversations", options={"empty_content": EMPTY_CONTENT}, when={"mode": "chat"}
)


def validation_cut(n_lines: int, val_fraction: float) -> int:
    """Index of the first validation line when the last ``val_fraction`` of ``n_lines`` lines is held out."""
    return n_lines - round(val_fraction * n_lines)


def split_text(text: str, val_fraction: float) -> tuple[str, str]:
    """Split ``text`` by lines into (first part, last ``val_fraction`` of the lines); each part ends with ``\\n``.

    Lines are separated by ``"\\n"`` only; a final newline does not make an extra empty line.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    cut = validation_cut(len(lines), val_fraction)
    join = lambda part: "\n".join(part) + "\n" if part else ""
    return join(lines[:cut]), join(lines[cut:])


def pack(documents: Sequence[Sequence[int]], block_size: int) -> torch.Tensor:
    """Concatenate token documents and cut them into non-overlapping blocks.

    Args:
        documents: token id lists (each already wrapped in bos/eos by the caller, :func:`zoo.data.text.wrap_document`).
        block_size: tokens per block.

    Returns:
        ``LongTensor[n_blocks, block_size]`` with ``n_blocks = total_tokens // block_size`` (the tail is dropped).
    """
    flat = torch.tensor([t for doc in documents for t in doc], dtype=torch.long)
    n = flat.numel() // block_size
    return flat[: n * block_size].view(n, block_size)


class TokenDataset(Dataset):
    """A list of ``{"input_ids": LongTensor[T], "labels": LongTensor[T]}`` examples (T may vary)."""

    def __init__(self, examples: list[dict[str, torch.Tensor]]):
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.examples[i]


class PadCollate:
    """Right-pad a list of examples to the longest: ``input_ids``/``labels``/``attention_mask`` all ``[B, T_max]``."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, batch: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        t_max = max(len(ex["input_ids"]) for ex in batch)
        ids = torch.full((len(batch), t_max), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(batch), t_max), IGNORE_INDEX, dtype=torch.long)
        mask = torch.zeros((len(batch), t_max), dtype=torch.long)
        for i, ex in enumerate(batch):
            n = len(ex["input_ids"])
            ids[i, :n], labels[i, :n], mask[i, :n] = ex["input_ids"], ex["labels"], 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def _paths(value: str | Sequence[str] | None) -> list[Path]:
    if value is None:
        return []
    root = repo_root()
    return [
        p if p.is_absolute() or p.exists() else root / p
        for p in map(Path, [value] if isinstance(value, str) else value)
    ]


class LMDataModule(L.LightningDataModule):
    """Pre-training text or chat SFT data for a causal LM (see the module docstring for formats and packing).

    Args:
        mode: ``pretrain`` (plain text, packed) or ``chat`` (chat JSONL, assistant-only labels).
        path: training file(s); relative paths are taken from the repository root when not found as given.
        val_path: validation file(s); ``None`` holds out ``val_fraction`` of ``path`` instead.
        val_fraction: the held-out share when ``val_path`` is ``None`` (lines for text, conversations for chat).
        max_length: block size (pretrain) or maximum conversation length (chat), in tokens.
        batch_size: sequences per batch.
        num_workers: DataLoader workers.
        tokenizer: tokenizer directory; ``None`` takes the attached LightningModule's ``tokenizer`` when there is
            one, else the shipped zoo-lm tokenizer.
        seed: seed of the chat validation split.

    Raises:
        ValueError: unknown ``mode`` or non-positive sizes.
        DataError: a missing file or bad line (at ``setup``).
    """

    def __init__(
        self,
        mode: Annotated[str, OneOf(MODES)] = "pretrain",
        path: Annotated[str | list[str], CHAT] = (
            "data/tinyshakespeare/input.txt",
            "data/alpaca-subset/alpaca_5000.txt",
        ),
        val_path: Annotated[str | list[str] | None, CHAT] = None,
        val_fraction: Fraction = 0.1,
        max_length: PositiveInt = 256,
        batch_size: PositiveInt = 16,
        num_workers: NonNegativeInt = 0,
        tokenizer: str | None = None,
        seed: NonNegativeInt = 0,
    ):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"data.mode: {mode!r} is not one of {MODES}")
        if max_length < 2 or batch_size < 1:
            raise ValueError(f"data.max_length ({max_length}) must be >= 2 and data.batch_size ({batch_size}) >= 1")
        if not 0 <= val_fraction < 1:
            raise ValueError(f"data.val_fraction must be in [0, 1), got {val_fraction}")
        self.mode, self.paths, self.val_paths = mode, _paths(path), _paths(val_path)
        self.val_fraction, self.max_length, self.batch_size = val_fraction, max_length, batch_size
        self.num_workers, self.tokenizer_path, self.seed = num_workers, tokenizer, seed
        self.tokenizer = None
        self.train_set: TokenDataset | None = None
        self.val_set: TokenDataset | None = None
        self.dropped = 0

    def _get_tokenizer(self):
        """The attached model's tokenizer (it follows ``model.arch`` / ``model.tokenizer``); ``data.tokenizer`` only
        without a model, or when it is the same tokenizer (else ValueError naming both sides)."""
        from zoo.models.causal_lm import check_same_tokenizer

        module = getattr(self.trainer, "lightning_module", None) if self.trainer is not None else None
        model_tok = getattr(module, "tokenizer", None)
        if self.tokenizer_path is None:
            return model_tok if model_tok is not None else load_tokenizer(None)
        tok = load_tokenizer(self.tokenizer_path)
        if model_tok is not None:
            check_same_tokenizer(
                tok,
                model_tok,
                f"data.tokenizer {self.tokenizer_path!r}",
                f"the model's tokenizer ({type(module).__name__})",
            )
        return tok

    def setup(self, stage: str | None = None) -> None:
        """Read and tokenise the files once (builds ``train_set`` and ``val_set``)."""
        if self.train_set is not None:
            return
        for p in self.paths + self.val_paths:
            if not p.is_file():
                raise DataError(f"{p}: no such file (data.path / data.val_path)")
        self.tokenizer = self._get_tokenizer()
        build = self._pretrain_sets if self.mode == "pretrain" else self._chat_sets
        train, val = build()
        self.train_set, self.val_set = TokenDataset(train), TokenDataset(val)
        if not len(self.train_set):
            raise DataError(
                f"{', '.join(map(str, self.paths))}: no training {'blocks' if self.mode == 'pretrain' else 'conversations'} "
                f"of max_length={self.max_length}"
            )

    def _document(self, text: str) -> list[int]:
        tok = self.tokenizer
        # literal "</s>" in a document is text, not a document boundary (special-token parsing off)
        ids = tok(text, add_special_tokens=False, split_special_tokens=True, verbose=False)["input_ids"]
        return wrap_document(tok, ids)

    def _pretrain_sets(self):
        train_docs, val_docs = [], []
        for p in self.paths:
            text = p.read_text(encoding="utf-8")
            head, tail = split_text(text, self.val_fraction) if not self.val_paths else (text, "")
            train_docs.append(self._document(head))
            if tail:
                val_docs.append(self._document(tail))
        val_docs += [self._document(p.read_text(encoding="utf-8")) for p in self.val_paths]
        as_examples = lambda blocks: [{"input_ids": b, "labels": b} for b in blocks]
        return (as_examples(pack(train_docs, self.max_length)), as_examples(pack(val_docs, self.max_length)))

    def _encode(self, conversations) -> list[dict[str, torch.Tensor]]:
        out = []
        for messages in conversations:
            enc = encode_chat(self.tokenizer, messages, self.max_length)
            if all(t == IGNORE_INDEX for t in enc["labels"]):
                self.dropped += 1
                continue
            out.append({k: torch.tensor(v, dtype=torch.long) for k, v in enc.items()})
        return out

    def _chat_sets(self):
        train = [c for p in self.paths for c in read_conversations(p, EMPTY_CONTENT)[0]]
        if self.val_paths:
            val = [c for p in self.val_paths for c in read_conversations(p, EMPTY_CONTENT)[0]]
        else:
            val_idx, _ = seeded_split(len(train), [self.val_fraction, 1 - self.val_fraction], self.seed)
            held = set(val_idx)
            train, val = [c for i, c in enumerate(train) if i not in held], [train[i] for i in val_idx]
        return self._encode(train), self._encode(val)

    def _loader(self, data: TokenDataset, shuffle: bool) -> DataLoader:
        return DataLoader(
            data,
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=PadCollate(self.tokenizer.pad_token_id),
            drop_last=False,
        )

    def train_dataloader(self) -> DataLoader:
        """Shuffled training batches ``{"input_ids", "labels", "attention_mask"}``, each ``LongTensor[B, T]``."""
        return self._loader(self.train_set, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        """Validation batches in file order (same keys and shapes as training)."""
        return self._loader(self.val_set, shuffle=False)
