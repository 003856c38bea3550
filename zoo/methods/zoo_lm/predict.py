"""``zoo predict --json`` on labelled input: a chat ``.jsonl`` file whose assistant replies are the references."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from zoo.methods.zoo_lm.losses import causal_lm_nll
from zoo.models.chat import IGNORE_INDEX


def labelled_chats(inputs: list[str]) -> list[tuple[str, str]] | None:
    """``(first user turn, the assistant reply after it)`` of each conversation when ``inputs`` is one chat ``.jsonl``
    file (schema of :func:`zoo.data.chat.read_conversations`); None for a plain prompt.

    Raises:
        DataError: a bad line (``file:line``).
    """
    if len(inputs) != 1 or not inputs[0].endswith(".jsonl") or not Path(inputs[0]).is_file():
        return None
    from zoo.data.chat import read_conversations
    from zoo.methods.zoo_lm.datamodule import EMPTY_CONTENT

    pairs = []
    for conv in read_conversations(inputs[0], EMPTY_CONTENT)[0]:
        roles = [m["role"] for m in conv]
        if "user" in roles and "assistant" in roles[roles.index("user") :]:
            u = roles.index("user")
            a = roles.index("assistant", u)
            pairs.append((conv[u]["content"], conv[a]["content"]))
    return pairs


@torch.no_grad()
def reference_metrics(module, chats: list[tuple[str, str]], replies: list[str]) -> dict[str, float]:
    """Teacher-forced NLL of each reference reply after its prompt, pooled over tokens (the tokens training supervises:
    :func:`zoo.models.chat.encode_chat` for ``prompt_format: chat``, else the reply's text tokens after ``<bos>`` +
    prompt): ``reference_nll`` (nats per token), ``reference_ppl = exp(reference_nll)``; ``exact_match``: the share of
    generated replies equal to the reference after stripping whitespace; ``n``: conversations."""
    from zoo.models.chat import encode_chat, encode_text

    tok, nll, count = module.tokenizer, 0.0, 0
    for prompt, reference in chats:
        if module.hparams.prompt_format == "chat":
            enc = encode_chat(tok, [{"role": "user", "content": prompt}, {"role": "assistant", "content": reference}])
            ids_, labels_ = enc["input_ids"], enc["labels"]
        else:
            head, tail = module.prompt_ids(prompt), encode_text(tok, reference)
            ids_, labels_ = head + tail, [IGNORE_INDEX] * len(head) + tail
        ids = torch.tensor([ids_], device=module.device)
        s, n = causal_lm_nll(module.lm(input_ids=ids).logits, torch.tensor([labels_], device=module.device))
        nll, count = nll + float(s), count + int(n)
    exact = sum(r.strip() == ref.strip() for r, (_, ref) in zip(replies, chats))
    mean = nll / max(count, 1)
    return {
        "reference_nll": mean,
        "reference_ppl": math.exp(mean),
        "exact_match": exact / len(chats),
        "n": float(len(chats)),
    }
