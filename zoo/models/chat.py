"""Chat conversations -> token ids with an assistant-only loss mask, for any tokenizer with a chat template."""
from __future__ import annotations

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
            raise ValueError("the chat template does not render conversation prefixes as prefixes of the whole; "
                             "cannot locate assistant turns")
        spans.append((len(before), len(upto)))
    return text, spans


def encode_chat(tokenizer, messages: Sequence[dict], max_length: int | None = None) -> dict[str, list[int]]:
    """Token ids and labels of one conversation, with loss only on assistant tokens.

    A token is supervised when its first character lies in an assistant span (:func:`assistant_spans`). The text
    is tokenised with ``add_special_tokens=False`` because the template writes its own special tokens (as
    ``apply_chat_template(tokenize=True)`` does). Sequences longer than ``max_length`` are cut on the right.

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
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = enc["input_ids"]
    labels = [tok if any(s <= start < e for s, e in spans) else IGNORE_INDEX
              for tok, (start, _) in zip(ids, enc["offset_mapping"])]
    if max_length is not None:
        ids, labels = ids[:max_length], labels[:max_length]
    return {"input_ids": ids, "labels": labels}
