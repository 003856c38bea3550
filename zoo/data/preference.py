"""Preference pairs (prompt, chosen, rejected) for ShaPO, DPO and the ShaPO cost model.

Input schema (JSON lines, one pair per line; other keys are ignored):
    prompt   str  the conversation so far. HH-RLHF style text ("\\n\\nHuman: ...\\n\\nAssistant: ...", ending in
                  "Assistant:") is split into turns; any other text is one user turn.
    chosen   str  the preferred (safer) reply.
    rejected str  the other reply.
A missing key, a non-string value, an empty prompt or invalid JSON raises ``DataError("file:line: ...")``.

Default data: ``data/hh-rlhf-harmless/harmless_base_test_pairs.jsonl`` with ``preference_split.json``, a split
*by conversation* (first human turn, :func:`zoo.data.conversation_split.conversation_key`) of the pairs outside zoo-lm.chat's ``sft``
part (:func:`zoo.data.conversation_split.conversation_split`): ``preference_train`` trains, ``preference_val`` selects checkpoints and
``preference_eval`` is the test part; no conversation crosses these three, and none of ``preference_val`` /
``preference_eval`` shares a conversation with ``sft`` (the ``sft`` indices are never read here). ``val_part``
picks what validation reads; ``test_dataloader`` always reads ``preference_eval``. A user file without a split
gets a seeded 90/10 split (validation = test), or pass ``val_path``.

``flip_rate`` swaps chosen and rejected for a seeded fraction of the *training* pairs only (the noisy-preference
setting of the paper); held-out pairs are never flipped.

Kept as one module: reading, encoding and the datamodule of one format; the encoders are
shared by the datamodule and the cost model.
"""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path
from typing import Annotated, Literal

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset

from zoo.core.constraints import DataFile, NonNegativeInt, PositiveInt, Probability
from zoo.core.data import DataError, read_jsonl, repo_root, seeded_split

DEFAULT_PAIRS = "data/hh-rlhf-harmless/harmless_base_test_pairs.jsonl"
DEFAULT_SPLIT = "data/hh-rlhf-harmless/split.json"  # zoo-lm's line-index split (its `sft` part stays fixed)
PREFERENCE_SPLIT = "data/hh-rlhf-harmless/preference_split.json"  # by conversation: what this datamodule reads
PARTS = ("preference_train", "preference_val", "preference_eval")
DEFAULT_REDTEAM = "data/redteam-prompts/problem.json"
#: What a pairs JSONL holds (checked before torch too: :mod:`zoo.core.datafiles`).
PAIRS = DataFile("jsonl", ("prompt", "chosen", "rejected"), text=("prompt", "chosen", "rejected"))
_TURN = re.compile(r"\n\n(Human|Assistant):[ ]?")


def hh_to_messages(prompt: str) -> list[dict[str, str]]:
    """Split an HH-RLHF transcript prefix into chat messages (roles ``user`` / ``assistant``).

    The trailing empty ``Assistant:`` turn (the one to be answered) is dropped. Text without HH markers is
    one user message.

    Raises:
        ValueError: the transcript has no user turn.
    """
    parts = _TURN.split(prompt)
    if len(parts) == 1:
        return [{"role": "user", "content": prompt.strip()}]
    messages = []
    for role, text in zip(parts[1::2], parts[2::2]):
        messages.append({"role": "user" if role == "Human" else "assistant", "content": text.strip()})
    if messages and messages[-1]["role"] == "assistant" and not messages[-1]["content"]:
        messages.pop()
    if not any(m["role"] == "user" for m in messages):
        raise ValueError("HH transcript has no Human turn")
    return messages


def format_prompt(tokenizer, prompt: str) -> str:
    """The prompt text the LM sees: the chat template with a generation prompt when the tokenizer has one
    (zoo-lm), else the raw HH text (base models such as the paper's Llama-3.2-3B)."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(hh_to_messages(prompt), add_generation_prompt=True, tokenize=False)
    return prompt


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """Token ids of the prompt text the LM sees (:func:`format_prompt`), with user text encoded with special-token
    parsing off: only the chat template writes control tokens (:func:`zoo.models.chat.encode_rendered`)."""
    from zoo.models.chat import encode_rendered, encode_text

    if getattr(tokenizer, "chat_template", None):
        return encode_rendered(tokenizer, hh_to_messages(prompt), add_generation_prompt=True)[1]
    return encode_text(tokenizer, prompt)


def encode_pair(
    tokenizer, prompt: str, chosen: str, rejected: str, max_length: int, max_prompt_length: int
) -> dict[str, list[int]]:
    """Token ids of one pair: prompt ids (left-truncated to ``max_prompt_length``, keeping the end) and each
    reply's ids followed by EOS (right-truncated so prompt + reply fits in ``max_length``); the Mitchell et al.
    DPO truncation rule, which the authors' code inherits."""
    from zoo.models.chat import encode_text

    p = encode_prompt(tokenizer, prompt)
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    c = encode_text(tokenizer, chosen.strip()) + eos  # a reply mentioning "</s>" gets no EOS inside its target
    r = encode_text(tokenizer, rejected.strip()) + eos
    if len(p) + max(len(c), len(r)) > max_length:
        p = p[-max_prompt_length:]
    room = max_length - len(p)
    return {"prompt": p, "chosen": c[:room], "rejected": r[:room]}


class PreferencePairs(Dataset):
    """Tokenised pairs; item i is a dict with ``prompt``/``chosen``/``rejected`` ids, ``index`` and ``flipped``."""

    def __init__(
        self, rows: list[dict], tokenizer, max_length: int, max_prompt_length: int, flipped: set[int] | None = None
    ):
        """Args: rows with prompt/chosen/rejected strings; ``flipped`` positions have the replies swapped."""
        self.rows = rows
        self.flipped = flipped or set()
        self.items = []
        for i, row in enumerate(rows):
            chosen, rejected = (
                (row["rejected"], row["chosen"]) if i in self.flipped else (row["chosen"], row["rejected"])
            )
            enc = encode_pair(tokenizer, row["prompt"], chosen, rejected, max_length, max_prompt_length)
            self.items.append({**enc, "index": i, "flipped": i in self.flipped})

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return self.items[i]


def collate_pairs(items: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a list of encoded pairs to one length T shared by chosen and rejected.

    Returns:
        ``chosen_input_ids``, ``chosen_attention_mask``, ``chosen_labels`` (``(B, T)``; labels are -100 on the
        prompt and padding), the same for ``rejected``, ``index`` ``(B,)`` long and ``flipped`` ``(B,)`` bool.
    """
    T = max(len(it["prompt"]) + max(len(it["chosen"]), len(it["rejected"])) for it in items)
    out: dict[str, torch.Tensor] = {}
    for side in ("chosen", "rejected"):
        ids = torch.full((len(items), T), pad_id, dtype=torch.long)
        mask = torch.zeros((len(items), T), dtype=torch.long)
        labels = torch.full((len(items), T), -100, dtype=torch.long)
        for b, it in enumerate(items):
            seq = it["prompt"] + it[side]
            ids[b, : len(seq)] = torch.tensor(seq)
            mask[b, : len(seq)] = 1
            labels[b, len(it["prompt"]) : len(seq)] = torch.tensor(it[side])
        out[f"{side}_input_ids"], out[f"{side}_attention_mask"], out[f"{side}_labels"] = ids, mask, labels
    out["index"] = torch.tensor([it["index"] for it in items], dtype=torch.long)
    out["flipped"] = torch.tensor([it["flipped"] for it in items], dtype=torch.bool)
    return out


def read_pairs(path: str | Path) -> list[dict]:
    """Read and check a pairs JSONL (see the module docstring for the schema). An empty reply is allowed (four
    shipped HH pairs have an empty chosen reply: the assistant said nothing); it is scored as EOS alone.

    Raises:
        DataError: ``file:line: ...`` for invalid JSON, a non-object line, a missing or non-string field, or an
            empty prompt.
    """
    path = Path(path)
    rows = read_jsonl(path, required=PAIRS.columns, types=dict.fromkeys(PAIRS.text, str))
    if any(not row["prompt"].strip() for row in rows):
        with open(path, encoding="utf-8") as f:  # read_jsonl skips blank lines: recover the line numbers
            linenos = [n for n, line in enumerate(f, 1) if line.strip()]
        n = next(n for row, n in zip(rows, linenos) if not row["prompt"].strip())
        raise DataError(f"{path}:{n}: 'prompt' is empty")
    return rows


def flip_indices(n: int, flip_rate: float, seed: int) -> set[int]:
    """A seeded set of round(flip_rate * n) positions in range(n) (``random.Random(seed)``, as the authors' 30%-noise
    loader does with seed 42).

    Raises:
        ValueError: flip_rate outside [0, 1].
    """
    if not 0.0 <= flip_rate <= 1.0:
        raise ValueError(f"data.flip_rate must be in [0, 1], got {flip_rate}")
    return set(random.Random(seed).sample(range(n), round(flip_rate * n)))


class PreferenceDataModule(L.LightningDataModule):
    """Preference pairs for ShaPO / DPO training and held-out evaluation, plus prompts for generation metrics."""

    def __init__(
        self,
        path: Annotated[str | None, PAIRS] = None,
        val_path: Annotated[str | None, PAIRS] = None,
        split_file: str | None = None,
        tokenizer: str | None = None,
        batch_size: PositiveInt = 8,
        eval_batch_size: PositiveInt = 16,
        max_length: PositiveInt = 256,
        max_prompt_length: PositiveInt = 128,
        flip_rate: Probability = 0.0,
        flip_seed: NonNegativeInt = 42,
        max_train_pairs: PositiveInt | None = None,
        max_eval_pairs: PositiveInt | None = None,
        split_seed: NonNegativeInt = 0,
        redteam_path: str | None = DEFAULT_REDTEAM,
        heldout_prompts: NonNegativeInt = 64,
        benign_path: str | None = None,
        benign_prompts: NonNegativeInt = 0,
        num_workers: NonNegativeInt = 0,
        shuffle: bool = True,
        val_part: Literal["preference_val", "preference_eval"] = "preference_val",
    ):
        """Args:
            path: pairs JSONL; ``None`` = the shipped HH-RLHF harmless pairs with their ``split.json``.
            val_path: held-out pairs JSONL for a user ``path`` (else a seeded 90/10 split of ``path``).
            split_file: JSON ``{"preference_train": [...], "preference_eval": [...]}`` of line indices into ``path``,
                optionally with ``preference_val`` and ``sft`` (default: the shipped ``preference_split.json``).
            tokenizer: ``None`` (default) = the tokenizer of the model this datamodule feeds (it follows
                ``model.arch`` / ``model.tokenizer``), zoo-lm's when no model is attached; a directory is accepted only
                if it is the same tokenizer as the model's (see :meth:`_resolve_tokenizer`).
            batch_size, eval_batch_size: pairs per training / evaluation batch.
            max_length, max_prompt_length: token limits (see :func:`encode_pair`).
            flip_rate: fraction of training pairs whose replies are swapped (0 <= r <= 1).
            flip_seed: seed of the flipped set (fixed across training seeds, like the authors' 42).
            max_train_pairs, max_eval_pairs: keep only the first n pairs of each part (CPU-scale runs).
            split_seed: seed of the 90/10 split of a user file.
            redteam_path: JSON list of ``{"prompt": str, ...}`` red-team prompts for the generation metrics
                (``None`` = none).
            heldout_prompts: how many held-out pair prompts join the red-team prompts for generation.
            benign_path: JSON list of benign instructions (Alpaca objects ``{"instruction", "input", ...}`` or
                ``{"prompt": str}``) whose replies measure over-refusal, a helpfulness proxy (``None`` = none).
            benign_prompts: how many of them (the last ``benign_prompts`` items of the file) join the generation.
            num_workers: DataLoader workers.
            shuffle: shuffle the training pairs each epoch.
            val_part: what validation reads from a split file: ``preference_val`` (checkpoint selection; falls back
                to ``preference_eval`` for a split without it) or ``preference_eval`` (the test part).

        Raises:
            ValueError: ``val_part`` is neither.
        """
        if val_part not in ("preference_val", "preference_eval"):
            raise ValueError(f"data.val_part must be 'preference_val' or 'preference_eval', got {val_part!r}")
        super().__init__()
        self.save_hyperparameters()
        self.tokenizer = None
        self.train_set: PreferencePairs | None = None
        self.val_set: PreferencePairs | None = None
        self.test_set: PreferencePairs | None = None

    @staticmethod
    def encode_reply(
        tokenizer, prompt: str, reply: str, max_length: int = 512, max_prompt_length: int = 256
    ) -> list[int]:
        """Token ids of ``prompt`` (HH text or plain user text) followed by ``reply`` and EOS, as in training."""
        if "\n\nHuman:" not in prompt:
            prompt = f"\n\nHuman: {prompt}\n\nAssistant:"
        enc = encode_pair(tokenizer, prompt, reply, reply, max_length, max_prompt_length)
        return enc["prompt"] + enc["chosen"]

    # ----- reading -----
    def _rows(self) -> tuple[list[dict], list[dict], list[dict]]:
        hp = self.hparams
        root = repo_root()
        if hp.path is None:
            pairs_path = root / DEFAULT_PAIRS
            split_path = Path(hp.split_file) if hp.split_file else root / PREFERENCE_SPLIT
        else:
            pairs_path = Path(hp.path)
            split_path = Path(hp.split_file) if hp.split_file else None
        rows = read_pairs(pairs_path)
        if hp.val_path is not None:
            train, val = rows, read_pairs(hp.val_path)
            test = val
        elif split_path is not None:
            parts = self._read_split(split_path, len(rows))
            val_idx = parts.get(hp.val_part, parts["preference_eval"])
            train, val, test = (
                [rows[i] for i in idx] for idx in (parts["preference_train"], val_idx, parts["preference_eval"])
            )
        else:
            train_idx, val_idx = seeded_split(len(rows), [0.9, 0.1], hp.split_seed)
            train, val = [rows[i] for i in train_idx], [rows[i] for i in val_idx]
            test = val
        if hp.max_train_pairs is not None:
            train = train[: hp.max_train_pairs]
        if hp.max_eval_pairs is not None:
            val, test = val[: hp.max_eval_pairs], test[: hp.max_eval_pairs]
        return train, val, test

    @staticmethod
    def _read_split(path: Path, n: int) -> dict[str, list[int]]:
        if not path.is_file():
            raise DataError(f"{path}: no such split file")
        try:
            split = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
        for key in ("preference_train", "preference_eval"):
            if key not in split:
                raise DataError(f"{path}: missing key {key!r} (has {sorted(split)})")
        names = [k for k in ("sft", *PARTS) if k in split]
        for key in names:
            bad = [i for i in split[key] if not isinstance(i, int) or not 0 <= i < n]
            if bad:
                raise DataError(f"{path}: {key} has indices outside 0..{n - 1}: {bad[:5]}")
        for j, b in enumerate(names):
            for a in names[:j]:
                common = set(split[a]) & set(split[b])
                if common:
                    raise DataError(f"{path}: {b} and {a} overlap at {sorted(common)[:5]}")
        return {k: list(split[k]) for k in names if k != "sft"}

    # ----- Lightning hooks -----
    def setup(self, stage: str | None = None) -> None:
        """Read, flip and tokenise (once)."""
        if self.train_set is not None:
            return
        hp = self.hparams
        self.tokenizer = self._resolve_tokenizer()
        train, val, test = self._rows()
        flipped = flip_indices(len(train), hp.flip_rate, hp.flip_seed)
        self.train_set = PreferencePairs(train, self.tokenizer, hp.max_length, hp.max_prompt_length, flipped)
        self.val_set = PreferencePairs(val, self.tokenizer, hp.max_length, hp.max_prompt_length)
        self.test_set = (
            self.val_set if test is val else PreferencePairs(test, self.tokenizer, hp.max_length, hp.max_prompt_length)
        )
        self.clean_train_set = (
            self.train_set
            if not flipped
            else PreferencePairs(train, self.tokenizer, hp.max_length, hp.max_prompt_length)
        )

    def _resolve_tokenizer(self):
        """The tokenizer of the model this datamodule feeds (its ``tokenizer`` attribute, which follows
        ``model.arch`` / ``model.tokenizer``); ``data.tokenizer`` only when no model is attached, or when it is the
        same tokenizer (checked: vocabulary, special-token ids, chat template).

        Raises:
            ValueError: ``data.tokenizer`` differs from the model's, naming both sides.
        """
        from zoo.models.causal_lm import check_same_tokenizer, load_tokenizer

        trainer = getattr(self, "trainer", None)
        module = getattr(trainer, "lightning_module", None) if trainer is not None else None
        model_tok = getattr(module, "tokenizer", None)
        if self.hparams.tokenizer is None:
            return model_tok if model_tok is not None else load_tokenizer(None)
        tok = load_tokenizer(self.hparams.tokenizer)
        if model_tok is not None:
            check_same_tokenizer(
                tok,
                model_tok,
                f"data.tokenizer {self.hparams.tokenizer!r}",
                f"the model's tokenizer ({type(module).__name__})",
            )
        return tok

    def _loader(self, data: Dataset, batch_size: int, shuffle: bool) -> DataLoader:
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        return DataLoader(
            data,
            batch_size=batch_size,
            shuffle=shuffle,
            num_workers=self.hparams.num_workers,
            collate_fn=functools.partial(collate_pairs, pad_id=pad),
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, self.hparams.batch_size, self.hparams.shuffle)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set, self.hparams.eval_batch_size, False)

    def test_dataloader(self) -> DataLoader:
        """The test part (``preference_eval``; for a user file, the validation pairs)."""
        return self._loader(self.test_set, self.hparams.eval_batch_size, False)

    def clean_train_dataloader(self, batch_size: int | None = None) -> DataLoader:
        """The training pairs *without* flips, in order (stage A's probe reads these: see README)."""
        return self._loader(self.clean_train_set, batch_size or self.hparams.eval_batch_size, False)

    def ordered_train_dataloader(self, batch_size: int | None = None) -> DataLoader:
        """The training pairs as trained on (flips included), in order (for precomputing reference log-probs)."""
        return self._loader(self.train_set, batch_size or self.hparams.eval_batch_size, False)

    def generation_prompts(self) -> list[tuple[str, list[int]]]:
        """Prompts for the generation metrics: every red-team prompt, then the first ``heldout_prompts`` held-out
        pair prompts (of the test part), then the last ``benign_prompts`` benign instructions, as
        ``(source, prompt token ids)`` with source ``redteam``, ``heldout`` or ``benign``.

        Raises:
            DataError: the red-team file is not a JSON list of objects with a string ``prompt``, or the benign file
                not a list of objects with a string ``prompt`` or ``instruction``.
        """
        out = []
        if self.hparams.redteam_path:
            for i, item in enumerate(_read_prompt_list(self.hparams.redteam_path, "red-team")):
                if not isinstance(item.get("prompt"), str):
                    raise DataError(f"{self.hparams.redteam_path}: item {i} has no string 'prompt'")
                out.append(("redteam", self._prompt_ids(f"\n\nHuman: {item['prompt']}\n\nAssistant:")))
        for row in self.test_set.rows[: self.hparams.heldout_prompts]:
            out.append(("heldout", self._prompt_ids(row["prompt"])))
        if self.hparams.benign_path and self.hparams.benign_prompts:
            items = _read_prompt_list(self.hparams.benign_path, "benign")
            first = max(len(items) - self.hparams.benign_prompts, 0)
            for i, item in enumerate(items[first:], start=first):  # i: the item's index in the file
                text = item.get("prompt") or _alpaca_text(item)
                if not isinstance(text, str) or not text:
                    raise DataError(f"{self.hparams.benign_path}: item {i} has no string 'prompt' or 'instruction'")
                out.append(("benign", self._prompt_ids(f"\n\nHuman: {text}\n\nAssistant:")))
        return out

    def _prompt_ids(self, prompt: str) -> list[int]:
        ids = encode_prompt(self.tokenizer, prompt)
        return ids[-self.hparams.max_prompt_length :]


def _read_prompt_list(path: str, what: str) -> list[dict]:
    """A JSON list of objects (``path`` relative to the repository unless absolute).

    Raises:
        DataError: unreadable, not JSON, or not a list of objects (named with ``what``).
    """
    p = Path(path)
    if not p.is_absolute():
        p = repo_root() / p
    try:
        items = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{p}: cannot read {what} prompts ({e})") from None
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise DataError(f"{p}: expected a JSON list of objects")
    return items


def _alpaca_text(item: dict) -> str | None:
    """An Alpaca record's instruction with its input (if any) on the next paragraph."""
    inst = item.get("instruction")
    if not isinstance(inst, str):
        return None
    extra = item.get("input")
    return inst.strip() + (f"\n\n{extra.strip()}" if isinstance(extra, str) and extra.strip() else "")
