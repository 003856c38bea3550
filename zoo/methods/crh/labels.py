"""Output labels (§5.5): 3 = gibberish (the authors' regex heuristic, rule by rule), 2 = the concept is present
(our keyword judge stands in for their Llama-3.3-70B judge), 1 = a normal answer; and steerability, the slope of
the label-2 fraction against the steering step."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

NORMAL, CONCEPT, GIBBERISH = 1, 2, 3


# The authors' file writes these raw strings with doubled backslashes (r"[^A-Za-z0-9\\s]"), so there whitespace
# counts as non-alphanumeric and the two run rules match only literal backslashes; ``authors_escapes=True`` keeps
# that behaviour, the default applies the rules as documented.
_PATTERNS = {
    False: (r"[^A-Za-z0-9\s]", r"(\b\w+\b)(\s+\1){3,}", r"([\W_])\1{6,}"),
    True: (r"[^A-Za-z0-9\\s]", r"(\\b\\w+\\b)(\\s+\\1){3,}", r"([\\W_])\\1{6,}"),
}


def gibberish_rule(text: str | None, authors_escapes: bool = False) -> str | None:
    """The first of the authors' ``is_gibberish`` rules that fires, or ``None`` (the text is not gibberish).

    Rules in their order: ``empty``; ``non_alnum`` (> 40 % of the characters are not letters, digits or
    whitespace, in a string of >= 20 characters); with >= 6 words (``[A-Za-z]+``), ``unique_ratio`` (distinct / all
    <= 0.25) and ``top_word`` (the most frequent word >= 40 %); ``repeat_run`` (a word repeated 4+ times in a
    row); ``symbol_run`` (one non-word character 7+ times in a row). ``authors_escapes``: the authors' literal
    patterns (see ``_PATTERNS``).
    """
    non_alnum, repeat_run, symbol_run = _PATTERNS[authors_escapes]
    t = (text or "").strip()
    if not t:
        return "empty"
    if len(t) >= 20 and len(re.findall(non_alnum, t)) / len(t) > 0.4:
        return "non_alnum"
    words = re.findall(r"[A-Za-z]+", t.lower())
    if len(words) >= 6:
        if len(set(words)) / len(words) <= 0.25:
            return "unique_ratio"
        if Counter(words).most_common(1)[0][1] / len(words) >= 0.4:
            return "top_word"
    if re.search(repeat_run, t.lower()):
        return "repeat_run"
    if re.search(symbol_run, t):
        return "symbol_run"
    return None


def concept_present(text: str, keywords: Sequence[str]) -> bool:
    """Keyword judge (ours): any keyword occurs case-insensitively, bounded by non-word characters where it
    starts or ends with a word character (so ``"int"`` does not match ``"print"``)."""
    low = text.lower()
    for kw in keywords:
        k = re.escape(kw.lower())
        pattern = (r"\b" if kw[:1].isalnum() else "") + k + (r"\b" if kw[-1:].isalnum() else "")
        if re.search(pattern, low):
            return True
    return False


def label(text: str, keywords: Sequence[str], authors_escapes: bool = False) -> int:
    """3 if gibberish, else 2 if the concept is present, else 1."""
    if gibberish_rule(text, authors_escapes) is not None:
        return GIBBERISH
    return CONCEPT if concept_present(text, keywords) else NORMAL


def steerability(rows: Sequence[tuple[int, int, int]], exclude_step1: bool = True) -> float | None:
    """Slope of a least-squares line through (step, fraction of label 2 at that step), pooled over questions.

    Args:
        rows: ``(qid, step, label)`` triples, steps counted from 1.
        exclude_step1: drop every question whose step-1 output already has label 2 (the issue's protocol).

    Returns:
        The slope per step, or ``None`` when fewer than two steps remain (every question excluded).
    """
    drop = {q for q, s, lab in rows if s == 1 and lab == CONCEPT} if exclude_step1 else set()
    by_step: dict[int, list[int]] = {}
    for q, s, lab in rows:
        if q not in drop:
            by_step.setdefault(s, []).append(lab == CONCEPT)
    if len(by_step) < 2:
        return None
    steps = sorted(by_step)
    frac = [float(np.mean(by_step[s])) for s in steps]
    return float(np.polyfit(np.asarray(steps, float), np.asarray(frac), 1)[0])


def soft_steerability(rows: Sequence[tuple[int, int, float]], exclude: set[int] = frozenset()) -> float | None:
    """Ours: slope against the step of the mean (over questions not in ``exclude``) of a graded concept score,
    here the keyword-token probability mass (``rows``: ``(qid, step, value)``); ``None`` with < 2 steps."""
    by_step: dict[int, list[float]] = {}
    for q, s, v in rows:
        if q not in exclude:
            by_step.setdefault(s, []).append(v)
    if len(by_step) < 2:
        return None
    steps = sorted(by_step)
    return float(np.polyfit(np.asarray(steps, float), np.asarray([np.mean(by_step[s]) for s in steps]), 1)[0])


def excluded_questions(rows: Sequence[tuple[int, int, int]]) -> set[int]:
    """Questions whose step-1 output already has the concept (left out of :func:`steerability`)."""
    return {q for q, s, lab in rows if s == 1 and lab == CONCEPT}
