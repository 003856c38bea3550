"""Time one GRPO step of ours (``zoo.models.grpo``) against TRL's ``GRPOTrainer``, interleaved in one run.

    OMP_NUM_THREADS=1 python benchmarks/grpo_vs_trl.py [--arch zoo-lm-small] [--prompts 4] [--reps 5]

One GRPO step = sample G completions for each of ``--prompts`` prompts, reward them, group-normalise, then
``num_iterations = 2`` optimiser steps on that batch (the importance ratio of the second one is not 1). Both
contestants get the same model (the preset's random initialisation; step time does not depend on the weights), the
same generated chain_sum prompts, G = 8, completions of exactly ``--tokens`` tokens (no EOS stop on either side: a
random model would end at different lengths), T = 1, ε = 0.2, β = 0, ``loss_type="grpo"``, AdamW at the same lr,
float32 (``bf16=False``), and an output-independent reward (Bernoulli 0.5).

TRL reuses a generation batch for ``num_iterations`` trainer steps, so one of our steps is compared with two TRL
steps (a generating one and a reusing one). A TRL callback runs one of our steps after every TRL pair, so a busy
machine slows both alike; medians of ``--reps`` pairs after ``--warmup``. Each contestant is one function
(``ours_step``; ``trl_trainer`` + its callback) so further contestants (RLCracker's full step) slot in beside them.

Writes ``results/anchor-adapter/grpo-vs-trl.json`` (``kind: benchmark``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
G, EPS, LR = 8, 0.2, 1e-5


def prompts(n: int) -> list[str]:
    """``n`` generated chain_sum prompts (``Question: a + b - c = ?\\nAnswer:``)."""
    from zoo.methods.anchor_adapter.chain_sum import generate, prompt_text

    return [prompt_text(it["question"]) for it in generate(n, seed=99)]


def random_reward(completions, **kwargs) -> list[float]:
    """Bernoulli(0.5) per completion (TRL's reward-function signature)."""
    return torch.bernoulli(torch.full((len(completions),), 0.5)).tolist()


def ours_step(model, tok, optimizer, texts: list[str], tokens: int) -> float:
    """One GRPO step of ``zoo.models.grpo`` (rollout, reward, advantages, μ = 2 updates); returns seconds."""
    from zoo.methods.anchor_adapter.policy import encode_prompts
    from zoo.models.grpo import group_advantages, policy_update, sample_rollouts

    start = time.perf_counter()
    ids, mask = encode_prompts(tok, texts)
    roll = sample_rollouts(model, ids, mask, G, tokens, [-1], tok.pad_token_id, temperature=1.0)
    rewards = torch.tensor(random_reward([None] * roll.completion_ids.shape[0]))
    adv = group_advantages(rewards, G, eps=1e-4)
    policy_update(model, optimizer, roll, adv, updates=2, epsilon=EPS, beta=0.0, loss_type="grpo")
    return time.perf_counter() - start


def trl_trainer(model, tok, texts: list[str], tokens: int, steps: int, callbacks: list):
    """TRL's ``GRPOTrainer`` set up like ``ours_step`` for ``steps`` trainer steps (2 per GRPO step)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir="/tmp/grpo-vs-trl",
        per_device_train_batch_size=len(texts) * G,
        num_generations=G,
        steps_per_generation=1,
        num_iterations=2,
        max_completion_length=tokens,
        temperature=1.0,
        epsilon=EPS,
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
        max_steps=steps,
        logging_steps=10_000,
        save_strategy="no",
        report_to="none",
        shuffle_dataset=False,
        disable_dropout=True,
        dataloader_num_workers=0,
    )
    model.generation_config.eos_token_id = None  # fixed-length completions, as ours
    model.generation_config.min_new_tokens = tokens
    data = Dataset.from_dict({"prompt": texts * (steps + 2)})
    return GRPOTrainer(
        model=model,
        reward_funcs=random_reward,
        args=args,
        train_dataset=data,
        processing_class=tok,
        callbacks=callbacks,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="zoo-lm-small")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    args = ap.parse_args()

    from transformers import TrainerCallback

    from zoo.core.results import write_result
    from zoo.models.causal_lm import build_causal_lm, load_tokenizer

    torch.manual_seed(0)
    tok = load_tokenizer()
    texts = prompts(args.prompts)
    ours_model = build_causal_lm(args.arch)
    trl_model = build_causal_lm(args.arch)
    trl_model.load_state_dict(ours_model.state_dict())
    opt = torch.optim.AdamW(ours_model.parameters(), lr=LR, weight_decay=0.0)
    times = {"ours": [], "trl": []}

    class Interleave(TrainerCallback):
        """Time TRL's step pairs; after each pair run one of ours."""

        def __init__(self):
            self.pair_start = None

        def on_step_begin(self, a, state, control, **kw):
            if state.global_step % 2 == 0:
                self.pair_start = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            if state.global_step % 2 == 0:
                times["trl"].append(time.perf_counter() - self.pair_start)
                times["ours"].append(ours_step(ours_model, tok, opt, texts, args.tokens))
                print(
                    f"pair {len(times['trl'])}: trl {times['trl'][-1]:.2f} s, ours {times['ours'][-1]:.2f} s",
                    flush=True,
                )

    n = args.reps + args.warmup
    trl_trainer(trl_model, tok, texts, args.tokens, 2 * n, [Interleave()]).train()
    ours = statistics.median(times["ours"][args.warmup :])
    trl = statistics.median(times["trl"][args.warmup :])
    ratios = [a / b for a, b in zip(times["ours"][args.warmup :], times["trl"][args.warmup :])]
    rows = [{"contestant": k, "rep": i, "seconds": t} for k in times for i, t in enumerate(times[k][args.warmup :])]
    summary = [
        {"ours_s": ours, "trl_s": trl, "ratio_of_medians": ours / trl, "median_paired_ratio": statistics.median(ratios)}
    ]
    write_result(
        "anchor-adapter",
        "grpo-vs-trl",
        rows,
        summary=summary,
        kind="benchmark",
        paper="issue #23 target: ours <= 1.0x TRL GRPOTrainer's time per GRPO step",
        notes=f"{args.arch} (random init), {args.prompts} chain_sum prompts x G={G}, {args.tokens} completion "
        f"tokens (fixed length), num_iterations=2, T=1, eps={EPS}, beta=0, loss_type=grpo, AdamW lr "
        f"{LR}, float32, CPU; {args.reps} interleaved pairs after {args.warmup} warm-up; one GRPO step "
        "= TRL's generating step + its reusing step.",
    )
    print(
        f"ours {ours:.3f} s, TRL {trl:.3f} s per GRPO step: ratio {ours / trl:.3f} "
        f"(median paired {statistics.median(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
