"""Make data/rlcracker/: a chat model's answers to real instructions under each watermark (generated; seeded).

    python -m zoo.methods.rlcracker.watermarked_answers [--out data/rlcracker] [--test-short 200 --test-long 100]
    python -m zoo.methods.rlcracker.watermarked_answers --model smollm2-135m-instruct --out data/rlcracker-smollm2

The provider (``--model``, default the zoo weights ``zoo-lm.chat``; a base id, a zoo id, a local HF directory) writes
every answer itself, as the paper watermarks an LLM's own outputs; the attacker that trains on these files must use
the same tokenizer (the detector re-tokenises with it).

* train (100) and val (20) questions: Alpaca records 4,517-4,999 (zoo-lm never trained on them), a seeded draw;
  answers ≤ 96 new tokens. Each row also carries the Alpaca ``reference`` output (a human-written negative).
* test questions: the 805 AlpacaEval instructions (data/crh-prompts), a seeded draw of ``short`` then ``long``
  questions; short answers ≤ 96 tokens, long ≤ 224 (what fits twice in a 512-token rewrite prompt).
* Every question gets one watermarked answer per watermark and one unmarked answer (the same sampler without the
  green bias): the unmarked answers are the negatives and the "regenerate" baseline.

Rows: ``{"id", "question", "watermarked", "unmarked", "z_watermarked", "z_unmarked"[, "reference"]}``. Files are
written to a temporary folder and moved into place only when all succeeded, with SOURCE.md listing their sha256
(a rerun on the same software reproduces them: one thread, torch seeded per batch).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import tempfile
from pathlib import Path

import torch

from zoo.methods.rlcracker.prompts import chat_prompt, encode_plain, sample
from zoo.methods.rlcracker.watermark import build_watermark

ALPACA = Path("data/alpaca-subset/alpaca_5000.json")
ALPACA_EVAL = Path("data/crh-prompts/alpaca_805_prompts.json")
HELD_OUT = range(4517, 5000)  # the Alpaca records zoo-lm validates on (data/zoo-lm-chat/SOURCE.md)
WATERMARKS = ("unigram", "kgw")
PROVIDER_TERMS = {
    "zoo-lm.chat": "zoo-lm.chat, CC-BY-NC-4.0 training data",
    "smollm2-135m-instruct": "SmolLM2-135M-Instruct, Apache-2.0",
    "gemma3-270m": "Gemma-3-270M, Gemma Terms of Use",
}
LENGTHS = {"short": (48, 96), "long": (160, 224)}  # (min, max) new tokens


def alpaca_question(rec: dict) -> str:
    """An Alpaca record's user turn: the instruction, then its input after a blank line (zoo-lm-chat's format)."""
    return rec["instruction"] + (f"\n\n{rec['input']}" if rec.get("input") else "")


def _answers(model, tok, questions, length, seed, processors) -> list[list[int]]:
    lo, hi = LENGTHS[length]
    torch.manual_seed(seed)
    return sample(
        model,
        tok,
        [chat_prompt(tok, q) for q in questions],
        max_new_tokens=hi,
        min_new_tokens=lo,
        processors=processors,
        temperature=0.7,
    )


def build(
    out: Path,
    n_train: int = 100,
    n_val: int = 20,
    n_short: int = 200,
    n_long: int = 100,
    seed: int = 0,
    model_ref: str = "zoo-lm.chat",
) -> dict[str, str]:
    """Write the files into ``out`` (replaced atomically) and return ``{file: sha256}``.

    Args:
        model_ref: the provider: anything ``zoo.models.causal_lm.load_causal_lm`` loads (zoo id, base id, directory).
    """
    from zoo.models.causal_lm import load_causal_lm

    torch.set_num_threads(1)
    model, tok = load_causal_lm(model_ref)
    rng = random.Random(seed)
    alpaca = json.loads(ALPACA.read_text())
    picked = rng.sample(list(HELD_OUT), n_train + n_val)
    evals = json.loads(ALPACA_EVAL.read_text())
    test_ids = rng.sample(range(len(evals)), n_short + n_long)
    splits = {
        "train": (
            [alpaca_question(alpaca[i]) for i in picked[:n_train]],
            "short",
            [f"alpaca:{i}" for i in picked[:n_train]],
            [alpaca[i]["output"] for i in picked[:n_train]],
        ),
        "val": (
            [alpaca_question(alpaca[i]) for i in picked[n_train:]],
            "short",
            [f"alpaca:{i}" for i in picked[n_train:]],
            [alpaca[i]["output"] for i in picked[n_train:]],
        ),
        "test_short": (
            [evals[i] for i in test_ids[:n_short]],
            "short",
            [f"alpaca_eval:{i}" for i in test_ids[:n_short]],
            None,
        ),
        "test_long": (
            [evals[i] for i in test_ids[n_short:]],
            "long",
            [f"alpaca_eval:{i}" for i in test_ids[n_short:]],
            None,
        ),
    }
    marks = {w: build_watermark(w, len(tok)) for w in WATERMARKS}
    files: dict[str, str] = {}
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        tmp = Path(tmp)
        for s, (split, (questions, length, ids, refs)) in enumerate(splits.items()):
            plain = _answers(model, tok, questions, length, seed * 1000 + 10 * s, ())
            for w_i, (w, mark) in enumerate(marks.items()):
                marked = _answers(model, tok, questions, length, seed * 1000 + 10 * s + 1 + w_i, [mark.processor()])
                rows = []
                for j, q in enumerate(questions):
                    row = {
                        "id": ids[j],
                        "question": q,
                        "watermarked": tok.decode(marked[j]),
                        "unmarked": tok.decode(plain[j]),
                    }
                    # z on the ids a reader gets back from the text (the detector's view)
                    row["z_watermarked"] = round(mark.z_score(encode_plain(tok, row["watermarked"])), 4)
                    row["z_unmarked"] = round(mark.z_score(encode_plain(tok, row["unmarked"])), 4)
                    if refs is not None:
                        row["reference"] = refs[j]
                    rows.append(row)
                name = f"{w}_{split}.jsonl"
                (tmp / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
                files[name] = hashlib.sha256((tmp / name).read_bytes()).hexdigest()
                print(
                    f"{name}: {len(rows)} rows, mean z {sum(r['z_watermarked'] for r in rows) / len(rows):.2f}",
                    flush=True,
                )
        (tmp / "SOURCE.md").write_text(source_md(files, n_train, n_val, n_short, n_long, seed, model_ref, out))
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(tmp, out)
    return files


def source_md(
    files: dict[str, str], n_train, n_val, n_short, n_long, seed, model_ref="zoo-lm.chat", out=Path("data/rlcracker")
) -> str:
    """SOURCE.md of the generated set (origin, provider model, fields, counts, sha256)."""
    table = "\n".join(f"| {name} | `{sha}` |" for name, sha in sorted(files.items()))
    flags = "" if model_ref == "zoo-lm.chat" else f" --model {model_ref}"
    where = "" if Path(out) == Path("data/rlcracker") else f" --out {out}"
    return f"""# rlcracker — watermarked and unmarked {model_ref} answers (GENERATED, not human text)

Made by `python -m zoo.methods.rlcracker.watermarked_answers{flags}{where} --train {n_train} --val {n_val} \
--test-short {n_short} --test-long {n_long} --seed {seed}` (one CPU thread; a rerun on the same software reproduces
the sha256 below).

- Questions: train/val from Alpaca records 4,517-4,999 of `data/alpaca-subset/alpaca_5000.json` (never a zoo-lm
  training target); test from the 805 AlpacaEval instructions `data/crh-prompts/alpaca_805_prompts.json`.
- Answers: sampled from `{model_ref}` (the provider; temperature 0.7, seeded) through its chat template; short
  48-96 new tokens, long 160-224. `watermarked`: with the watermark's green bias (γ 0.5, δ 2, key 15485863; KGW
  prefix 4, "time" scheme; `zoo/methods/rlcracker/watermark.py`); `unmarked`: the same sampler without it.
  `z_*`: the detector's z on the re-tokenised text. `reference` (train/val): the Alpaca output (human negative).
- Rows: `{{"id", "question", "watermarked", "unmarked", "z_watermarked", "z_unmarked"[, "reference"]}}`;
  files `<watermark>_<split>.jsonl`, split ∈ train ({n_train}), val ({n_val}), test_short ({n_short}),
  test_long ({n_long}).

Licences: Alpaca and AlpacaEval instructions CC BY-NC 4.0 (research use); the generated text follows the
provider's terms ({PROVIDER_TERMS.get(model_ref, "see the provider model's licence")}).

| file | sha256 |
|---|---|
{table}
"""


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("data/rlcracker"))
    p.add_argument("--train", type=int, default=100)
    p.add_argument("--val", type=int, default=20)
    p.add_argument("--test-short", type=int, default=200)
    p.add_argument("--test-long", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="zoo-lm.chat", help="the provider: zoo id, base id or model directory")
    a = p.parse_args(argv)
    files = build(a.out, a.train, a.val, a.test_short, a.test_long, a.seed, a.model)
    for name, sha in sorted(files.items()):
        print(sha, name)


if __name__ == "__main__":
    main()
