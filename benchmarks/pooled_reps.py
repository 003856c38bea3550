"""pooled-reps benchmark: hook pooling during ``generate`` vs ``generate(output_hidden_states=True)`` + pooling, and
vs plain batched ``generate`` (the same sampling, no pooling at all).

Same model (``--arch``: zoo-lm.chat, or a base id such as smollm2-135m-instruct), same held-out Alpaca prompts, same
seed, ``T`` new tokens. Checks that the pooled vectors (mean, prompt, last, every readout layer) agree to 1e-5 and
that all three sides sample the same tokens, then times them with ``zoo.core.timing.compare`` (interleaved repeats,
alternating order, one untimed warm-up, one thread, medians of wall and CPU time) and measures the memory each
pooling side keeps: the bytes of the tensors it holds (ours: the running sums; the peer: every step's hidden-state
tuple) and the peak-RSS growth of a forked child running it once, beside plain ``generate``'s (the sensible memory
peer: it keeps no states, so ours' growth over plain's is what pooling costs in memory).

    python benchmarks/pooled_reps.py [--arch zoo-lm.chat] [--tokens 256] [--batch 16] [--repeats 3] [--json]

Targets: throughput >= 1.0x the hidden-states peer's and extra memory <= 1/10 of it at T = 256 (issue 20); tokens/s
>= 0.95x plain ``generate`` (issue 44: what pooling costs a batched generation).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.core.data import set_seed
from zoo.core.measure import measure
from zoo.core.results import write_result
from zoo.core.timing import compare
from zoo.methods.pooled_reps.datamodule import PromptReferenceDataModule
from zoo.methods.pooled_reps.pipeline import encode_prompts, eos_ids
from zoo.models.causal_lm import load_causal_lm
from zoo.models.generation_pool import pooled_generate, pooled_generate_hidden_states


def _setup(batch: int, arch: str = "zoo-lm.chat"):
    model, tok = load_causal_lm(arch)
    dm = PromptReferenceDataModule(sources=["alpaca-heldout"], max_items=batch)
    dm.setup()
    ids, mask = encode_prompts(tok, dm.items)
    return model, tok, ids, mask


def _run(fn, model, tok, ids, mask, T):
    set_seed(0)
    return fn(model, ids, mask, T, eos_ids(tok, model), tok.pad_token_id, 0.7, 0.95)


def plain_generate(model, ids, mask, T, eos, pad, temperature, top_p):
    """Plain batched ``generate`` with the sampling config pooling uses (``T + 1`` decoded tokens), no hooks."""
    from zoo.models.generation_pool import _sampling_config

    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            generation_config=_sampling_config(model, T + 1, temperature, top_p, pad),
        )
    return out[:, ids.shape[1] : ids.shape[1] + T]


def _held_bytes_peer(model, tok, ids, mask, T) -> int:
    """Bytes of the hidden-state tuples ``generate(output_hidden_states=True)`` returns (what the peer keeps)."""
    from zoo.models.generation_pool import _sampling_config

    gc = _sampling_config(model, T + 1, 0.7, 0.95, tok.pad_token_id)
    gc.output_hidden_states, gc.return_dict_in_generate = True, True
    set_seed(0)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gc)
    return sum(h.numel() * h.element_size() for step in out.hidden_states for h in step)


def _child_rss(which: str, T: int, batch: int, arch: str, queue) -> None:
    torch.set_num_threads(1)
    model, tok, ids, mask = _setup(batch, arch)
    fn = {"ours": pooled_generate, "peer": pooled_generate_hidden_states, "plain": plain_generate}[which]
    # the high-water mark is reset first (ru_maxrss would carry the parent's peak into the forked child)
    queue.put(measure(lambda: _run(fn, model, tok, ids, mask, T)).peak_mib)


def _rss_growth(which: str, T: int, batch: int, arch: str) -> float:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_rss, args=(which, T, batch, arch, q))
    p.start()
    value = q.get()
    p.join()
    return value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="zoo-lm.chat", help="zoo-lm preset or zoo id, base id, local dir, Hub name")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--json",
        action="store_true",
        help="write results/pooled-reps/bench-pooling[-ARCH].json (no suffix: zoo-lm.chat)",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    T = args.tokens
    model, tok, ids, mask = _setup(args.batch, args.arch)
    ours = _run(pooled_generate, model, tok, ids, mask, T)
    peer = _run(pooled_generate_hidden_states, model, tok, ids, mask, T)
    plain = _run(plain_generate, model, tok, ids, mask, T)
    assert torch.equal(ours.tokens, peer.tokens), "the two pooling runs sampled different tokens"
    same_as_plain = bool(torch.equal(ours.tokens[:, : plain.shape[1]], plain[:, : ours.tokens.shape[1]]))
    max_diff = max(float((getattr(ours, k) - getattr(peer, k)).abs().max()) for k in ("mean", "prompt", "last"))
    timing = compare(
        {
            "ours": lambda: _run(pooled_generate, model, tok, ids, mask, T),
            "peer": lambda: _run(pooled_generate_hidden_states, model, tok, ids, mask, T),
            "plain": lambda: _run(plain_generate, model, tok, ids, mask, T),
        },
        repeats=args.repeats,
        warmup=1,
        threads=1,
    )
    wall = timing.wall
    cpu = timing.cpu
    held_ours = sum(getattr(ours, k).numel() * 4 for k in ("mean", "prompt", "last"))
    held_peer = _held_bytes_peer(model, tok, ids, mask, T)
    rss = {name: _rss_growth(name, T, args.batch, args.arch) for name in ("ours", "peer", "plain")}
    tokens = args.batch * T
    row = {
        "arch": args.arch,
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
        "plain_wall_s": statistics.median(wall["plain"]),
        "plain_tokens_per_s": tokens / statistics.median(wall["plain"]),
        "vs_plain_generate_ratio_wall": statistics.median(wall["plain"]) / statistics.median(wall["ours"]),
        "vs_plain_generate_ratio_cpu": statistics.median(cpu["plain"]) / statistics.median(cpu["ours"]),
        "same_tokens_as_plain": same_as_plain,
        "ours_held_mib": held_ours / 2**20,
        "peer_held_mib": held_peer / 2**20,
        "held_memory_ratio": held_ours / held_peer,
        "ours_rss_growth_mib": rss["ours"],
        "peer_rss_growth_mib": rss["peer"],
        "plain_rss_growth_mib": rss["plain"],
        "rss_growth_ratio_vs_plain": rss["ours"] / rss["plain"] if rss["plain"] > 0 else None,
        "load_1min": os.getloadavg()[0],
    }
    for k, v in row.items():
        print(f"{k:>24}: {v:.6g}" if isinstance(v, float) else f"{k:>24}: {v}")
    if args.json:
        suffix = "" if args.arch == "zoo-lm.chat" else "-" + args.arch.split("/")[-1].split("-")[0]
        path = write_result(
            "pooled-reps",
            f"bench-pooling{suffix}",
            [row],
            kind="benchmark",
            paper={
                "target": "throughput >= 1.0x the hidden-states peer's; extra memory <= 1/10 of it at T = 256; "
                "vectors equal to 1e-5; tokens/s >= 0.95x plain batched generate"
            },
            notes=(
                f"{args.arch} ({model.config.num_hidden_layers} blocks, d {model.config.hidden_size}), {args.batch} "
                f"held-out Alpaca prompts in one left-padded batch, T = {T} new tokens (T + 1 decoded by every side: "
                "the extra forward holds token T), temperature 0.7, top-p 0.95, seed 0 before each call. "
                + timing.describe()
                + " Ours: forward hooks keep running sums (mean, prompt, last per readout layer; no per-token "
                "states). Peer: generate(output_hidden_states=True, return_dict_in_generate=True) then masked means. "
                "Plain: the same generate call with no hooks and no pooling (what pooling costs a batched "
                "generation; same_tokens_as_plain says whether it sampled the same tokens). held = bytes of the "
                "tensors each pooling side keeps; rss = peak-RSS growth of a forked child running it once; "
                "the memory peer that keeps no states on purpose is plain generate (rss_growth_ratio_vs_plain: ours' "
                "growth over plain's, the KV cache and logits being common to both). "
                + f"Load at the end: {os.getloadavg()[0]:.2f}."
            ),
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
