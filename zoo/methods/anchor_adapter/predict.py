"""``zoo predict anchor-adapter.<tag> "Question: 23 + 48 - 17 = ?"``: replies before and after, leak status, lens."""

from __future__ import annotations

from zoo.methods.anchor_adapter.chain_sum import is_correct, prompt_text, question_of
from zoo.methods.anchor_adapter.policy import adapters, generate_replies


def predict_record(module, text: str) -> dict:
    """Greedy replies of the model before and after its stage, whether the question is in benchmark B (default
    task, ``task_seed`` 0) and leaked, and the after model's logit-lens table at the answer position.

    Returns:
        ``{"prompt", "gold", "benchmark": "leaked" | "clean" | None, "replies": [{"model", "adapters", "reply",
        "correct"}], "answer_token", "lens": [{"layer", "stream", "rank", "top3"}]}``.

    Raises:
        zoo.core.data.DataError: the input is not a ``+``/``-`` chain of integers.
    """
    from zoo.core.data import DataError
    from zoo.methods.anchor_adapter.circuit import lens_streams
    from zoo.methods.anchor_adapter.datamodule import AnchorAdapterDataModule, is_chain
    from zoo.methods.anchor_adapter.policy import answer_batch, decoder

    q = question_of(text)
    if not is_chain(q):
        raise DataError(f"{text!r}: expected a chain like 'Question: 23 + 48 - 17 = ?'")
    tokens = q.split()
    value = int(tokens[0])
    for op, b in zip(tokens[1::2], tokens[2::2]):
        value = value + int(b) if op == "+" else value - int(b)
    item = {"question": q, "answer": str(value)}
    bench = {it["question"]: it for it in AnchorAdapterDataModule().bench}
    model, tok = module.lm, module.tokenizer
    model.eval()
    out = {
        "prompt": prompt_text(q),
        "gold": value,
        "benchmark": ("leaked" if bench[q]["leaked"] else "clean") if q in bench else None,
        "replies": [],
    }
    before, after = module.before_after()
    for name, names in (("before", before), ("after", after)):
        ctx = adapters(model, names) if names else model.disable_adapter()
        with ctx:
            reply = generate_replies(model, tok, [prompt_text(q)], module.hparams.eval_tokens)[0]
        out["replies"].append(
            {
                "model": name,
                "adapters": list(names),
                "reply": reply.strip(),
                "correct": bool(is_correct(reply, item["answer"])),
            }
        )
    _, norm, head = decoder(model)
    ids, mask, target = answer_batch(tok, [item], next(model.parameters()).device)
    with adapters(model, after) if after else model.disable_adapter():
        streams = lens_streams(model, ids, mask)
    out["answer_token"], out["lens"] = tok.decode([int(target[0])]), []
    for name in ("attn_out", "resid_mid", "mlp_out", "resid_post"):
        for i, h in enumerate(streams[name]):
            logits = head(norm(h)).float()[0]
            out["lens"].append(
                {
                    "layer": i,
                    "stream": name,
                    "rank": int((logits > logits[target[0]]).sum()) + 1,
                    "top3": [tok.decode([int(t)]) for t in logits.topk(3).indices],
                }
            )
    return out


def predict_text(d: dict) -> str:
    """:func:`predict_record`'s record as the lines ``zoo predict`` prints."""
    status = {
        "leaked": "leaked (planted 8x in mid-training)",
        "clean": "clean half of benchmark B",
        None: "not in benchmark B",
    }[d["benchmark"]]
    lines = [f"{d['prompt']}   (gold {d['gold']}; {status})"]
    lines += [
        f"{r['model']:>6} ({'+'.join(r['adapters']) or 'base'}): {r['reply']!r}  "
        f"[{'correct' if r['correct'] else 'wrong'}]"
        for r in d["replies"]
    ]
    lines.append(f"logit lens of the after model at ' \\boxed{{' -> answer token {d['answer_token']!r}:")
    lines.append(f"{'layer':>5} | {'stream':<10} | {'rank':>5} | top-3 tokens")
    lines += [f"{r['layer']:>5} | {r['stream']:<10} | {r['rank']:>5} | {r['top3']}" for r in d["lens"]]
    return "\n".join(lines)
