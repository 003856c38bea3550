"""Platform overhead: the same model on the same batches through ``train.py``'s path and a bare PyTorch loop.

The zoo side composes and validates ``recipes/zoo-lm.yaml`` exactly as ``python train.py`` does and runs
``zoo.core.training.train`` (run directory, CSV logger, best/last checkpoint callbacks, Lightning loop) with one
extra callback that stamps the time at the start of every training batch. The bare side builds the same
model, datamodule batches and AdamW, and stamps the time at the start of every step of a plain loop. The
per-step time is the median interval between consecutive stamps (data loading, forward, backward, optimiser
and, on the zoo side, logging and callbacks), so one-off set-up does not blur the ratio. The sides are run by
``zoo.core.timing.compare``: one thread each, one untimed warm-up run per side, then ``--repeats`` interleaved
repeats (both sides back to back, the first side alternating), so each repeat's ratio compares both sides under the
same background load; the headline is the **median of the per-repeat ratios** (a paired estimate). The ratio of the
two sides' median step times is also reported, but it pairs steps from different repeats and so carries the load
drift between repeats. Also times ``import zoo`` and ``zoo list``.

    python benchmarks/overhead.py [--arch zoo-lm-small] [--batch-size 16] [--max-length 256] [--steps 40]
        [--repeats 2] [--results-dir DIR]

Writes ``results/platform/overhead.json`` (``kind: benchmark``; the machine load at start and end is in its
provenance and in each row, since on a shared machine the ratio is load-dominated).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lightning as L

from zoo.core.results import write_result
from zoo.core.timing import compare, machine_load

ROOT = Path(__file__).resolve().parents[1]


class StepClock(L.Callback):
    """Records ``time.perf_counter()`` at the start of every training batch."""

    def __init__(self):
        self.stamps: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.stamps.append(time.perf_counter())


def _median_step(stamps: list[float], skip: int = 3) -> float:
    """Median seconds between consecutive step starts, the first ``skip`` intervals left out."""
    gaps = [b - a for a, b in itertools.pairwise(stamps)][skip:]
    return statistics.median(gaps)


def _overrides(arch: str, batch_size: int, max_length: int) -> list[str]:
    return [f"model.arch={arch}", f"data.batch_size={batch_size}", f"data.max_length={max_length}"]


def zoo_steps(steps: int, arch: str, batch_size: int, max_length: int, out_dir: str) -> list[float]:
    """Step start times of ``python train.py recipe=zoo-lm.yaml ...`` (validation and exports off)."""
    from zoo.cli import compose_and_validate
    from zoo.core.training import train

    cfg = compose_and_validate(
        [
            "recipe=zoo-lm.yaml",
            *_overrides(arch, batch_size, max_length),
            f"trainer.max_steps={steps}",
            "trainer.limit_val_batches=0",
            "trainer.val_check_interval=null",
            "checkpoint.monitor=null",
            "logger.kind=csv",
            "export.formats=[]",
            f"out_dir={out_dir}",
        ]
    )
    clock = StepClock()
    train(cfg, callbacks=[clock])
    return clock.stamps


def bare_steps(steps: int, arch: str, batch_size: int, max_length: int) -> list[float]:
    """Step start times of the same model, batches and AdamW in a plain PyTorch loop."""
    import torch

    from zoo.core.build import build_datamodule
    from zoo.core.data import set_seed
    from zoo.core.recipe import load_recipe
    from zoo.models.causal_lm import build_causal_lm

    cfg = load_recipe("zoo-lm.yaml", _overrides(arch, batch_size, max_length))
    set_seed(cfg["seed"])
    model = build_causal_lm(arch)
    dm = build_datamodule(cfg)
    dm.setup("fit")
    o = cfg["model"]["optimizer"]
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]), weight_decay=o["weight_decay"])
    model.train()
    stamps: list[float] = []
    batches = iter(dm.train_dataloader())
    for _ in range(steps):
        stamps.append(time.perf_counter())
        batch = next(batches)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), batch["labels"][:, 1:].reshape(-1), ignore_index=-100
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return stamps


def _time_cmd(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="zoo-lm-small")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=256, help="tokens per sequence")
    ap.add_argument("--steps", type=int, default=40, help="training steps per run")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per side (after one warm-up run)")
    ap.add_argument("--results-dir", default=None, help="write the results file under this folder instead")
    args = ap.parse_args(argv)
    os.environ.update(HF_HUB_OFFLINE="1", WANDB_MODE="disabled")
    os.chdir(ROOT)
    logging.disable(logging.WARNING)
    tmp = tempfile.mkdtemp()
    shape = (args.arch, args.batch_size, args.max_length)
    # compare times whole runs (set-up included); the per-step figure is each run's median step, appended per call
    # with the 1-minute load average after it
    runs = {"train.py": lambda: zoo_steps(args.steps, *shape, tmp), "bare loop": lambda: bare_steps(args.steps, *shape)}
    done = {side: [] for side in runs}

    def run(side: str):
        return lambda: done[side].append((_median_step(runs[side]()), os.getloadavg()[0]))

    load_start = machine_load()
    t = compare({side: run(side) for side in runs}, repeats=args.repeats, warmup=1, threads=1)
    (zoo_s, loads), (bare_s, _) = (zip(*done[side][t.warmup :]) for side in runs)  # warm-up runs left out
    z, b = statistics.median(zoo_s), statistics.median(bare_s)
    ratios = [zs / bs for zs, bs in zip(zoo_s, bare_s)]
    paired = statistics.median(ratios)
    imp = statistics.median(_time_cmd([sys.executable, "-c", "import zoo"]) for _ in range(5))
    base = statistics.median(_time_cmd([sys.executable, "-c", "pass"]) for _ in range(5))
    lst = statistics.median(_time_cmd([sys.executable, "-m", "zoo.cli", "list"]) for _ in range(3))
    print(
        f"model {args.arch}, batch {args.batch_size} x {args.max_length} tokens, {args.steps} steps, "
        f"median step of {args.repeats} interleaved repeats after one warm-up run"
    )
    print(
        f"per-step  train.py {z * 1e3:.1f} ms   bare loop {b * 1e3:.1f} ms   median of per-repeat ratios "
        f"{paired:.3f} (target <= 1.05; range {min(ratios):.3f}-{max(ratios):.3f}); ratio of medians {z / b:.3f}"
    )
    print(f"import zoo {imp - base:.3f} s over bare python (target < 0.3 s); zoo list {lst:.3f} s (target < 1 s)")
    rows = [
        {"repeat": i, "train.py ms": zs * 1e3, "bare loop ms": bs * 1e3, "ratio": zs / bs, "load (1 min)": ld}
        for i, (zs, bs, ld) in enumerate(zip(zoo_s, bare_s, loads))
    ]
    rows.append(
        {
            "repeat": "median",
            "train.py ms": z * 1e3,
            "bare loop ms": b * 1e3,
            "ratio": paired,
            "ratio of medians": z / b,
            "ratio min": min(ratios),
            "ratio max": max(ratios),
            "import zoo s (over bare python)": imp - base,
            "zoo list s": lst,
        }
    )
    print(
        write_result(
            "platform",
            "overhead",
            rows,
            kind="benchmark",
            paper="n/a (zoo targets: ratio <= 1.05, import zoo < 0.3 s, zoo list < 1 s)",
            notes=f"Model {args.arch}, batch {args.batch_size} x {args.max_length} tokens, {args.steps} "
            f"steps, per-step = median interval between step starts of each run. zoo.core.timing.compare: "
            f"{t.describe()} The median row's 'ratio' is the median of the per-repeat (paired) ratios, "
            "'ratio of medians' divides the two sides' median steps; 'load (1 min)' is the machine's 1-minute load "
            "average after each repeat's train.py run. On a loaded machine the ratio is dominated by contention; "
            f"the idle figure needs a quiet machine and >= 5 runs. Machine: {load_start} before the runs, "
            f"{machine_load()} after.",
            results_dir=None if args.results_dir is None else Path(args.results_dir),
        )
    )


if __name__ == "__main__":
    main()
