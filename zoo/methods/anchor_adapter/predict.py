"""``zoo predict anchor-adapter.<tag> "Question: 23 + 48 - 17 = ?"``: replies before and after, leak status, lens."""
from __future__ import annotations

from zoo.methods.anchor_adapter.chain_sum import is_correct, prompt_text, question_of
from zoo.methods.anchor_adapter.policy import adapters, generate_replies


def predict_text(module, text: str) -> str:
    """Greedy replies of the model before and after its stage, whether the question is in benchmark B (default
    task, ``task_seed`` 0) and leaked, and the after model's logit-lens table at the answer position.

    Raises:
        zoo.core.data.DataError: the input is not a ``+``/``-`` chain of integers.
    """
    from zoo.core.data import DataError
    from zoo.methods.anchor_adapter.circuit import answer_batch, decoder, lens_streams
    from zoo.methods.anchor_adapter.datamodule import AnchorAdapterDataModule, _is_chain

    q = question_of(text)
    if not _is_chain(q):
        raise DataError(f"{text!r}: expected a chain like 'Question: 23 + 48 - 17 = ?'")
    tokens = q.split()
    value = int(tokens[0])
    for op, b in zip(tokens[1::2], tokens[2::2]):
        value = value + int(b) if op == "+" else value - int(b)
    item = {"question": q, "answer": str(value)}
    bench = {it["question"]: it for it in AnchorAdapterDataModule().bench}
    status = ("leaked (planted 8x in mid-training)" if bench[q]["leaked"] else "clean half of benchmark B") \
        if q in bench else "not in benchmark B"
    model, tok = module.lm, module.tokenizer
    model.eval()
    lines = [f"{prompt_text(q)}   (gold {value}; {status})"]
    before, after = module.before_after()
    for name, names in (("before", before), ("after", after)):
        ctx = adapters(model, names) if names else model.disable_adapter()
        with ctx:
            reply = generate_replies(model, tok, [prompt_text(q)], module.hparams.eval_tokens)[0]
        lines.append(f"{name:>6} ({'+'.join(names) or 'base'}): {reply.strip()!r}  "
                     f"[{'correct' if is_correct(reply, item['answer']) else 'wrong'}]")
    _, norm, head = decoder(model)
    ids, mask, target = answer_batch(tok, [item], next(model.parameters()).device)
    with adapters(model, after) if after else model.disable_adapter():
        streams = lens_streams(model, ids, mask)
    lines.append(f"logit lens of the after model at ' \\boxed{{' -> answer token {tok.decode([int(target[0])])!r}:")
    lines.append(f"{'layer':>5} | {'stream':<10} | {'rank':>5} | top-3 tokens")
    for name in ("attn_out", "resid_mid", "mlp_out", "resid_post"):
        for i, h in enumerate(streams[name]):
            logits = head(norm(h)).float()[0]
            rank = int((logits > logits[target[0]]).sum()) + 1
            top = [tok.decode([int(t)]) for t in logits.topk(3).indices]
            lines.append(f"{i:>5} | {name:<10} | {rank:>5} | {top}")
    return "\n".join(lines)
