"""The authors' pairs (§5.2) for a chat LM that can follow an instruction: ``r_no`` is the LM's own answer to the
question, ``r_with`` its own answer to the question under a concept instruction; both greedy, through the
tokenizer's chat template (``temperature`` > 0 samples instead: for random test LMs, whose greedy answer
repeats the prompt's last token). The difference vectors are then read from the *plain* question followed by each answer
(``pipeline.difference_vectors``), so the instruction itself never enters ``a_with``.

Where the instruction goes is ours (the authors' generation script is not in their snapshot; only the instruction
column of ``concepts_100.csv`` is): appended to the user turn after a blank line. ``directive="authors"`` uses that
column verbatim; ``"short"`` uses ``"In your answer, talk about {concept}."`` with the concept's description (ours:
in a greedy pilot on 3-4 concepts, SmolLM2-135M-Instruct named the concept in 0 of 12 answers with the authors'
instruction as the system turn, 0 of 12 with it in the user turn (2 drifted to "mathematics"), and in 13 of 32
with the short directive).

Every answer is cached in a JSON file keyed by the LM and the settings, saved after each batch, so an interrupted
run resumes where it stopped and later split seeds reuse the answers.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from zoo.methods.crh.pairs import Pair, greedy_replies, prompt_text

SHORT_DIRECTIVE = "In your answer, talk about {concept}."


def directive_text(concept: dict, directive: str) -> str:
    """The concept instruction: the authors' ``instruction`` column (``authors``) or :data:`SHORT_DIRECTIVE`.

    Raises:
        ValueError: an unknown ``directive``, or ``authors`` for a concept without an instruction.
    """
    if directive == "short":
        return SHORT_DIRECTIVE.format(concept=concept["concept"])
    if directive == "authors":
        if not concept.get("instruction"):
            raise ValueError(f"concept {concept['cid']}: no instruction column to use with directive 'authors'")
        return concept["instruction"]
    raise ValueError(f"directive must be 'short' or 'authors', got {directive!r}")


def question_pools(
    qids: list[int], concepts: list[dict], per_concept: int | None, seed: int = 0
) -> dict[int, list[int]]:
    """Each concept's question pool: ``per_concept`` questions drawn from ``qids`` (seeded by the concept id, fixed
    across split seeds so their answers are generated once), or all of them (``None``).

    Raises:
        ValueError: ``per_concept`` exceeds the number of questions.
    """
    order = sorted(qids)
    if per_concept is None:
        return {c["cid"]: order for c in concepts}
    if per_concept > len(order):
        raise ValueError(f"pair_questions {per_concept} > the {len(order)} questions available")
    return {c["cid"]: sorted(random.Random(seed * 100_003 + c["cid"]).sample(order, per_concept)) for c in concepts}


def instructed_pairs(
    model,
    tokenizer,
    questions: dict[int, str],
    concepts: list[dict],
    pools: dict[int, list[int]],
    cache: str | None,
    lm_key: str,
    directive: str = "short",
    max_new_tokens: int = 24,
    batch_size: int = 16,
    temperature: float = 0.0,
    log=None,
) -> list[Pair]:
    """``Pair(qid, cid, question, concept, r_no, r_with)`` for every concept and question of its pool.

    Args:
        questions: ``{qid: text}``. concepts: ``{cid, concept, instruction?}`` dicts. pools: ``{cid: [qid]}``.
        cache: JSON file of the answers (``None``: not cached); lm_key: names the LM in the cache key.
        max_new_tokens: answer length (both sides); temperature: 0 (greedy, the default) or sampled
            (:func:`pairs.greedy_replies`).

    Returns:
        The pairs, concepts in the given order and questions ascending; pairs with an empty answer are left out
        (as the authors' filtered CSV leaves out invalid rows).
    """
    say = log or (lambda msg: None)
    key = hashlib.sha256(f"{lm_key}|instructed|{directive}|{max_new_tokens}|{temperature:g}".encode()).hexdigest()[:16]
    path = Path(cache) if cache else None
    store = json.loads(path.read_text()) if path and path.is_file() else {}
    have: dict[str, str] = store.get(key, {})
    jobs: dict[str, str] = {}
    for c in concepts:
        text = directive_text(c, directive)
        for q in pools[c["cid"]]:
            jobs.setdefault(f"no:{q}", prompt_text(tokenizer, questions[q], "chat"))
            jobs[f"with:{c['cid']}:{q}"] = prompt_text(tokenizer, f"{questions[q]}\n\n{text}", "chat")
    todo = [k for k in jobs if k not in have]
    say(f"instructed pairs: {len(jobs)} answers, {len(todo)} to generate")
    for i in range(0, len(todo), batch_size):
        chunk = todo[i : i + batch_size]
        for k, r in zip(
            chunk,
            greedy_replies(
                model,
                tokenizer,
                [jobs[k] for k in chunk],
                max_new_tokens,
                batch_size,
                add_special_tokens=False,
                temperature=temperature,
                seed=i,
            ),
        ):
            have[k] = r
        if path:
            store[key] = have
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(store))
        say(f"instructed pairs: {min(i + batch_size, len(todo))}/{len(todo)}")
    return [
        Pair(q, c["cid"], questions[q], c["concept"], have[f"no:{q}"], have[f"with:{c['cid']}:{q}"])
        for c in concepts
        for q in pools[c["cid"]]
        if have[f"no:{q}"].strip() and have[f"with:{c['cid']}:{q}"].strip()
    ]
