"""pooled-reps benchmark: hook pooling during ``generate`` vs ``generate(output_hidden_states=True)`` + pooling.

Same model (zoo-lm.chat), same held-out Alpaca prompts, same seed, ``T`` new tokens. Checks that the pooled vectors
(mean, prompt, last, every readout layer) agree to 1e-5, then times both (interleaved repeats, median wall time and
CPU time) and measures the memory each keeps for pooling: the bytes of the tensors it holds (ours: the running sums;
the peer: every step's hidden-state tuple) and the peak-RSS growth of a forked child running it once.

    python benchmarks/pooled_reps.py [--tokens 256] [--batch 16] [--repeats 3] [--json]

Targets (issue 20): throughput >= 1.0x the peer's, extra memory <= 1/10 of the peer's at T = 256.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.core.data import set_seed
from zoo.core.results import write_result
from zoo.methods.pooled_reps.datamodule import PromptReferenceDataModule
from zoo.methods.pooled_reps.pipeline import encode_prompts, eos_ids
from zoo.models.causal_lm import load_causal_lm
from zoo.models.generation_pool import pooled_generate, pooled_generate_hidden_states


def _setup(batch: int):
    model, tok = load_causal_lm("zoo-lm.chat")
    dm = PromptReferenceDataModule(sources=["alpaca-heldout"], max_items=batch)
    dm.setup()
    ids, mask = encode_prompts(tok, dm.items)
    return model, tok, ids, mask


def _run(fn, model, tok, ids, mask, T):
    set_seed(0)
    return fn(model, ids, mask, T, eos_ids(tok, model), tok.pad_token_id, 0.7, 0.95)


def _held_bytes_peer(model, tok, ids, mask, T) -> int:
    """Bytes of the hidden-state tuples ``generate(output_hidden_states=True)`` returns (what the peer keeps)."""
    from zoo.models.generation_pool import _sampling_config

    gc = _sampling_config(model, T + 1, 0.7, 0.95, tok.pad_token_id)
    gc.output_hidden_states, gc.return_dict_in_generate = True, True
    set_seed(0)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gc)
    return sum(h.numel() * h.element_size() for step in out.hidden_states for h in step)


def _child_rss(which: str, T: int, batch: int, queue) -> None:
    torch.set_num_threads(1)
    model, tok, ids, mask = _setup(batch)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _run(pooled_generate if which == "ours" else pooled_generate_hidden_states, model, tok, ids, mask, T)
    queue.put((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)  # KiB -> MiB


def _rss_growth(which: str, T: int, batch: int) -> float:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_rss, args=(which, T, batch, q))
    p.start()
    value = q.get()
    p.join()
    return value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="write results/pooled-reps/bench-pooling.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    T = args.tokens
    model, tok, ids, mask = _setup(args.batch)
    ours = _run(pooled_generate, model, tok, ids, mask, T)
    peer = _run(pooled_generate_hidden_states, model, tok, ids, mask, T)
    assert torch.equal(ours.tokens, peer.tokens), "the two runs sampled different tokens"
    max_diff = max(float((getattr(ours, k) - getattr(peer, k)).abs().max()) for k in ("mean", "prompt", "last"))
    wall = {"ours": [], "peer": []}
    cpu = {"ours": [], "peer": []}
    for _ in range(args.repeats):
        for name, fn in (("ours", pooled_generate), ("peer", pooled_generate_hidden_states)):
            t0, c0 = time.perf_counter(), time.process_time()
            _run(fn, model, tok, ids, mask, T)
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    held_ours = sum(getattr(ours, k).numel() * 4 for k in ("mean", "prompt", "last"))
    held_peer = _held_bytes_peer(model, tok, ids, mask, T)
    rss = {name: _rss_growth(name, T, args.batch) for name in ("ours", "peer")}
    tokens = args.batch * T
    row = {
        "T": T,
        "batch": args.batch,
        "layers": model.config.num_hidden_layers,
        "repeats": args.repeats,
        "max_abs_diff": max_diff,
        "ours_wall_s": statistics.median(wall["ours"]),
        "peer_wall_s": statistics.median(wall["peer"]),
        "ours_cpu_s": statistics.median(cpu["ours"]),
        "peer_cpu_s": statistics.median(cpu["peer"]),
        "throughput_ratio_wall": statistics.median(wall["peer"]) / statistics.median(wall["ours"]),
        "throughput_ratio_cpu": statistics.median(cpu["peer"]) / statistics.median(cpu["ours"]),
        "ours_tokens_per_s": tokens / statistics.median(wall["ours"]),
        "peer_tokens_per_s": tokens / statistics.median(wall["peer"]),
        "ours_held_mib": held_ours / 2**20,
        "peer_held_mib": held_peer / 2**20,
        "held_memory_ratio": held_ours / held_peer,
        "ours_rss_growth_mib": rss["ours"],
        "peer_rss_growth_mib": rss["peer"],
        "load_1min": os.getloadavg()[0],
    }
    for k, v in row.items():
        print(f"{k:>24}: {v:.6g}" if isinstance(v, float) else f"{k:>24}: {v}")
    if args.json:
        path = write_result(
            "pooled-reps",
            "bench-pooling",
            [row],
            kind="benchmark",
            paper={
                "target": "throughput >= 1.0x the peer's; extra memory <= 1/10 of the peer's at T = 256; "
                "vectors equal to 1e-5"
            },
            notes=(
                f"zoo-lm.chat (4 blocks, d 256), {args.batch} held-out Alpaca prompts, T = {T} new tokens "
                "(T + 1 decoded by both: the extra forward holds token T), temperature 0.7, top-p 0.95, seed 0, "
                f"one thread, {args.repeats} interleaved repeats (median). Ours: forward hooks keep running sums "
                "(mean, prompt, last per readout layer; no per-token states). Peer: generate("
                "output_hidden_states=True, return_dict_in_generate=True) then masked means. held = bytes of the "
                "tensors each keeps for pooling; rss = peak-RSS growth of a forked child running it once."
            ),
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
