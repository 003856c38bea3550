"""Build zoo-lm's derived data files from the shipped copies (deterministic; ``python -m zoo.methods.zoo_lm.derived_data``).

Writes, relative to the repository root:

- ``data/hh-rlhf-harmless/split.json``: the one split of the 2,007 HH-RLHF harmless pairs every method uses,
  ``{"seed": 0, "fractions": [0.4, 0.45, 0.15], "sft": [...], "preference_train": [...], "preference_eval": [...]}``,
  made by ``zoo.core.data.seeded_split(n_pairs, [0.4, 0.45, 0.15], seed=0)`` over the *line order* of
  ``harmless_base_test_pairs.jsonl`` (indices are 0-based line numbers, not the file's ``id`` field). Only ``sft``
  pairs may be used to train zoo-lm; ``preference_train`` / ``preference_eval`` are ShaPO's.
- ``data/alpaca-subset/alpaca_5000.txt``: the 5,000 Alpaca examples rendered as plain text for pre-training
  (:func:`alpaca_text`), one example after another in file order, separated by a blank line.
- ``data/zoo-lm-chat/train.jsonl`` and ``val.jsonl``: chat SFT conversations ``{"messages": [...], "source": ...}``.
  Alpaca examples go to ``val`` exactly when their first line lies in the last 10% of the lines of
  ``alpaca_5000.txt`` (the part :class:`~zoo.methods.zoo_lm.datamodule.LMDataModule` holds out for pre-training
  validation; *ours*), so chat validation text was never a pre-training target. HH-RLHF ``sft`` pairs become the
  prompt's turns plus the ``chosen`` reply; a seeded 10% of them (seed 0) go to ``val``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from zoo.core.data import DataError, read_jsonl, repo_root, seeded_split
from zoo.methods.zoo_lm.datamodule import validation_cut

SPLIT_SEED = 0
SPLIT_FRACTIONS = (0.4, 0.45, 0.15)
SPLIT_NAMES = ("sft", "preference_train", "preference_eval")
HH_PAIRS = "data/hh-rlhf-harmless/harmless_base_test_pairs.jsonl"
HH_SPLIT = "data/hh-rlhf-harmless/split.json"
ALPACA_JSON = "data/alpaca-subset/alpaca_5000.json"
ALPACA_TEXT = "data/alpaca-subset/alpaca_5000.txt"
CHAT_DIR = "data/zoo-lm-chat"
VAL_FRACTION = 0.1

_TURN = re.compile(r"\n\n(Human|Assistant): ")


def make_split(n_pairs: int) -> dict:
    """The HH-RLHF split as written to ``split.json``: ``seeded_split(n_pairs, [0.4, 0.45, 0.15], seed=0)``."""
    parts = seeded_split(n_pairs, SPLIT_FRACTIONS, SPLIT_SEED)
    return {"seed": SPLIT_SEED, "fractions": list(SPLIT_FRACTIONS), **dict(zip(SPLIT_NAMES, parts))}


def hh_messages(prompt: str, reply: str, where: str = "") -> list[dict[str, str]]:
    """Turn an HH-RLHF transcript (``"\\n\\nHuman: ...\\n\\nAssistant:"``) plus the final reply into chat messages.

    Args:
        prompt: the shared prefix, ending with ``"\\n\\nAssistant:"``.
        reply: the final assistant reply (the ``chosen`` side).
        where: ``file:line`` for error messages.

    Returns:
        ``[{"role": "user"|"assistant", "content": str}, ...]`` alternating, ending with the assistant reply.

    Raises:
        DataError: the prompt does not start with a Human turn or does not end with ``"\\n\\nAssistant:"``.
        Consecutive turns of one speaker (a handful of real transcripts) are merged with a blank line (*ours*).
    """
    if not prompt.endswith("\n\nAssistant:"):
        raise DataError(f"{where}: prompt does not end with '\\n\\nAssistant:'")
    pieces = _TURN.split(prompt[: -len("\n\nAssistant:")] + "\n\nAssistant: " + reply)
    if pieces[0].strip():
        raise DataError(f"{where}: text before the first 'Human:' turn: {pieces[0][:40]!r}")
    messages = []
    for speaker, text in zip(pieces[1::2], pieces[2::2]):
        role = "user" if speaker == "Human" else "assistant"
        if messages and messages[-1]["role"] == role:  # a few transcripts repeat a speaker: merge (ours)
            messages[-1]["content"] += "\n\n" + text.strip()
        else:
            messages.append({"role": role, "content": text.strip()})
    if not messages or messages[0]["role"] != "user":
        raise DataError(f"{where}: transcript does not start with a Human turn")
    return messages


def alpaca_user_text(example: dict) -> str:
    """The user turn of an Alpaca example: the instruction, then its input (if any) after a blank line."""
    inp = example["input"].strip()
    return example["instruction"].strip() + (f"\n\n{inp}" if inp else "")


def alpaca_text(example: dict) -> str:
    """An Alpaca example as plain pre-training text: ``Instruction: ...`` / ``Input: ...`` / ``Response: ...`` (*ours*)."""
    inp = example["input"].strip()
    return (
        f"Instruction: {example['instruction'].strip()}\n"
        + (f"Input: {inp}\n" if inp else "")
        + f"Response: {example['output'].strip()}\n"
    )


def read_alpaca(path: Path) -> list[dict]:
    """Read the Alpaca JSON array, checking every record has string ``instruction``, ``input``, ``output``.

    Raises:
        DataError: ``path: record i: ...`` for a missing or non-string field.
    """
    rows = json.loads(path.read_text(encoding="utf-8"))
    for i, row in enumerate(rows):
        for key in ("instruction", "input", "output"):
            if not isinstance(row.get(key), str):
                raise DataError(f"{path}: record {i}: field {key!r} missing or not a string")
    return rows


def build(root: Path | None = None) -> dict[str, int]:
    """Write every derived file (see the module docstring); returns row counts per output."""
    root = Path(root or repo_root())
    pairs = read_jsonl(
        root / HH_PAIRS,
        required=("prompt", "chosen", "rejected"),
        types={"prompt": str, "chosen": str, "rejected": str},
    )
    split = make_split(len(pairs))
    (root / HH_SPLIT).write_text(json.dumps(split) + "\n", encoding="utf-8")

    alpaca = read_alpaca(root / ALPACA_JSON)
    texts = [alpaca_text(ex) for ex in alpaca]
    (root / ALPACA_TEXT).write_text("\n".join(texts), encoding="utf-8")
    starts, line = [], 0
    for t in texts:
        starts.append(line)
        line += t.count("\n") + 1  # + the blank separator line
    n_lines = line - 1  # the last example has no separator line
    cut = validation_cut(n_lines, VAL_FRACTION)

    train, val = [], []
    for i, ex in enumerate(alpaca):
        row = {
            "messages": [
                {"role": "user", "content": alpaca_user_text(ex)},
                {"role": "assistant", "content": ex["output"].strip()},
            ],
            "source": f"alpaca:{i}",
        }
        (val if starts[i] >= cut else train).append(row)
    sft = split["sft"]
    hh_val = set(seeded_split(len(sft), [VAL_FRACTION, 1 - VAL_FRACTION], SPLIT_SEED)[0])
    for j, idx in enumerate(sft):
        p = pairs[idx]
        row = {
            "messages": hh_messages(p["prompt"], p["chosen"], f"{root / HH_PAIRS}:{idx + 1}"),
            "source": f"hh-rlhf-harmless:{idx}",
        }
        (val if j in hh_val else train).append(row)
    out = root / CHAT_DIR
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("val", val)):
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {
        "hh_pairs": len(pairs),
        **{k: len(split[k]) for k in SPLIT_NAMES},
        "alpaca_text_lines": n_lines,
        "chat_train": len(train),
        "chat_val": len(val),
    }


if __name__ == "__main__":
    print(json.dumps(build(), indent=1))
