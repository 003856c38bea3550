"""The measured default of the ``threads`` recipe key: one zoo-lm-small training step (AdamW, batch 8 x 128) at 1
vs 2 torch threads, interleaved in one process (``zoo.core.timing.compare``, 2 warm-up steps per side).

    python benchmarks/threads.py [--repeats 7]

Writes results/platform/threads.json; ratio = (2 threads) / (1 thread) step time (> 1: one thread is faster).
"""

from __future__ import annotations

import argparse
import os

import torch

from zoo.core.results import write_result
from zoo.core.timing import compare
from zoo.models.causal_lm import build_causal_lm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--arch", default="zoo-lm-small")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = build_causal_lm(args.arch)
    opt = torch.optim.AdamW(model.parameters(), 1e-4)
    x = torch.randint(0, 100, (8, 128))

    def step(threads: int):
        def run():
            torch.set_num_threads(threads)
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        return run

    t = compare({"1 thread": step(1), "2 threads": step(2)}, repeats=args.repeats, warmup=2, threads=None)
    row = {
        "what": f"{args.arch} training step, batch 8 x 128, AdamW",
        "ours": "1 thread",
        "peer": "2 threads",
        "load_1min": os.getloadavg()[0],
        **t.row("1 thread", "2 threads"),
    }
    print(row)
    write_result(
        "platform",
        "threads",
        [row],
        kind="benchmark",
        notes=(
            f"{t.describe().replace('1 thread(s) each side', 'threads set per side')} The process was launched "
            "with OMP_NUM_THREADS=2 so that either count is available; each side sets torch.set_num_threads before its "
            "step. ratio = 2-thread step time / 1-thread step time: above 1, the recipe default threads: 1 is faster "
            "on this shared 2-core machine (load in provenance and in the row)."
        ),
    )


if __name__ == "__main__":
    main()
