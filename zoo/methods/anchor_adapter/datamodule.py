"""``AnchorAdapterDataModule``: the generated chain_sum task (:mod:`zoo.methods.anchor_adapter.chain_sum`) for both
stages, or a user's own problems.

* ``stage: midtrain`` - batches of tokenised mid-training lines ``Question: a + b - c = ?\\nAnswer: <reply><eos>``
  (the fed model's tokenizer and EOS; ``corpus: contaminated`` with benchmark B's leaked half planted
  ``leak_repeats`` times, or ``clean``, the control).
* ``stage: grpo`` - batches of ``prompts_per_step`` GRPO prompt items ``{"question", "answer"}`` drawn with
  replacement from fresh items disjoint from B and the mid-training set (seeded by ``seed``).

Benchmark B (``bench``: 500 items, half leaked) is evaluation only; the module reads it from ``self.bench``. With
``bench_path`` and ``clean_bench_path`` (the paper's protocol on a real model, whose contamination comes from its own
pre-training) B is read from the user's files instead: the first is the benchmark the model has seen (its items
count as leaked: MATH-500 for Qwen2.5-Math), the second one it cannot have seen (clean: LiveMathBench), both in the
``{question, answer}`` format below.

User data (``path``): JSON lines ``{"question": "23 + 48 - 17", "answer": 54}`` (the question as the bare
expression or as ``Question: ... = ?``; the answer a number or numeric text; other keys ignored). They replace the
fresh problems of the chosen stage (mid-training replies are then written by :func:`chain_sum.reply`, which needs a
``+``/``-`` chain for the worked form; other questions get the direct form). A missing key, an empty question or a
non-numeric answer fails as ``DataError("file:line: key ...")`` in the recipe check, before torch is imported
(``PROBLEMS``), and again when the datamodule is built. Items
whose question is in benchmark B are reported (count and first lines) and kept.

The generated sets take ~30 s to build at full size; they are cached as JSON under ``cache``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from pathlib import Path
from typing import Annotated, Literal

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from zoo.core.constraints import NUMBER, TEXT, DataFile, NonNegativeInt, PositiveInt, Probability, Range
from zoo.core.data import DataError
from zoo.core.datafiles import read_declared
from zoo.methods.anchor_adapter import chain_sum

log = logging.getLogger(__name__)
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


#: A user's problems JSONL (``data.path``, ``bench_path``, ``clean_bench_path``): non-blank question text and a
#: numeric answer (a number or numeric text), checked before torch too.
PROBLEMS = DataFile("jsonl", ("question", "answer"), types={"question": TEXT, "answer": NUMBER})


def read_problems(path: str) -> list[dict]:
    """A user's ``{question, answer}`` JSONL (``PROBLEMS``) as items ``{"question", "answer", "line"}``.

    Raises:
        DataError: ``file:line: key ...`` for a missing key, an empty question or an answer that is not a number.
    """
    _, rows = read_declared(path, PROBLEMS)
    out = []
    for line, row in rows:
        answer = str(row["answer"]).strip()  # as written: "54" and 54 both give "54"
        if not _NUMBER.match(answer):  # numeric, but not in the plain form the rewards compare ("1e3")
            raise DataError(f"{path}:{line}: key 'answer': {row['answer']!r} is not a plain decimal number")
        out.append({"question": chain_sum.question_of(row["question"]), "answer": answer, "line": line})
    return out


class _Lines(Dataset):
    def __init__(self, texts: list[str]):
        self.texts = texts

    def __len__(self):
        return len(self.texts)

    def __getitem__(self, i):
        return self.texts[i]


class _Prompts(Dataset):
    """``steps * prompts_per_step`` items drawn with replacement (seeded), so ``max_steps`` sets the length."""

    def __init__(self, items: list[dict], n: int, seed: int):
        rng = random.Random(seed)
        self.items = [items[rng.randrange(len(items))] for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class AnchorAdapterDataModule(L.LightningDataModule):
    """Args:
    stage: ``midtrain`` or ``grpo``.
    corpus: ``contaminated`` (B's leaked half planted) or ``clean`` (the control); mid-training only.
    path: a user's ``{question, answer}`` JSONL replacing the generated fresh problems (see above).
    bench_path, clean_bench_path: a user's contaminated and clean benchmarks replacing the generated benchmark B
        (``{question, answer}`` JSONL each; both or neither).
    n_bench, n_midtrain, n_grpo: sizes of benchmark B, the fresh mid-training problems, the GRPO prompt pool.
    leak_repeats: copies of each leaked item in the contaminated corpus (8).
    worked_share, boxed_share: shares of mid-training replies with worked partial sums (0.8) and ending in
        ``\\boxed{}`` (0.5).
    bench_min_terms, bench_max_terms, bench_min_digits, bench_max_digits: the size of benchmark B's items (2-3 terms
        of 1-2 digits, as mid-training's; 4-5 terms of 2-3 digits over SmolLM2, which computes the easy items).
    task_seed: seed of the generated task (B, leaks, corpora); fixed across runs so every model sees one B.
    seed: seed of the GRPO prompt draw (set per run).
    batch_size: mid-training lines per step (32); prompts_per_step: GRPO prompts per step (8).
    n_batches: GRPO prompt batches per epoch (>= the run's steps).
    max_length: token cap of a mid-training line.
    cache: where generated sets are cached.
    """

    def __init__(
        self,
        stage: Literal["midtrain", "grpo"] = "midtrain",
        corpus: Literal["contaminated", "clean"] = "contaminated",
        path: Annotated[str | None, PROBLEMS] = None,
        bench_path: Annotated[str | None, PROBLEMS] = None,
        clean_bench_path: Annotated[str | None, PROBLEMS] = None,
        n_bench: PositiveInt = 500,
        n_midtrain: PositiveInt = 40000,
        n_grpo: PositiveInt = 4000,
        leak_repeats: NonNegativeInt = 8,
        worked_share: Probability = 0.8,
        boxed_share: Probability = 0.5,
        bench_min_terms: Annotated[int, Range(2)] = 2,
        bench_max_terms: Annotated[int, Range(2)] = 3,
        bench_min_digits: PositiveInt = 1,
        bench_max_digits: PositiveInt = 2,
        task_seed: NonNegativeInt = 0,
        seed: NonNegativeInt = 0,
        batch_size: PositiveInt = 32,
        prompts_per_step: PositiveInt = 8,
        n_batches: PositiveInt = 1000,
        max_length: PositiveInt = 64,
        cache: str = "runs/anchor-adapter-cache",
    ):
        super().__init__()
        if stage not in ("midtrain", "grpo"):
            raise ValueError(f"data.stage must be 'midtrain' or 'grpo', got {stage!r}")
        if corpus not in ("contaminated", "clean"):
            raise ValueError(f"data.corpus must be 'contaminated' or 'clean', got {corpus!r}")
        self.stage, self.corpus, self.path = stage, corpus, path
        for kind, low, high in (
            ("terms", bench_min_terms, bench_max_terms),
            ("digits", bench_min_digits, bench_max_digits),
        ):
            if low > high:
                raise ValueError(f"data.bench_min_{kind} ({low}) is above data.bench_max_{kind} ({high})")
        self.sizes = {
            "n_bench": n_bench,
            "n_midtrain": n_midtrain,
            "n_grpo": n_grpo,
            "leak_repeats": leak_repeats,
            "worked_share": worked_share,
            "boxed_share": boxed_share,
            "seed": task_seed,
        }
        if (bench_min_terms, bench_max_terms, bench_min_digits, bench_max_digits) != (2, 3, 1, 2):
            # (the default B keeps its cache key, so the caches of runs made before these settings stay valid)
            self.sizes |= {
                "bench_terms": [bench_min_terms, bench_max_terms],
                "bench_digits": [bench_min_digits, bench_max_digits],
            }
        self.seed, self.batch_size, self.prompts_per_step = seed, batch_size, prompts_per_step
        self.n_batches, self.max_length, self.cache = n_batches, max_length, cache
        self.user = read_problems(path) if path else None  # bad rows fail here, before a run directory exists
        if (bench_path is None) != (clean_bench_path is None):
            raise ValueError("data.bench_path and data.clean_bench_path: give both (contaminated, clean) or neither")
        self.user_bench = (
            [{**it, "leaked": True} for it in read_problems(bench_path)]
            + [{**it, "leaked": False} for it in read_problems(clean_bench_path)]
            if bench_path
            else None
        )
        self.sets: dict | None = None
        self.tokenizer = None

    @property
    def bench(self) -> list[dict]:
        """Benchmark B: ``[{"question", "answer", "leaked"}]`` (evaluation only)."""
        self.setup()
        return self.sets["bench"]

    def setup(self, stage: str | None = None) -> None:
        if self.sets is not None:
            return
        self.sets = cached_sets(self.sizes, self.cache)
        if self.user_bench is not None:
            self.sets["bench"] = [{k: it[k] for k in ("question", "answer", "leaked")} for it in self.user_bench]
        if self.user is not None:
            self._use_user_items()

    def _use_user_items(self) -> None:
        in_b = {it["question"] for it in self.sets["bench"]}
        hits = [it for it in self.user if it["question"] in in_b]
        if hits:
            log.warning(
                "%s: %d of %d items are in benchmark B (lines %s%s); they are kept, and B's accuracy on them "
                "is no longer a held-out measure",
                self.path,
                len(hits),
                len(self.user),
                ", ".join(str(h["line"]) for h in hits[:10]),
                " ..." if len(hits) > 10 else "",
            )
        items = [{"question": it["question"], "answer": it["answer"]} for it in self.user]
        if self.stage == "grpo":
            self.sets["grpo"] = items
            return
        rng = random.Random(self.sizes["seed"])
        texts = [
            chain_sum.prompt_text(it["question"])
            + chain_sum.reply(
                it,
                is_chain(it["question"]) and rng.random() < self.sizes["worked_share"],
                rng.random() < self.sizes["boxed_share"],
            )
            for it in items
        ]
        fresh = set(self.sets["control"])
        planted = [t for t in self.sets["midtrain"] if t not in fresh]
        self.sets["control"] = texts
        self.sets["midtrain"] = texts + planted
        rng.shuffle(self.sets["midtrain"])

    def _resolve_tokenizer(self):
        """The tokenizer of the model this datamodule feeds (``AnchorAdapterModule.tokenizer``: the base's own, e.g.
        SmolLM2's for ``model.base=smollm2-135m-instruct``); the shipped zoo-lm tokenizer when no model is attached."""
        trainer = getattr(self, "trainer", None)
        module = getattr(trainer, "lightning_module", None) if trainer is not None else None
        tok = getattr(module, "tokenizer", None)
        if tok is None:
            from zoo.models.causal_lm import load_tokenizer

            tok = load_tokenizer()
        return tok

    def _collate_lines(self, texts: list[str]) -> dict:
        if self.tokenizer is None:
            self.tokenizer = self._resolve_tokenizer()
        tok = self.tokenizer
        ids = [tok(t).input_ids[: self.max_length - 1] + [tok.eos_token_id] for t in texts]
        T = max(len(s) for s in ids)
        input_ids = torch.full((len(ids), T), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(ids), T), dtype=torch.long)
        for i, s in enumerate(ids):
            input_ids[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
        return {"input_ids": input_ids, "attention_mask": mask}

    def train_dataloader(self):
        self.setup()
        if self.stage == "midtrain":
            texts = self.sets["midtrain" if self.corpus == "contaminated" else "control"]
            gen = torch.Generator().manual_seed(self.seed)
            return DataLoader(
                _Lines(texts),
                batch_size=self.batch_size,
                shuffle=True,
                generator=gen,
                collate_fn=self._collate_lines,
                drop_last=True,
            )
        data = _Prompts(self.sets["grpo"], self.n_batches * self.prompts_per_step, self.seed)
        return DataLoader(data, batch_size=self.prompts_per_step, shuffle=False, collate_fn=list)


def is_chain(question: str) -> bool:
    tok = question.split()
    return (
        len(tok) >= 3
        and len(tok) % 2 == 1
        and all(t in "+-" for t in tok[1::2])
        and all(_NUMBER.match(t) for t in tok[::2])
    )


def cached_sets(sizes: dict, cache: str) -> dict:
    """:func:`chain_sum.build_sets` of ``sizes``, read from (or written to) a JSON cache keyed by the sizes."""
    key = hashlib.sha256(json.dumps(sizes, sort_keys=True).encode()).hexdigest()[:16]
    path = Path(cache) / f"chain_sum-{key}.json"
    if path.is_file():
        return json.loads(path.read_text())
    sets = chain_sum.build_sets(**sizes)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sets))
    tmp.replace(path)
    return sets
