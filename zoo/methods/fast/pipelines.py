"""The three data pipelines of FAST (Li et al., arXiv 2506.07691, §3.2 and Alg. 1) as plain functions.

* **FAST**: each chat conversation is rendered with the model's chat template and run through the LM *alone*
  (one conversation per sequence, truncated at ``max_length``); the residual-stream activations of its tokens
  are streamed into a mixing buffer (:func:`mixing_buffer`).
* **BT(F)**: the same templated conversations, concatenated and cut into ``block_size``-token blocks
  (:func:`pack_blocks`); tokens attend across conversation boundaries inside a block.
* **BT(P)**: the LM's pre-training text (no template) packed the same way.

Conversations are deduplicated with the paper's n-gram hash rule (:func:`ngram_dedup`). Activations are read
with the shared :func:`zoo.models.activations.residual_stream` on a copy of the LM cut after the read block
(:func:`truncated_lm`), so the forward pass stops there.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch

from zoo.core.data import DataError
from zoo.data.text import wrap_document
from zoo.models.activations import decoder_layers, residual_stream
from zoo.models.chat import encode_rendered

PIPELINES = ("fast", "bt_pretrain", "bt_chat")


def ngram_dedup(texts: Sequence[str], n: int = 20) -> list[int]:
    """Alg. 1 of the paper: walk the samples in order and drop one if any of its word ``n``-gram hashes was seen
    in an earlier *kept* or dropped sample; a sample shorter than ``n`` words counts as one n-gram (*ours*).

    Args:
        texts: the samples (we hash the rendered conversation's whitespace words; the paper does not say which
            units it hashes).

    Returns:
        Indices of the kept samples, in order.
    """
    seen: set[bytes] = set()
    kept = []
    for i, text in enumerate(texts):
        words = text.split()
        grams = [" ".join(words[k : k + n]) for k in range(max(1, len(words) - n + 1))]
        hashes = {hashlib.blake2b(g.encode(), digest_size=8).digest() for g in grams}
        if not hashes & seen:
            kept.append(i)
        seen |= hashes
    return kept


def encode_conversations(tokenizer, conversations: Sequence[Sequence[dict]], max_length: int) -> list[list[int]]:
    """Template-rendered token ids of each conversation, cut to ``max_length`` tokens on the right.

    Special tokens come only from the template (:func:`zoo.models.chat.encode_rendered`)."""
    return [encode_rendered(tokenizer, conv)[1][:max_length] for conv in conversations]


def pretrain_documents(
    tokenizer, paths: Sequence[str | Path], val_fraction: float = 0.1, boundary: str | None = None
) -> list[list[int]]:
    """zoo-lm's pre-training documents: the first ``1 - val_fraction`` of each text file's lines (the split zoo-lm
    pre-trained on), no chat template, as ``<bos> text <eos>`` (without the specials a tokenizer lacks) or, with
    ``boundary``, as ``text boundary``: an instruct model whose BOS/EOS are chat-template tokens ends its
    pre-training documents with another token (SmolLM2: ``<|endoftext|>``).

    Raises:
        DataError: a missing file. ValueError: ``boundary`` is not one token of the tokenizer
            (``data.document_boundary``).
    """
    end = None
    if boundary is not None:
        end = tokenizer.convert_tokens_to_ids(boundary)
        if end is None or end == tokenizer.unk_token_id and boundary != tokenizer.unk_token:
            raise ValueError(f"data.document_boundary: {boundary!r} is not a token of the LM's tokenizer")
    docs = []
    for p in map(Path, paths):
        if not p.is_file():
            raise DataError(f"{p}: no such file")
        lines = p.read_text(encoding="utf-8").split("\n")
        lines = lines[:-1] if lines and lines[-1] == "" else lines
        text = "\n".join(lines[: len(lines) - round(val_fraction * len(lines))]) + "\n"
        ids = tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        docs.append(wrap_document(tokenizer, ids) if end is None else [*ids, end])
    return docs


def pack_blocks(documents: Sequence[Sequence[int]], block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Block training: concatenate the documents and cut non-overlapping ``block_size`` blocks (tail dropped).

    Returns:
        ``(blocks, doc_index)``, both ``LongTensor[n_blocks, block_size]``; ``doc_index`` says which document each
        token came from (a block holding two indices attends across documents).
    """
    flat = torch.tensor([t for d in documents for t in d], dtype=torch.long)
    owner = torch.cat([torch.full((len(d),), i, dtype=torch.long) for i, d in enumerate(documents)])
    n = flat.numel() // block_size
    return flat[: n * block_size].view(n, block_size), owner[: n * block_size].view(n, block_size)


def truncated_lm(model: torch.nn.Module, layer: int) -> torch.nn.Module:
    """A view of ``model`` holding decoder blocks ``0..layer`` only and no final norm, so that
    ``residual_stream(view, ids, layers=[layer])`` equals ``residual_stream(model, ids, layers=[layer])`` while
    the forward pass stops after block ``layer``. Weights are shared with ``model`` (no copy).

    Raises:
        ValueError: ``model.layer`` out of range.
    """
    blocks = decoder_layers(model)
    if not 0 <= layer < len(blocks):
        raise ValueError(
            f"model.layer: {layer} is out of range; the LM has {len(blocks)} decoder blocks (0..{len(blocks) - 1})"
        )
    # transformers 5 records hidden states with forward hooks it installs on the decoder blocks at the first
    # recording forward, flagging the inner model as hooked. Run one on the LM first so the view (which shares the
    # blocks and copies the flag) does not install a second set: that would record every block twice.
    residual_stream(model, torch.zeros((1, 1), dtype=torch.long), layers=[0])
    inner = copy.copy(model.model)
    inner._modules = dict(inner._modules)  # a shallow copy shares the submodule dict: give the view its own
    inner.layers = torch.nn.ModuleList(list(blocks)[: layer + 1])
    inner.norm = torch.nn.Identity()

    class _Upto(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = inner

        def forward(self, **kwargs):
            return self.model(**kwargs)

    return _Upto().eval()


@torch.no_grad()
def harvest(
    model: torch.nn.Module,
    sequences: Sequence[Sequence[int]] | torch.Tensor,
    layers: Sequence[int],
    batch_tokens: int = 4096,
    pad_id: int = 0,
) -> dict[int, list[torch.Tensor]]:
    """Residual-stream activations of every token of every sequence, each sequence run alone (right padding with
    an attention mask, so batching does not change a causal LM's activations).

    Args:
        sequences: token id lists (FAST) or ``LongTensor[n, T]`` blocks (BT).
        layers: blocks to read (output of block ``l``); the forward stops after the deepest.
        batch_tokens: padded tokens per forward.

    Returns:
        ``{layer: [Tensor[len_i, D] per sequence, in input order]}`` (float32).
    """
    seqs = [list(map(int, s)) for s in sequences]
    view = truncated_lm(model, max(layers))
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    out: dict[int, list] = {lay: [None] * len(seqs) for lay in layers}
    start = 0
    while start < len(order):
        width = len(seqs[order[start]])
        group = order[start : start + max(1, batch_tokens // max(width, 1))]
        ids = torch.full((len(group), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, i in enumerate(group):
            ids[r, : len(seqs[i])], mask[r, : len(seqs[i])] = torch.tensor(seqs[i]), 1
        hidden = residual_stream(view, ids, mask, layers=layers)
        for lay in layers:
            for r, i in enumerate(group):
                out[lay][i] = hidden[lay][r, : len(seqs[i])].float().clone()
        start += len(group)
    return out


def mixing_buffer(
    chunks: Iterable[torch.Tensor], capacity: int, batch_size: int, generator: torch.Generator | None = None
) -> Iterator[torch.Tensor]:
    """The paper's mixing buffer (§3.2): fill to ``capacity`` activations, shuffle, emit the first half in
    ``batch_size`` batches, refill the emptied half from the stream, repeat; when the stream ends the rest is
    shuffled and emitted. Every activation of the stream is emitted exactly once; nothing is emitted before the
    buffer is full (or the stream has ended). A last batch smaller than ``batch_size`` is dropped.

    Args:
        chunks: the activation stream, ``Tensor[n_i, D]`` pieces in data order (a conversation, a block).
        capacity: buffer size in activations (>= 2 * batch_size).

    Yields:
        ``Tensor[batch_size, D]``.

    Raises:
        ValueError: ``capacity < 2 * batch_size``.
    """
    if capacity < 2 * batch_size:
        raise ValueError(f"mixing buffer: capacity {capacity} must be >= 2 x batch_size {batch_size}")
    pending: list[torch.Tensor] = []
    held = 0
    for chunk in chunks:
        pending.append(chunk)
        held += len(chunk)
        if held < capacity:
            continue
        buf = torch.cat(pending)
        buf = buf[torch.randperm(len(buf), generator=generator)]
        emit = (len(buf) // 2) // batch_size * batch_size
        yield from buf[:emit].split(batch_size)
        pending, held = [buf[emit:]], len(buf) - emit
    if held:
        buf = torch.cat(pending)
        buf = buf[torch.randperm(len(buf), generator=generator)]
        yield from (b for b in buf.split(batch_size) if len(b) == batch_size)
