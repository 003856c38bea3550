"""Chat conversations -> token ids with an assistant-only loss mask, for any tokenizer with a chat template.

User text never becomes a control token: message contents (and free text, :func:`encode_text`) are tokenised with
special-token parsing off, so a message containing the literal ``</s><|assistant|>`` is encoded as those
characters, not as an end of turn and an assistant header. Special tokens come only from the template itself
(:func:`encode_rendered`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

IGNORE_INDEX = -100
"""Label value ``torch.nn.functional.cross_entropy`` (and transformers' causal-LM loss) skips."""


def assistant_spans(tokenizer, messages: Sequence[dict]) -> tuple[str, list[tuple[int, int]]]:
    """Render ``messages`` with the tokenizer's chat template and locate every assistant turn in the text.

    The span of assistant message ``i`` runs from the end of ``render(messages[:i], add_generation_prompt=True)``
    to the end of ``render(messages[:i+1])``: the reply plus whatever the template closes a turn with (our
    ``</s>``, Qwen's ``<|im_end|>\\n``). This works for any template whose renderings of a conversation's
    prefixes are prefixes of each other (*ours*; transformers' ``{% generation %}`` markers need template support).

    Args:
        tokenizer: a transformers tokenizer with ``chat_template``.
        messages: ``[{"role": str, "content": str}, ...]``; the first message must not be the assistant's.

    Returns:
        ``(text, spans)``: the full rendering and ``[(start, end), ...]`` character spans, one per assistant turn.

    Raises:
        ValueError: no messages, a conversation opening with an assistant turn, or a template whose prefix
            renderings are not prefixes of the full rendering.
    """
    if not messages:
        raise ValueError("empty conversation")
    if messages[0]["role"] == "assistant":
        raise ValueError("a conversation must not start with an assistant turn")
    render = tokenizer.apply_chat_template
    text = render(list(messages), tokenize=False)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(list(messages[:i]), tokenize=False, add_generation_prompt=True)
        upto = render(list(messages[: i + 1]), tokenize=False)
        if not (upto.startswith(before) and text.startswith(upto)):
            raise ValueError(
                "the chat template does not render conversation prefixes as prefixes of the whole; "
                "cannot locate assistant turns"
            )
        spans.append((len(before), len(upto)))
    return text, spans


_SLOT = "\ue000{}\ue001"  # private-use code points: a message's place in a template rendering
_SLOT_RE = re.compile("\ue000(\\d+)\ue001")


def encode_text(tokenizer, text: str) -> list[int]:
    """Token ids of user text with special-token parsing off (``</s>`` in the text is three ordinary pieces)."""
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


def encode_rendered(
    tokenizer, messages: Sequence[dict], add_generation_prompt: bool = False
) -> tuple[str, list[int], list[tuple[int, int]]]:
    """Render ``messages`` with the chat template and tokenise it so that only the template writes special tokens.

    The template is rendered once with each message's content replaced by a private-use placeholder; the
    template's own text between placeholders is tokenised with special tokens parsed, each content with parsing
    off (:func:`encode_text`). *Ours*; ``apply_chat_template(tokenize=True)`` parses special tokens everywhere.

    Returns:
        ``(text, ids, offsets)``: the rendering with the real contents, its token ids and each token's character
        ``(start, end)`` in ``text``.

    Raises:
        ValueError: a template that changes message contents (so a placeholder rendering cannot stand for the real
            one) or that drops a message.
    """
    slots = [dict(m, content=_SLOT.format(i)) for i, m in enumerate(messages)]
    skeleton = tokenizer.apply_chat_template(slots, tokenize=False, add_generation_prompt=add_generation_prompt)
    text, ids, offsets, pos = "", [], [], 0
    for i, piece in enumerate(_SLOT_RE.split(skeleton)):
        if i % 2:  # a message content
            piece = messages[int(piece)]["content"]
            enc = tokenizer(piece, add_special_tokens=False, split_special_tokens=True, return_offsets_mapping=True)
        else:
            enc = tokenizer(piece, add_special_tokens=False, return_offsets_mapping=True)
        ids += enc["input_ids"]
        offsets += [(pos + a, pos + b) for a, b in enc["offset_mapping"]]
        text += piece
        pos += len(piece)
    real = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=add_generation_prompt)
    if text != real:
        raise ValueError(
            "the chat template changes message contents (it trims or escapes them); cannot keep user "
            "text apart from template tokens"
        )
    return text, ids, offsets


def encode_chat(tokenizer, messages: Sequence[dict], max_length: int | None = None) -> dict[str, list[int]]:
    """Token ids and labels of one conversation, with loss only on assistant tokens.

    A token is supervised when its first character lies in an assistant span (:func:`assistant_spans`). The text
    is tokenised by :func:`encode_rendered`: special tokens come from the template only, never from message
    contents. Sequences longer than ``max_length`` are cut on the right.

    Args:
        tokenizer: a transformers fast tokenizer (offsets are needed) with a chat template.
        messages: ``[{"role", "content"}, ...]``.
        max_length: keep at most this many tokens (``None``: all).

    Returns:
        ``{"input_ids": [T], "labels": [T]}`` with ``labels[t] = input_ids[t]`` on assistant tokens and
        :data:`IGNORE_INDEX` elsewhere (the model shifts labels by one itself).

    Raises:
        ValueError: see :func:`assistant_spans`.
    """
    text, spans = assistant_spans(tokenizer, messages)
    rendered, ids, offsets = encode_rendered(tokenizer, messages)
    if rendered != text:
        raise ValueError("the chat template renders the conversation differently on a second call")
    labels = [tok if any(s <= start < e for s, e in spans) else IGNORE_INDEX for tok, (start, _) in zip(ids, offsets)]
    if max_length is not None:
        ids, labels = ids[:max_length], labels[:max_length]
    return {"input_ids": ids, "labels": labels}
