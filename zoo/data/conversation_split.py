"""The HH-RLHF preference pairs re-split by conversation (issue 15): ``data/hh-rlhf-harmless/preference_split.json``.

``python -m zoo.data.conversation_split`` rewrites it from the shipped pairs and zoo-lm's ``split.json``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from zoo.core.data import repo_root
from zoo.data.preference import DEFAULT_PAIRS, DEFAULT_SPLIT, PREFERENCE_SPLIT, hh_to_messages, read_pairs


def conversation_key(prompt: str) -> str:
    """The conversation a pair belongs to: its first human turn, whitespace-normalised (HH-RLHF pairs of one
    red-team conversation share it)."""
    return " ".join(hh_to_messages(prompt)[0]["content"].split())


def conversation_split(
    prompts: list[str],
    sft: list[int],
    preference_train: list[int],
    preference_eval: list[int],
    val_fraction: float = 0.1,
    seed: int = 0,
) -> dict[str, list[int]]:
    """Re-split line-index preference parts by conversation, keeping ``sft`` fixed (zoo-lm.chat was trained on it).

    ``preference_eval`` keeps only pairs whose conversation appears nowhere in ``sft`` or ``preference_train``; the
    pairs it loses join ``preference_train``. ``preference_val`` is a seeded ``val_fraction`` of the training
    conversations that share nothing with ``sft`` (whole conversations move). Ours (issue 15's correction).

    Args:
        prompts: the prompt of every line; the three index lists are disjoint line indices into it.

    Returns:
        ``{"sft", "preference_train", "preference_val", "preference_eval"}`` sorted index lists.
    """
    key = [conversation_key(p) for p in prompts]
    sft_convs = {key[i] for i in sft}
    train_convs = {key[i] for i in preference_train}
    test = [i for i in preference_eval if key[i] not in sft_convs | train_convs]
    pool = sorted(set(preference_train) | (set(preference_eval) - set(test)))
    free = sorted({key[i] for i in pool} - sft_convs)
    random.Random(seed).shuffle(free)
    val_convs = set(free[: round(val_fraction * len(free))])
    return {
        "sft": sorted(sft),
        "preference_train": [i for i in pool if key[i] not in val_convs],
        "preference_val": [i for i in pool if key[i] in val_convs],
        "preference_eval": sorted(test),
    }


def write_conversation_split(out: str | Path | None = None, val_fraction: float = 0.1, seed: int = 0) -> Path:
    """``data/hh-rlhf-harmless/preference_split.json`` from the shipped pairs and zoo-lm's ``split.json``
    (:func:`conversation_split`); ``python -m zoo.data.conversation_split`` runs it."""
    root = repo_root()
    rows = read_pairs(root / DEFAULT_PAIRS)
    src = json.loads((root / DEFAULT_SPLIT).read_text())
    split = conversation_split(
        [r["prompt"] for r in rows], src["sft"], src["preference_train"], src["preference_eval"], val_fraction, seed
    )
    out = Path(out) if out else root / PREFERENCE_SPLIT
    out.write_text(
        json.dumps(
            {
                "source": DEFAULT_SPLIT,
                "by": "conversation (first human turn)",
                "val_fraction": val_fraction,
                "seed": seed,
                **split,
            }
        )
        + "\n"
    )
    return out


if __name__ == "__main__":
    print(write_conversation_split())
