"""FAST benchmark: our SAE training (a LightningModule under ``lightning.Trainer``) vs sae-lens, in one process.

1. Steps/s on identical cached activations: our ``FastSAEModule`` vs sae-lens ``SAETrainer`` (Standard SAE, 8x,
   batch 1,024, same batches in the same order). Target ratio >= 0.8.
2. Harvest + train tokens/s: our pipeline (BT(P) blocks run through zoo-lm.chat up to block 2, then the SAE
   trained on them) vs sae-lens ``LanguageModelSAETrainingRunner`` on the same blocks. Target ratio >= 0.8.

The four sides are timed by ``zoo.core.timing.compare``: one thread each, one untimed warm-up call per side (lazy
imports, allocator growth), then ``--repeats`` interleaved repeats in alternating order. The speed is steps (tokens)
per CPU second of this process (``time.process_time``), the median over repeats: the 2 cores are shared and wall
time varies several-fold with other jobs' load (wall medians and the load average are recorded too).

    python benchmarks/fast.py [--steps 150] [--tokens 32768] [--repeats 2] [--batch 1024] [--results-dir DIR]
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import torch

from zoo.core.results import write_result
from zoo.core.timing import compare, machine_load


def ours_steps(acts: torch.Tensor, steps: int, batch: int) -> None:
    import lightning as L

    from zoo.methods.fast.datamodule import FastSAEDataModule
    from zoo.methods.fast.module import FastSAEModule

    module = FastSAEModule(geometric_median_sample=1024)
    dm = FastSAEDataModule(training_tokens=steps * batch, batch_size=batch, activation_cache=None, empty_content="drop")
    dm.train_pieces, dm.stats = list(acts.split(256)), {}
    trainer = L.Trainer(
        max_epochs=1,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(module, datamodule=dm)
    assert trainer.global_step == steps


def saelens_steps(acts: torch.Tensor, steps: int, batch: int) -> None:
    from sae_lens import LoggingConfig, StandardTrainingSAE, StandardTrainingSAEConfig
    from sae_lens.config import SAETrainerConfig
    from sae_lens.training.sae_trainer import SAETrainer

    d = acts.shape[1]
    sae = StandardTrainingSAE(
        StandardTrainingSAEConfig(
            d_in=d,
            d_sae=8 * d,
            l1_coefficient=5.0,
            apply_b_dec_to_input=False,
            decoder_init_norm=1.0,
            normalize_activations="expected_average_only_in",
        )
    )
    cfg = SAETrainerConfig(
        total_training_samples=steps * batch,
        train_batch_size_samples=batch,
        lr=1e-3,
        lr_end=1e-4,
        lr_scheduler_name="cosineannealing",
        lr_warm_up_steps=round(0.05 * steps),
        lr_decay_steps=round(0.2 * steps),
        device="cpu",
        logger=LoggingConfig(log_to_wandb=False),
        n_batches_for_norm_estimate=10,
    )

    def provider():
        gen = torch.Generator().manual_seed(0)
        while True:
            yield acts[torch.randperm(len(acts), generator=gen)[:batch]]

    SAETrainer(cfg=cfg, sae=sae, data_provider=provider()).fit()


def ours_harvest_train(blocks: torch.Tensor, batch: int) -> None:
    from zoo.methods.fast.pipelines import harvest
    from zoo.models.causal_lm import load_causal_lm

    model, _ = load_causal_lm("zoo-lm.chat")
    acts = torch.cat(harvest(model, blocks, [2])[2])
    ours_steps(acts, len(acts) // batch, batch)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=150, help="SAE steps of comparison 1")
    p.add_argument("--tokens", type=int, default=32_768, help="activations (tokens) harvested, 256-token blocks")
    p.add_argument("--repeats", type=int, default=2, help="timed repeats per side (after one warm-up call)")
    p.add_argument("--batch", type=int, default=1024, help="SAE batch size (activations)")
    p.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)
    from zoo.methods.fast.baselines import train_runner
    from zoo.methods.fast.pipelines import harvest, pack_blocks, pretrain_documents
    from zoo.models.causal_lm import load_causal_lm

    batch = args.batch
    torch.set_num_threads(1)
    model, tok = load_causal_lm("zoo-lm.chat")
    docs = pretrain_documents(tok, ["data/tinyshakespeare/input.txt", "data/alpaca-subset/alpaca_5000.txt"])
    step_blocks = pack_blocks(docs, 256)[0][: args.tokens // 256]
    acts = torch.cat(harvest(model, step_blocks, [2])[2])
    tokens = len(acts) // batch * batch
    load_start = machine_load()
    t = compare(
        {
            "ours_steps": lambda: ours_steps(acts, args.steps, batch),
            "saelens_steps": lambda: saelens_steps(acts, args.steps, batch),
            "ours_pipeline": lambda: ours_harvest_train(step_blocks, batch),
            "saelens_runner": lambda: train_runner(step_blocks, training_tokens=tokens, batch_size=batch),
        },
        repeats=args.repeats,
        warmup=1,
        threads=1,
    )
    rows = [
        {
            "comparison": comparison,
            "ours": work / t.median(ours, "cpu"),
            "peer": work / t.median(peer, "cpu"),
            "ratio": t.ratio(peer, ours, "cpu"),
            "ours_wall_s": t.median(ours),
            "peer_wall_s": t.median(peer),
            "ours_cpu_s": t.median(ours, "cpu"),
            "peer_cpu_s": t.median(peer, "cpu"),
            "target": 0.8,
        }
        for comparison, work, ours, peer in (
            ("SAE steps/s on identical cached activations", args.steps, "ours_steps", "saelens_steps"),
            ("harvest + train tokens/s (BT(P) blocks)", tokens, "ours_pipeline", "saelens_runner"),
        )
    ]
    for r in rows:
        print(f"{r['comparison']}: ours {r['ours']:.1f}/CPU-s, sae-lens {r['peer']:.1f}/CPU-s, ratio {r['ratio']:.2f}")
    write_result(
        "fast",
        "bench-speed",
        rows,
        kind="benchmark",
        packages=["sae-lens"],
        paper="peer: sae-lens 6.54 SAETrainer and LanguageModelSAETrainingRunner (the paper trains with "
        "sae_lens plus custom code)",
        notes=f"zoo-lm.chat block 2, Standard SAE 8x (2,048 features), batch {batch}; {args.steps} steps on "
        f"{len(acts):,} cached activations; pipeline: {tokens:,} tokens of BT(P) 256-token blocks "
        f"harvested then trained (ours: Lightning Trainer; sae-lens: its runner incl. model wrapping "
        f"and norm estimate). zoo.core.timing.compare over the four sides: {t.describe()} ours/peer = work per "
        f"median CPU second; ratio = peer median CPU time / ours (> 1: ours faster). Machine: {load_start} "
        f"before the timed calls, {machine_load()} after.",
        results_dir=None if args.results_dir is None else Path(args.results_dir),
    )


if __name__ == "__main__":
    main()
