"""The controlled preference task's data (GENERATED labels, ours; issue 15): the oracle, the prompts and the
builder. The task is described in :mod:`zoo.methods.shapo.controlled`, whose CLI runs :func:`build`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch

from zoo.core.data import repo_root

OUT_DIR = "data/shapo-controlled"
ALPACA = "data/alpaca-subset/alpaca_5000.json"
HH_PAIRS = "data/hh-rlhf-harmless/harmless_base_test_pairs.jsonl"
HH_SPLIT = "data/hh-rlhf-harmless/preference_split.json"
NEW_TOKENS = 32
MIN_GAP = 0.05
SIZES = {"train": 960, "val": 128, "test_alpaca": 128, "test_hh": 128}


def oracle_reward(texts: list[str]) -> list[float]:
    """The true reward: VADER compound sentiment in [-1, 1] of each text (Hutto & Gilbert 2014).

    Raises:
        ImportError: ``vaderSentiment`` is missing (``pip install -e ".[oracle]"``).
    """
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError as e:
        raise ImportError('the controlled task\'s oracle needs vaderSentiment: pip install -e ".[oracle]"') from e
    analyser = SentimentIntensityAnalyzer()
    return [float(analyser.polarity_scores(t)["compound"]) for t in texts]


def user_prompt(text: str) -> str:
    """An HH-style one-turn prompt (the form :mod:`zoo.data.preference` renders with the chat template)."""
    return f"\n\nHuman: {text.strip()}\n\nAssistant:"


def task_prompts(seed: int = 0, sizes: dict[str, int] | None = None, oversample: int = 2) -> dict[str, list[str]]:
    """Prompts of each part: seeded disjoint Alpaca instructions (with their input) for train / val / test_alpaca,
    and the first human turns of distinct HH ``preference_eval`` conversations for test_hh.

    Args:
        sizes: pairs (train, val) or prompts (test_alpaca, test_hh) per part; default :data:`SIZES`.
        oversample: train and val get ``oversample`` times as many prompts as pairs (pairs without a preference
            are dropped by :func:`build`).
    """
    sizes = sizes or SIZES
    root = repo_root()
    alpaca = json.loads((root / ALPACA).read_text())
    texts = [a["instruction"].strip() + (f"\n\n{a['input'].strip()}" if a["input"].strip() else "") for a in alpaca]
    texts = [t for t in texts if len(t) <= 300]
    random.Random(seed).shuffle(texts)
    n_tr = oversample * sizes["train"]
    n_va = oversample * sizes["val"]
    parts = {
        "train": texts[:n_tr],
        "val": texts[n_tr : n_tr + n_va],
        "test_alpaca": texts[n_tr + n_va : n_tr + n_va + sizes["test_alpaca"]],
    }
    from zoo.data.conversation_split import conversation_key
    from zoo.data.preference import read_pairs

    rows = read_pairs(root / HH_PAIRS)
    test_idx = json.loads((root / HH_SPLIT).read_text())["preference_eval"]
    firsts = list(dict.fromkeys(conversation_key(rows[i]["prompt"]) for i in test_idx))
    parts["test_hh"] = firsts[: sizes["test_hh"]]
    return {k: [user_prompt(t) for t in v] for k, v in parts.items()}


def sample_replies(
    model,
    tokenizer,
    prompts: list[str],
    seed: int,
    temperature: float = 1.0,
    max_new_tokens: int = NEW_TOKENS,
    batch_size: int = 32,
) -> tuple[list[list[int]], list[list[int]]]:
    """Prompt ids (chat template, last 64 tokens) and one seeded reply (token ids) per prompt."""
    from zoo.data.preference import encode_prompt
    from zoo.methods.shapo.lm import sample_completions

    ids = [encode_prompt(tokenizer, p)[-64:] for p in prompts]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.no_grad():
        replies = sample_completions(
            model.eval(), ids, pad, tokenizer.eos_token_id, max_new_tokens, temperature, seed, batch_size
        )
    return ids, replies


def decode(tokenizer, replies: list[list[int]]) -> list[str]:
    return [tokenizer.decode(r, skip_special_tokens=True).strip() for r in replies]


def build(
    out_dir: str | Path | None = None,
    seed: int = 0,
    model_id: str = "zoo-lm.chat",
    sizes: dict[str, int] | None = None,
    oversample: int = 2,
    batch_size: int = 32,
) -> Path:
    """Write the task (see the module docstring): two seeded samples of ``model_id`` per train/val prompt, labelled
    by :func:`oracle_reward`, the first ``sizes[part]`` pairs with a preference kept (default :data:`SIZES`).

    ``model_id`` is anything :func:`zoo.models.causal_lm.load_causal_lm` loads (a zoo id, a base id such as
    ``smollm2-135m-instruct``, a local directory). Returns the output directory."""
    from zoo.models.causal_lm import load_causal_lm

    out = Path(out_dir) if out_dir else repo_root() / OUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    sizes = sizes or SIZES
    model, tok = load_causal_lm(model_id)
    prompts = task_prompts(seed, sizes, oversample)
    counts = {}
    for part in ("train", "val"):
        _, a = sample_replies(model, tok, prompts[part], seed=1000 + seed, batch_size=batch_size)
        _, b = sample_replies(model, tok, prompts[part], seed=2000 + seed, batch_size=batch_size)
        ta, tb = decode(tok, a), decode(tok, b)
        ra, rb = oracle_reward(ta), oracle_reward(tb)
        rows = []
        for p, x, y, rx, ry in zip(prompts[part], ta, tb, ra, rb):
            if abs(rx - ry) < MIN_GAP or x == y:
                continue
            (c, rc), (r, rr) = sorted([(x, rx), (y, ry)], key=lambda t: -t[1])
            rows.append({"prompt": p, "chosen": c, "rejected": r, "reward_chosen": rc, "reward_rejected": rr})
        rows = rows[: sizes[part]]
        counts[part] = {"prompts": len(prompts[part]), "pairs": len(rows), "model": model_id}
        (out / f"{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tests = {k: prompts[k] for k in ("test_alpaca", "test_hh")}
    (out / "test_prompts.json").write_text(json.dumps(tests, indent=0) + "\n")
    (out / "counts.json").write_text(json.dumps(counts, indent=1) + "\n")
    return out
