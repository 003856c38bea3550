"""Question/response pairs (§5.2), built here (ours) because no pairs CSV is staged and zoo-lm.chat cannot follow
a concept instruction: ``r_no`` is the LM's greedy reply, ``r_with = r_no`` plus a templated sentence naming three
of the concept's keywords. A user's pairs CSV in the authors' columns runs unchanged (:func:`read_pairs_csv`)."""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path
from typing import NamedTuple

import torch

from zoo.core.constraints import INTEGER, TEXT, DataFile
from zoo.core.datafiles import read_declared

PAIR_COLUMNS = ("qid", "cid", "question", "concept", "resp_no_concept", "resp_with_concept")
#: A user's pairs CSV (``data.path``): integer ids, non-empty responses (checked before torch too).
PAIRS = DataFile(
    "csv",
    PAIR_COLUMNS,
    types={"qid": INTEGER, "cid": INTEGER, "resp_no_concept": TEXT, "resp_with_concept": TEXT},
)
SENTENCES = (
    "This also brings to mind {0}, {1} and {2}.",
    "Think of {0}, {1} and {2} here.",
    "It relates to {0}, {1} and {2}.",
)


class Pair(NamedTuple):
    """One question's pair for one concept (``qid`` = question id, ``cid`` = concept id). A named tuple, not a
    frozen dataclass: Lightning moves the batch that carries the pairs with ``apply_to_collection``, which rebuilds
    named tuples but refuses frozen dataclasses (every user pairs CSV failed at the first step)."""

    qid: int
    cid: int
    question: str
    concept: str
    resp_no: str
    resp_with: str


def prompt_text(tokenizer, question: str, template: str = "plain") -> str:
    """The generation prompt: ``"User: {q}\\nAssistant: "`` (the authors', ``plain``) or the tokenizer's chat
    template with a generation prompt (``chat``).

    Raises:
        ValueError: an unknown template.
    """
    if template == "plain":
        return f"User: {question}\nAssistant: "
    if template == "chat":
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
        )
    raise ValueError(f"template must be 'plain' or 'chat', got {template!r}")


def concept_sentence(keywords: list[str], qid: int, cid: int) -> str:
    """A templated sentence naming three of the concept's keywords, chosen deterministically from ``(qid, cid)``."""
    rng = random.Random(qid * 1009 + cid)
    words = rng.sample(list(keywords), 3)
    return SENTENCES[rng.randrange(len(SENTENCES))].format(*words)


def with_concept(resp_no: str, sentence: str, insert: str = "append") -> str:
    """``r_with``: the sentence appended to ``r_no`` (``append``) or inserted after its first sentence
    (``after_first_sentence``; appended when ``r_no`` has no sentence end).

    Raises:
        ValueError: an unknown ``insert``.
    """
    if insert == "append":
        return f"{resp_no.rstrip()} {sentence}".strip()
    if insert == "after_first_sentence":
        m = re.search(r"[.!?](\s|$)", resp_no)
        if m is None:
            return with_concept(resp_no, sentence)
        return f"{resp_no[: m.end()].rstrip()} {sentence} {resp_no[m.end() :].lstrip()}".strip()
    raise ValueError(f"insert must be 'append' or 'after_first_sentence', got {insert!r}")


@torch.no_grad()
def greedy_replies(
    model,
    tokenizer,
    prompts: list[str],
    max_new_tokens: int = 64,
    batch_size: int = 64,
    add_special_tokens: bool = True,
    temperature: float = 0.0,
    seed: int = 0,
) -> list[str]:
    """The LM's replies (``generate``, left padding) to ``prompts``, decoded without special tokens: greedy
    (``temperature`` 0, the default) or sampled at ``temperature`` with ``torch.manual_seed(seed + batch start)``."""
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    out = []
    try:
        for i in range(0, len(prompts), batch_size):
            enc = tokenizer(
                prompts[i : i + batch_size], return_tensors="pt", padding=True, add_special_tokens=add_special_tokens
            ).to(model.device)
            sample = (
                {"do_sample": True, "temperature": temperature, "top_k": 0} if temperature > 0 else {"do_sample": False}
            )
            torch.manual_seed(seed + i)
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, **sample)
            out += tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return [r.strip() for r in out]


def cached_replies(
    model,
    tokenizer,
    questions: dict[int, str],
    key: str,
    cache: str | None,
    template: str = "plain",
    max_new_tokens: int = 64,
) -> dict[int, str]:
    """Greedy replies for ``questions {qid: text}``, read from / added to the JSON file ``cache`` (``None``: no
    cache) under ``key`` (the LM and settings, so a different LM never reuses them)."""
    key = hashlib.sha256(f"{key}|{template}|{max_new_tokens}".encode()).hexdigest()[:16]
    path = Path(cache) if cache else None
    store = json.loads(path.read_text()) if path and path.is_file() else {}
    have = store.get(key, {})
    todo = [q for q in questions if str(q) not in have]
    for i in range(0, len(todo), 64):  # saved after every batch, so an interrupted run keeps what it made
        chunk = todo[i : i + 64]
        prompts = [prompt_text(tokenizer, questions[q], template) for q in chunk]
        for q, r in zip(
            chunk, greedy_replies(model, tokenizer, prompts, max_new_tokens, add_special_tokens=template == "plain")
        ):
            have[str(q)] = r
        if path:
            store[key] = have
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(store))
    return {q: have[str(q)] for q in questions}


def read_pairs_csv(path: str) -> list[Pair]:
    """Read a pairs CSV with columns ``qid, cid, question, concept, resp_no_concept, resp_with_concept`` (``PAIRS``).

    Raises:
        DataError: ``file:line: column ...`` for a missing column, a non-integer id or an empty response.
    """
    _, rows = read_declared(path, PAIRS)
    return [
        Pair(r["qid"], r["cid"], r["question"], r["concept"], r["resp_no_concept"], r["resp_with_concept"])
        for _, r in rows
    ]


def split_questions(qids: list[int], cid: int, n_train: int, n_test: int, seed: int) -> tuple[list[int], list[int]]:
    """Seeded train/test questions of one concept (the authors: 100 train, 5 test, seed 42); distinct.

    Raises:
        ValueError: fewer than ``n_train + n_test`` questions.
    """
    if len(qids) < n_train + n_test:
        raise ValueError(f"concept {cid}: {len(qids)} valid questions, need n_train + n_test = {n_train + n_test}")
    order = sorted(qids)
    random.Random(seed * 100_003 + cid).shuffle(order)
    return order[:n_train], order[n_train : n_train + n_test]
