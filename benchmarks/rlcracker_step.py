"""Time one GRPO step of ours against TRL's ``GRPOTrainer`` on RLCracker's rewrite task, and RLCracker's full step
beside them, interleaved in one run.

    OMP_NUM_THREADS=1 python benchmarks/rlcracker_step.py [--prompts 2] [--tokens 32] [--reps 5]

Contestants, all on the same LoRA policy (zoo-lm-small random init with RLCracker's r 32 adapters; step time does
not depend on the weights' values), the same rewrite prompts around the first ``--prompts`` marked texts of
data/rlcracker/unigram_train.jsonl, G = 8, T = 0.7, completions of exactly ``--tokens`` tokens (no EOS stop),
μ = 1, ε = 0.2, ``loss_type="grpo"``, AdamW at the same lr, float32, and the same sequence reward (``r_sem`` of the
MiniLM similarity to the marked text):

* **ours**: ``zoo.models.grpo`` rollout, reward, group advantages, one update, β = 0;
* **trl**: ``GRPOTrainer`` with that reward function, ``num_iterations = 1``, β = 0;
* **rlcracker**: ``RLCrackerModule.grpo_step``: the same plus the frozen reference's two scoring passes (rewrite
  prompt and bare question), the token reward, β = 0.04 and the NLL term (the full method).

A TRL callback runs one of ours and one RLCracker step after every TRL step, so a busy machine slows all alike;
medians of ``--reps`` after ``--warmup``. Writes ``results/rlcracker/step-time.json`` (``kind: benchmark``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
G, LR, TEMP = 8, 1e-5, 0.7


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()

    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from zoo.core.results import write_result
    from zoo.methods.rlcracker.module import RLCrackerModule
    from zoo.methods.rlcracker.prompts import left_pad, rewrite_prompt
    from zoo.methods.rlcracker.rewards import semantic_reward, similarity
    from zoo.models import grpo

    torch.manual_seed(0)
    lines = Path("data/rlcracker/unigram_train.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines][: args.prompts]
    marked = [r["watermarked"] for r in rows]
    ours_mod = RLCrackerModule(arch="zoo-lm-small", max_new_tokens=args.tokens, temperature=TEMP)
    full_mod = RLCrackerModule(arch="zoo-lm-small", max_new_tokens=args.tokens, temperature=TEMP)
    trl_mod = RLCrackerModule(arch="zoo-lm-small", max_new_tokens=args.tokens, temperature=TEMP)
    for m in (full_mod, trl_mod):
        m.load_state_dict(ours_mod.state_dict())
    tok = ours_mod.tokenizer
    trl_mod.lm.generation_config.eos_token_id = None  # fixed-length completions (ours: eos id -1 below;
    trl_mod.lm.generation_config.min_new_tokens = args.tokens  # the full step keeps its eos, rare from random init)
    opt_ours = torch.optim.AdamW([p for p in ours_mod.lm.parameters() if p.requires_grad], lr=LR, weight_decay=0.0)
    opt_full = torch.optim.AdamW([p for p in full_mod.lm.parameters() if p.requires_grad], lr=LR, weight_decay=0.0)

    def reward(completions, marked_text=None, **kw):
        return semantic_reward(similarity(list(completions), list(marked_text))).tolist()

    def ours_step() -> float:
        start = time.perf_counter()
        ids, mask = left_pad([rewrite_prompt(tok, t) for t in marked], tok.pad_token_id)
        ro = grpo.sample_rollouts(ours_mod.lm, ids, mask, G, args.tokens, [-1], tok.pad_token_id, TEMP)
        r = torch.tensor(reward(ours_mod.decode(ro), [t for t in marked for _ in range(G)]))
        grpo.policy_update(
            ours_mod.lm, opt_ours, ro, grpo.group_advantages(r, G), updates=1, epsilon=0.2, beta=0.0, temperature=TEMP
        )
        return time.perf_counter() - start

    def full_step() -> float:
        start = time.perf_counter()
        full_mod.grpo_step(rows, opt_full)
        return time.perf_counter() - start

    times = {"ours": [], "trl": [], "rlcracker": []}

    class Interleave(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.start = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            times["trl"].append(time.perf_counter() - self.start)
            times["ours"].append(ours_step())
            times["rlcracker"].append(full_step())
            print({k: round(v[-1], 2) for k, v in times.items()}, flush=True)

    n = args.reps + args.warmup
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": rewrite_prompt_text(t)}], tokenize=False, add_generation_prompt=True
        )
        for t in marked
    ]
    data = Dataset.from_dict({"prompt": prompts * (n + 2), "marked_text": marked * (n + 2)})
    cfg = GRPOConfig(
        output_dir="/tmp/rlcracker-step",
        per_device_train_batch_size=len(marked) * G,
        num_generations=G,
        steps_per_generation=1,
        num_iterations=1,
        max_completion_length=args.tokens,
        temperature=TEMP,
        epsilon=0.2,
        beta=0.0,
        loss_type="grpo",
        learning_rate=LR,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1e9,
        bf16=False,
        use_cpu=True,
        gradient_checkpointing=False,
        max_steps=n,
        logging_steps=10_000,
        save_strategy="no",
        report_to="none",
        shuffle_dataset=False,
        disable_dropout=True,
        dataloader_num_workers=0,
    )
    GRPOTrainer(
        model=trl_mod.lm,
        reward_funcs=reward,
        args=cfg,
        train_dataset=data,
        processing_class=tok,
        callbacks=[Interleave()],
    ).train()
    med = {k: statistics.median(v[args.warmup :]) for k, v in times.items()}
    out = [{"contestant": k, "rep": i, "seconds": t} for k in times for i, t in enumerate(times[k][args.warmup :])]
    summary = [
        {
            "ours_s": med["ours"],
            "trl_s": med["trl"],
            "rlcracker_s": med["rlcracker"],
            "ours_over_trl": med["ours"] / med["trl"],
            "rlcracker_over_trl": med["rlcracker"] / med["trl"],
        }
    ]
    write_result(
        "rlcracker",
        "step-time",
        out,
        summary=summary,
        kind="benchmark",
        paper="issue #24 target: our GRPO step <= 1.0x TRL GRPOTrainer's",
        notes=f"zoo-lm-small + LoRA r32 (random init), {len(marked)} rewrite prompts x G={G}, {args.tokens} "
        f"completion tokens (fixed length), mu=1, T={TEMP}, eps=0.2, loss_type=grpo, AdamW lr {LR}, "
        f"float32, CPU, MiniLM r_sem reward on all sides; {args.reps} interleaved reps after "
        f"{args.warmup} warm-up; rlcracker = the full step (reference passes, token reward, beta 0.04, "
        "NLL).",
    )
    print(summary[0])


def rewrite_prompt_text(text: str) -> str:
    """The rewrite instruction around ``text`` (TRL renders the chat template itself)."""
    from zoo.methods.rlcracker.prompts import REWRITE

    return REWRITE.format(text=text)


if __name__ == "__main__":
    main()
