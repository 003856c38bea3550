"""Training throughput of zoo-lm's Lightning step vs a bare transformers + PyTorch loop (same model and batches).

Both sides start from the same initial weights, run AdamW (lr 1e-3, weight decay 0.1 on matrices) on the same
packed tinyshakespeare batches, and are timed over the same steps after ``--warmup`` untimed steps. The runs are
scheduled by ``zoo.core.timing.compare``: one untimed warm-up run per side, then ``--repeats`` interleaved runs with
the side going first alternating (ours, bare, bare, ours, ...) so both see the same machine load, ``--threads`` on
both sides; the medians of ``--repeats`` are reported, in tokens per wall second and per CPU second (process time). As a check that both do the same work, the per-step losses of the two sides must agree.

    python benchmarks/zoo_lm.py [--arch zoo-lm-small] [--steps 8] [--warmup 2] [--repeats 3] [--batch 8]
        [--results-dir DIR]
    python benchmarks/zoo_lm.py --arch smollm2-135m-instruct --lora 16 --batch 4 --block 128 --steps 4 --warmup 1

``--arch`` takes a preset or a pretrained base id (its weights and tokenizer; ``zoo base fetch`` first).
``--lora R`` trains rank-R LoRA adapters on every linear layer (alpha 2R) instead of all weights; the bare loop
then steps the same peft model. Writes ``results/zoo-lm/train-throughput.json`` for a full fine-tune of a preset,
else ``train-throughput-<arch>[-lora<R>].json`` (``kind: benchmark``, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path

import lightning as L
import torch
from torch.utils.data import DataLoader

import zoo
from zoo.core.results import write_result
from zoo.core.timing import compare, machine_load
from zoo.methods.zoo_lm.datamodule import LMDataModule, PadCollate
from zoo.models.causal_lm import ARCHS, tokenizer_for

OPT = {"name": "adamw", "lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}


class _Timer(L.Callback):
    """Wall and CPU time from the start of batch ``warmup`` to the end of training, and every step's loss."""

    def __init__(self, warmup: int):
        self.warmup, self.t0, self.t1, self.losses = warmup, None, None, []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if batch_idx == self.warmup:
            self.t0 = _clocks()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.losses.append(float(outputs["loss"]))

    def on_train_end(self, trainer, module):
        self.t1 = _clocks()


def _clocks() -> tuple[float, float]:
    """``(wall, process CPU)`` seconds now; CPU time is the steadier figure on a shared machine."""
    return time.perf_counter(), time.process_time()


def _elapsed(t0: tuple[float, float], t1: tuple[float, float]) -> tuple[float, float]:
    return t1[0] - t0[0], t1[1] - t0[1]


def lora_config(r: int) -> dict | None:
    """``model.lora`` for rank ``r`` on every linear layer of a Llama/Gemma block (``None`` for ``r == 0``)."""
    return None if r == 0 else {"r": r, "alpha": 2 * r, "dropout": 0.0, "target_modules": LINEAR}


LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def run_lightning(
    init: dict, arch: str, batches: list[dict], warmup: int, lora: dict | None = None
) -> tuple[tuple[float, float], list[float]]:
    """``(wall, CPU)`` seconds for the timed steps of ``Trainer.fit`` on ``batches``, and the per-step losses."""
    module = zoo.create("zoo-lm", arch=arch, optimizer=OPT, lora=lora)
    module.load_state_dict(init)
    timer = _Timer(warmup)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=len(batches),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[timer],
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    loader = DataLoader(batches, batch_size=None, shuffle=False)
    trainer.fit(module, train_dataloaders=loader)
    return _elapsed(timer.t0, timer.t1), timer.losses


def run_bare(
    init: dict, arch: str, batches: list[dict], warmup: int, lora: dict | None = None
) -> tuple[tuple[float, float], list[float]]:
    """The same steps with a plain loop: ``model(input_ids, labels).loss``, backward, AdamW step (on the trainable
    parameters: all of them, or the LoRA adapters of the same peft model)."""
    model = zoo.create("zoo-lm", arch=arch, lora=lora).lm  # the transformers model alone (peft-wrapped with LoRA)
    model.load_state_dict({k[3:]: v for k, v in init.items()}, strict=False)
    model.tie_weights()
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in trainable if p.dim() >= 2]
    no_decay = [p for p in trainable if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=OPT["lr"],
        betas=tuple(OPT["betas"]),
        weight_decay=OPT["weight_decay"],
    )
    losses, t0 = [], None
    for i, batch in enumerate(batches):
        if i == warmup:
            t0 = _clocks()
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return _elapsed(t0, _clocks()), losses


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="zoo-lm-small")
    p.add_argument("--steps", type=int, default=8, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--block", type=int, default=256)
    p.add_argument("--lora", type=int, default=0, help="LoRA rank on every linear layer (0: train all weights)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
    a = p.parse_args(argv)
    lora = lora_config(a.lora)
    dm = LMDataModule(
        mode="pretrain",
        path="data/tinyshakespeare/input.txt",
        max_length=a.block,
        batch_size=a.batch,
        tokenizer=tokenizer_for(a.arch, None),
    )
    dm.setup("fit")
    collate = PadCollate(dm.tokenizer.pad_token_id)
    n = a.warmup + a.steps
    batches = [collate([dm.train_set[i * a.batch + j] for j in range(a.batch)]) for i in range(n)]
    torch.manual_seed(0)
    init = copy.deepcopy(zoo.create("zoo-lm", arch=a.arch, lora=lora).state_dict())
    tokens = a.steps * a.batch * a.block
    # compare schedules whole runs; each run times its own steps after the warm-up steps (set-up excluded)
    runs = {"ours": run_lightning, "bare": run_bare}
    got = {side: [] for side in runs}

    def run(side: str):
        return lambda: got[side].append(runs[side](init, a.arch, batches, a.warmup, lora))

    load_start = machine_load()
    t = compare({side: run(side) for side in runs}, repeats=a.repeats, warmup=1, threads=a.threads)
    ours, bare, ours_cpu, bare_cpu, max_diff = [], [], [], [], 0.0
    for r, ((t_ours, l_ours), (t_bare, l_bare)) in enumerate(zip(*(got[side][t.warmup :] for side in runs))):
        ours.append(tokens / t_ours[0])
        bare.append(tokens / t_bare[0])
        ours_cpu.append(tokens / t_ours[1])
        bare_cpu.append(tokens / t_bare[1])
        max_diff = max(max_diff, max(abs(x - y) for x, y in zip(l_ours, l_bare)))
        print(
            f"repeat {r}: ours {ours[-1]:.0f} tok/s ({ours_cpu[-1]:.0f} per CPU s), "
            f"bare {bare[-1]:.0f} tok/s ({bare_cpu[-1]:.0f} per CPU s)"
        )
    mo, mb = statistics.median(ours), statistics.median(bare)
    mo_cpu, mb_cpu = statistics.median(ours_cpu), statistics.median(bare_cpu)
    what = f"{a.arch} ({f'LoRA r {a.lora} on every linear layer' if a.lora else 'all weights'})"
    print(
        f"arch {what}, batch {a.batch}x{a.block} tokens, {a.steps} timed steps after {a.warmup}, "
        f"{a.repeats} interleaved repeats, torch threads {torch.get_num_threads()}"
    )
    print(f"max |loss(ours) - loss(bare)| over all steps: {max_diff:.2e}")
    print(
        f"median tokens/s: ours (Lightning) {mo:.0f}, bare transformers+PyTorch {mb:.0f}, ratio ours/bare {mo / mb:.3f}"
        f" (per CPU second: {mo_cpu:.0f} vs {mb_cpu:.0f}, {mo_cpu / mb_cpu:.3f})"
    )

    def row(repeat, o, b, oc, bc) -> dict:
        return {
            "repeat": repeat,
            "ours tokens/s": o,
            "bare tokens/s": b,
            "ours / bare": o / b,
            "ours tokens/CPU s": oc,
            "bare tokens/CPU s": bc,
            "ours / bare (CPU)": oc / bc,
        }

    rows = [row(r, *v) for r, v in enumerate(zip(ours, bare, ours_cpu, bare_cpu))]
    rows.append(row("median", mo, mb, mo_cpu, mb_cpu))
    name = (
        "train-throughput"
        if a.arch in ARCHS and not a.lora
        else f"train-throughput-{a.arch}" + (f"-lora{a.lora}" if a.lora else "")
    )
    print(
        write_result(
            "zoo-lm",
            name,
            rows,
            kind="benchmark",
            paper="n/a (zoo target: ours/bare >= 0.95)",
            notes=f"{what}, batch {a.batch} x {a.block} tokens of tinyshakespeare, {a.steps} timed steps "
            f"after {a.warmup} untimed ones in every run (ours = lightning.Trainer.fit on ZooLM, bare = the same "
            "transformers model (input_ids, labels).loss + backward + AdamW on its trainable parameters); "
            f"zoo.core.timing.compare over whole runs: {t.describe()} Tokens per wall second and per CPU second "
            "(process time, steadier on a shared machine); median row = medians of each column (ratios from those "
            f"medians); max |loss(ours) - loss(bare)| over all steps {max_diff:.1e} (both sides do the same work). "
            f"Machine: {load_start} before the runs, {machine_load()} after.",
            results_dir=None if a.results_dir is None else Path(a.results_dir),
        )
    )


if __name__ == "__main__":
    main()
