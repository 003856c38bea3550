"""Time one optimiser step of our DPO and our ShaPO against TRL's DPOTrainer on the same model and batch.

    OMP_NUM_THREADS=1 python benchmarks/shapo.py [--arch zoo-lm-small] [--batch 8] [--reps 15]

Each step is forward (policy and frozen reference) + backward + gradient clipping + AdamW step on one batch of
the first ``--batch`` HH-RLHF ``preference_train`` pairs, tokenised once by our datamodule and handed to TRL as
the decoded prompt and reply strings (so TRL tokenises the same text; the token counts are printed). The ShaPO
step is a ShaPO step (``shapo_every=1``): two forward/backward passes with the masked perturbation between them.
Steps are interleaved (ours-DPO, ours-ShaPO, TRL) so a busy machine slows all three alike; medians are reported.
Weights are the preset's random initialisation: step time does not depend on their values.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="zoo-lm-small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=128)
    args = ap.parse_args()

    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    from zoo.data.preference import PreferenceDataModule
    from zoo.methods.shapo.module import ShaPOModule
    from zoo.methods.shapo.subspace import down_projections, rank_neurons

    torch.manual_seed(0)
    dm = PreferenceDataModule(batch_size=args.batch, max_length=args.max_length, max_prompt_length=args.max_length // 2,
                              max_train_pairs=args.batch, shuffle=False, redteam_path=None)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    tok = dm.tokenizer

    module = ShaPOModule(arch=args.arch, variant="token", shapo_every=1, perturbation="rho", rho=0.05,
                         eval_generation=False)
    module.setup("fit")  # frozen reference = a copy of the policy
    g = torch.Generator().manual_seed(0)
    d = module.probe_direction.numel()
    module.neuron_masks.copy_(rank_neurons(down_projections(module.policy), torch.randn(d, generator=g), 1.0))
    module.masks_ready.fill_(True)
    policy_init = copy.deepcopy(module.policy.state_dict())
    opt = torch.optim.AdamW(module.policy.parameters(), lr=1e-6)

    def ours_dpo():
        opt.zero_grad(set_to_none=True)
        loss, _ = module._loss(batch, "train")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.policy.parameters(), 10.0)
        opt.step()

    def ours_shapo():
        opt.zero_grad(set_to_none=True)
        module.shapo_backward([batch], 1.0)
        torch.nn.utils.clip_grad_norm_(module.policy.parameters(), 10.0)
        opt.step()

    rows = {"prompt": [], "chosen": [], "rejected": []}
    for item in dm.train_set.items:
        rows["prompt"].append(tok.decode(item["prompt"]))
        rows["chosen"].append(tok.decode(item["chosen"][:-1]))  # TRL appends EOS itself
        rows["rejected"].append(tok.decode(item["rejected"][:-1]))
    trl_policy = copy.deepcopy(module.policy)
    trl_policy.load_state_dict(policy_init)
    config = DPOConfig(output_dir="/tmp/shapo_bench_trl", per_device_train_batch_size=args.batch, max_length=None,
                       learning_rate=1e-6, beta=0.1, max_grad_norm=10.0, bf16=False, use_cpu=True,
                       gradient_checkpointing=False, report_to="none", save_strategy="no", logging_steps=10 ** 6,
                       dataloader_drop_last=False, seed=0)
    trainer = DPOTrainer(model=trl_policy, ref_model=copy.deepcopy(trl_policy).eval(), args=config,
                         train_dataset=Dataset.from_dict(rows), processing_class=tok)
    trainer.create_optimizer_and_scheduler(num_training_steps=10 ** 6)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); we call training_step directly
    trl_batch = next(iter(trainer.get_train_dataloader()))

    def trl_step():
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.training_step(trainer.model, trl_batch)
        trainer.accelerator.clip_grad_norm_(trainer.model.parameters(), 10.0)
        trainer.optimizer.step()

    ours_tokens = int(batch["chosen_attention_mask"].sum() + batch["rejected_attention_mask"].sum())
    ours_scored = int((batch["chosen_labels"] != -100).sum() + (batch["rejected_labels"] != -100).sum())
    trl_tokens = int(trl_batch["attention_mask"].sum())
    trl_scored = int(trl_batch["completion_mask"].sum())
    steps = {"ours DPO": ours_dpo, "ours ShaPO": ours_shapo, "TRL DPOTrainer": trl_step}
    times = {k: [] for k in steps}
    for rep in range(args.warmup + args.reps):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            fn()
            if rep >= args.warmup:
                times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    n_params = sum(p.numel() for p in module.policy.parameters())
    print(f"model {args.arch} ({n_params / 1e6:.2f}M params), batch {args.batch} pairs, torch threads "
          f"{torch.get_num_threads()}, {args.reps} timed steps each after {args.warmup} warm-up")
    print(f"tokens in the batch (chosen + rejected, scored): ours {ours_tokens} ({ours_scored}), "
          f"TRL {trl_tokens} ({trl_scored})")
    for name, t in med.items():
        q = sorted(times[name])
        print(f"  {name:<15} median {t * 1000:8.1f} ms   (min {q[0] * 1000:.1f}, max {q[-1] * 1000:.1f})")
    base = med["TRL DPOTrainer"]
    print(f"ratio ours DPO / TRL   = {med['ours DPO'] / base:.2f}x  (target <= 1.0x)")
    print(f"ratio ours ShaPO / TRL = {med['ours ShaPO'] / base:.2f}x  (target <= 1.2x)")


if __name__ == "__main__":
    main()
