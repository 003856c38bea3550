"""``PromptReferenceDataModule``: (prompt, reference) items of one or more domains, in batches, for pooled-reps.

Domains (``sources``):
    ``alpaca-heldout``  Alpaca records 4,517-4,999 of ``data/alpaca-subset/alpaca_5000.json`` (483; zoo-lm never
                        trained on them): instruction (+ blank line + input) -> output.
    ``alpaca-seen``     Alpaca records 0-999 (zoo-lm.chat's SFT targets: the "seen" contrast).
    ``hh-eval``         HH-RLHF harmless ``preference_eval`` of ``data/hh-rlhf-harmless/split.json`` (301 pairs; the one
                        pair whose chosen reply is empty is dropped: 300): prompt turns -> chosen.
    ``world``           the generated scene world (:mod:`zoo.methods.pooled_reps.synthetic`), labelled generated.
    ``user``            ``path``: the user's JSON lines.

User schema (one object per line, other keys ignored):
    prompt     str  non-empty; HH-style "\\n\\nHuman: ... \\n\\nAssistant:" text becomes turns, other text one user turn.
    reference  str  non-empty reference answer (embedded into the reference spaces).
A missing, non-string or empty field raises ``DataError("file:line: key ...")`` when the datamodule is built, before
a run directory exists and before any generation.

Batches are lists of item dicts ``{"domain", "messages", "reference" | "latent"}`` (tokenising is the module's: the
tokenizer follows its model).
"""

from __future__ import annotations

import json
from typing import Annotated

import lightning as L
from torch.utils.data import DataLoader

from zoo.core.constraints import DataFile, NonEmpty, NonNegativeInt, OneOf, PositiveInt
from zoo.core.data import DataError, read_jsonl, repo_root
from zoo.data.preference import DEFAULT_PAIRS, DEFAULT_SPLIT, hh_to_messages, read_pairs
from zoo.methods.pooled_reps.synthetic import world_items

ALPACA = "data/alpaca-subset/alpaca_5000.json"
HELDOUT = range(4517, 5000)
SEEN = range(1000)
SOURCES = ("alpaca-heldout", "alpaca-seen", "hh-eval", "world", "user")


def _alpaca(path: str, records: range, domain: str) -> list[dict]:
    rows = json.loads((repo_root() / path).read_text())  # shipped: relative to the project, not the cwd
    out = []
    for i in records:
        r = rows[i]
        user = r["instruction"].strip() + (f"\n\n{r['input'].strip()}" if r["input"].strip() else "")
        out.append({"domain": domain, "messages": [{"role": "user", "content": user}], "reference": r["output"]})
    return out


def _hh_eval(pairs: str, split: str) -> list[dict]:
    rows = read_pairs(repo_root() / pairs)
    idx = json.loads((repo_root() / split).read_text())["preference_eval"]
    return [
        {"domain": "hh-eval", "messages": hh_to_messages(rows[i]["prompt"]), "reference": rows[i]["chosen"]}
        for i in idx
        if rows[i]["chosen"].strip()
    ]


def read_user(path: str) -> list[dict]:
    """Read and check a user's ``{"prompt", "reference"}`` JSONL (schema in the module docstring).

    Raises:
        DataError: ``file:line: key`` for a missing, non-string or empty field, invalid JSON or a missing file.
    """
    rows = read_jsonl(path, required=("prompt", "reference"), types={"prompt": str, "reference": str})
    with open(path, encoding="utf-8") as f:
        linenos = [n for n, line in enumerate(f, 1) if line.strip()]
    out = []
    for row, n in zip(rows, linenos):
        for key in ("prompt", "reference"):
            if not row[key].strip():
                raise DataError(f"{path}:{n}: {key} is empty")
        out.append({"domain": "user", "messages": hh_to_messages(row["prompt"]), "reference": row["reference"]})
    return out


class PromptReferenceDataModule(L.LightningDataModule):
    """(prompt, reference) items of the chosen domains (see the module docstring).

    Args:
        sources: domains to measure, from ``alpaca-heldout``, ``alpaca-seen``, ``hh-eval``, ``world``, ``user``.
        path: the user's JSONL (needed for, and implying, ``user``).
        max_items: keep the first this many items per domain (``None``: all).
        world_items: measurement scenes of the ``world`` domain. world_seed: their seed.
        batch_size: prompts generated together.

    Raises:
        DataError: an unknown source, ``user`` without ``path``, or a bad user row (at construction).
    """

    def __init__(
        self,
        sources: Annotated[list[Annotated[str, OneOf(SOURCES)]], NonEmpty] | None = None,
        path: Annotated[str | None, DataFile("jsonl", ("prompt", "reference"), text=("prompt", "reference"))] = None,
        max_items: PositiveInt | None = None,
        world_items: PositiveInt = 300,
        world_seed: NonNegativeInt = 1,
        batch_size: PositiveInt = 64,
    ):
        super().__init__()
        sources = list(sources or (["user"] if path else ["alpaca-heldout", "hh-eval"]))
        if path and "user" not in sources:
            sources.append("user")
        unknown = [s for s in sources if s not in SOURCES]
        if unknown:
            raise DataError(f"data.sources: unknown {unknown}; choose from {list(SOURCES)}")
        if "user" in sources and not path:
            raise DataError("data.sources names 'user' but data.path is not set")
        self.sources, self.path, self.max_items = sources, path, max_items
        self.n_world, self.world_seed, self.batch_size = int(world_items), int(world_seed), int(batch_size)
        self.user_items = read_user(path) if path else []  # fail on bad rows now, before any run directory
        self.items: list[dict] | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.items is not None:
            return
        items = []
        for source in self.sources:
            got = {
                "alpaca-heldout": lambda: _alpaca(ALPACA, HELDOUT, "alpaca-heldout"),
                "alpaca-seen": lambda: _alpaca(ALPACA, SEEN, "alpaca-seen"),
                "hh-eval": lambda: _hh_eval(DEFAULT_PAIRS, DEFAULT_SPLIT),
                "world": lambda: world_items(self.n_world, self.world_seed),
                "user": lambda: self.user_items,
            }[source]()
            items += got[: self.max_items] if self.max_items else got
        self.items = items

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.items, batch_size=self.batch_size, shuffle=False, collate_fn=list)
