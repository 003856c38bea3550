"""Time one optimiser step of our DPO and our ShaPO against TRL's DPOTrainer, at two levels of framework.

    OMP_NUM_THREADS=1 python benchmarks/shapo.py [--arch zoo-lm-small] [--batch 8] [--reps 15]
    OMP_NUM_THREADS=1 flock /work/logs/heavy.lock python benchmarks/shapo.py --arch smollm2-135m-instruct --lora-r 8 \
        --batch 4 --reps 3 --warmup 1          # the real chat base (LoRA; about 10 minutes on one thread)

Same model (a preset's random initialisation, or a pretrained base / HF directory: step time does not depend on
the weights' values), same frozen reference (full fine-tuning: a copy of the policy on both sides; ``--lora-r``: the
same peft LoRA model on both sides, its reference the base with the adapters disabled, ours and TRL's), same first
``--batch`` HH-RLHF ``preference_train`` pairs (tokenised once by our datamodule with the model's own tokenizer and
chat template, and handed to TRL as the decoded prompt and reply strings, so TRL tokenises the same text; the token
counts are printed), same AdamW (lr 1e-6) and gradient clipping at norm 10. The ShaPO step is a ShaPO step (``shapo_every=1``): two
forward/backward passes with the masked perturbation between them. Two comparisons, both reported:

* **bare**: the loss, backward, clip and optimiser step called directly on both sides (ours: ``_loss`` /
  ``shapo_backward``; TRL: ``DPOTrainer.compute_loss`` on its collated batch). Steps are interleaved (ours-DPO,
  ours-ShaPO, TRL) so a busy machine slows all three alike; medians of ``--reps`` after ``--warmup``.
* **framework**: each side's own training loop, ``lightning.Trainer.fit`` on our module and datamodule vs
  ``DPOTrainer.train()``, both for ``warmup + reps`` steps; the step time is the median interval between step starts
  (data loading, collation, logging and callbacks included); both datasets hold just the ``--batch`` pairs, so every
  step is a new one-batch epoch on both sides. The loops run one after another (they cannot be interleaved), so their
  ratio is more exposed to load changes than the bare one.

Writes ``results/shapo/step-time.json`` for the default zoo-lm-small, else ``step-time-<arch>[-lora<r>].json``
(``kind: benchmark``, docs/benchmarks.md); ``--results-dir`` writes elsewhere (tests).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from itertools import pairwise
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _median_gap(stamps: list[float], skip: int) -> float:
    """Median interval between consecutive step starts, after the first ``skip`` intervals."""
    return statistics.median([b - a for a, b in pairwise(stamps)][skip:])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="zoo-lm-small")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--lora-r", type=int, default=0, help="LoRA rank on every projection (alpha 2r); 0: full")
    ap.add_argument("--levels", nargs="+", choices=["bare", "framework"], default=["bare", "framework"])
    ap.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
    args = ap.parse_args(argv)

    import lightning as L
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import DPOConfig, DPOTrainer

    from zoo.core.results import write_result
    from zoo.data.preference import PreferenceDataModule
    from zoo.methods.shapo.module import ShaPOModule
    from zoo.methods.shapo.subspace import down_projections, rank_neurons
    from zoo.models.causal_lm import tokenizer_for

    lora = {"r": args.lora_r, "alpha": 2 * args.lora_r} if args.lora_r > 0 else None

    torch.manual_seed(0)
    load_start = os.getloadavg()[0]

    def datamodule() -> PreferenceDataModule:
        dm = PreferenceDataModule(
            batch_size=args.batch,
            max_length=args.max_length,
            max_prompt_length=args.max_length // 2,
            max_train_pairs=args.batch,
            shuffle=False,
            redteam_path=None,
            tokenizer=tokenizer_for(args.arch, None),
        )
        dm.setup("fit")
        return dm

    dm = datamodule()
    batch = next(iter(dm.train_dataloader()))
    tok = dm.tokenizer
    optimizer = {"name": "adamw", "lr": 1e-6, "weight_decay": 0.0}

    def shapo_module(variant: str, init: dict | None = None) -> ShaPOModule:
        m = ShaPOModule(
            arch=args.arch,
            variant=variant,
            shapo_every=1,
            perturbation="rho",
            rho=0.05,
            eval_generation=False,
            optimizer=optimizer,
            max_grad_norm=10.0,
            lora=lora,
        )
        if init is not None:
            m.policy.load_state_dict(init)
        m.setup("fit")  # frozen reference = a copy of the policy; under LoRA none (the adapters disabled)
        d = m.probe_direction.numel()
        m.neuron_masks.copy_(
            rank_neurons(down_projections(m.policy), torch.randn(d, generator=torch.Generator().manual_seed(0)), 1.0)
        )
        m.masks_ready.fill_(True)
        return m

    module = shapo_module("token")
    policy_init = copy.deepcopy(module.policy.state_dict())
    trainable = [p for p in module.policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-6, weight_decay=0.0)

    def ours_dpo():
        opt.zero_grad(set_to_none=True)
        loss, _ = module._loss(batch, "train")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 10.0)
        opt.step()

    def ours_shapo():
        opt.zero_grad(set_to_none=True)
        module.shapo_backward([batch], 1.0)
        torch.nn.utils.clip_grad_norm_(trainable, 10.0)
        opt.step()

    rows = {"prompt": [], "chosen": [], "rejected": []}
    for item in dm.train_set.items:
        rows["prompt"].append(tok.decode(item["prompt"]))
        rows["chosen"].append(tok.decode(item["chosen"][:-1]))  # TRL appends EOS itself
        rows["rejected"].append(tok.decode(item["rejected"][:-1]))
    n_steps = args.warmup + args.reps

    class HFStamps(TrainerCallback):
        """Time at the start of every HF Trainer step."""

        def __init__(self):
            self.stamps: list[float] = []

        def on_step_begin(self, *a, **k):
            self.stamps.append(time.perf_counter())

    class LightningStamps(L.Callback):
        """Time at the start of every Lightning training batch."""

        def __init__(self):
            self.stamps: list[float] = []

        def on_train_batch_start(self, *a, **k):
            self.stamps.append(time.perf_counter())

    def trl_trainer(steps: int, callbacks=()) -> DPOTrainer:
        policy = copy.deepcopy(module.policy)
        policy.load_state_dict(policy_init)
        config = DPOConfig(
            output_dir="/tmp/shapo_bench_trl",
            per_device_train_batch_size=args.batch,
            max_length=None,
            learning_rate=1e-6,
            beta=0.1,
            max_grad_norm=10.0,
            bf16=False,
            use_cpu=True,
            gradient_checkpointing=False,
            report_to="none",
            save_strategy="no",
            logging_steps=10**6,
            dataloader_drop_last=False,
            seed=0,
            max_steps=steps,
            lr_scheduler_type="constant",
            weight_decay=0.0,
            disable_tqdm=True,
        )
        # the same `batch` pairs every step: one epoch is one step on both sides (our datamodule holds them alone too);
        # a peft policy gets no ref_model: TRL then disables the adapters for the reference, as we do
        return DPOTrainer(
            model=policy,
            ref_model=None if lora else copy.deepcopy(policy).eval(),
            args=config,
            train_dataset=Dataset.from_dict(rows),
            processing_class=tok,
            callbacks=list(callbacks),
        )

    trainer = trl_trainer(n_steps)
    trainer.create_optimizer_and_scheduler(num_training_steps=10**6)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); we call compute_loss directly
    trl_batch = next(iter(trainer.get_train_dataloader()))

    def trl_bare():
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.model.train()
        loss = trainer.compute_loss(trainer.model, trl_batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in trainer.model.parameters() if p.requires_grad], 10.0)
        trainer.optimizer.step()

    ours_tokens = int(batch["chosen_attention_mask"].sum() + batch["rejected_attention_mask"].sum())
    ours_scored = int((batch["chosen_labels"] != -100).sum() + (batch["rejected_labels"] != -100).sum())
    trl_tokens = int(trl_batch["attention_mask"].sum())
    trl_scored = int(trl_batch["completion_mask"].sum())
    # padded positions each side's forward computes (pad included): what the step time scales with
    ours_padded = batch["chosen_input_ids"].numel() + batch["rejected_input_ids"].numel()
    trl_padded = trl_batch["input_ids"].numel()
    steps = {"ours DPO": ours_dpo, "ours ShaPO": ours_shapo, "TRL DPOTrainer": trl_bare}
    times = {k: [] for k in steps}
    for rep in range(n_steps):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            fn()
            if rep >= args.warmup:
                times[name].append(time.perf_counter() - t0)
    bare = {k: statistics.median(v) for k, v in times.items()}

    # framework level: each side's own loop, one step more than timed (n_steps intervals between n_steps + 1 starts)
    loops: dict[str, float] = {}
    if "framework" in args.levels:
        for name, variant in (("ours DPO", "dpo"), ("ours ShaPO", "token")):
            clock = LightningStamps()
            m = shapo_module(variant, policy_init)
            L.Trainer(
                accelerator="cpu",
                devices=1,
                max_steps=n_steps + 1,
                limit_val_batches=0,
                logger=False,
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
                num_sanity_val_steps=0,
                callbacks=[clock],
            ).fit(m, datamodule=datamodule())
            loops[name] = _median_gap(clock.stamps, args.warmup)
        clock = HFStamps()
        trl_trainer(n_steps + 1, [clock]).train()
        loops["TRL DPOTrainer"] = _median_gap(clock.stamps, args.warmup)

    n_params = sum(p.numel() for p in module.policy.parameters())
    model_name = f"{args.arch}" + (f" + LoRA r {args.lora_r} on every projection" if lora else "")
    print(
        f"model {model_name} ({n_params / 1e6:.2f}M params), batch {args.batch} pairs, torch threads "
        f"{torch.get_num_threads()}, {args.reps} timed steps each after {args.warmup} warm-up"
    )
    print(
        f"tokens in the batch (chosen + rejected, scored, padded): ours {ours_tokens} ({ours_scored}, {ours_padded}), "
        f"TRL {trl_tokens} ({trl_scored}, {trl_padded})"
    )
    out = []
    for level, med in (("bare", bare), ("framework", loops)):
        if level not in args.levels:
            continue
        for name, t in med.items():
            print(f"  {level:<9} {name:<15} median {t * 1000:8.1f} ms")
        base = med["TRL DPOTrainer"]
        print(
            f"  {level}: ours DPO / TRL = {med['ours DPO'] / base:.2f}x (target <= 1.0x), "
            f"ours ShaPO / TRL = {med['ours ShaPO'] / base:.2f}x (target <= 1.2x)"
        )
        out.append(
            {
                "level": level,
                "ours DPO ms": med["ours DPO"] * 1e3,
                "ours ShaPO ms": med["ours ShaPO"] * 1e3,
                "TRL DPOTrainer ms": base * 1e3,
                "ours DPO / TRL": med["ours DPO"] / base,
                "ours ShaPO / TRL": med["ours ShaPO"] / base,
                "ShaPO / DPO (ours)": med["ours ShaPO"] / med["ours DPO"],
            }
        )
    notes = (
        f"Model {model_name} ({n_params / 1e6:.2f}M parameters), batch {args.batch} HH-RLHF pairs (tokens chosen + "
        f"rejected: ours {ours_tokens}, TRL {trl_tokens}; scored: ours {ours_scored}, TRL {trl_scored}; positions "
        f"computed with padding: ours {ours_padded}, TRL {trl_padded}), torch "
        f"threads {torch.get_num_threads()}, medians of {args.reps} steps after {args.warmup} warm-up. "
        + (
            "'bare': loss + backward + clip + AdamW called directly on both sides, interleaved. "
            if "bare" in args.levels
            else ""
        )
        + (
            "'framework': lightning.Trainer.fit on our module vs DPOTrainer.train(), median interval between step "
            "starts, run one after the other. "
            if "framework" in args.levels
            else ""
        )
        + "Targets (issue 4): DPO <= 1.0x, ShaPO <= 1.2x TRL. Load (1-minute average) "
        f"{load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end."
    )
    name = (
        "step-time"
        if args.arch == "zoo-lm-small" and not lora
        else f"step-time-{args.arch}" + (f"-lora{args.lora_r}" if lora else "")
    )
    print(
        write_result(
            "shapo",
            name,
            out,
            kind="benchmark",
            notes=notes,
            packages=["trl", "datasets", "peft"],
            paper="n/a (speed target set by the zoo, not the paper)",
            results_dir=None if args.results_dir is None else Path(args.results_dir),
        )
    )


if __name__ == "__main__":
    main()
