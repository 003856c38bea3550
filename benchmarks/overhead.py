"""Platform overhead: the same model on the same batches through ``train.py`` and through a bare PyTorch loop.

Both sides run as fresh processes twice, for N1 and N2 optimiser steps; the per-step time is
``(T(N2) - T(N1)) / (N2 - N1)``, so start-up (imports, data tokenisation, model build) cancels and what is
left is the steady-state cost of a step, Lightning's loop, logging and checkpoint callbacks included.
The model is zoo-lm (``--arch``) on the zoo-lm pretraining data; validation is off on both sides.
Also times ``import zoo`` and ``zoo list`` (targets < 0.3 s and < 1 s).

    python benchmarks/overhead.py [--arch zoo-lm-small] [--steps 10 40] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BARE = r"""
import sys, time, torch
from zoo.core.data import set_seed
from zoo.core.recipe import load_recipe
from zoo.core.build import build_datamodule
from zoo.models.causal_lm import build_causal_lm
steps, arch, bs, length = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = load_recipe("zoo-lm.yaml", [f"model.arch={arch}", f"data.batch_size={bs}", f"data.max_length={length}"])
set_seed(cfg["seed"])
model = build_causal_lm(arch)
dm = build_datamodule(cfg); dm.setup("fit")
opt_cfg = dict(cfg["model"]["optimizer"])
opt = torch.optim.AdamW(model.parameters(), lr=opt_cfg["lr"], betas=tuple(opt_cfg["betas"]),
                        weight_decay=opt_cfg["weight_decay"])
model.train(); done = 0
while done < steps:
    for batch in dm.train_dataloader():
        out = model(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask"))
        logits = out.logits[:, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), batch["labels"][:, 1:].reshape(-1),
                                                 ignore_index=-100)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step(); done += 1
        if done == steps:
            break
"""


def _time(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="zoo-lm-small")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--steps", type=int, nargs=2, default=[10, 40])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1", WANDB_MODE="disabled")
    env.pop("ZOO_RUN_DIR", None)
    tmp = tempfile.mkdtemp()

    def zoo_cmd(n):
        return [sys.executable, "train.py", "recipe=zoo-lm.yaml", f"model.arch={args.arch}",
                f"data.batch_size={args.batch_size}", f"data.max_length={args.max_length}",
                f"trainer.max_steps={n}", "trainer.limit_val_batches=0", "trainer.val_check_interval=null",
                "checkpoint.monitor=null", "logger.kind=csv", "export.formats=[]", f"out_dir={tmp}"]

    def bare_cmd(n):
        return [sys.executable, "-c", BARE, str(n), args.arch, str(args.batch_size), str(args.max_length)]

    n1, n2 = args.steps
    per = {"train.py": [], "bare": []}
    for _ in range(args.repeats):  # interleaved, so background load hits both sides alike
        for name, cmd in (("train.py", zoo_cmd), ("bare", bare_cmd)):
            per[name].append((_time(cmd(n2), env) - _time(cmd(n1), env)) / (n2 - n1))
    zoo_s, bare_s = statistics.median(per["train.py"]), statistics.median(per["bare"])
    imp = statistics.median(_time([sys.executable, "-c", "import zoo"], env) for _ in range(5))
    base = statistics.median(_time([sys.executable, "-c", "pass"], env) for _ in range(5))
    lst = statistics.median(_time([sys.executable, "-m", "zoo.cli", "list"], env) for _ in range(3))
    print(f"model {args.arch}, batch {args.batch_size} x {args.max_length} tokens, steps {n1}->{n2}, "
          f"median of {args.repeats}")
    print(f"per-step  train.py {zoo_s * 1e3:.1f} ms   bare loop {bare_s * 1e3:.1f} ms   "
          f"ratio {zoo_s / bare_s:.3f} (target <= 1.05)")
    print(f"import zoo {imp - base:.3f} s over bare python (target < 0.3 s); zoo list {lst:.3f} s (target < 1 s)")


if __name__ == "__main__":
    main()
