"""``CRHPairsDataModule``: AlpacaEval questions and the CRH concepts, or a user's pairs CSV.

Inputs (all UTF-8):

- ``prompts_path``: JSON list of question strings (question id = index); ``data/crh-prompts/alpaca_805_prompts.json``.
- ``concepts_path``: CSV with columns ``concept_id`` (integer), ``output_concept`` (text) and optionally
  ``instruction`` (the authors' concept instruction, used by ``pairs: instructed`` with ``directive: authors``);
  other columns ignored.
- ``keywords_path``: JSON ``{concept_id: [keyword, ...]}`` with >= 3 keywords per concept (ours, reviewed): they
  build ``r_with`` and are the keyword judge's vocabulary.
- ``path`` (optional, the user's data): a pairs CSV with columns ``qid, cid, question, concept, resp_no_concept,
  resp_with_concept`` (integer ids, non-empty responses), the authors' layout. Given, it replaces the pairs built
  from the LM's replies; the concepts it names still need keywords for the judge.

Bad rows fail with ``DataError("file:line: column ...")`` in ``setup``, before any model work. The single training
"batch" is one dict holding everything (the analysis runs once).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import lightning as L
from torch.utils.data import DataLoader

from zoo.core.constraints import INTEGER, DataFile, NonEmpty, NonNegativeInt, PositiveInt
from zoo.core.data import DataError
from zoo.core.datafiles import read_declared
from zoo.methods.crh.pairs import PAIRS, read_pairs_csv

CONCEPT_COLUMNS = ("concept_id", "output_concept")
#: The concepts CSV (``data.concepts_path``): an integer id per concept (checked before torch too).
CONCEPTS = DataFile("csv", CONCEPT_COLUMNS, types={"concept_id": INTEGER})


class CRHPairsDataModule(L.LightningDataModule):
    """Args:
    prompts_path, concepts_path, keywords_path, path: see the module docstring.
    concepts: ``null`` (all), an int (the first n in file order) or a list of concept ids.
    n_questions: ``null`` (all) or the first n questions (small runs and tests).
    insert: where the concept sentence goes in ``r_with``: ``append`` or ``after_first_sentence``.
    """

    def __init__(
        self,
        prompts_path: str = "data/crh-prompts/alpaca_805_prompts.json",
        concepts_path: Annotated[str, CONCEPTS] = "data/crh-prompts/concepts_100.csv",
        keywords_path: str = "data/crh-prompts/concept_keywords.json",
        path: Annotated[str | None, PAIRS] = None,
        concepts: PositiveInt | Annotated[list[NonNegativeInt], NonEmpty] | None = None,
        n_questions: PositiveInt | None = None,
        insert: Literal["append", "after_first_sentence"] = "append",
    ):
        super().__init__()
        if insert not in ("append", "after_first_sentence"):
            raise ValueError(f"data.insert must be 'append' or 'after_first_sentence', got {insert!r}")
        self.prompts_path, self.concepts_path, self.keywords_path, self.path = (
            prompts_path,
            concepts_path,
            keywords_path,
            path,
        )
        self.concepts_sel, self.n_questions, self.insert = concepts, n_questions, insert
        self.batch: dict | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.batch is not None:
            return
        questions = _read_questions(self.prompts_path)
        if self.n_questions is not None:
            questions = {q: t for q, t in questions.items() if q < self.n_questions}
        keywords = _read_keywords(self.keywords_path)
        _, rows = read_declared(self.concepts_path, CONCEPTS)
        concepts = []
        for line, row in rows:
            cid = row["concept_id"]
            if cid not in keywords:
                raise DataError(f"{self.concepts_path}:{line}: concept {cid} has no keywords in {self.keywords_path}")
            concepts.append(
                {
                    "cid": cid,
                    "concept": row["output_concept"],
                    "keywords": keywords[cid],
                    "instruction": (row.get("instruction") or "").strip(),
                }
            )
        pairs = read_pairs_csv(self.path) if self.path else None
        if pairs is not None:  # the user's concepts and questions
            known = {c["cid"]: c for c in concepts}
            missing = sorted({p.cid for p in pairs} - set(keywords))
            if missing:
                raise DataError(f"{self.path}: concepts {missing} have no keywords in {self.keywords_path}")
            concepts = [
                known.get(
                    c, {"cid": c, "concept": next(p.concept for p in pairs if p.cid == c), "keywords": keywords[c]}
                )
                for c in dict.fromkeys(p.cid for p in pairs)
            ]
            questions = {p.qid: p.question for p in pairs}
        sel = self.concepts_sel
        if isinstance(sel, int):
            concepts = concepts[:sel]
        elif sel is not None:
            unknown = sorted(set(sel) - {c["cid"] for c in concepts})
            if unknown:
                raise ValueError(f"data.concepts: unknown concept ids {unknown}")
            concepts = [c for c in concepts if c["cid"] in set(sel)]
        if pairs is not None:
            keep = {c["cid"] for c in concepts}
            pairs = [p for p in pairs if p.cid in keep]
        self.batch = {"questions": questions, "concepts": concepts, "pairs": pairs, "insert": self.insert}

    def train_dataloader(self):
        return DataLoader([self.batch], batch_size=None, collate_fn=lambda x: x)


def _read_questions(path: str) -> dict[int, str]:
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: cannot read a JSON list of questions ({e})") from None
    if not isinstance(items, list) or not all(isinstance(t, str) and t.strip() for t in items):
        raise DataError(f"{path}: expected a JSON list of non-empty strings")
    return dict(enumerate(items))


def _read_keywords(path: str) -> dict[int, list[str]]:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: cannot read the keywords JSON ({e})") from None
    out = {}
    for key, words in raw.items():
        if not isinstance(words, list) or len([w for w in words if isinstance(w, str) and w.strip()]) < 3:
            raise DataError(f"{path}: concept {key!r}: needs a list of >= 3 non-empty keywords")
        out[int(key)] = list(words)
    return out
