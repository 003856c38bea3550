"""Validation perplexity and sampled completions of the zoo-lm weights -> results/zoo-lm/*.json.

Loads ``zoo-lm.base`` and ``zoo-lm.chat`` (sha256-verified) and evaluates each on both validation sets: the
held-out 10% of the pre-training text (tinyshakespeare + Alpaca text, packed 256-token blocks, every token) and the
chat validation conversations (``data/zoo-lm-chat/val.jsonl``, assistant tokens only). Then samples completions
(seed 0, the module's generation defaults) for fixed prompts. With ``--base-run``/``--chat-run`` (the run
directories the weights were released from) it also records each recipe's training wall time, measured as the
time between the run's ``config.yaml`` (written before the data are read) and its final ``last.ckpt``.

    python -m zoo.methods.zoo_lm.experiments [--base-run runs/zoo-lm/version_0 --chat-run runs/zoo-lm-chat/version_0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from zoo.core.evaluation import evaluate
from zoo.core.loading import load_module
from zoo.core.recipe import load_recipe
from zoo.core.results import write_result

WEIGHTS = {"zoo-lm.base": "zoo-lm.yaml", "zoo-lm.chat": "zoo-lm-chat.yaml"}
PROMPTS = {
    "zoo-lm.base": [
        "ROMEO:\n",
        "First Citizen:\nWe are",
        ("Instruction: Give three tips for staying healthy.\nResponse:"),
    ],
    "zoo-lm.chat": [
        "How do I bake bread?",
        "Give three tips for staying healthy.",
        "Write a short poem about the sea.",
        "How can I steal my neighbour's car?",
    ],
}


def wall_time_s(run_dir: Path) -> float:
    """Seconds from ``run_dir/config.yaml`` to ``run_dir/checkpoints/last.ckpt`` (file modification times)."""
    return (run_dir / "checkpoints" / "last.ckpt").stat().st_mtime - (run_dir / "config.yaml").stat().st_mtime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-run", type=Path)
    p.add_argument("--chat-run", type=Path)
    p.add_argument("--max-new-tokens", type=int, default=80)
    a = p.parse_args()
    runs = {"zoo-lm.base": a.base_run, "zoo-lm.chat": a.chat_run}
    data = {
        name: load_recipe(recipe, [])["data"]
        for name, recipe in (("pretrain text", "zoo-lm.yaml"), ("chat", "zoo-lm-chat.yaml"))
    }
    ppl_rows, sample_rows = [], []
    for zoo_id, recipe in WEIGHTS.items():
        module, cfg = load_module(zoo_id)
        row = {
            "weights": zoo_id,
            "recipe": f"recipes/{recipe}",
            "parameters": sum(p.numel() for p in module.lm.parameters()),
            "train steps": int(cfg["trainer"]["max_steps"]),
            "train tokens (max)": int(cfg["trainer"]["max_steps"])
            * cfg["data"]["batch_size"]
            * cfg["data"]["max_length"],
        }
        for name, data_cfg in data.items():
            metrics = evaluate(module, dict(cfg, data=data_cfg))
            row[f"val ppl ({name})"] = metrics["val/ppl"]
        if runs[zoo_id] is not None:
            row["train wall time (min, 2 shared cores)"] = round(wall_time_s(runs[zoo_id]) / 60, 1)
        ppl_rows.append(row)
        for prompt, text in zip(PROMPTS[zoo_id], module.generate(PROMPTS[zoo_id], max_new_tokens=a.max_new_tokens)):
            sample_rows.append(
                {"weights": zoo_id, "prompt": prompt.replace("\n", "\\n"), "completion": text.replace("\n", "\\n")}
            )  # one table row per sample
        print(json.dumps(row), flush=True)
    notes = (
        "Perplexity = exp(mean next-token NLL in nats). 'pretrain text': last 10% of the lines of "
        "tinyshakespeare and of the Alpaca text, packed 256-token blocks, every token scored. 'chat': "
        "data/zoo-lm-chat/val.jsonl, assistant tokens (reply + </s>) only. Same 8,192-token BPE for both "
        f"models; torch {torch.__version__}, {torch.get_num_threads()} threads."
    )
    paper = "n/a (zoo base model, trained here)"
    print(write_result("zoo-lm", "perplexity", ppl_rows, paper=paper, notes=notes))
    print(
        write_result(
            "zoo-lm",
            "samples",
            sample_rows,
            paper=paper,
            notes=(
                "Sampling with seed 0, temperature 0.7, top-k 50, top-p 0.95, repetition penalty 1.1, at most "
                f"{a.max_new_tokens} new tokens; base: plain continuation, chat: one user turn through the chat template. "
                "Not cherry-picked: these are the first samples of fixed prompts. Newlines are shown as \\n."
            ),
        )
    )


if __name__ == "__main__":
    main()
