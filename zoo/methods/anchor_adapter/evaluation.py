"""Benchmark-B accuracy (leaked vs clean) and the perplexity paradox measures (paper §3; notes §6.1).

* accuracy: greedy reply of at most ``max_new_tokens`` tokens, scored by math-verify against the gold answer.
* answer perplexity: ``exp`` of the mean NLL of the answer text `` \\boxed{a}`` given the prompt (ours: the direct
  answer form, the same for every item); prompt perplexity: ``exp`` of the mean NLL of the prompt tokens after the
  first. Both per item, with torchmetrics ``Perplexity`` over the masked tokens.
"""

from __future__ import annotations

import torch

from zoo.methods.anchor_adapter.chain_sum import is_correct, prompt_text
from zoo.methods.anchor_adapter.policy import generate_replies


def answer_text(item: dict) -> str:
    """The answer whose perplexity is measured: `` \\boxed{54}``."""
    return f" \\boxed{{{item['answer']}}}"


@torch.no_grad()
def item_perplexities(model, tok, items: list[dict], batch_size: int = 64) -> tuple[list[float], list[float]]:
    """``(answer_ppl, prompt_ppl)`` per item (torchmetrics ``Perplexity`` on each item's masked tokens).

    Returns:
        Two lists of ``len(items)`` floats.
    """
    from torchmetrics.functional.text import perplexity

    device = next(model.parameters()).device
    ans, pro = [], []
    for i in range(0, len(items), batch_size):
        chunk = items[i : i + batch_size]
        p_ids = [tok(prompt_text(it["question"])).input_ids for it in chunk]
        a_ids = [tok(answer_text(it)).input_ids for it in chunk]
        T = max(len(p) + len(a) for p, a in zip(p_ids, a_ids))
        ids = torch.full((len(chunk), T), tok.pad_token_id, dtype=torch.long)
        kind = torch.zeros((len(chunk), T), dtype=torch.long)  # 1 prompt token (scored), 2 answer token
        for j, (p, a) in enumerate(zip(p_ids, a_ids)):
            ids[j, : len(p) + len(a)] = torch.tensor(p + a)
            kind[j, 1 : len(p)], kind[j, len(p) : len(p) + len(a)] = 1, 2
        ids, kind = ids.to(device), kind.to(device)
        logits = model(input_ids=ids, attention_mask=(kind > 0) | (torch.arange(T, device=device) == 0)).logits
        logits, target, kind = logits[:, :-1].float(), ids[:, 1:], kind[:, 1:]
        for j in range(len(chunk)):
            for which, out in ((2, ans), (1, pro)):
                t = torch.where(kind[j] == which, target[j], torch.full_like(target[j], -100))
                out.append(float(perplexity(logits[j : j + 1], t[None], ignore_index=-100)))
    return ans, pro


def bench_metrics(model, tok, bench: list[dict], max_new_tokens: int = 32) -> tuple[dict, list[dict]]:
    """Accuracy and mean perplexities on benchmark B, split leaked / clean.

    Returns:
        ``(metrics, per_item)``: metrics ``acc_leaked, acc_clean, ppl_answer, ppl_prompt`` (and the leaked / clean
        perplexities); per_item rows ``{question, answer, leaked, reply, correct, ppl_answer, ppl_prompt}``.
    """
    was = model.training
    model.eval()
    replies = generate_replies(model, tok, [prompt_text(it["question"]) for it in bench], max_new_tokens)
    ppl_a, ppl_p = item_perplexities(model, tok, bench)
    model.train(was)
    rows = [
        {
            "question": it["question"],
            "answer": it["answer"],
            "leaked": bool(it["leaked"]),
            "reply": r,
            "correct": is_correct(r, it["answer"]),
            "ppl_answer": a,
            "ppl_prompt": p,
        }
        for it, r, a, p in zip(bench, replies, ppl_a, ppl_p)
    ]
    out = {}
    for name, keep in (("leaked", True), ("clean", False)):
        sub = [r for r in rows if r["leaked"] == keep]
        out[f"acc_{name}"] = sum(r["correct"] for r in sub) / max(len(sub), 1)
        out[f"ppl_answer_{name}"] = sum(r["ppl_answer"] for r in sub) / max(len(sub), 1)
        out[f"ppl_prompt_{name}"] = sum(r["ppl_prompt"] for r in sub) / max(len(sub), 1)
    out["ppl_answer"] = sum(r["ppl_answer"] for r in rows) / len(rows)
    out["ppl_prompt"] = sum(r["ppl_prompt"] for r in rows) / len(rows)
    return out, rows
