"""``FastSAEDataModule``: residual-stream activation streams of the three pipelines (FAST, BT(F), BT(P)).

Data (all shipped): ``path`` is a chat JSON-lines file, one conversation per line,
``{"messages": [{"role": "system"|"user"|"assistant", "content": non-empty str}, ...]}`` with at least one
assistant turn (other keys ignored; default ``data/zoo-lm-chat/train.jsonl``, zoo-lm.chat's own SFT data);
``pretrain_path`` are plain-text files (BT(P); default zoo-lm's pre-training text, tinyshakespeare + Alpaca);
``val_path`` is a chat JSON-lines file evaluated one conversation at a time. A bad chat line raises
:class:`zoo.core.data.DataError` ``file:line: key`` in the recipe check, before torch is imported, for a user's file,
and when the datamodule is built (before any run directory).

Pipeline (§3.2): conversations are deduplicated by the 20-gram hash rule (Alg. 1; the count is logged), shuffled
once with ``data_seed`` and rendered with the LM's chat template. ``fast`` runs each alone (cut at
``max_length``); ``bt_chat`` packs them into ``block_size`` blocks; ``bt_pretrain`` packs the pre-training text.
Sequences are taken in order until ``harvest_tokens`` tokens, run once through the LM (``model.lm``) up to block
``model.layer`` and cached (``activation_cache``; the LM in eval mode is deterministic, so replaying the cache equals
re-running the LM). Training streams ``training_tokens`` tokens (several passes over the cache, each in a fresh
sequence order) through the mixing buffer (``buffer_tokens``) in ``batch_size`` batches.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
from pathlib import Path
from typing import Annotated, Literal

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from zoo.core.constraints import DataFile, NonNegativeInt, OneOf, PositiveInt
from zoo.core.data import DataError, repo_root
from zoo.data.chat import read_conversations
from zoo.methods.fast.pipelines import (
    PIPELINES,
    encode_conversations,
    harvest,
    mixing_buffer,
    ngram_dedup,
    pack_blocks,
    pretrain_documents,
)

log = logging.getLogger(__name__)
CHAT = "data/zoo-lm-chat/train.jsonl"
PRETRAIN = ["data/tinyshakespeare/input.txt", "data/alpaca-subset/alpaca_5000.txt"]
VAL = "data/zoo-lm-chat/val.jsonl"
#: A chat file (``data.path``, ``data.val_path``), read as the datamodule reads it (with its ``empty_content``) in the
#: recipe check, before torch.
CHAT_FILE = DataFile("jsonl", reader="zoo.data.chat:read_conversations", option_args=("empty_content",))


def _resolve(p: str) -> Path:
    path = Path(p)
    return path if path.is_absolute() or path.exists() else repo_root() / path


ROLES = ("system", "user", "assistant")


def template_token_ids(tokenizer) -> list[int]:
    """Ids of the tokenizer's special tokens a chat template writes: every special token but a padding token of its
    own (zoo-lm: ``<s>``, ``</s>``, ``<|system|>``, ``<|user|>``, ``<|assistant|>``; SmolLM2, whose padding *is* its
    EOS: ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``)."""
    own_pad = {tokenizer.pad_token_id} - {tokenizer.bos_token_id, tokenizer.eos_token_id}
    return sorted(set(tokenizer.all_special_ids) - own_pad)


def template_mask(tokenizer, ids: list[int]) -> torch.Tensor:
    """Which tokens of a template-rendered conversation MSE_st is measured on (the paper's "special tokens"): the
    template's special tokens (:func:`template_token_ids`) and the role name a special token opens a turn with
    (ChatML's ``<|im_start|>user``; the paper's Qwen list has ``user`` and ``assistant``). A role name is the run of
    ordinary tokens right after a special token, up to the next token holding a newline, whose text is one of
    :data:`ROLES` (SmolLM2 writes ``assistant`` as two tokens); message contents never follow a special token
    directly in these templates, so no content token is marked. zoo-lm's roles are special tokens themselves.

    Args:
        ids: ``[T]`` token ids of one conversation.

    Returns:
        ``BoolTensor[T]``.
    """
    special = set(template_token_ids(tokenizer))
    mask = [i in special for i in ids]
    for t, tid in enumerate(ids):
        if tid not in special:
            continue
        end, text = t + 1, ""
        while end < len(ids) and ids[end] not in special:
            piece = tokenizer.decode([ids[end]])
            if "\n" in piece:
                break
            text, end = text + piece, end + 1
        if end > t + 1 and text.strip() in ROLES:
            mask[t + 1 : end] = [True] * (end - t - 1)
    return torch.tensor(mask, dtype=torch.bool)


class ActivationStream(IterableDataset):
    """Replays cached activations for a token budget through the mixing buffer.

    Args:
        pieces: ``[Tensor[len_i, D]]`` per sequence (conversation or block).
        training_tokens: tokens to emit in all (``len(self)`` batches; the last pass is cut).
        capacity, batch_size: mixing buffer size and batch size (activations).
        seed: shuffles the sequence order of each pass and the buffer.
    """

    def __init__(self, pieces: list[torch.Tensor], training_tokens: int, capacity: int, batch_size: int, seed: int):
        self.pieces, self.capacity, self.batch_size, self.seed = pieces, capacity, batch_size, seed
        self.n_batches = training_tokens // batch_size

    def __len__(self) -> int:
        return self.n_batches

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed)

        def stream():
            epoch = 0
            while True:
                order = list(range(len(self.pieces)))
                random.Random(self.seed * 1000 + epoch).shuffle(order)
                yield from (self.pieces[i] for i in order)
                epoch += 1

        for i, batch in enumerate(mixing_buffer(stream(), self.capacity, self.batch_size, gen)):
            if i >= self.n_batches:
                return
            yield batch


class FastSAEDataModule(L.LightningDataModule):
    """Activation streams for SAE training and the per-conversation validation set (see the module docstring).

    Args:
        pipeline: ``fast`` | ``bt_chat`` | ``bt_pretrain``.
        path, pretrain_path, val_path: data files (schema above).
        max_length: FAST truncation (256: zoo-lm.chat's SFT length; 1,024 an option). block_size: BT block length.
        ngram: dedup n-gram length (20). harvest_tokens: distinct tokens run through the LM (``None``: all).
        training_tokens: tokens the SAE trains on. buffer_tokens: mixing buffer capacity. batch_size: tokens/step.
        val_conversations: first N validation conversations (``None``: all). val_batch: conversations per val batch.
        data_seed: the one shuffle of the conversations before harvesting (shared by all SAE seeds).
        activation_cache: where harvested activations are kept (``None``: not kept).
        document_boundary: BT(P) documents end with this token instead of being wrapped in the tokenizer's BOS/EOS
            (an instruct model's BOS/EOS are chat-template tokens; SmolLM2's pre-training text ends with
            ``<|endoftext|>``).
        shuffle_blocks: shuffle the BT blocks with ``data_seed`` before taking ``harvest_tokens`` (without it BT(P)
            takes the first blocks of the first file: zoo-lm's 150k tokens are all tinyshakespeare).
        empty_content: ``error`` (refuse a message with empty content) or ``drop`` (skip that conversation, counted;
            the shipped recipes drop zoo-lm-chat's three empty replies: train lines 2336 and 4673, val line 142).

    Raises:
        DataError: a bad chat line or missing file. ValueError: an unknown pipeline (``data.pipeline``).
    """

    def __init__(
        self,
        pipeline: Annotated[str, OneOf(PIPELINES)] = "fast",
        path: Annotated[str, CHAT_FILE] = CHAT,
        pretrain_path: list[str] | None = None,
        val_path: Annotated[str, CHAT_FILE] = VAL,
        max_length: PositiveInt = 256,
        block_size: PositiveInt = 256,
        ngram: PositiveInt = 20,
        harvest_tokens: PositiveInt | None = 150_000,
        training_tokens: PositiveInt = 300_000,
        buffer_tokens: PositiveInt = 16_384,
        batch_size: PositiveInt = 1024,
        val_conversations: PositiveInt | None = None,
        val_batch: PositiveInt = 32,
        data_seed: NonNegativeInt = 0,
        activation_cache: str | None = "runs/fast-cache",
        empty_content: Literal["keep", "error", "drop"] = "error",
        document_boundary: str | None = None,
        shuffle_blocks: bool = False,
    ):
        super().__init__()
        if pipeline not in PIPELINES:
            raise ValueError(f"data.pipeline: {pipeline!r} is not one of {PIPELINES}")
        self.pipeline, self.max_length, self.block_size, self.ngram = pipeline, max_length, block_size, ngram
        self.harvest_tokens, self.training_tokens = harvest_tokens, training_tokens
        self.buffer_tokens, self.batch_size, self.val_batch, self.data_seed = (
            buffer_tokens,
            batch_size,
            val_batch,
            data_seed,
        )
        self.document_boundary, self.shuffle_blocks = document_boundary, shuffle_blocks
        self.pretrain_paths = [_resolve(p) for p in (pretrain_path or PRETRAIN)]
        self.chat_path, self.val_path = _resolve(path), _resolve(val_path)
        self.activation_cache = None if activation_cache is None else _resolve(activation_cache)
        # read and check the user's files now: a bad line fails before a run directory exists
        self.conversations, dropped = read_conversations(self.chat_path, empty_content)
        val, val_dropped = read_conversations(self.val_path, empty_content)
        self.val_conversations = val[:val_conversations]
        for p in self.pretrain_paths if pipeline == "bt_pretrain" else []:
            if not p.is_file():
                raise DataError(f"{p}: no such file")
        self.train_pieces: list[torch.Tensor] | None = None
        self.stats: dict[str, float] = {"empty_dropped": dropped, "val_empty_dropped": val_dropped}

    # ---- harvesting ------------------------------------------------------------------------------------------
    def use_lm(self, model, tokenizer, ref: str, layer: int) -> None:
        """Harvest with this LM and layer instead of the fitted module's (evaluating an outside SAE)."""
        self._lm_override = ((model, tokenizer), ref, layer)

    def _lm(self):
        if getattr(self, "_lm_override", None):
            return self._lm_override
        module = self.trainer.lightning_module
        return module.lm_and_tokenizer(), module.hparams.lm, int(module.hparams.layer)

    def train_sequences(self, tokenizer) -> list:
        """The token sequences of this pipeline, in harvest order, cut at ``harvest_tokens`` (records stats)."""
        texts = [" ".join(m["content"] for m in c) for c in self.conversations]
        kept = ngram_dedup(texts, self.ngram)
        self.stats.update(
            conversations=float(len(self.conversations)),
            dedup_kept=len(kept),
            dedup_dropped=len(self.conversations) - len(kept),
        )
        log.info("20-gram dedup: kept %d of %d conversations", len(kept), len(self.conversations))
        random.Random(self.data_seed).shuffle(kept)
        if self.pipeline == "bt_pretrain":
            docs = pretrain_documents(tokenizer, self.pretrain_paths, boundary=self.document_boundary)
        else:
            docs = encode_conversations(
                tokenizer, [self.conversations[i] for i in kept], self.max_length if self.pipeline == "fast" else 10**9
            )
        seqs = docs if self.pipeline == "fast" else list(pack_blocks(docs, self.block_size)[0])
        if self.shuffle_blocks and self.pipeline != "fast":
            random.Random(self.data_seed).shuffle(seqs)
        self.stats["available_tokens"] = float(sum(len(s) for s in seqs))
        out, total = [], 0
        for s in seqs:
            if self.harvest_tokens is not None and total >= self.harvest_tokens:
                break
            out.append(s)
            total += len(s)
        return out

    def _cached(self, name: str, key: dict, make):
        if self.activation_cache is None:
            return make()
        digest = hashlib.sha256(repr(sorted(key.items())).encode()).hexdigest()[:16]
        file = self.activation_cache / f"{name}-{digest}.pt"
        if file.is_file():
            return torch.load(file, weights_only=True)
        value = make()
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        torch.save(value, tmp)
        os.replace(tmp, file)  # atomic: another process never reads a half-written cache
        return value

    def _key(self, lm_ref: str, layer: int, **extra) -> dict:
        files = [self.chat_path, self.val_path, *self.pretrain_paths]
        return {
            "lm": lm_ref,
            "layer": layer,
            "pipeline": self.pipeline,
            "max_length": self.max_length,
            "block": self.block_size,
            "ngram": self.ngram,
            "harvest": self.harvest_tokens,
            "seed": self.data_seed,
            "boundary": self.document_boundary,
            "shuffle_blocks": self.shuffle_blocks,
            "files": [(str(f), f.stat().st_mtime_ns if f.exists() else 0) for f in files],
            **extra,
        }

    def prepare_train(self) -> list[torch.Tensor]:
        """Harvest (or load) the training activations; sets ``train_pieces`` and ``stats``."""
        if self.train_pieces is None:
            (model, tok), ref, layer = self._lm()

            def make():
                seqs = self.train_sequences(tok)
                return {"pieces": harvest(model, seqs, [layer], pad_id=tok.pad_token_id)[layer], "stats": self.stats}

            value = self._cached("train", self._key(ref, layer), make)
            self.train_pieces, self.stats = value["pieces"], dict(value["stats"])
            self.stats["harvested_tokens"] = float(sum(len(p) for p in self.train_pieces))
            self.stats["passes"] = self.training_tokens / self.stats["harvested_tokens"]
        return self.train_pieces

    def prepare_val(self) -> dict:
        """Validation conversations, each run alone: ``{"ids": [[int]], "acts": [Tensor[len_i, D]]}``."""
        if not hasattr(self, "_val"):
            (model, tok), ref, layer = self._lm()
            ids = encode_conversations(tok, self.val_conversations, self.max_length)

            def make():
                return harvest(model, ids, [layer], pad_id=tok.pad_token_id)[layer]

            key = self._key(ref, layer, pipeline="val", n=len(ids), harvest=None, boundary=None, shuffle_blocks=None)
            self._val = {
                "ids": ids,
                "acts": self._cached("val", key, make),
                "template": [template_mask(tok, s) for s in ids],
            }
        return self._val

    # ---- loaders ---------------------------------------------------------------------------------------------
    def train_dataloader(self):
        seed = torch.initial_seed() % (2**31)
        return DataLoader(
            ActivationStream(self.prepare_train(), self.training_tokens, self.buffer_tokens, self.batch_size, seed),
            batch_size=None,
        )

    def val_dataloader(self):
        val = self.prepare_val()
        batches = []
        for start in range(0, len(val["ids"]), self.val_batch):
            idx = range(start, min(start + self.val_batch, len(val["ids"])))
            ids = [torch.tensor(val["ids"][i]) for i in idx]
            batches.append(
                {
                    "x": torch.cat([val["acts"][i] for i in idx]),
                    "seq": torch.cat([torch.full((len(t),), i) for i, t in zip(idx, ids)]),
                    "pos": torch.cat([torch.arange(len(t)) for t in ids]),
                    "template": torch.cat([val["template"][i] for i in idx]),
                }
            )
        return DataLoader(batches, batch_size=None)

    def norm_scale(self) -> float:
        """sae-lens' ``expected_average_only_in`` normalisation: the factor making the mean activation norm of the
        training stream ``sqrt(D)``."""
        pieces = self.prepare_train()
        norms = torch.cat([p.norm(dim=-1) for p in pieces])
        return float(pieces[0].shape[-1] ** 0.5 / norms.mean())

    def sample(self, n: int, seed: int = 0) -> torch.Tensor:
        """``[n, D]`` training activations drawn without replacement (for the geometric median and GSNR)."""
        flat = torch.cat(self.prepare_train())
        return flat[torch.randperm(len(flat), generator=torch.Generator().manual_seed(seed))[:n]]
