"""CRH steered generation speed: our steering (``zoo.models.activations.steer`` at block l - 1's output, a vector
per sequence, every forward) against plain unsteered ``generate`` and against the authors' mechanism (a
``register_forward_pre_hook`` on block l, as ``steering_opt``), on zoo-lm.chat.

Same prompts (AlpacaEval), same greedy decoding, same new-token count; timed by ``zoo.core.timing.compare`` (one
untimed warm-up generate per side, repeats interleaved in alternating order, one thread); the ratio is of median
times. Before timing, the steered sides must give equal
logits (max |diff| <= 1e-6) on a forward pass and identical greedy tokens.

    nice -n 10 python benchmarks/crh.py [--batch 32] [--tokens 32] [--repeats 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os

import torch

from zoo.core.results import write_result
from zoo.core.timing import compare
from zoo.methods.crh.pairs import prompt_text
from zoo.methods.crh.steering import steer_site
from zoo.models.activations import decoder_layers, steer
from zoo.models.causal_lm import load_causal_lm


@contextlib.contextmanager
def authors_pre_hook(model, layer: int, vectors: torch.Tensor):
    """The peer: add ``vectors [B, D]`` to block ``layer``'s input at every position, on every forward."""

    def hook(_m, args, kwargs):
        return (args[0] + vectors[:, None, :].to(args[0].dtype), *args[1:]), kwargs

    handle = decoder_layers(model)[layer].register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--layer", type=int, default=2)
    a = ap.parse_args(argv)
    model, tok = load_causal_lm("zoo-lm.chat")
    with open("data/crh-prompts/alpaca_805_prompts.json") as f:
        questions = json.load(f)[: a.batch]
    tok.padding_side = "left"
    enc = tok([prompt_text(tok, q) for q in questions], return_tensors="pt", padding=True)
    torch.manual_seed(0)
    vectors = torch.randn(a.batch, model.config.hidden_size) * 2.0
    ours = lambda: steer(model, steer_site(a.layer, "input"), vectors)
    peer = lambda: authors_pre_hook(model, a.layer, vectors)
    with torch.no_grad():
        with ours():
            lo = model(**enc).logits
        with peer():
            lp = model(**enc).logits
    max_diff = float((lo - lp).abs().max())
    if max_diff > 1e-6:
        raise SystemExit(f"steered logits differ by {max_diff:.2e} > 1e-6")

    def gen(ctx):
        with ctx(), torch.no_grad():
            return model.generate(
                **enc, max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False, pad_token_id=tok.pad_token_id
            )

    sides = {
        "unsteered generate": contextlib.nullcontext,
        "ours: activations.steer": ours,
        "authors: forward pre-hook": peer,
    }
    load = [os.getloadavg()[0]]
    t = compare(
        {name: (lambda ctx=ctx: gen(ctx)) for name, ctx in sides.items()}, repeats=a.repeats, warmup=1, threads=1
    )
    outs = t.outputs
    load.append(os.getloadavg()[0])
    same = bool(torch.equal(outs["ours: activations.steer"], outs["authors: forward pre-hook"]))
    rows = []
    for name in sides:
        med = t.median(name)
        rows.append(
            {
                "side": name,
                "tokens_per_s": a.batch * a.tokens / med,
                "seconds": med,
                "ratio_to_unsteered": t.ratio(name, "unsteered generate"),
                "ratio_to_pre_hook": t.ratio(name, "authors: forward pre-hook"),
            }
        )
        print(f"{name:28s} {a.batch * a.tokens / med:8.1f} tok/s  x{rows[-1]['ratio_to_unsteered']:.3f} of unsteered")
    write_result(
        "crh",
        "bench-steered-generation",
        rows,
        kind="benchmark",
        paper="issue #22 target: steered generation <= 1.05x the time of unsteered generate",
        notes=(
            f"zoo-lm.chat, {a.batch} AlpacaEval prompts (left-padded), greedy, {a.tokens} new tokens, "
            f"steering at layer {a.layer} (block {a.layer - 1}'s output = block {a.layer}'s input), one "
            f"vector per sequence on every forward; {t.describe()} Logits max |ours - pre-hook| = {max_diff:.1e}, greedy tokens identical: {same}; "
            f"1-min load {load[0]:.1f} -> {load[1]:.1f} on 2 cores. nnsight 0.8.1 not measured (not "
            "installed here; see the card)."
        ),
    )


if __name__ == "__main__":
    main()
